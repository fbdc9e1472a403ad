"""The run summary the ready DAGs print (reporting.py), from the group's XComs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from airflow_dist_training.reporting import run_summary


class FakeTI:
    """An unmapped task instance whose XCom pulls answer ``{(task_id, key): value}``."""

    def __init__(self, xcoms: dict[tuple[str, str], Any]) -> None:
        self.xcoms = xcoms

    def xcom_pull(self, task_ids: str, key: str = "return_value", **_: Any) -> Any:
        return self.xcoms.get((task_ids, key))


def _xcoms(training: dict[str, Any]) -> dict[tuple[str, str], Any]:
    return {
        ("sagemaker.plan", "summary"): "plan",
        ("sagemaker.plan", "backend"): "sagemaker",
        ("sagemaker.plan", "job_name"): "demo-ab12-1",
        ("sagemaker.train", "return_value"): training,
    }


def test_the_run_summary_says_which_step_a_resumed_job_started_from(tmp_path: Path) -> None:
    training = {
        "job_name": "demo-ab12-2",
        "final_metrics": {"train:loss": 0.3},
        "model_artifact_uri": "s3://b/models/demo-ab12-2/output/model.tar.gz",
        "resumed_from": {
            "step": 7,
            "checkpoint_uri": "s3://b/checkpoints/run/step-000000000007/",
            "after": "a spot interruption of job demo-ab12-1",
        },
    }
    result = run_summary({"ti": FakeTI(_xcoms(training))}, ["local", "sagemaker"], tmp_path / "s.txt")
    assert result["resumed_from"]["step"] == 7
    lines = (tmp_path / "s.txt").read_text().splitlines()
    job = lines.index("Training job        demo-ab12-2")
    assert lines[job + 1] == "Resumed             from step 7 after a spot interruption of job demo-ab12-1"


def test_a_run_that_started_from_scratch_has_no_resumed_line(tmp_path: Path) -> None:
    training = {
        "job_name": "demo-ab12-1",
        "final_metrics": {},
        "model_artifact_uri": None,
        "resumed_from": None,
    }
    run_summary({"ti": FakeTI(_xcoms(training))}, ["sagemaker"], tmp_path / "s.txt")
    text = (tmp_path / "s.txt").read_text()
    assert "Training job        demo-ab12-1" in text and "Resumed" not in text


def test_the_resumed_line_docs_checkpoints_quotes_is_the_one_rendered(tmp_path: Path) -> None:
    from tests.paths import REPO

    training = {
        "job_name": "local-demo-6c1f0e2a9b-2",
        "final_metrics": {},
        "model_artifact_uri": None,
        "resumed_from": {
            "step": 6,
            "checkpoint_uri": "s3://b/c/",
            "after": "a spot interruption of job local-demo-6c1f0e2a9b-1",
        },
    }
    run_summary({"ti": FakeTI(_xcoms(training))}, ["sagemaker"], tmp_path / "s.txt")
    lines = (tmp_path / "s.txt").read_text().splitlines()
    job = lines.index("Training job        local-demo-6c1f0e2a9b-2")
    quoted = "\n".join(lines[job : job + 2])
    assert f"```text\n{quoted}\n```" in (REPO / "docs" / "checkpoints.md").read_text()


def test_a_re_evaluation_run_says_so_with_the_champions_new_metrics_and_where_it_was_recorded(
    capsys: Any,
) -> None:
    model = "s3://b/models/demo-ab12-1/output/model.tar.gz"
    reason = f"evaluation changed since champion adt-demo/3: re-evaluating adt-demo/3 without retraining (its model {model} is still there)"
    xcoms = {
        **_xcoms({}),
        ("sagemaker.check_changes", "skip_reason"): reason,
        ("sagemaker.check_changes", "action"): "reevaluate",
        ("sagemaker.reevaluate", "return_value"): {
            "metrics": {"accuracy": 0.81},
            "evaluation_set_hash": "sha256:e1",
            "evaluation_uri": "s3://b/eval/run/evaluation.json",
        },
        ("sagemaker.record_evaluation", "return_value"): {
            "package_id": "arn:aws:sagemaker:us-east-1:1:model-package/adt-demo/3",
            "evaluation_uri": "s3://b/eval/run/evaluation.json",
        },
    }
    result = run_summary({"ti": FakeTI(xcoms)}, groups=["sagemaker"])
    assert result["reevaluated"] is True
    text = capsys.readouterr().out
    assert f"RE-EVALUATED: {reason}" in text
    assert "Training job        not created (train, evaluate, gate and register skipped)" in text
    assert "Evaluation metrics  accuracy=0.81" in text and "Evaluation set      sha256:e1" in text
    assert "Quality gate        not run (the champion is not gated against itself)" in text
    assert (
        "Recorded            on arn:aws:sagemaker:us-east-1:1:model-package/adt-demo/3, no new version "
        "(s3://b/eval/run/evaluation.json)" in text
    )
