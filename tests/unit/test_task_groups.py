"""The ``stage_train_evaluate`` task group's shape, built at parse time with no I/O."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from airflow.sdk import DAG

from airflow_dist_training.errors import SpecValidationError
from airflow_dist_training.spec.pipeline import EvaluationStep, RegistryStep
from airflow_dist_training.task_groups import stage_train_evaluate
from tests.unit.sagemaker.specs import example

G = "stage_train_evaluate"


def _build(**kwargs: Any) -> DAG:
    with DAG(dag_id="shape", schedule=None, start_date=dt.datetime(2026, 1, 1)) as dag:
        stage_train_evaluate(base_dir="/tmp", **kwargs)
    return dag


def _downstream(dag: DAG, task: str) -> set[str]:
    return {t.removeprefix(f"{G}.") for t in dag.get_task(f"{G}.{task}").downstream_task_ids}


def test_plan_gates_training_and_a_teardown_stops_an_orphaned_job() -> None:
    dag = _build(spec=example("smddp_p4d"), backend="sagemaker")
    assert {t.removeprefix(f"{G}.") for t in dag.task_ids} == {
        "plan",
        "check_changes",
        "train",
        "checkpoint_retention",
        "stop_orphaned_job",
    }
    assert _downstream(dag, "plan") == {"check_changes", "train", "stop_orphaned_job"}
    assert _downstream(dag, "check_changes") == {"train"}
    assert dag.get_task(f"{G}.stop_orphaned_job").is_teardown
    # the teardown runs after everything else in the group
    assert "stop_orphaned_job" in _downstream(dag, "checkpoint_retention")


def test_local_jobs_die_with_their_task_so_the_group_has_no_teardown() -> None:
    dag = _build(spec=example("local_demo"), backend="local")
    assert {t.removeprefix(f"{G}.") for t in dag.task_ids} == {"plan", "check_changes", "train", "checkpoint_retention"}
    assert _downstream(dag, "plan") == {"check_changes", "train"}
    assert _downstream(dag, "check_changes") == {"train"}


def test_evaluation_gate_and_registry_follow_training_in_that_order() -> None:
    dag = _build(
        spec=example("local_demo"),
        backend="local",
        evaluation=EvaluationStep(script="examples/evaluate.py"),
        gate={"thresholds": {"accuracy": {"min": 0.5}}},
        registry=RegistryStep(local_dir="/tmp/registry"),
    )
    tasks = {t.removeprefix(f"{G}.") for t in dag.task_ids}
    assert {"evaluate", "gate", "register"} <= tasks
    assert "evaluate" in _downstream(dag, "train")
    assert "gate" in _downstream(dag, "evaluate")
    assert "register" in _downstream(dag, "gate")


def test_a_bad_spec_fails_at_parse_time_naming_the_field() -> None:
    bad = example("local_demo").model_dump(mode="json", exclude_unset=True)
    bad["compute"]["instance_count"] = 0
    with pytest.raises(SpecValidationError, match=r"compute\.instance_count"):
        _build(spec=bad, backend="local")


def _shipped_dag(name: str) -> DAG:
    import importlib.util

    from tests.paths import REPO

    loaded = importlib.util.spec_from_file_location(f"shipped_{name}", REPO / "dags" / f"{name}.py")
    assert loaded is not None and loaded.loader is not None
    module = importlib.util.module_from_spec(loaded)
    loaded.loader.exec_module(module)
    return module.dag


def test_the_shipped_dag_defers_sagemaker_jobs_by_default_and_runs_local_jobs_in_the_worker() -> None:
    """No worker slot is held for the hours a GPU job runs ([operators] default_deferrable is off)."""
    dag = _shipped_dag("distributed_retraining")
    assert dag.get_task("sagemaker.train").deferrable is True
    assert dag.get_task("sagemaker.evaluate").deferrable is True
    assert dag.get_task("local.train").deferrable is False
    assert dag.get_task("local.evaluate").deferrable is False


@pytest.mark.parametrize(("deferrable", "expected"), [(None, True), (True, True), (False, False)])
def test_a_sagemaker_group_waits_in_the_worker_only_when_told(deferrable: bool | None, expected: bool) -> None:
    dag = _build(
        spec=example("smddp_p4d"),
        backend="sagemaker",
        deferrable=deferrable,
        evaluation=EvaluationStep(script="examples/evaluate.py"),
    )
    assert dag.get_task(f"{G}.train").deferrable is expected
    assert dag.get_task(f"{G}.evaluate").deferrable is expected
    # the group's own training_kwargs still win
    assert _build(spec=example("smddp_p4d"), backend="sagemaker", training_kwargs={"deferrable": False}).get_task(
        f"{G}.train"
    ).deferrable is False


def test_the_forms_evaluation_dependencies_replace_the_steps_and_stay_inside_the_project(tmp_path: Any) -> None:
    from airflow_dist_training.task_groups import _evaluation_for_run

    step = EvaluationStep(script="examples/evaluate.py", dependencies=["/opt/helpers/checkpointing.py"])
    assert _evaluation_for_run(step, {}, tmp_path) is step  # no form value: the step's own
    chosen = _evaluation_for_run(step, {"evaluation_dependencies": ["lib/helper.py", "pkg"]}, tmp_path)
    assert chosen is not None and list(chosen.dependencies) == ["lib/helper.py", "pkg"]
    assert chosen.script == step.script
    for bad, what in (
        (["/etc/passwd"], "'/etc/passwd' must be a path inside the project folder"),
        (["lib/../../x"], "'lib/../../x' must be a path inside the project folder"),
        (["s3://b/k.py"], "'s3://b/k.py' must be a path inside the project folder"),
    ):
        with pytest.raises(SpecValidationError, match=r"trigger form: params\.evaluation_dependencies\[0\]: " + what):
            _evaluation_for_run(step, {"evaluation_dependencies": bad}, tmp_path)
    with pytest.raises(SpecValidationError, match=r"params\.evaluation_dependencies: must be a list of paths"):
        _evaluation_for_run(step, {"evaluation_dependencies": "lib/helper.py"}, tmp_path)
    with pytest.raises(SpecValidationError, match=r"params\.evaluation_dependencies: .*helper\.py"):
        _evaluation_for_run(step, {"evaluation_dependencies": ["a/helper.py", "b/helper.py"]}, tmp_path)


def test_retention_and_promotion_read_the_layout_the_spec_names() -> None:
    spec = example("local_demo")
    checkpoint = spec.checkpoint.model_copy(update={"layout": "hf-trainer"})  # type: ignore[union-attr]
    dag = _build(spec=spec.model_copy(update={"checkpoint": checkpoint}), backend="local")
    retention = dag.get_task(f"{G}.checkpoint_retention")
    assert (retention.checkpoint_layout, retention.hook.layout) == ("hf-trainer", "hf-trainer")


def test_checkpoint_freshness_watches_the_running_job_beside_train_on_a_durable_backend_only() -> None:
    from airflow_dist_training.spec.pipeline import CheckpointFreshness, CheckpointStep

    step = CheckpointStep(freshness=CheckpointFreshness(max_age_seconds=120, on_stall="stop"))
    dag = _build(spec=example("smddp_p4d"), backend="sagemaker", checkpoints=step)
    watch: Any = dag.get_task(f"{G}.watch_checkpoints")
    # beside train: the same short circuit skips both; nothing waits for the alarm but the teardown
    assert _downstream(dag, "check_changes") == {"train", "watch_checkpoints"}
    assert _downstream(dag, "watch_checkpoints") == {"stop_orphaned_job"}
    assert (watch.plan_task_id, watch.training_task_id) == (f"{G}.plan", f"{G}.train")
    assert (watch.max_age_seconds, watch.on_stall, watch.deferrable, watch.retries) == (120, "stop", True, 0)
    assert watch.poll_interval == dag.get_task(f"{G}.train").poll_interval
    in_worker: Any = _build(spec=example("smddp_p4d"), backend="sagemaker", checkpoints=step, deferrable=False)
    assert in_worker.get_task(f"{G}.watch_checkpoints").deferrable is False
    # the local job lives in its training task's process: no other task can watch it
    assert f"{G}.watch_checkpoints" not in _build(spec=example("local_demo"), backend="local", checkpoints=step).task_ids
    assert f"{G}.watch_checkpoints" not in _build(spec=example("smddp_p4d"), backend="sagemaker").task_ids


def test_every_task_of_the_group_takes_the_retry_policy_and_the_enclosing_groups_defaults() -> None:
    """The group's default_args (set without TaskGroup's deep copy) reach each task as before: the
    retry policy, merged over an enclosing group's defaults, which the group's own win over."""
    from airflow.sdk import TaskGroup

    from airflow_dist_training.compat import retry_policy_supported

    with DAG(dag_id="defaults", schedule=None, start_date=dt.datetime(2026, 1, 1)) as dag:
        with TaskGroup("outer", default_args={"owner": "team-a", "retry_policy": "overridden"}):
            group = stage_train_evaluate(spec=example("local_demo"), backend="local", base_dir="/tmp")
    assert group.default_args["owner"] == "team-a"
    policy = group.default_args["retry_policy"]
    assert policy != "overridden" and (policy is not None) == retry_policy_supported()
    tasks = [t for t in dag.tasks if t.task_id.startswith("outer.stage_train_evaluate.")]
    assert len(tasks) == 4
    assert {t.owner for t in tasks} == {"team-a"}
    if retry_policy_supported():
        assert all(t.retry_policy is policy for t in tasks)
