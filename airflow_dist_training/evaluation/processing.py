"""The evaluation-script contract, and the SageMaker ``CreateProcessingJob`` request that honours it.

Pure: no Airflow, no boto3. The contract (``docs/evaluation.md``) is identical locally and on
SageMaker: ``python <script> --model-dir <dir> --output-dir <dir> [arguments]``, the same paths in
``ADT_MODEL_DIR``/``ADT_OUTPUT_DIR``/``ADT_DATA_DIR``. Processing jobs download a ``model.tar.gz``
but never extract it, so the container entrypoint is a shell one-liner that extracts archives in
the model dir and then ``exec``s ``python3 <script>`` (``sh``, ``tar`` and ``python3`` exist in
every SageMaker framework image).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from airflow_dist_training.errors import Problem, SpecValidationError
from airflow_dist_training.storage.location import parent_uri, uri_name, uri_scheme

PROCESSING_ROOT = "/opt/ml/processing"
MODEL_DIR = f"{PROCESSING_ROOT}/model"
CODE_DIR = f"{PROCESSING_ROOT}/input/code"
DATA_DIR = f"{PROCESSING_ROOT}/input/data"
OUTPUT_DIR = f"{PROCESSING_ROOT}/evaluation"

_JOB_NAME = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")
_ROLE_ARN = re.compile(r"^arn:aws[a-z\-]*:iam::\d{12}:role/.+$")

# Runs inside the container as `sh -c BOOTSTRAP <script> <args...>` ($0 = script): a one-liner, as
# the API limits each entrypoint string to 256 characters.
BOOTSTRAP = (
    'for f in "$ADT_MODEL_DIR"/*.tar.gz; do [ -e "$f" ] && tar -xzf "$f" -C "$ADT_MODEL_DIR"; done; '
    'mkdir -p "$ADT_OUTPUT_DIR"; exec python3 "$0" "$@"'
)


def script_arguments(model_dir: str, output_dir: str, arguments: Sequence[str] = ()) -> list[str]:
    return ["--model-dir", model_dir, "--output-dir", output_dir, *[str(a) for a in arguments]]


def script_environment(model_dir: str, output_dir: str, data_dir: str | None) -> dict[str, str]:
    env = {"ADT_MODEL_DIR": model_dir, "ADT_OUTPUT_DIR": output_dir}
    if data_dir:
        env["ADT_DATA_DIR"] = data_dir
    return env


def build_processing_job_request(
    *,
    job_name: str,
    role_arn: str,
    image_uri: str,
    script_uri: str,
    model_uri: str,
    output_uri: str,
    data_uri: str | None = None,
    instance_type: str = "ml.m5.xlarge",
    instance_count: int = 1,
    volume_size_gb: int = 30,
    max_runtime_seconds: int = 3600,
    arguments: Sequence[str] = (),
    environment: Mapping[str, str] | None = None,
    network_config: Mapping[str, Any] | None = None,
    volume_kms_key_id: str | None = None,
    output_kms_key_id: str | None = None,
    tags: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """``CreateProcessingJob`` kwargs that run the evaluation script over a model.

    ``script_uri`` is the script in S3 (``s3://.../evaluate.py``); its folder is downloaded so
    helper modules next to it are importable. ``model_uri`` is a ``model.tar.gz`` or an S3 prefix
    (a checkpoint folder). ``output_uri`` is the S3 prefix that receives ``evaluation.json``.
    """
    uris = {"script": script_uri, "model_uri": model_uri, "output_uri": output_uri, "data_uri": data_uri}
    _check_processing_inputs(job_name, role_arn, image_uri, uris, instance_count)
    script_name = uri_name(script_uri)
    inputs = [
        _processing_input("model", model_uri, MODEL_DIR),
        _processing_input("code", parent_uri(script_uri) + "/", CODE_DIR),
    ]
    if data_uri:
        inputs.append(_processing_input("data", data_uri, DATA_DIR))
    env = {**script_environment(MODEL_DIR, OUTPUT_DIR, DATA_DIR if data_uri else None), **(environment or {})}
    s3_output = {"S3Uri": output_uri.rstrip("/"), "LocalPath": OUTPUT_DIR, "S3UploadMode": "EndOfJob"}
    output: dict[str, Any] = {"Outputs": [{"OutputName": "evaluation", "S3Output": s3_output}]}
    if output_kms_key_id:
        output["KmsKeyId"] = output_kms_key_id
    cluster: dict[str, Any] = {
        "InstanceCount": instance_count,
        "InstanceType": instance_type,
        "VolumeSizeInGB": volume_size_gb,
    }
    if volume_kms_key_id:
        cluster["VolumeKmsKeyId"] = volume_kms_key_id
    request: dict[str, Any] = {
        "ProcessingJobName": job_name,
        "RoleArn": role_arn,
        "AppSpecification": {
            "ImageUri": image_uri,
            "ContainerEntrypoint": ["sh", "-c", BOOTSTRAP, f"{CODE_DIR}/{script_name}"],
            "ContainerArguments": script_arguments(MODEL_DIR, OUTPUT_DIR, arguments),
        },
        "ProcessingInputs": inputs,
        "ProcessingOutputConfig": output,
        "ProcessingResources": {"ClusterConfig": cluster},
        "StoppingCondition": {"MaxRuntimeInSeconds": max_runtime_seconds},
        "Environment": env,
    }
    if network_config:
        request["NetworkConfig"] = dict(network_config)
    if tags:
        request["Tags"] = [{"Key": k, "Value": v} for k, v in tags.items()]
    return request


def _processing_input(name: str, s3_uri: str, local_path: str) -> dict[str, Any]:
    return {
        "InputName": name,
        "S3Input": {
            "S3Uri": s3_uri,
            "LocalPath": local_path,
            "S3DataType": "S3Prefix",
            "S3InputMode": "File",
            "S3DataDistributionType": "FullyReplicated",
        },
    }


def _check_processing_inputs(
    job_name: str, role_arn: str, image_uri: str, uris: Mapping[str, str | None], instance_count: int
) -> None:
    """Every problem of the arguments at once, before any request is built."""
    problems: list[Problem] = []
    if not _JOB_NAME.match(job_name):
        problems.append(Problem("job_name", f"{job_name!r}: 1-63 letters, digits and hyphens"))
    if not _ROLE_ARN.match(role_arn or ""):
        problems.append(
            Problem("role_arn", f"{role_arn!r} is not an IAM role ARN (arn:aws:iam::<account>:role/<name>)")
        )
    if not image_uri:
        problems.append(Problem("image_uri", "is required for the SageMaker backend"))
    for field, uri in uris.items():
        if uri is not None and uri_scheme(uri) != "s3":
            problems.append(Problem(field, f"must be an s3:// URI for the SageMaker backend, got {uri!r}"))
    if not str(uris["script"]).endswith(".py"):
        problems.append(Problem("script", f"must be a .py file, got {uris['script']!r}"))
    if instance_count < 1:
        problems.append(Problem("instance_count", "must be at least 1"))
    if problems:
        raise SpecValidationError(problems)
