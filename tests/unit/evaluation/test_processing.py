from __future__ import annotations

import json
import subprocess
import tarfile
from pathlib import Path

import pytest

from airflow_dist_training.errors import SpecValidationError
from airflow_dist_training.evaluation.processing import BOOTSTRAP, build_processing_job_request

ROLE = "arn:aws:iam::123456789012:role/sm-exec"


def test_exact_processing_job_request() -> None:
    request = build_processing_job_request(
        job_name="eval-evaluate-0123456789",
        role_arn=ROLE,
        image_uri="763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.8.0-cpu-py312",
        script_uri="s3://b/code/evaluate.py",
        model_uri="s3://b/job/output/model.tar.gz",
        output_uri="s3://b/eval/run1/",
        data_uri="s3://b/data/test",
        arguments=["--batch-size", 64],
        environment={"SEED": "1"},
        tags={"team": "ml"},
    )
    s3in = {"S3DataType": "S3Prefix", "S3InputMode": "File", "S3DataDistributionType": "FullyReplicated"}
    assert request == {
        "ProcessingJobName": "eval-evaluate-0123456789",
        "RoleArn": ROLE,
        "AppSpecification": {
            "ImageUri": "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.8.0-cpu-py312",
            "ContainerEntrypoint": ["sh", "-c", BOOTSTRAP, "/opt/ml/processing/input/code/evaluate.py"],
            "ContainerArguments": [
                "--model-dir",
                "/opt/ml/processing/model",
                "--output-dir",
                "/opt/ml/processing/evaluation",
                "--batch-size",
                "64",
            ],
        },
        "ProcessingInputs": [
            {
                "InputName": "model",
                "S3Input": {
                    "S3Uri": "s3://b/job/output/model.tar.gz",
                    "LocalPath": "/opt/ml/processing/model",
                    **s3in,
                },
            },
            {
                "InputName": "code",
                "S3Input": {"S3Uri": "s3://b/code/", "LocalPath": "/opt/ml/processing/input/code", **s3in},
            },
            {
                "InputName": "data",
                "S3Input": {
                    "S3Uri": "s3://b/data/test",
                    "LocalPath": "/opt/ml/processing/input/data",
                    **s3in,
                },
            },
        ],
        "ProcessingOutputConfig": {
            "Outputs": [
                {
                    "OutputName": "evaluation",
                    "S3Output": {
                        "S3Uri": "s3://b/eval/run1",
                        "LocalPath": "/opt/ml/processing/evaluation",
                        "S3UploadMode": "EndOfJob",
                    },
                }
            ]
        },
        "ProcessingResources": {
            "ClusterConfig": {"InstanceCount": 1, "InstanceType": "ml.m5.xlarge", "VolumeSizeInGB": 30}
        },
        "StoppingCondition": {"MaxRuntimeInSeconds": 3600},
        "Environment": {
            "ADT_MODEL_DIR": "/opt/ml/processing/model",
            "ADT_OUTPUT_DIR": "/opt/ml/processing/evaluation",
            "ADT_DATA_DIR": "/opt/ml/processing/input/data",
            "SEED": "1",
        },
        "Tags": [{"Key": "team", "Value": "ml"}],
    }


def test_request_passes_botocore_validation() -> None:
    import botocore.session
    from botocore.validate import validate_parameters

    model = botocore.session.get_session().get_service_model("sagemaker")
    request = build_processing_job_request(
        job_name="e",
        role_arn=ROLE,
        image_uri="img",
        script_uri="s3://b/evaluate.py",
        model_uri="s3://b/m.tar.gz",
        output_uri="s3://b/out",
    )
    validate_parameters(request, model.operation_model("CreateProcessingJob").input_shape)  # raises on error
    assert all(len(s) <= 256 for s in request["AppSpecification"]["ContainerEntrypoint"])


def test_invalid_sagemaker_arguments_each_named() -> None:
    with pytest.raises(SpecValidationError) as exc:
        build_processing_job_request(
            job_name="bad_name",
            role_arn="role",
            image_uri="",
            script_uri="/local/evaluate.sh",
            model_uri="/local/model.tar.gz",
            output_uri="s3://b/out",
        )
    assert str(exc.value).splitlines() == [
        "job_name: 'bad_name': 1-63 letters, digits and hyphens",
        "role_arn: 'role' is not an IAM role ARN (arn:aws:iam::<account>:role/<name>)",
        "image_uri: is required for the SageMaker backend",
        "script: must be an s3:// URI for the SageMaker backend, got '/local/evaluate.sh'",
        "model_uri: must be an s3:// URI for the SageMaker backend, got '/local/model.tar.gz'",
        "script: must be a .py file, got '/local/evaluate.sh'",
    ]


def test_container_bootstrap_extracts_model_and_runs_script(tmp_path: Path, job_env_python: Path) -> None:
    """Run the exact entrypoint with sh, as the processing container would."""
    model_dir, out_dir, code = tmp_path / "model", tmp_path / "evaluation", tmp_path / "code"
    model_dir.mkdir(), code.mkdir()
    (tmp_path / "weights.txt").write_text("42")
    with tarfile.open(model_dir / "model.tar.gz", "w:gz") as tar:
        tar.add(tmp_path / "weights.txt", arcname="weights.txt")
    script = code / "evaluate.py"
    script.write_text(
        "import argparse, json, pathlib\n"
        "p = argparse.ArgumentParser(); p.add_argument('--model-dir'); p.add_argument('--output-dir')\n"
        "a = p.parse_args()\n"
        "w = float(pathlib.Path(a.model_dir, 'weights.txt').read_text())\n"
        "pathlib.Path(a.output_dir, 'evaluation.json').write_text(json.dumps({'metrics': {'w': w}}))\n"
    )
    shim = tmp_path / "bin"
    shim.mkdir()
    (shim / "python3").symlink_to(job_env_python)  # the image's python3
    env = {"PATH": f"{shim}:/usr/bin:/bin", "ADT_MODEL_DIR": str(model_dir), "ADT_OUTPUT_DIR": str(out_dir)}
    subprocess.run(
        ["sh", "-c", BOOTSTRAP, str(script), "--model-dir", str(model_dir), "--output-dir", str(out_dir)],
        env=env,
        check=True,
        timeout=60,
    )
    assert json.loads((out_dir / "evaluation.json").read_text()) == {"metrics": {"w": 42.0}}
