"""The local backend runs the request its plan task showed, planned once per run.

The plan task (``hooks/backends.plan_on_backend``) plans the local job's request with the
training task's region rule and hook settings; the training task sends that request from the
plan's XCom without calling the SageMaker planner again. The region decides the image URI and
``sagemaker_region``, so a plan for another region than the run's showed a request never sent.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from airflow.sdk import DAG

from airflow_dist_training.hooks.backends import plan_on_backend
from airflow_dist_training.operators.training import DistributedTrainingOperator
from airflow_dist_training.planning import RUN_PLAN_XCOM_KEY, RunPlan
from airflow_dist_training.sagemaker import request as request_module
from airflow_dist_training.spec.loading import load_spec

from .conftest import script_spec

pytestmark = pytest.mark.slow


class _TI:
    """The XCom of one DAG run, as the plan task pushes it and the training task pulls it."""

    dag_id, task_id, run_id, map_index, try_number = "plan_once", "train", "manual__1", -1, 1

    def __init__(self) -> None:
        self.xcom: dict[tuple[str, str], Any] = {}

    def xcom_push(self, key: str, value: Any) -> None:
        self.xcom[(self.task_id, key)] = value

    def xcom_pull(self, task_ids: str, key: str) -> Any:
        return self.xcom.get((task_ids, key))


def _plan_task(tmp_path: Path, ti: _TI, **spec_over: Any) -> dict[str, Any]:
    """The plan task's XCom, through JSON as Airflow stores it."""
    spec = load_spec(script_spec(tmp_path, "print('trained')\n", **spec_over))
    context = {"run_id": _TI.run_id, "params": {}, "ti": ti}
    plan = plan_on_backend(
        spec, backend="local", overrides=None, train_task_id="train", context=context, base_dir=str(tmp_path)
    )
    pushed = json.loads(json.dumps(plan.xcoms(dry_run=False)))
    ti.xcom.update({("plan", key): value for key, value in pushed.items()})
    return pushed


def _train_task(tmp_path: Path, ti: _TI, **kwargs: Any) -> DistributedTrainingOperator:
    with DAG(_TI.dag_id, schedule=None):
        op = DistributedTrainingOperator(
            task_id="train",
            spec=ti.xcom[("plan", "spec")],
            backend="local",
            plan_task_id="plan",
            local_hook_kwargs={"base_dir": str(tmp_path), "stop_grace_seconds": 5},
            **kwargs,
        )
    op.execute({"run_id": _TI.run_id, "params": {}, "ti": ti})  # type: ignore[arg-type]
    return op


def _hyperparameters(op: DistributedTrainingOperator) -> dict[str, Any]:
    """The hyperparameters.json the job's first host read."""
    found = sorted(op.hook.job_dir(op.hook.last_job.name).rglob("hyperparameters.json"))
    assert found, "the job wrote no input config"
    return dict(json.loads(found[0].read_text()))


@pytest.fixture
def local_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, job_env_python: Path) -> None:
    monkeypatch.setenv("ADT_LOCAL_ROOT", str(tmp_path / "jobs"))
    monkeypatch.setenv("ADT_LOCAL_USE_S3", "0")


def test_a_local_run_in_another_region_runs_the_request_its_plan_task_showed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, local_env: None
) -> None:
    # the case that used to differ: the plan task planned for us-east-1, the run for AWS_REGION
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    ti = _TI()
    shown = _plan_task(tmp_path, ti)["request"]
    op = _train_task(tmp_path, ti)
    assert op.hook.last_job.request == shown
    assert ".eu-west-1." in shown["AlgorithmSpecification"]["TrainingImage"]
    assert json.loads(_hyperparameters(op)["sagemaker_region"]) == "eu-west-1"


def test_the_training_task_sends_the_plan_tasks_request_without_planning_it_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, local_env: None
) -> None:
    calls: list[str] = []
    planner = request_module.plan_training_job

    def counting_planner(*args: Any, **kwargs: Any) -> Any:
        calls.append(str(kwargs.get("job_name")))
        return planner(*args, **kwargs)

    monkeypatch.setattr(request_module, "plan_training_job", counting_planner)
    ti = _TI()
    pushed = _plan_task(tmp_path, ti)
    assert calls  # the plan task planned it (a CPU instance type: once more on a GPU stand-in)
    plan = RunPlan.from_xcom(pushed[RUN_PLAN_XCOM_KEY])
    assert plan.uploads and plan.request == pushed["request"]  # the code the request names, shipped by the plan
    calls.clear()
    op = _train_task(tmp_path, ti)
    assert calls == []
    assert op.hook.last_job.request == pushed["request"]
    assert op.hook.last_job.describe()["TrainingJobStatus"] == "Completed"


def test_a_warm_start_changes_the_local_request_and_is_planned_once_in_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, local_env: None
) -> None:
    from airflow_dist_training.sagemaker.request import request_changes

    weights = tmp_path / "weights"
    weights.mkdir()
    (weights / "model.pt").write_bytes(b"weights")
    ti = _TI()
    shown = _plan_task(tmp_path, ti)["request"]
    calls: list[str] = []
    planner = request_module.plan_training_job
    monkeypatch.setattr(request_module, "plan_training_job", lambda *a, **k: calls.append("plan") or planner(*a, **k))
    op = _train_task(tmp_path, ti, warm_start_uri=str(weights))
    sent = op.hook.last_job.request
    assert calls  # the state changed the request: planned again in the run, not sent stale
    changes = request_changes(shown, sent)
    assert changes and all(change.startswith("InputDataConfig") for change in changes), changes
    assert "warm_start" in {c["ChannelName"] for c in sent["InputDataConfig"]}
