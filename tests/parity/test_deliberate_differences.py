"""Deliberate differences from the SageMaker SDK that are not request fields of the v2 cases.

- Job names: the SDK appends a timestamp and does not sanitise; we sanitise and use a run-identity hash.
- The launcher strategy: our own launcher, compared with SDK v3 ``ModelTrainer`` + ``Torchrun()`` by
  structure (see docs/parity.md for why it cannot be compared byte for byte).
- No output path: the SDK falls back to its default bucket, we ask for ``output.s3_path``.
- Hugging Face on Trainium: the SDK cannot resolve an image, we resolve the neuronx training image.
- The SDK's version lists: ours are generated from them (``data/sdk_versions.json``).
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from airflow_dist_training.sagemaker.launcher import CODE_CHANNEL, LAUNCHER_CHANNEL
from airflow_dist_training.sagemaker.naming import NAME_PATTERN, job_name, job_name_problems
from airflow_dist_training.sagemaker.request import plan_training_job
from tests.parity.cases import HF_TRN1_IMAGE, NAME_BASES, REGION, RUN_IDENTITY, load


def test_sdk_job_names_are_timestamped_and_unsanitised(sdk_results: dict[str, Any]) -> None:
    sdk = sdk_results["name:my_job"]["name"]
    assert re.fullmatch(r"my_job-\d{4}(-\d{2}){5}-\d{3}", sdk)  # base + UTC timestamp with ms
    assert job_name_problems(sdk), "the SDK's name would be accepted by the API pattern"
    ours = job_name("my_job", RUN_IDENTITY)
    assert NAME_PATTERN.match(ours) and ours.startswith("my-job-")
    assert ours == job_name("my_job", RUN_IDENTITY)  # stable across retries: the SDK's is not


def test_sdk_cuts_long_bases_to_39_characters(sdk_results: dict[str, Any]) -> None:
    long_base = NAME_BASES[2]
    sdk = sdk_results[f"name:{long_base}"]["name"]
    assert len(sdk) == 63 and sdk.startswith("a" * 39 + "-")
    ours = job_name(long_base, RUN_IDENTITY)
    assert len(ours) == 63 and ours.startswith("a" * 52 + "-")  # we keep more of the base


def test_launcher_differs_from_model_trainer_by_design() -> None:
    """SDK v3 ModelTrainer(Torchrun): /bin/bash sm_train.sh entrypoint, ``sm_drivers`` channel.

    Ours: python3 adt_launch.py entrypoint, ``adt_launcher`` channel; same ``code`` channel name,
    same hyperparameter encoding (v3 ``safe_serialize``: strings unquoted, the rest JSON), and like
    v3 no Debugger/Profiler configs and no ``sagemaker_*`` hyperparameters.
    """
    spec = load(
        "launcher_any_image", {"hyperparameters": {"epochs": 3, "lr": 0.1, "name": "abc", "cfg": {"a": 1}}}
    )
    request = plan_training_job(spec, job_name="parity-launcher", region=REGION).request
    algorithm = request["AlgorithmSpecification"]
    assert algorithm["ContainerEntrypoint"] == [
        "python3",
        f"/opt/ml/input/data/{LAUNCHER_CHANNEL}/adt_launch.py",
    ]
    assert algorithm["ContainerArguments"] == [
        "--config",
        f"/opt/ml/input/data/{LAUNCHER_CHANNEL}/launch.json",
    ]
    # v3 (reference doc, verified with sagemaker 3.20.0): {"epochs":"3","lr":"0.1","name":"abc","cfg":"{\"a\": 1}"}
    expected = {"epochs": "3", "lr": "0.1", "name": "abc", "cfg": '{"a": 1}', "model": "resnet50"}
    assert request["HyperParameters"] == expected
    assert [c["ChannelName"] for c in request["InputDataConfig"]] == [CODE_CHANNEL, LAUNCHER_CHANNEL]
    assert all(c["InputMode"] == "File" for c in request["InputDataConfig"])  # as v3's managed channels
    assert "DebugHookConfig" not in request and "ProfilerConfig" not in request
    assert "EnableSageMakerMetricsTimeSeries" not in algorithm


def test_sdk_version_lists_are_generated_from_the_sdk(sdk_results: dict[str, Any]) -> None:
    """data/sdk_versions.json holds fw_utils' lists as the pinned SDK has them (TF 2.9.2 included)."""
    from airflow_dist_training.sagemaker.catalog import sdk_version_lists
    from tests.parity.regenerate_images import FW_UTILS_LISTS

    sdk = sdk_results["difference:fw_utils"]["values"]
    ours = sdk_version_lists()
    for key, name in FW_UTILS_LISTS.items():
        assert ours[key] == sdk[name], f"{key} differs from fw_utils.{name}: run tests/parity/regenerate_images.py"
    assert "2.9.2" in ours["smddp"]["tensorflow"]


def test_no_output_path_the_sdk_uses_its_default_bucket_we_refuse(sdk_results: dict[str, Any]) -> None:
    """The SDK defaults to s3://sagemaker-{region}-{account}/ (and creates that bucket); we ask for output."""
    from airflow_dist_training.errors import SpecValidationError
    from tests.parity.cases import SDK_DEFAULT_BUCKET

    request = sdk_results["difference:default_output"]["request"]
    default = f"s3://{SDK_DEFAULT_BUCKET}/"
    assert request["OutputDataConfig"]["S3OutputPath"] == default
    assert request["DebugHookConfig"]["S3OutputPath"] == default
    assert request["ProfilerConfig"]["S3OutputPath"] == default
    spec = load("torch_distributed_p4d", {"output": None})
    with pytest.raises(SpecValidationError) as info:
        plan_training_job(spec, job_name="parity-default-output", region=REGION)
    assert [f"{p.path}: {p.message}" for p in info.value.problems] == [
        "output.s3_path: is required for SageMaker jobs (where model.tar.gz goes)"
    ]


def test_huggingface_on_trainium_the_sdk_refuses_we_resolve_the_neuronx_image(sdk_results: dict[str, Any]) -> None:
    """The SDK's HuggingFace estimator has no Trainium image lookup; we use its own neuronx training data."""
    sdk = sdk_results["difference:huggingface_trn1"]
    assert "Unsupported processor: trn" in sdk.get("error", ""), sdk
    request = plan_training_job(load("huggingface_trn1"), job_name="parity-hf-trn1", region=REGION).request
    assert request["AlgorithmSpecification"]["TrainingImage"] == HF_TRN1_IMAGE
