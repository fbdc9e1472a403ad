"""``DistributedTuningOperator`` at parse time and before any AWS call."""

from __future__ import annotations

import re

import pytest

from airflow_dist_training.errors import SpecValidationError
from airflow_dist_training.operators.tuning import DistributedTuningOperator
from tests.unit.tuning.test_tuning_spec import TRAINING, tuning


class NoAws:
    """A hook whose every use is an error: nothing may reach AWS."""

    def __getattr__(self, name: str) -> None:
        raise AssertionError(f"AWS was called ({name}) for a bad spec")


def test_the_constructor_parses_and_validates_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    op = DistributedTuningOperator(
        task_id="tune", spec="{{ var.value.spec }}", tuning="{{ var.value.tuning }}"
    )
    assert op.spec == "{{ var.value.spec }}" and op.tuning == "{{ var.value.tuning }}"
    assert set(op.template_fields) >= {"spec", "tuning"}
    assert "hook" not in op.__dict__, "no hook (no connection lookup) at parse time"


def test_a_bad_tuning_section_fails_the_task_before_any_aws_call() -> None:
    op = DistributedTuningOperator(
        task_id="tune",
        spec=TRAINING,
        tuning=tuning(objective={"metric": "loss", "type": "Maximize"}),
        region_name="us-east-1",
        aws_conn_id=None,
    )
    op.__dict__["hook"] = NoAws()
    op.__dict__["jobs"] = NoAws()
    with pytest.raises(SpecValidationError, match=re.escape("tuning.objective.metric: 'loss' is not one of")):
        op.execute({"run_id": "manual__1"})  # type: ignore[arg-type]
