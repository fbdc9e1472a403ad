"""The Hugging Face estimator's image fields and rules, and your own container's entry point.

The SDK's own messages for the HuggingFace estimator's arguments (``HuggingFace._validate_args``) come
from the spec, with the field path, before anything is planned; request-level parity is in tests/parity.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from airflow_dist_training.errors import SpecValidationError
from airflow_dist_training.sagemaker.images import ImageResolutionError, resolve_image_uri
from airflow_dist_training.sagemaker.request import plan_training_job
from airflow_dist_training.spec.loading import load_spec
from airflow_dist_training.spec.training import ImageSpec

HF = {"framework": "huggingface", "transformers_version": "4.56.2", "pytorch_version": "2.8.0", "py_version": "py312"}
BASE: dict[str, Any] = {
    "name": "unit",
    "image": HF,
    "source": {"entry_point": "train.py", "source_dir": "s3://my-ml-bucket/code/sourcedir.tar.gz"},
    "role_arn": "arn:aws:iam::123456789012:role/SageMakerTrainingRole",
    "compute": {"instance_type": "ml.p4d.24xlarge", "instance_count": 2},
    "output": {"s3_path": "s3://my-ml-bucket/output"},
}
OWN_IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/team/trainer:1"


def spec_data(image: dict[str, Any], **top: Any) -> dict[str, Any]:
    data = copy.deepcopy(BASE)
    data["image"] = image
    data.update(top)
    return data


def load_errors(data: dict[str, Any]) -> list[str]:
    with pytest.raises(SpecValidationError) as info:
        load_spec(data)
    return [str(p) for p in info.value.problems]


def plan_errors(data: dict[str, Any]) -> list[str]:
    with pytest.raises(SpecValidationError) as info:
        plan_training_job(load_spec(data), job_name="job-1", region="us-east-1")
    return [str(p) for p in info.value.problems]


@pytest.mark.parametrize(
    ("image", "message"),
    [
        (
            {"framework": "huggingface", "pytorch_version": "2.8.0"},
            "transformers_version, and image_uri are both None. Specify either transformers_version or image_uri",
        ),
        (
            {**HF, "tensorflow_version": "2.6.3"},
            "tensorflow_version and pytorch_version are both not None. Specify only tensorflow_version or "
            "pytorch_version.",
        ),
        (
            {"framework": "huggingface", "transformers_version": "4.56.2"},
            "tensorflow_version and pytorch_version are both None. Specify either tensorflow_version or "
            "pytorch_version.",
        ),
        (
            {**HF, "pytorch_version": "2.8"},
            "Please use either full version or shortened version for both transformers_version, "
            "tensorflow_version and pytorch_version.",
        ),
        ({**HF, "framework_version": "4.56.2"}, "a huggingface image takes transformers_version instead"),
        (
            {"framework": "pytorch", "framework_version": "2.8.0", "transformers_version": "4.56.2"},
            "transformers_version: only with framework: huggingface",
        ),
    ],
)
def test_huggingface_image_fields_get_the_sdks_messages(image: dict[str, Any], message: str) -> None:
    errors = load_errors(spec_data(image))
    assert len(errors) == 1 and errors[0].startswith("image") and message in errors[0], errors


def test_a_huggingface_image_uri_skips_the_version_rules_as_the_sdk_does() -> None:
    spec = load_spec(spec_data({"framework": "huggingface", "uri": OWN_IMAGE}))
    assert spec.image.base_framework is None
    request = plan_training_job(spec, job_name="job-1", region="us-east-1").request
    assert request["AlgorithmSpecification"]["TrainingImage"] == OWN_IMAGE
    assert request["AlgorithmSpecification"]["EnableSageMakerMetricsTimeSeries"] is True  # HuggingFace: always


@pytest.mark.parametrize(
    ("image", "instance", "message"),
    [
        ({**HF, "transformers_version": "4.99.0"}, "ml.p4d.24xlarge", "known versions: 4.10, 4.10.2"),
        ({**HF, "pytorch_version": "2.7.1"}, "ml.p4d.24xlarge", "Unsupported base framework: pytorch2.7.1"),
        (HF, "ml.c5.xlarge", "Unsupported processor: cpu"),
        ({**HF, "py_version": "py311"}, "ml.p4d.24xlarge", "py_version 'py311' is not available"),
        (
            {"framework": "huggingface", "transformers_version": "4.36.2", "tensorflow_version": "1.13.1"},
            "ml.trn1.32xlarge",
            "Unsupported base framework: tensorflow1.13.1",
        ),
    ],
)
def test_huggingface_images_that_do_not_exist_are_refused(image: dict[str, Any], instance: str, message: str) -> None:
    with pytest.raises(ImageResolutionError, match=message):
        resolve_image_uri(ImageSpec.model_validate(image), region="us-east-1", instance_type=instance)


@pytest.mark.parametrize(
    "image",
    [{"framework": "pytorch", "framework_version": "2.8.0", "py_version": "py312"}, HF],
)
def test_an_image_in_a_region_without_its_registry_is_refused_naming_the_region(image: dict[str, Any]) -> None:
    with pytest.raises(ImageResolutionError, match=r"^Unsupported region: xx-nowhere-1: no .*supported regions: .*us-east-1"):
        resolve_image_uri(ImageSpec.model_validate(image), region="xx-nowhere-1", instance_type="ml.p4d.24xlarge")


def test_huggingface_with_smp_v2_is_refused_at_the_image() -> None:
    data = spec_data(HF, distribution={"strategy": "smp_v2", "smp": {"parameters": {"tensor_parallel_degree": 8}}})
    errors = plan_errors(data)
    assert any(e.startswith("image.transformers_version: Unsupported pytorch-smp version: 4.56.2") for e in errors)


def test_huggingface_pytorchddp_is_plain_ddp_not_smddp() -> None:
    """HuggingFace keeps pytorchddp (the PyTorch estimator turned it into SMDDP): no SMDDP version rule."""
    data = spec_data(HF, distribution={"strategy": "pytorchddp"})
    hyperparameters = plan_training_job(load_spec(data), job_name="job-1", region="us-east-1").request[
        "HyperParameters"
    ]
    assert hyperparameters["sagemaker_pytorch_ddp_enabled"] == "true"
    assert hyperparameters["sagemaker_instance_type"] == '"ml.p4d.24xlarge"'
    assert "sagemaker_distributed_dataparallel_enabled" not in hyperparameters
    pytorch = spec_data({"framework": "pytorch", "framework_version": "2.8.0", "py_version": "py312"})
    pytorch["distribution"] = {"strategy": "pytorchddp"}
    assert any("is not supported by smdataparallel" in e for e in plan_errors(pytorch))


def test_container_entry_point_and_arguments_go_into_the_request() -> None:
    image = {"uri": OWN_IMAGE, "container_entry_point": ["python3", "-m", "trainer"], "container_arguments": ["--x", "1"]}
    algorithm = plan_training_job(load_spec(spec_data(image)), job_name="job-1", region="us-east-1").request[
        "AlgorithmSpecification"
    ]
    assert algorithm["ContainerEntrypoint"] == ["python3", "-m", "trainer"]
    assert algorithm["ContainerArguments"] == ["--x", "1"]


@pytest.mark.parametrize(
    ("image", "message"),
    [
        ({**HF, "container_entry_point": ["python3"]}, "they need uri"),
        ({"uri": OWN_IMAGE, "container_arguments": ["--x"]}, "container_arguments needs container_entry_point"),
        ({"uri": OWN_IMAGE, "container_entry_point": []}, "container_entry_point"),
    ],
)
def test_container_entry_point_needs_your_own_image(image: dict[str, Any], message: str) -> None:
    errors = load_errors(spec_data(image))
    assert len(errors) == 1 and errors[0].startswith("image") and message in errors[0], errors


def test_the_launcher_strategy_keeps_its_own_entry_point() -> None:
    data = spec_data({"uri": OWN_IMAGE, "container_entry_point": ["bash", "run.sh"]})
    data["distribution"] = {"strategy": "launcher"}
    assert plan_errors(data) == [
        "image.container_entry_point: strategy 'launcher' sets its own container entry point; "
        "leave container_entry_point out, or use another strategy"
    ]
