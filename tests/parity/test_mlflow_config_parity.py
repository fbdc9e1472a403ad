"""``mlflow:`` -> ``CreateTrainingJob.MlflowConfig``, encoded as the SageMaker SDK v3 encodes it.

The SDK v2 estimators have no MLflow argument. The v3 trainers (``sagemaker-train``,
``_build_mlflow_config``) send ``{"MlflowResourceArn": arn}`` plus ``MlflowExperimentName`` and
``MlflowRunName`` only when they are given; the suite does not install v3 (docs/parity.md), so the
encoding is recorded here, as for the launcher. botocore's own validation of the request is the
other side: it must accept what we send.
"""

from __future__ import annotations

from typing import Any

import pytest

from airflow_dist_training.errors import SpecValidationError
from airflow_dist_training.sagemaker.request import plan_training_job
from tests.parity.cases import REGION, load

ARN = "arn:aws:sagemaker:us-west-2:123456789012:mlflow-tracking-server/team"
APP = "arn:aws:sagemaker:us-west-2:123456789012:mlflow-app/app-ABC123"


def _v3_build_mlflow_config(arn: str, experiment: str | None, run: str | None) -> dict[str, Any]:
    """The v3 trainers' encoding (sagemaker-train ``_build_mlflow_config``), as recorded."""
    config = {"MlflowResourceArn": arn}
    if experiment:
        config["MlflowExperimentName"] = experiment
    if run:
        config["MlflowRunName"] = run
    return config


@pytest.mark.parametrize(
    ("arn", "experiment", "run"),
    [(ARN, None, None), (ARN, "retraining", None), (APP, "team/retraining", "nightly-2026.12.07")],
)
def test_mlflow_config_is_the_sdk_v3_encoding(arn: str, experiment: str | None, run: str | None) -> None:
    block = {
        "resource_arn": arn,
        **({"experiment_name": experiment} if experiment else {}),
        **({"run_name": run} if run else {}),
    }
    with_mlflow = plan_training_job(
        load("pytorchddp_p3", {"mlflow": block}), job_name="parity-mlflow", region=REGION
    ).request
    without = plan_training_job(load("pytorchddp_p3"), job_name="parity-mlflow", region=REGION).request
    assert with_mlflow.pop("MlflowConfig") == _v3_build_mlflow_config(arn, experiment, run)
    assert with_mlflow == without  # nothing else changes
    import botocore.session

    client = botocore.session.get_session().create_client(
        "sagemaker", region_name=REGION, aws_access_key_id="x", aws_secret_access_key="x"
    )
    from botocore.validate import validate_parameters

    shape = client.meta.service_model.operation_model("CreateTrainingJob").input_shape
    validate_parameters({**with_mlflow, "MlflowConfig": _v3_build_mlflow_config(arn, experiment, run)}, shape)


@pytest.mark.parametrize(
    ("block", "field"),
    [
        ({"resource_arn": "arn:aws:sagemaker:us-west-2:123456789012:model-package/x"}, "mlflow.resource_arn"),
        ({"resource_arn": ARN, "experiment_name": "has space"}, "mlflow.experiment_name"),
        ({"experiment_name": "e"}, "mlflow.resource_arn"),
    ],
)
def test_a_bad_mlflow_block_is_a_field_error(block: dict[str, Any], field: str) -> None:
    with pytest.raises(SpecValidationError) as refused:
        from airflow_dist_training.spec.loading import load_spec

        base = load("pytorchddp_p3").model_dump(mode="json", exclude_unset=True)
        load_spec({**base, "mlflow": block})
    assert [p.path for p in refused.value.problems] == [field]
