"""Trigger-form limits: shown in the form, enforced by the plan task, never clamped into a run."""

from __future__ import annotations

import pytest

from airflow_dist_training.errors import SpecValidationError
from airflow_dist_training.form_limits import check_form_limits, form_limit_problems
from tests.paths import REPO


def test_values_above_the_limit_are_problems_naming_the_param():
    problems = form_limit_problems({"instance_count": 20, "epochs": 3}, {"instance_count": {"x-maximum": 16}})
    assert [str(p) for p in problems] == [
        "params.instance_count: 20 is above this DAG's limit of 16; nothing was launched"
    ]


def test_the_retraining_dag_shows_its_limits_without_a_clamping_maximum():
    from airflow_dist_training.compat import DagBag

    dag = DagBag(dag_folder=str(REPO / "dags" / "distributed_retraining.py"), safe_mode=False).dags[
        "distributed_retraining"
    ]
    for name, limit in (("instance_count", 16), ("epochs", 1000), ("learning_rate", 10)):
        schema = dag.params.get_param(name).schema
        assert "maximum" not in schema, f"{name}: a schema maximum makes the form clamp silently"
        assert schema["x-maximum"] == limit
        assert f"(at most {limit})" in schema["title"]
    with pytest.raises(SpecValidationError) as info:
        check_form_limits({"dag": dag, "params": {"instance_count": 20}})
    assert str(info.value) == (
        "trigger form: params.instance_count: 20 is above this DAG's limit of 16; nothing was launched"
    )
