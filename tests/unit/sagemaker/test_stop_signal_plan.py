"""Which mode passes SageMaker's stop SIGTERM on to the script: the plan says it, and the toolkit shim
(``stopping.forward_sigterm``) is planned as an entrypoint override shipped in a channel."""

from __future__ import annotations

import pytest

from airflow_dist_training.errors import SpecValidationError
from airflow_dist_training.sagemaker.launcher import launcher_script
from airflow_dist_training.sagemaker.request import plan_training_job
from airflow_dist_training.sagemaker.summary import render_plan
from airflow_dist_training.spec.loading import load_spec

from .specs import JOB, REGION, example


def test_toolkit_script_mode_says_the_script_does_not_get_sigterm() -> None:
    plan = plan_training_job(example("torch_distributed_p4d"), job_name=JOB, region=REGION)
    assert "ContainerEntrypoint" not in plan.request["AlgorithmSpecification"]
    assert "Stop signal      the script does NOT get SIGTERM" in render_plan(plan)
    assert "stopping.forward_sigterm" in plan.stop_signal


def test_forward_sigterm_wraps_the_toolkit_in_the_shipped_shim() -> None:
    plan = plan_training_job(
        example("torch_distributed_p4d", stopping__forward_sigterm=True), job_name=JOB, region=REGION
    )
    algorithm = plan.request["AlgorithmSpecification"]
    assert algorithm["ContainerEntrypoint"] == ["python3", "/opt/ml/input/data/adt_launcher/adt_launch.py"]
    assert algorithm["ContainerArguments"] == ["--wrap"]
    # still script mode: the toolkit's hyperparameters are there; the shim ships in its own channel
    assert "sagemaker_program" in plan.request["HyperParameters"]
    channel = next(c for c in plan.request["InputDataConfig"] if c["ChannelName"] == "adt_launcher")
    shim = next(u for u in plan.uploads if u.s3_uri.endswith("/adt_launcher/adt_launch.py"))
    assert channel["DataSource"]["S3DataSource"]["S3Uri"] == shim.s3_uri.rsplit("/", 1)[0] + "/"
    assert shim.content == launcher_script()
    assert plan.stop_signal.startswith("the script gets SIGTERM: AWS's toolkit runs under our shim")


def test_the_launcher_strategy_always_forwards() -> None:
    plan = plan_training_job(example("launcher_any_image"), job_name=JOB, region=REGION)
    assert plan.stop_signal.startswith("the script gets SIGTERM: our launcher (PID 1) forwards it")


def test_forward_sigterm_with_an_own_entrypoint_is_refused_naming_the_field() -> None:
    spec = load_spec(
        {
            "name": "own",
            "role_arn": "arn:aws:iam::123456789012:role/SageMakerTrainingRole",
            "image": {
                "uri": "123456789012.dkr.ecr.us-east-1.amazonaws.com/mine:1",
                "container_entry_point": ["python3", "run.py"],
            },
            "source": {"entry_point": "train.py", "source_dir": "s3://my-ml-bucket/code/sourcedir.tar.gz"},
            "compute": {"instance_type": "ml.m5.xlarge", "instance_count": 1},
            "output": {"s3_path": "s3://my-ml-bucket/output"},
            "stopping": {"forward_sigterm": True},
        }
    )
    with pytest.raises(SpecValidationError) as err:
        plan_training_job(spec, job_name=JOB, region=REGION)
    assert "stopping.forward_sigterm" in str(err.value)
    assert "your own entrypoint is PID 1" in str(err.value)
