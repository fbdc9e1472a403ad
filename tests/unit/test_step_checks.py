"""The plan task checks every step's inputs (evaluation, gate, registry) before anything launches."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from airflow_dist_training.pipeline_checks import check_steps
from airflow_dist_training.spec.loading import load_spec
from airflow_dist_training.spec.pipeline import EvaluationStep, RegistryStep, S3Location, s3_locations
from tests.paths import REPO


def _spec(**overrides: Any) -> Any:
    data: dict[str, Any] = {
        "name": "demo",
        "image": {"uri": "123456789012.dkr.ecr.us-east-1.amazonaws.com/train:1"},
        "source": {"entry_point": "train.py"},
        "role_arn": "arn:aws:iam::123456789012:role/SageMakerTrainingRole",
        "compute": {"instance_type": "ml.m5.xlarge", "instance_count": 1},
        "channels": {"train": {"type": "s3", "uri": "s3://data-bucket/train"}},
        "output": {"s3_path": "s3://out-bucket/models"},
        "checkpoint": {"s3_uri": "s3://out-bucket/ckpt"},
    }
    data.update(overrides)
    return load_spec(data)


def _messages(problems: list[Any]) -> list[str]:
    return [str(p) for p in problems if p.severity == "error"]


def test_local_script_and_data_are_accepted_for_sagemaker_when_they_exist() -> None:
    step = EvaluationStep(script="examples/evaluate.py", channel_source="examples/specs")
    assert _messages(check_steps(_spec(), backend="sagemaker", evaluation=step, base_dir=REPO)) == []


def test_missing_evaluation_script_and_data_are_rejected_naming_the_field(tmp_path: Path) -> None:
    step = EvaluationStep(script="nope/evaluate.py", channel_source="nope/test")
    errors = _messages(check_steps(_spec(), backend="sagemaker", evaluation=step, base_dir=tmp_path))
    assert errors == [
        f"evaluation.script: {tmp_path / 'nope/evaluate.py'} does not exist (or is not a file)",
        f"evaluation.channel_source: {tmp_path / 'nope/test'} does not exist",
    ]


def test_sagemaker_evaluation_needs_an_output_location_and_a_role() -> None:
    spec = _spec(output=None, role_arn=None)
    step = EvaluationStep(script="s3://code/evaluate.py")
    errors = _messages(check_steps(spec, backend="sagemaker", evaluation=step))
    assert any(e.startswith("output.s3_path: is required for a SageMaker evaluation") for e in errors)
    assert any(e.startswith("role_arn: is required") for e in errors)


def test_an_s3_script_on_the_local_backend_is_rejected() -> None:
    step = EvaluationStep(script="s3://code/evaluate.py")
    errors = _messages(check_steps(_spec(), backend="local", evaluation=step))
    assert errors == [
        "evaluation.script: s3://code/evaluate.py: the local backend runs a local script, not a URI"
    ]


def test_gate_thresholds_and_registry_are_checked() -> None:
    step = EvaluationStep(script="s3://code/evaluate.py")
    errors = _messages(
        check_steps(
            _spec(),
            backend="sagemaker",
            evaluation=step,
            gate={"thresholds": {"accuracy": {"minimum": 0.9}}},
            registry=RegistryStep(model_package_group="bad_name!", inference_image="not an image"),
        )
    )
    assert any(e.startswith("gate.thresholds.accuracy") and "minimum" in e for e in errors), errors
    assert "registry.model_package_group: 'bad_name!': 1-63 letters, digits and hyphens" in errors
    assert any(e.startswith("registry.inference_image: 'not an image' is not an image URI") for e in errors)


def test_inference_image_from_the_form_overrides_the_registry_step() -> None:
    registry = RegistryStep(model_package_group="grp", inference_image="not an image")
    ok = "123456789012.dkr.ecr.us-east-1.amazonaws.com/serve:2"
    assert _messages(check_steps(_spec(), backend="sagemaker", registry=registry, inference_image=ok)) == []


def test_s3_locations_name_every_bucket_the_run_uses() -> None:
    step = EvaluationStep(script="s3://code/evaluate.py", channel_source="s3://data-bucket/test")
    assert s3_locations(_spec(), evaluation=step) == [
        S3Location("channels.train.uri", "s3://data-bucket/train", True),
        S3Location("output.s3_path", "s3://out-bucket/models", False),
        S3Location("checkpoint.s3_uri", "s3://out-bucket/ckpt", False),
        S3Location("evaluation.script", "s3://code/evaluate.py", True),
        S3Location("evaluation.channel_source", "s3://data-bucket/test", True),
    ]


def test_a_staged_channel_is_checked_at_its_staging_source() -> None:
    """Staging puts the channel on FSx: the run reads the staging source, not the channel's own URI."""
    from airflow_dist_training.spec.pipeline import StagingStep

    staging = StagingStep(channel="train", source="s3://raw/train/", file_system_id="fs-1", file_system_path="/t")
    assert s3_locations(_spec(), staging=staging)[:2] == [
        S3Location("staging.source", "s3://raw/train/", True),
        S3Location("output.s3_path", "s3://out-bucket/models", False),
    ]


@pytest.mark.integration
def test_missing_bucket_and_empty_prefix_are_named(moto_reset: str) -> None:
    import os

    import boto3

    from airflow_dist_training.pipeline_checks import check_s3_locations

    s3 = boto3.client("s3", region_name="us-east-1", endpoint_url=os.environ["AWS_ENDPOINT_URL"])
    s3.create_bucket(Bucket="data-bucket")
    s3.put_object(Bucket="data-bucket", Key="train/part-0", Body=b"x")
    problems = check_s3_locations(
        s3,
        [
            S3Location("channels.train.uri", "s3://data-bucket/train", True),
            S3Location("channels.test.uri", "s3://data-bucket/test", True),
            S3Location("output.s3_path", "s3://out-bucket/models", False),
        ],
    )
    assert [str(p) for p in problems] == [
        "channels.test.uri: s3://data-bucket/test: no objects under this prefix",
        "output.s3_path: s3://out-bucket/models: bucket out-bucket does not exist",
    ]


@pytest.mark.integration
def test_no_such_bucket_on_upload_fails_fast_naming_the_bucket(moto_reset: str) -> None:
    from airflow_dist_training.errors import SpecValidationError
    from airflow_dist_training.hooks.evaluation import ArtifactStore
    from airflow_dist_training.hooks.training import SageMakerTrainingHook

    with pytest.raises(SpecValidationError, match="bucket missing-bucket does not exist"):
        ArtifactStore(None, "us-east-1").write_text("s3://missing-bucket/eval/evaluation.json", "{}")
    hook = SageMakerTrainingHook(aws_conn_id=None, region_name="us-east-1")
    with pytest.raises(SpecValidationError, match="bucket missing-bucket does not exist"):
        hook.upload_code(REPO / "examples" / "evaluate.py", "s3://missing-bucket/code/evaluate.py")


class _S3:
    """An S3 client holding ``buckets`` ({bucket: [keys]}); other buckets answer 404 as S3 does."""

    def __init__(self, buckets: dict[str, list[str]]) -> None:
        self.buckets = buckets

    def head_bucket(self, Bucket: str) -> None:
        if Bucket not in self.buckets:
            error = Exception("Not Found")
            error.response = {"Error": {"Code": "404"}}  # type: ignore[attr-defined]
            raise error

    def list_objects_v2(self, Bucket: str, Prefix: str, MaxKeys: int) -> dict[str, int]:
        return {"KeyCount": min(MaxKeys, sum(k.startswith(Prefix) for k in self.buckets[Bucket]))}


def test_with_an_s3_client_the_steps_check_reads_every_location_of_the_run() -> None:
    """The plan task's one call: the step rules, then each bucket and input prefix through its client."""
    step = EvaluationStep(script="s3://data-bucket/code/evaluate.py")
    s3 = _S3({"data-bucket": ["train/part-0"]})
    errors = _messages(check_steps(_spec(), backend="sagemaker", evaluation=step, s3=s3, conn_id="aws_ml"))
    assert errors == [
        "output.s3_path: s3://out-bucket/models: bucket out-bucket does not exist",
        "evaluation.script: s3://data-bucket/code/evaluate.py: no objects under this prefix",
    ]
