"""Our CreateHyperParameterTuningJob request == the SageMaker SDK v2 ``HyperparameterTuner``'s, field for field.

Each case plans a training spec + tuning section with ``plan_tuning_job`` and has the SDK build the
same tuner over the same estimator (``tuning_cases.py``). Only the named differences may appear,
and each must (the run-identity tag, as for training jobs).
"""

from __future__ import annotations

from typing import Any

import pytest

from airflow_dist_training.sagemaker.request import RUN_IDENTITY_TAG
from airflow_dist_training.sagemaker.tuning import plan_tuning_job
from tests.parity.cases import REGION, RUN_IDENTITY
from tests.parity.test_request_parity import MISSING, diff, render
from tests.parity.tuning_cases import TUNING_CASES, TuningCase

ALLOWED: dict[str, dict[str, tuple[Any, Any]]] = {
    # we tag the tuning job with its Airflow run identity (as its training jobs): a retry finds it
    "run_identity_tag": {
        "Tags[1].Key": (RUN_IDENTITY_TAG, MISSING),
        "Tags[1].Value": (RUN_IDENTITY, MISSING),
    },
    # Grid without max_jobs: the SDK sends MaxNumberOfTrainingJobs=None, which botocore's parameter
    # validation rejects before any call; we leave it out (SageMaker then tries every combination)
    "grid_every_combination": {
        "HyperParameterTuningJobConfig.ResourceLimits.MaxNumberOfTrainingJobs": (MISSING, None)
    },
}


def our_request(case: TuningCase) -> dict[str, Any]:
    plan = plan_tuning_job(
        case.spec,
        case.tuning_spec,
        job_name=case.job_name,
        region=REGION,
        run_identity=RUN_IDENTITY if case.run_identity else None,
    )
    return plan.request


@pytest.mark.parametrize("case", TUNING_CASES, ids=lambda c: c.id)
def test_tuning_request_matches_sdk(case: TuningCase, sdk_results: dict[str, Any]) -> None:
    result = sdk_results[f"tuning:{case.id}"]
    assert "request" in result, f"the SDK rejected tuning case {case.id}: {result.get('error')}"
    differences = diff(our_request(case), result["request"])
    allowed = ALLOWED.get(case.id, {})
    unexpected = {p: v for p, v in differences.items() if allowed.get(p) != v}
    assert not unexpected, f"tuning request differs from the SDK's in {case.id}:\n" + render(unexpected)
    assert sorted(allowed) == sorted(differences), "an allowed difference no longer occurs: update ALLOWED"


def test_tuning_job_names_fit_the_api() -> None:
    for case in TUNING_CASES:
        assert len(case.job_name) <= 32
