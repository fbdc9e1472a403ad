"""Run overrides (the trigger form's knobs) produce a re-validated spec, or a field-path error."""

from __future__ import annotations

import pytest

from airflow_dist_training.errors import SpecValidationError
from airflow_dist_training.sagemaker.request import plan_training_job
from airflow_dist_training.spec.overrides import apply_overrides
from tests.unit.sagemaker.specs import example


def test_form_values_replace_the_spec_values() -> None:
    spec = apply_overrides(
        example("torch_distributed_p4d"),
        {"instance_type": "ml.p5.48xlarge", "instance_count": 4, "epochs": 7, "learning_rate": 0.01},
    )
    assert (spec.compute.instance_type, spec.compute.instance_count) == ("ml.p5.48xlarge", 4)
    assert spec.hyperparameters["epochs"] == 7 and spec.hyperparameters["lr"] == 0.01


def test_spot_on_gets_a_max_wait_of_twice_the_runtime() -> None:
    spec = apply_overrides(example("torch_distributed_p4d"), {"spot": True})
    assert spec.spot.enabled and spec.spot.max_wait_seconds == 2 * spec.stopping.max_runtime_seconds


def test_spot_off_drops_every_spot_only_setting() -> None:
    spot = {
        "enabled": True,
        "max_wait_seconds": 200000,
        "max_interruptions": 3,
        "on_demand_after_interruptions": 2,
    }
    spec = apply_overrides(example("torch_distributed_p4d", spot=spot), {"spot": False})
    assert spec.spot.model_dump() == {
        "enabled": False,
        "max_wait_seconds": None,
        "max_interruptions": None,
        "on_demand_after_interruptions": None,
    }
    request = plan_training_job(spec, job_name="job-0123456789", region="us-east-1").request
    assert "EnableManagedSpotTraining" not in request
    assert "MaxWaitTimeInSeconds" not in request["StoppingCondition"]


def test_a_bad_override_names_the_field() -> None:
    with pytest.raises(SpecValidationError) as info:
        apply_overrides(example("torch_distributed_p4d"), {"instance_count": 0})
    assert str(info.value) == "run overrides: instance_count: Input should be greater than or equal to 1"


def test_run_conf_booleans_are_no_counts():
    import pytest

    from airflow_dist_training.errors import SpecValidationError
    from airflow_dist_training.spec.loading import load_spec
    from airflow_dist_training.spec.overrides import apply_overrides
    from tests.unit.sagemaker.test_validation_errors import BASE

    with pytest.raises(SpecValidationError) as info:
        apply_overrides(load_spec(BASE), {"instance_count": True})
    assert str(info.value) == "run overrides: instance_count: must be an integer, not a boolean (true)"


def test_the_spot_budget_of_a_run_comes_from_the_form() -> None:
    spec = apply_overrides(
        example("torch_distributed_p4d"), {"spot": True, "spot_max_interruptions": 2, "spot_on_demand_after": 1}
    )
    assert (spec.spot.max_interruptions, spec.spot.on_demand_after_interruptions) == (2, 1)
    with pytest.raises(SpecValidationError) as info:
        apply_overrides(example("torch_distributed_p4d"), {"spot_on_demand_after": 0})
    assert "spot_on_demand_after: Input should be greater than or equal to 1" in str(info.value)


def test_a_spot_budget_without_spot_is_refused_not_dropped() -> None:
    spec = apply_overrides(example("torch_distributed_p4d"), {"spot": False, "spot_max_interruptions": 1})
    with pytest.raises(SpecValidationError) as info:
        plan_training_job(spec, job_name="job-0123456789", region="us-east-1")
    assert "spot.max_interruptions: is only used with spot.enabled: true" in str(info.value)
