"""The Training view's data: local live files, epoch curves, checkpoints, gate, links (no services)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from airflow_dist_training.evaluation.report import render_svg
from airflow_dist_training.links.sagemaker import ALL_LINKS, job_links
from airflow_dist_training.ui.data import (
    build_run_view,
    counter_unit,
    local_job_view,
    member_task_id,
    metric_curves,
    progress_and_eta,
    total_from_hyperparameters,
)
from airflow_dist_training.ui.sagemaker_source import curves_from_metric_data, metric_queries
from airflow_dist_training.ui.urls import training_view_url


def _points(epochs: int, hosts: tuple[str, ...] = ("algo-1",)) -> list[dict[str, Any]]:
    out = []
    for e in range(epochs):
        for h in hosts:
            t = 1000.0 + e * 2
            out.append({"name": "train:loss", "value": 1.0 / (e + 1), "timestamp": t, "host": h})
            out.append({"name": "train:accuracy", "value": 0.5 + e / 20, "timestamp": t + 1e-5, "host": h})
            out.append({"name": "train:epoch", "value": float(e), "timestamp": t + 2e-5, "host": h})
    return out


def test_metric_curves_use_the_epoch_metric_as_x_axis() -> None:
    curves = metric_curves(_points(3))
    assert curves["axis"] == "epoch"
    assert [p["x"] for p in curves["series"]["train:loss"]] == [0.0, 1.0, 2.0]
    assert [round(p["value"], 3) for p in curves["series"]["train:loss"]] == [1.0, 0.5, 0.333]
    assert "train:epoch" not in curves["series"]


def test_metric_curves_without_epoch_metric_use_seconds() -> None:
    points = [p for p in _points(3) if p["name"] != "train:epoch"]
    curves = metric_curves(points)
    assert curves["axis"] == "seconds"
    assert [p["x"] for p in curves["series"]["train:loss"]] == [0.0, 2.0, 4.0]


def test_local_job_view_reads_the_live_metric_log_and_skips_a_partial_line(tmp_path: Path) -> None:
    lines = "".join(json.dumps(p) + "\n" for p in _points(2))
    (tmp_path / "metrics.jsonl").write_text(lines + '{"name": "train:loss", "val')  # being written
    (tmp_path / "status.json").write_text(
        json.dumps(
            {
                "status": "InProgress",
                "hosts": ["algo-1", "algo-2"],
                "processes_per_host": 2,
                "timeline": [
                    {"status": "Training", "start": "2026-01-01T00:00:00+00:00", "end": None, "message": ""}
                ],
                "metric_definitions": [["train:loss", "loss=(.*)"]],
            }
        )
    )
    view = local_job_view(tmp_path)
    assert view["status"] == "InProgress" and view["secondary_status"] == "Training"
    assert view["hosts"] == ["algo-1", "algo-2"] and view["metric_definitions"] == ["train:loss"]
    assert len(view["metrics"]["series"]["train:loss"]) == 2


def test_build_run_view_combines_job_checkpoints_gate_and_registration(tmp_path: Path) -> None:
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(p) + "\n" for p in _points(3)))
    decision = {
        "passed": True,
        "reasons": ["PASS accuracy: 0.9 >= 0.8"],
        "checks": [
            {"metric": "accuracy", "check": "min", "status": "PASS", "reason": "PASS accuracy: 0.9 >= 0.8"}
        ],
        "challenger": {"metrics": {"accuracy": 0.9}},
        "champion": None,
    }
    xcoms = {
        ("local.train", "sagemaker_training_job"): {
            "backend": "local",
            "job_name": "job-1",
            "job_dir": str(tmp_path),
        },
        ("local.train", "return_value"): {"status": "Completed", "final_metrics": {"train:loss": 0.33}},
        ("local.plan", "cost_bound_usd"): 1.5,
        ("local.plan", "spec"): {"compute": {"instance_type": "ml.m5.xlarge", "instance_count": 1}},
        ("local.checkpoint_retention", "return_value"): {
            "root": "/ck",
            "kept": {"30": ["last 2"], "20": ["best loss"]},
            "deleted": [{"step": 10}],
        },
        ("local.promote_checkpoint", "return_value"): {"step": 30, "uri": "/ck/promoted"},
        ("local.gate", "return_value"): decision,
        ("local.register", "return_value"): {
            "package_id": "adt-demo/3",
            "version": 3,
            "approval_status": "Approved",
        },
    }
    view = build_run_view(
        "d",
        "r",
        run_state="success",
        task_instances=[{"task_id": "local.train", "state": "success"}],
        xcoms=xcoms,
        render_plot=render_svg,
        now=2000.0,
    )
    (job,) = view["jobs"]
    assert job["backend"] == "local" and job["status"] == "Completed" and job["cost_bound_usd"] == 1.5
    assert job["instance_type"] == "ml.m5.xlarge" and job["hosts"] == ["algo-1"]
    assert len(job["metrics"]["series"]["train:loss"]) == 3
    (section,) = view["sections"]
    steps = [(i["step"], i["retained"], i["promoted"]) for i in section["checkpoints"]["items"]]
    assert steps == [("30", True, True), ("20", True, False), (10, False, False)]
    assert section["gate"]["passed"] is True and section["plot_svg"].startswith("<svg")
    assert section["registration"]["version"] == 3
    assert view["live"] is False


def test_sagemaker_metric_queries_and_curves() -> None:
    queries = metric_queries("job", ["train:loss", "val:loss"], 2)
    assert [q["Label"] for q in queries] == [
        "train:loss|algo-1",
        "train:loss|algo-2",
        "val:loss|algo-1",
        "val:loss|algo-2",
    ]
    assert queries[0]["MetricStat"]["Metric"]["Dimensions"] == [{"Name": "Host", "Value": "job/algo-1"}]
    curves = curves_from_metric_data(
        [{"Label": "train:loss|algo-1", "Timestamps": [160.0, 100.0], "Values": [0.5, 0.9]}]
    )
    assert curves["series"]["train:loss"] == [
        {"x": 0.0, "value": 0.9, "host": "algo-1"},
        {"x": 60.0, "value": 0.5, "host": "algo-1"},
    ]


def test_local_links_point_at_the_training_view_and_local_artifacts() -> None:
    view = training_view_url("dag", "manual__2026-01-01T00:00:00+00:00", "http://af:8080/")
    assert (
        view == "http://af:8080/dags/dag/runs/manual__2026-01-01T00%3A00%3A00%2B00%3A00/plugin/training-run"
    )
    links = job_links(
        {"backend": "local", "view_url": view, "output_uri": "/data/models", "checkpoint_uri": "file:///ck"}
    )
    assert links == {
        "job": view,
        "logs": view,
        "output": "file:///data/models",
        "checkpoints": "file:///ck",
        "view": view,
    }


def test_get_link_reads_the_operator_and_never_xcom_before_the_job_is_known(monkeypatch: Any) -> None:
    import airflow.sdk.execution_time.xcom as xcom_mod

    def boom(**kwargs: Any) -> Any:
        raise AssertionError("XCom looked up: the API client would log 'XCom not found'")

    monkeypatch.setattr(xcom_mod.XCom, "get_value", boom)
    operator = SimpleNamespace()  # failed before the job was known
    assert [link.get_link(operator, ti_key=None) for link in ALL_LINKS] == [""] * len(ALL_LINKS)  # type: ignore[arg-type]
    operator._adt_training_links = {"backend": "local", "view_url": "http://v", "output_uri": "/m"}
    assert [link.get_link(operator, ti_key=None) for link in ALL_LINKS] == [  # type: ignore[arg-type]
        "http://v",
        "http://v",
        "http://v",
        "file:///m",
        "",
    ]


def test_a_mapped_groups_members_are_side_by_side_each_with_its_own_plan_and_gate(tmp_path: Path) -> None:
    """Issue 26: ``stage_train_evaluate(members=...)`` runs every task once per map index; the view
    shows one job card and one after-training card per member, each reading its own plan."""
    rows = []  # (task_id, map_index, key, value) as the XCom table holds them
    for index, member in enumerate(["emea", "apac"]):
        job_dir = tmp_path / member
        job_dir.mkdir()
        (job_dir / "metrics.jsonl").write_text("".join(json.dumps(p) + "\n" for p in _points(2)))
        rows += [
            (
                "m.train",
                index,
                "sagemaker_training_job",
                {"backend": "local", "job_name": f"mlp-{member}-1", "job_dir": str(job_dir)},
            ),
            (
                "m.train",
                index,
                "return_value",
                {"status": "Completed", "final_metrics": {"train:loss": 0.1 * (index + 1)}},
            ),
            (
                "m.plan",
                index,
                "spec",
                {"compute": {"instance_type": f"ml.m5.{index + 1}xlarge", "instance_count": 1}},
            ),
            ("m.gate", index, "return_value", {"passed": index == 0, "reasons": [], "checks": []}),
        ]
    xcoms = {(member_task_id(t, i), k): v for t, i, k, v in rows}
    tis = [{"task_id": member_task_id("m.train", i), "state": "success"} for i in (0, 1)]
    view = build_run_view("d", "r", run_state="success", task_instances=tis, xcoms=xcoms, now=2000.0)
    assert [(j["task_id"], j["job_name"], j["instance_type"]) for j in view["jobs"]] == [
        ("m[0].train", "mlp-emea-1", "ml.m5.1xlarge"),
        ("m[1].train", "mlp-apac-1", "ml.m5.2xlarge"),
    ]
    assert [(s["group"], s["gate"]["passed"]) for s in view["sections"]] == [("m[0]", True), ("m[1]", False)]
    assert all(len(j["metrics"]["series"]["train:loss"]) == 2 for j in view["jobs"])
    assert member_task_id("m.train", -1) == "m.train"


def test_a_sweeps_winner_gate_and_registration_have_their_own_card() -> None:
    selection = {"winner": "trial-03", "metric": "accuracy", "value": 0.85, "ranking": [], "excluded": []}
    xcoms = {
        ("s.best_of_sweep", "selection"): selection,
        ("s.gate", "return_value"): {"passed": True, "reasons": [], "checks": []},
        ("s.register", "return_value"): {"package_id": "sweep-mlp/1", "approval_status": "Approved"},
        (member_task_id("s.members.train", 3), "return_value"): {"status": "Completed", "final_metrics": {}},
    }
    view = build_run_view("d", "r", run_state="success", task_instances=[], xcoms=xcoms, now=1.0)
    [card] = [s for s in view["sections"] if s["group"] == "s"]
    assert card["sweep"]["winner"] == "trial-03" and card["registration"]["package_id"] == "sweep-mlp/1"


def test_a_jobs_card_links_its_mlflow_run_and_the_registration_its_model_version() -> None:
    """Issue 34: the tracker's ``mlflow_run`` XCom and the mlflow registry's ``audit_uri``."""
    run_url = "http://mlflow.internal:5000/#/experiments/3/runs/abc"
    version_url = "http://mlflow.internal:5000/#/models/adt-demo/versions/2"
    xcoms = {
        ("g.train", "sagemaker_training_job"): {"job_name": "j-1", "backend": "local"},
        ("g.train", "return_value"): {"status": "Completed"},
        ("g.train", "mlflow_run"): {"run_id": "abc", "experiment_id": "3", "url": run_url},
        ("g.register", "return_value"): {"registry": "mlflow", "version": 2, "audit_uri": version_url},
    }
    view = build_run_view("d", "r", run_state="success", task_instances=[], xcoms=xcoms, now=1.0)
    [job] = view["jobs"]
    assert job["mlflow_run_url"] == run_url
    [section] = view["sections"]
    assert section["registration"]["audit_uri"] == version_url
    script = (
        Path(__file__).parents[3] / "airflow_dist_training" / "ui" / "static" / "training.js"
    ).read_text()
    assert "job.mlflow_run_url" in script and "reg.audit_uri" in script  # the page renders both links


def test_a_tuning_step_lists_its_training_jobs_with_their_objective_and_the_winner() -> None:
    """The ``train`` task of a pipeline's tuning step returns the best training job's result plus
    ``tuning`` (operators/tuning.py): the group's card shows the tuning job and its training jobs."""
    jobs = [
        {
            "job_name": "tuned-001-aa",
            "status": "Completed",
            "tuned_hyperparameters": {"lr": '"0.001"'},
            "objective_value": 0.52,
            "failure_reason": None,
        },
        {
            "job_name": "tuned-002-bb",
            "status": "Completed",
            "tuned_hyperparameters": {"lr": '"0.1"'},
            "objective_value": 0.91,
            "failure_reason": None,
        },
        {
            "job_name": "tuned-003-cc",
            "status": "Stopped",
            "tuned_hyperparameters": {"lr": '"0.5"'},
            "objective_value": 0.4,
            "failure_reason": None,
        },
    ]
    result = {
        "status": "Completed",
        "job_name": "tuned-002-bb",
        "final_metrics": {"train:accuracy": 0.91},
        "tuning": {
            "job_name": "tuned",
            "status": "Completed",
            "strategy": "Grid",
            "objective_metric": "train:accuracy",
            "objective_value": 0.91,
            "training_job_counts": {"Completed": 2, "Stopped": 1},
            "training_jobs": jobs,
        },
    }
    xcoms = {("g.train", "return_value"): result}
    view = build_run_view("d", "r", run_state="success", task_instances=[], xcoms=xcoms, now=1.0)
    [card] = view["sections"]
    tuning = card["tuning"]
    assert card["group"] == "g" and tuning["job_name"] == "tuned" and tuning["strategy"] == "Grid"
    assert tuning["winner"] == "tuned-002-bb" and tuning["winner_value"] == 0.91
    assert [(j["job_name"], j["objective_value"], j["winner"]) for j in tuning["training_jobs"]] == [
        ("tuned-001-aa", 0.52, False),
        ("tuned-002-bb", 0.91, True),
        ("tuned-003-cc", 0.4, False),
    ]
    assert tuning["training_job_counts"] == {"Completed": 2, "Stopped": 1}
    # a training job's result (no tuning) has no tuning card
    plain = build_run_view(
        "d",
        "r",
        run_state="success",
        task_instances=[],
        xcoms={("g.train", "return_value"): {"status": "Completed"}},
        now=1.0,
    )
    assert all(s["tuning"] is None for s in plain["sections"])


def test_progress_counters_and_totals_are_read_by_name() -> None:
    """Issue 36 item 5: the counter is the metric named for what it counts, the total a hyperparameter."""
    assert [counter_unit(n) for n in ("train:epoch", "global_step", "train/iteration", "Epoch")] == [
        "epoch",
        "step",
        "step",
        "epoch",
    ]
    assert [counter_unit(n) for n in ("train:epochs_trained", "train:steps_trained", "train:loss")] == [
        None
    ] * 3
    assert total_from_hyperparameters({"epochs": 8, "lr": 0.05}) == {"unit": "epoch", "total": 8}
    assert total_from_hyperparameters({"max-steps": "500"}) == {
        "unit": "step",
        "total": 500,
    }  # SageMaker's strings
    assert total_from_hyperparameters({"lr": 0.1, "epochs": "a few"}) is None


def test_progress_and_eta_from_the_observed_rate() -> None:
    epochs = {"unit": "epoch", "points": [(100.0, 0.0), (110.0, 1.0), (120.0, 2.0)]}  # range(8), 10 s each
    running = progress_and_eta(epochs, {"unit": "epoch", "total": 8}, running=True, now=125.0)
    # 3 of 8 epochs done at 0.1 epoch/s: 5 more take 50 s, 5 s of which have passed since epoch 2 ended
    assert running == {
        "unit": "epoch",
        "done": 3,
        "total": 8,
        "fraction": 0.375,
        "rate_per_hour": 360.0,
        "eta_seconds": 45.0,
    }
    one_based = {"unit": "step", "points": [(0.0, 1.0), (4.0, 3.0)]}  # a counter that starts at 1
    step = progress_and_eta(one_based, {"unit": "step", "total": 7}, running=True, now=4.0)
    assert step is not None and (step["done"], step["eta_seconds"]) == (3, 8.0)
    finished = progress_and_eta(
        {"unit": "epoch", "points": [(0.0, 0.0), (9.0, 7.0)]},
        {"unit": "epoch", "total": 8},
        running=False,
        now=99.0,
    )
    assert finished is not None and (finished["done"], finished["fraction"], finished["eta_seconds"]) == (
        8,
        1.0,
        None,
    )
    # one observation: progress, no rate yet; a total in steps says nothing of epochs
    first = progress_and_eta(
        {"unit": "epoch", "points": [(0.0, 0.0)]}, {"unit": "step", "total": 90}, running=True, now=1.0
    )
    assert first is not None and (first["done"], first["total"], first["eta_seconds"]) == (1, None, None)
    not_yet = progress_and_eta(None, {"unit": "epoch", "total": 8}, running=True, now=1.0)
    assert not_yet is not None and (not_yet["done"], not_yet["total"]) == (None, 8)
    assert progress_and_eta(None, None, running=True, now=1.0) is None


def test_a_run_summary_metric_is_neither_the_epoch_axis_nor_the_counter() -> None:
    summary = {"name": "train:epochs_trained", "value": 3.0, "timestamp": 1007.0, "host": "algo-1"}
    curves = metric_curves([*_points(3), summary])
    assert curves["axis"] == "epoch" and curves["epochs"] == 2.0
    assert curves["series"]["train:epochs_trained"] == [{"x": 2.0, "value": 3.0, "host": "algo-1"}]
    assert curves["counter"] == {
        "unit": "epoch",
        "points": [(1000.00002, 0.0), (1002.00002, 1.0), (1004.00002, 2.0)],
        "lowest": 0.0,
    }


def test_a_sagemaker_jobs_counter_is_the_minutes_maximum_with_its_time() -> None:
    maximum, minimum = metric_queries("job", ["train:epoch"], 1)
    assert (maximum["Label"], maximum["MetricStat"]["Stat"]) == ("train:epoch|algo-1", "Maximum")
    assert (minimum["Label"], minimum["MetricStat"]["Stat"]) == ("train:epoch|algo-1|min", "Minimum")
    assert metric_queries("job", ["train:loss"], 1)[0]["MetricStat"]["Stat"] == "Average"
    curves = curves_from_metric_data(
        [
            {"Label": "train:epoch|algo-1", "Timestamps": [160.0, 100.0], "Values": [9.0, 1.0]},
            {"Label": "train:epoch|algo-1|min", "Timestamps": [160.0, 100.0], "Values": [2.0, 0.0]},
        ]
    )
    # epochs 0 and 1 in the first minute: the minute's maximum alone would read as counting from 1
    assert curves["counter"] == {"unit": "epoch", "points": [(100.0, 1.0), (160.0, 9.0)], "lowest": 0.0}
    assert list(curves["series"]) == ["train:epoch"] and len(curves["series"]["train:epoch"]) == 2
    progress = progress_and_eta(curves["counter"], {"unit": "epoch", "total": 12}, running=True, now=160.0)
    assert progress is not None and progress["done"] == 10 and progress["eta_seconds"] == 15.0


def _sweep_run(tmp_path: Path, *, running: bool) -> dict[str, Any]:
    """Three sweep members (``sweep_train_evaluate``: ``sweep.members[i]``), each with 3 epochs of a
    4-epoch spec logged 2 s apart; while ``running`` their jobs are InProgress and there is no pick."""
    names = ["trial-00", "trial-01", "trial-02"]
    xcoms: dict[tuple[str, str], Any] = {}
    for index, name in enumerate(names):
        job_dir = tmp_path / name
        job_dir.mkdir()
        points = [
            {**p, "value": p["value"] * (index + 1)} if p["name"] == "train:loss" else p for p in _points(3)
        ]
        (job_dir / "metrics.jsonl").write_text("".join(json.dumps(p) + "\n" for p in points))
        train = member_task_id("sweep.members.train", index)
        xcoms[(train, "sagemaker_training_job")] = {
            "backend": "local",
            "job_name": f"mlp-{name}-1",
            "job_dir": str(job_dir),
        }
        xcoms[(member_task_id("sweep.members.plan", index), "spec")] = {
            "name": f"mlp-{name}",
            "hyperparameters": {"epochs": 4},
        }
        if not running:
            xcoms[(train, "return_value")] = {
                "status": "Completed",
                "final_metrics": {"train:loss": 0.3 * (index + 1)},
            }
    if not running:
        rows = [{"member": n, "status": "ok", "hyperparameters": {}} for n in names]
        xcoms[("sweep.best_of_sweep", "members")] = rows
        xcoms[("sweep.best_of_sweep", "selection")] = {
            "winner": "trial-00",
            "metric": "train:loss",
            "ranking": [],
        }
    return build_run_view(
        "d", "r", run_state="running" if running else "success", task_instances=[], xcoms=xcoms, now=1005.0
    )


def test_a_sweeps_members_share_one_chart_per_metric_with_the_winner_marked(tmp_path: Path) -> None:
    view = _sweep_run(tmp_path, running=False)
    (family,) = view["members"]
    assert family["group"] == "sweep.members" and family["winner"] == "trial-00" and family["axis"] == "epoch"
    assert [(m["member"], m["winner"], m["status"]) for m in family["members"]] == [
        ("trial-00", True, "Completed"),
        ("trial-01", False, "Completed"),
        ("trial-02", False, "Completed"),
    ]
    loss = family["metrics"]["train:loss"]
    assert [(c["member"], c["winner"], [p["x"] for p in c["points"]]) for c in loss] == [
        ("trial-00", True, [0.0, 1.0, 2.0]),
        ("trial-01", False, [0.0, 1.0, 2.0]),
        ("trial-02", False, [0.0, 1.0, 2.0]),
    ]
    assert [c["points"][0]["value"] for c in loss] == [1.0, 2.0, 3.0]  # each member's own curve
    assert [(j["member"], j["winner"]) for j in view["jobs"]] == [
        ("trial-00", True),
        ("trial-01", False),
        ("trial-02", False),
    ]
    # finished: 3 epochs of 4 were logged, no ETA
    assert [
        (m["progress"]["done"], m["progress"]["total"], m["progress"]["eta_seconds"])
        for m in family["members"]
    ] == [(3, 4, None)] * 3


def test_running_members_show_progress_and_an_eta_named_by_their_spec(tmp_path: Path) -> None:
    view = _sweep_run(tmp_path, running=True)
    (family,) = view["members"]
    assert family["winner"] is None and [m["member"] for m in family["members"]] == [
        "mlp-trial-00",
        "mlp-trial-01",
        "mlp-trial-02",
    ]
    # epochs 0..2 ended at 1000, 1002, 1004 (0.5 epoch/s): the 4th ends about 2 s after the 3rd, 1 s from now
    assert [(j["status"], j["progress"]["done"], j["progress"]["eta_seconds"]) for j in view["jobs"]] == [
        ("InProgress", 3, 1.0)
    ] * 3
    assert view["live"] is True


def _tuning_result(job_arn: str, backend: str) -> dict[str, Any]:
    """A tuning step's ``train`` result (operators/tuning.py): three training jobs, the second the
    best by ``train:accuracy``, the third stopped before it logged anything."""
    rows = [
        ("tuned-001-aa", "Completed", 0.52),
        ("tuned-002-bb", "Completed", 0.91),
        ("tuned-003-cc", "Stopped", None),
    ]
    return {
        "backend": backend,
        "status": "Completed",
        "job_name": "tuned-002-bb",
        "job_arn": job_arn,
        "final_metrics": {"train:accuracy": 0.91},
        "tuning": {
            "job_name": "tuned",
            "status": "Completed",
            "strategy": "Grid",
            "objective_metric": "train:accuracy",
            "objective_value": 0.91,
            "training_job_counts": {"Completed": 2, "Stopped": 1},
            "training_jobs": [
                {"job_name": n, "status": s, "tuned_hyperparameters": {"lr": f'"{i}"'}, "objective_value": v}
                for i, (n, s, v) in enumerate(rows)
            ],
        },
    }


def _assert_tuning_members(block: dict[str, Any], axis: str) -> None:
    assert block["group"] == "g" and block["tuning_job"] == "tuned" and block["axis"] == axis
    assert block["winner"] == "tuned-002-bb" and block["objective"] == "train:accuracy"
    assert [(m["member"], m["winner"], m["status"], m["final_metrics"]) for m in block["members"]] == [
        ("tuned-001-aa", False, "Completed", {"train:accuracy": 0.52}),
        ("tuned-002-bb", True, "Completed", {"train:accuracy": 0.91}),
        ("tuned-003-cc", False, "Stopped", {}),
    ]
    # one chart per metric, a curve per training job that logged (each its own values), the winner marked
    assert sorted(block["metrics"]) == ["train:accuracy", "train:loss"]
    loss = block["metrics"]["train:loss"]
    assert [(c["member"], c["winner"], len(c["points"])) for c in loss] == [
        ("tuned-001-aa", False, 3),
        ("tuned-002-bb", True, 3),
    ]
    assert [c["points"][0]["value"] for c in loss] == [1.0, 2.0]


def test_a_local_tuning_steps_training_jobs_share_one_chart_per_metric_from_their_files(
    tmp_path: Path,
) -> None:
    """The local tuning job runs its training jobs under the executor's root, beside the winner
    (local/tuning.py): each one's curves come from its own metrics file there."""
    for scale, name in ((1, "tuned-001-aa"), (2, "tuned-002-bb")):
        (tmp_path / name).mkdir()
        points = [{**p, "value": p["value"] * scale} if p["name"] == "train:loss" else p for p in _points(3)]
        (tmp_path / name / "metrics.jsonl").write_text("".join(json.dumps(p) + "\n" for p in points))
    result = _tuning_result(f"local://{tmp_path / 'tuned-002-bb'}", "local")
    xcoms = {("g.train", "return_value"): result, ("g.plan", "spec"): {"hyperparameters": {"epochs": 4}}}
    view = build_run_view("d", "r", run_state="success", task_instances=[], xcoms=xcoms, now=1.0)
    (block,) = view["members"]
    _assert_tuning_members(block, "epoch")
    assert [c["points"][-1]["x"] for c in block["metrics"]["train:loss"]] == [2.0, 2.0]
    # 3 epochs of the plan's 4 logged; the stopped job has no progress to show
    assert [(m["progress"] or {}).get("done") for m in block["members"]] == [3, 3, None]
    assert all(m["error"] is None for m in block["members"])


def test_a_sagemaker_tuning_steps_training_jobs_share_one_chart_per_metric_from_cloudwatch() -> None:
    """On SageMaker each training job's curves are its CloudWatch metrics, read by the view's
    SageMaker source in the winner's region; a job whose read fails is listed with the error."""
    asked: list[tuple[str, str | None]] = []

    def source(name: str, region: str | None) -> dict[str, Any]:
        asked.append((name, region))
        if name == "tuned-003-cc":
            raise RuntimeError("ThrottlingException: Rate exceeded")
        scale = 1.0 if name == "tuned-001-aa" else 2.0
        results = [
            {
                "Label": "train:loss|algo-1",
                "Timestamps": [100.0, 160.0, 220.0],
                "Values": [scale, scale / 2, scale / 3],
            },
            {
                "Label": "train:accuracy|algo-1",
                "Timestamps": [100.0, 160.0, 220.0],
                "Values": [0.5, 0.6, 0.7],
            },
        ]
        return {"status": "Completed", "metrics": curves_from_metric_data(results)}

    arn = "arn:aws:sagemaker:eu-west-1:123456789012:training-job/tuned-002-bb"
    xcoms = {("g.train", "return_value"): _tuning_result(arn, "sagemaker")}
    view = build_run_view(
        "d", "r", run_state="success", task_instances=[], xcoms=xcoms, sagemaker=source, now=1.0
    )
    assert asked == [
        ("tuned-001-aa", "eu-west-1"),
        ("tuned-002-bb", "eu-west-1"),
        ("tuned-003-cc", "eu-west-1"),
    ]
    (block,) = view["members"]
    _assert_tuning_members(block, "seconds")
    assert [c["points"][-1]["x"] for c in block["metrics"]["train:loss"]] == [120.0, 120.0]
    assert block["members"][2]["error"] == "RuntimeError: ThrottlingException: Rate exceeded"


def test_a_large_tuning_job_charts_only_its_best_training_jobs_and_lists_every_one() -> None:
    """Each charted SageMaker training job costs a describe and a GetMetricData per page load: a
    tuning job of 30 charts the winner and the 11 nearest to its objective, and lists all 30."""
    from airflow_dist_training.ui.data import MAX_CHARTED_TRAINING_JOBS

    result = _tuning_result("arn:aws:sagemaker:us-east-1:123456789012:training-job/t-15", "sagemaker")
    result["job_name"], result["tuning"]["objective_value"] = "t-15", 0.95
    result["tuning"]["training_jobs"] = [
        {"job_name": f"t-{i:02d}", "status": "Completed", "objective_value": 0.95 - abs(i - 15) / 100}
        for i in range(30)
    ] + [{"job_name": "t-failed", "status": "Failed", "objective_value": None}]
    asked: list[str] = []

    def source(name: str, region: str | None) -> dict[str, Any]:
        asked.append(name)
        return {"status": "Completed", "metrics": curves_from_metric_data([])}

    view = build_run_view(
        "d",
        "r",
        run_state="success",
        task_instances=[],
        xcoms={("g.train", "return_value"): result},
        sagemaker=source,
        now=1.0,
    )
    (block,) = view["members"]
    assert (
        MAX_CHARTED_TRAINING_JOBS == 12 and len(asked) == 12 and "t-15" in asked and "t-failed" not in asked
    )
    assert max(abs(int(name[2:]) - 15) for name in asked) <= 6  # the nearest to the winner's 0.95
    assert len(block["members"]) == 31  # every training job keeps its row
    assert block["curves_note"] == "curves of the 12 best of 31 training jobs"
