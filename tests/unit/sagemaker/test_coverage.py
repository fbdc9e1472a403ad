"""The CreateTrainingJob coverage table cannot go stale: every botocore field has a decision."""

from __future__ import annotations

import copy
import sys

from tests.paths import REPO

sys.path.insert(0, str(REPO / "scripts"))
import gen_request_coverage as gen

sys.path.pop(0)


def test_every_create_training_job_field_has_a_coverage_decision():
    model, _ = gen.service_model()
    paths = gen.request_fields(model)
    assert len(paths) > 100
    assert gen.unmapped(paths) == []


def test_a_new_botocore_field_fails_the_check():
    model, _ = gen.service_model()
    grown = copy.deepcopy(model)
    grown["shapes"]["CreateTrainingJobRequest"]["members"]["QuantumConfig"] = {"shape": "String"}
    grown["shapes"]["Channel"]["members"]["Sampling"] = {"shape": "String"}
    assert gen.unmapped(gen.request_fields(grown)) == ["InputDataConfig[].Sampling", "QuantumConfig"]


def test_the_published_table_is_current():
    assert gen.main(["--check"]) == 0, "run scripts/gen_request_coverage.py"


def test_the_issue_fields_are_spec_fields():
    for path in (
        "InputDataConfig[].RecordWrapperType",
        "InputDataConfig[].ShuffleConfig.Seed",
        "HyperParameters",
        "AlgorithmSpecification.TrainingImageConfig.TrainingRepositoryAccessMode",
    ):
        entry = gen.lookup(path)
        assert entry is not None and entry.status == "spec", path


def test_max_pending_time_is_sent_in_the_stopping_condition():
    from airflow_dist_training.sagemaker.request import plan_training_job
    from tests.unit.sagemaker.specs import JOB, REGION, example

    plan = plan_training_job(example("torch_distributed_p4d", stopping__max_pending_seconds=7200), job_name=JOB, region=REGION)
    assert plan.request["StoppingCondition"]["MaxPendingTimeInSeconds"] == 7200
