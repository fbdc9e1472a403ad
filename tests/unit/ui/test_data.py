"""The Training view's data: local live files, epoch curves, checkpoints, gate, links (no services)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from airflow_dist_training.evaluation.report import render_svg
from airflow_dist_training.links.sagemaker import ALL_LINKS, job_links
from airflow_dist_training.ui.data import build_run_view, local_job_view, member_task_id, metric_curves
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
