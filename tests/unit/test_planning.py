"""The plan task validates and plans a spec once (issue 15: it used to re-validate and re-plan)."""

from __future__ import annotations

from typing import Any
from unittest import mock

import pytest

import airflow_dist_training.sagemaker.request as request_module
import airflow_dist_training.spec.loading as loading
import airflow_dist_training.spec.overrides as overrides_module
from airflow_dist_training.hooks.backends import SageMakerBackend
from airflow_dist_training.planning import plan_run
from airflow_dist_training.spec.overrides import apply_overrides
from airflow_dist_training.spec.training import TrainingJobSpec
from tests.corpus.requests import RecordingSageMaker
from tests.unit.sagemaker.specs import example


def test_no_override_keeps_the_validated_spec_itself() -> None:
    spec = example("torch_distributed_p4d")
    assert apply_overrides(spec, {}) is spec
    assert apply_overrides(spec, {"hyperparameter_names": {"epochs": "n_epochs"}}) is spec
    changed = apply_overrides(spec, {"epochs": 3})
    assert changed is not spec and changed.hyperparameters["epochs"] == 3


@pytest.mark.parametrize(("overrides", "spec_validations"), [({}, 0), ({"instance_count": 4}, 1)])
def test_the_sagemaker_plan_task_validates_and_plans_the_spec_once(
    overrides: dict[str, Any], spec_validations: int
) -> None:
    spec = example("torch_distributed_p4d")
    calls: dict[str, int] = {"spec": 0, "plan": 0, "check_spec": 0}
    validate, plan, check = (
        loading.validate_model,
        request_module.plan_training_job,
        request_module.check_spec,
    )

    def counting_validate(model: Any, *args: Any, **kwargs: Any) -> Any:
        calls["spec"] += model is TrainingJobSpec
        return validate(model, *args, **kwargs)

    def counting_plan(*args: Any, **kwargs: Any) -> Any:
        calls["plan"] += 1
        return plan(*args, **kwargs)

    def counting_check(*args: Any, **kwargs: Any) -> Any:
        calls["check_spec"] += 1
        return check(*args, **kwargs)

    with (
        mock.patch.object(overrides_module, "validate_model", counting_validate),
        mock.patch.object(loading, "validate_model", counting_validate),
        mock.patch.object(request_module, "plan_training_job", counting_plan),
        mock.patch.object(request_module, "check_spec", counting_check),
    ):
        result = plan_run(
            spec,
            backend=SageMakerBackend(aws_conn_id=None),
            region="us-east-1",
            overrides=overrides,
            train_task_id="group.train",
            context={"run_id": "manual__2026-01-01", "params": {}},
        )
    assert calls == {"spec": spec_validations, "plan": 1, "check_spec": 1}
    assert result.request is not None
    assert result.request["TrainingJobName"] == result.job_name_base == result.job_name(1)
    # the run-identity tag is the hash the training task sends (and its job name ends with)
    tags = {t["Key"]: t["Value"] for t in result.request["Tags"]}
    assert tags["airflow-dist-training:run-identity"] == result.identity_hash
    assert result.job_name_base.endswith(f"-{result.identity_hash}")


def test_the_local_plan_path_does_not_validate_the_spec_again(tmp_path: Any) -> None:
    """Local stand-ins (role, output, code folder) are filled into a copy, not a re-validated dump."""
    from airflow_dist_training.hooks.local_training import LocalTrainingHook

    (tmp_path / "train.py").write_text("print('hi')\n")
    spec = loading.load_spec(
        {
            "name": "once",
            "image": {"uri": "123456789012.dkr.ecr.us-east-1.amazonaws.com/x:1"},
            "source": {"entry_point": "train.py", "source_dir": str(tmp_path)},
            "compute": {"instance_type": "ml.m5.xlarge", "instance_count": 1},
        }
    )
    calls = {"spec": 0, "plan": 0}
    validate, plan = loading.validate_model, request_module.plan_training_job

    def counting_validate(model: Any, *args: Any, **kwargs: Any) -> Any:
        calls["spec"] += model is TrainingJobSpec
        return validate(model, *args, **kwargs)

    def counting_plan(*args: Any, **kwargs: Any) -> Any:
        calls["plan"] += 1
        return plan(*args, **kwargs)

    with (
        mock.patch.object(loading, "validate_model", counting_validate),
        mock.patch.object(request_module, "plan_training_job", counting_plan),
    ):
        local = LocalTrainingHook(root=tmp_path / "root", base_dir=tmp_path, use_s3=False)
        planned = local.plan(spec, "once-1")
    assert calls == {"spec": 0, "plan": 1}
    assert planned.hosts == ["algo-1"] and planned.entry_point == "train.py"


def test_request_changes_names_what_the_run_changed_after_the_plan_task() -> None:
    from airflow_dist_training.sagemaker.request import plan_training_job, request_changes

    spec = example("torch_distributed_p4d")
    planned = plan_training_job(spec, job_name="job-1", region="us-east-1").request
    assert (
        request_changes(planned, plan_training_job(spec, job_name="job-1", region="us-east-1").request) == []
    )
    on_demand = spec.model_copy(update={"spot": type(spec.spot)()})
    sent = plan_training_job(on_demand, job_name="job-1-2", region="us-east-1").request
    assert request_changes(planned, sent) == [
        "TrainingJobName: 'job-1' -> 'job-1-2'",
        "StoppingCondition.MaxWaitTimeInSeconds: removed (was 172800)",
        "HyperParameters.sagemaker_job_name: '\"job-1\"' -> '\"job-1-2\"'",
        "EnableManagedSpotTraining: removed (was True)",
    ]


class _Counts:
    """Counts spec validations, plans and planner checks while patched in."""

    def __init__(self) -> None:
        self.calls = {"spec": 0, "plan": 0, "check_spec": 0}
        self._validate, self._plan, self._check = (
            loading.validate_model,
            request_module.plan_training_job,
            request_module.check_spec,
        )

    def validate(self, model: Any, *args: Any, **kwargs: Any) -> Any:
        self.calls["spec"] += model is TrainingJobSpec
        return self._validate(model, *args, **kwargs)

    def plan(self, *args: Any, **kwargs: Any) -> Any:
        self.calls["plan"] += 1
        return self._plan(*args, **kwargs)

    def check(self, *args: Any, **kwargs: Any) -> Any:
        self.calls["check_spec"] += 1
        return self._check(*args, **kwargs)

    def patches(self) -> Any:
        from contextlib import ExitStack

        stack = ExitStack()
        stack.enter_context(mock.patch.object(overrides_module, "validate_model", self.validate))
        stack.enter_context(mock.patch.object(loading, "validate_model", self.validate))
        stack.enter_context(mock.patch.object(request_module, "plan_training_job", self.plan))
        stack.enter_context(mock.patch.object(request_module, "check_spec", self.check))
        return stack


class _TaskInstance:
    """The XCom of one DAG run, as the plan task pushes it and the training task pulls it."""

    dag_id = "dag"
    map_index = -1

    def __init__(self) -> None:
        self.xcom: dict[tuple[str, str], Any] = {}

    def xcom_pull(self, task_ids: str, key: str) -> Any:
        return self.xcom.get((task_ids, key))


class _NoCheckpoints:
    def latest_complete(self, uri: str) -> None:
        return None

    def move_aside_incomplete(self, uri: str) -> list[dict[str, object]]:
        return []


def _plan_then_train(spec: TrainingJobSpec, *, warm_start_uri: str | None = None) -> tuple[Any, ...]:
    """The plan task, then the training task's submit, as ``stage_train_evaluate`` wires them."""
    from airflow.sdk import DAG

    from airflow_dist_training.operators.training import DistributedTrainingOperator

    ti = _TaskInstance()
    context: Any = {"run_id": "manual__2026-01-01", "params": {}, "ti": ti}
    counts = _Counts()
    with counts.patches():
        result = plan_run(
            spec,
            backend=SageMakerBackend(aws_conn_id=None),
            region="us-east-1",
            overrides={},
            train_task_id="train",
            context=context,
            checkpoint_resume="latest",
        )
        ti.xcom.update({("plan", key): value for key, value in result.xcoms(dry_run=False).items()})
        with DAG("dag", schedule=None):
            op = DistributedTrainingOperator(
                task_id="train",
                spec=result.spec,
                plan_task_id="plan",
                checkpoint_resume="latest",
                aws_conn_id=None,
                region_name="us-east-1",
                warm_start_uri=warm_start_uri,
            )
        sagemaker = RecordingSageMaker()
        op.__dict__.update(hook=sagemaker, checkpoint_hook=_NoCheckpoints())
        op.submit_job(context)
    return result, sagemaker, counts.calls


def test_the_training_task_sends_the_plan_tasks_request_validated_and_planned_once() -> None:
    spec = example("launcher_any_image", checkpoint={"s3_uri": "s3://my-ml-bucket/checkpoints/ci"})
    result, sagemaker, calls = _plan_then_train(spec)
    # plan task: planned and checked once; training task: the XCom spec loaded once, no second plan
    assert calls == {"spec": 1, "plan": 1, "check_spec": 1}
    assert sagemaker.created == [result.request]
    # the run-scoped checkpoint prefix was planned by the plan task already (the request shown is sent)
    assert result.request is not None
    assert result.request["CheckpointConfig"]["S3Uri"] == result.run_checkpoint_uri == (
        f"s3://my-ml-bucket/checkpoints/ci/{result.job_name_base}"
    )
    # the launcher files travel with the plan (XCom), and are uploaded before the create
    assert sagemaker.put == [u.s3_uri for u in result.uploads] and len(sagemaker.put) == 2


def test_a_warm_start_changes_the_request_and_the_training_task_logs_the_difference(
    capfd: pytest.CaptureFixture[str],
) -> None:
    spec = example("launcher_any_image")
    result, sagemaker, calls = _plan_then_train(spec, warm_start_uri="s3://my-ml-bucket/champion/model.tar.gz")
    log = "".join(capfd.readouterr())
    assert calls["plan"] == 2  # the run's state changed the spec: planned again, and said so
    assert calls["spec"] == 1  # the training task validates the spec with its channels once
    sent = sagemaker.created[0]
    assert sent != result.request
    assert any(c["ChannelName"] == "warm_start" for c in sent["InputDataConfig"])
    assert f"The run's state changed the request planned for {result.job_name_base}" in log
    assert "InputDataConfig: [" in log  # request_changes names the field and both values


def _run_plan(spec: TrainingJobSpec, policy: str | None = "latest") -> Any:
    return plan_run(
        spec,
        backend=SageMakerBackend(aws_conn_id=None),
        region="us-east-1",
        overrides={},
        train_task_id="train",
        context={"run_id": "manual__2026-01-01", "ti": _TaskInstance()},
        checkpoint_resume=policy,
    )


def test_a_run_plan_goes_through_xcom_as_json_unchanged() -> None:
    import json

    from airflow_dist_training.planning import RunPlan

    plan = _run_plan(example("launcher_any_image", checkpoint={"s3_uri": "s3://my-ml-bucket/ckpt"}))
    assert RunPlan.from_xcom(json.loads(json.dumps(plan.to_xcom()))) == plan
    assert plan.identity == "dag:train:manual__2026-01-01:-1"
    assert plan.job_name_base.endswith(f"-{plan.identity_hash}") and plan.uploads  # launcher files
    assert plan.run_checkpoint_uri == f"s3://my-ml-bucket/ckpt/{plan.job_name_base}"


def test_applying_no_state_sends_the_plan_and_plans_nothing() -> None:
    from airflow_dist_training.planning import RunPlan, RunState, apply_run_state

    here = _run_plan(example("torch_distributed_p4d"))
    plan = RunPlan.from_xcom(here.to_xcom())  # the plan task's, through XCom
    counts = _Counts()
    with counts.patches():
        job = apply_run_state(plan, RunState())
        assert counts.calls == {"spec": 1, "plan": 0, "check_spec": 0}
        apply_run_state(here, RunState())  # a plan made in this process keeps the spec it validated
    assert counts.calls == {"spec": 1, "plan": 0, "check_spec": 0}
    assert job.request == plan.request and job.name == plan.job_name_base
    assert not job.planned_again and job.changes == ()


def test_the_next_generation_on_demand_names_every_change_and_keeps_the_runs_checkpoints() -> None:
    from airflow_dist_training.planning import RunState, apply_run_state

    plan = _run_plan(example("torch_distributed_p4d"))
    job = apply_run_state(plan, RunState(generation=3, on_demand=True))
    assert job.name == f"{plan.job_name_base}-r3" and job.planned_again
    assert job.request is not None and "EnableManagedSpotTraining" not in job.request
    # every generation of the run resumes from the run's own checkpoints
    assert job.request["CheckpointConfig"]["S3Uri"] == plan.run_checkpoint_uri
    assert list(job.changes) == [
        f"TrainingJobName: {plan.job_name_base!r} -> '{plan.job_name_base}-r3'",
        "StoppingCondition.MaxWaitTimeInSeconds: removed (was 172800)",
        f"HyperParameters.sagemaker_job_name: '\"{plan.job_name_base}\"' -> '\"{plan.job_name_base}-r3\"'",
        "EnableManagedSpotTraining: removed (was True)",
    ]


def test_staged_channels_and_a_warm_start_are_validated_once_with_the_spec() -> None:
    from airflow_dist_training.planning import RunState, apply_run_state

    network = {"subnets": ["subnet-0123456789abcdef0"], "security_group_ids": ["sg-0123456789abcdef0"]}
    plan = _run_plan(example("launcher_any_image", network=network))
    staged = {"type": "fsx", "file_system_id": "fs-0123456789abcdef0", "directory_path": "/fsx/data"}
    counts = _Counts()
    with counts.patches():
        job = apply_run_state(plan, RunState(channels={"train": staged}, warm_start_uri="s3://my-ml-bucket/model.tar.gz"))
    assert counts.calls == {"spec": 1, "plan": 1, "check_spec": 1}
    assert job.request is not None
    sources = {c["ChannelName"]: c["DataSource"] for c in job.request["InputDataConfig"]}
    assert sources["train"]["FileSystemDataSource"]["FileSystemId"] == "fs-0123456789abcdef0"
    assert sources["warm_start"]["S3DataSource"]["S3Uri"] == "s3://my-ml-bucket/model.tar.gz"
    assert any(change.startswith("InputDataConfig") for change in job.changes)


def test_a_training_task_refuses_the_plan_of_another_task() -> None:
    from airflow.sdk import DAG

    from airflow_dist_training.compat import AirflowFailException
    from airflow_dist_training.operators.training import DistributedTrainingOperator

    plan = _run_plan(example("launcher_any_image"), policy=None)
    ti = _TaskInstance()
    ti.xcom.update({("plan", key): value for key, value in plan.xcoms(dry_run=False).items()})
    with DAG("dag", schedule=None):
        op = DistributedTrainingOperator(task_id="train_other", spec=plan.spec, plan_task_id="plan", aws_conn_id=None)
    with pytest.raises(AirflowFailException, match="planned the run dag:train:manual__2026-01-01:-1"):
        op.submit_job({"run_id": "manual__2026-01-01", "ti": ti})  # type: ignore[arg-type]
