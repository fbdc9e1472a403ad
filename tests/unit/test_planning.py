"""The plan task validates and plans a spec once (issue 15: it used to re-validate and re-plan)."""

from __future__ import annotations

from typing import Any
from unittest import mock

import pytest

import airflow_dist_training.sagemaker.request as request_module
import airflow_dist_training.spec.loading as loading
import airflow_dist_training.spec.overrides as overrides_module
from airflow_dist_training.planning import plan_run
from airflow_dist_training.spec.overrides import apply_overrides
from airflow_dist_training.spec.training import TrainingJobSpec
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
            backend="sagemaker",
            overrides=overrides,
            train_task_id="group.train",
            context={"run_id": "manual__2026-01-01", "params": {}},
            region_name="us-east-1",
        )
    assert calls == {"spec": spec_validations, "plan": 1, "check_spec": 1}
    assert result["request"]["TrainingJobName"] == result["job_name"]
    # the run-identity tag is the hash the training task sends (and its job name ends with)
    tags = {t["Key"]: t["Value"] for t in result["request"]["Tags"]}
    assert tags["airflow-dist-training:run-identity"] == result["job_name"].rsplit("-", 1)[-1]


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
