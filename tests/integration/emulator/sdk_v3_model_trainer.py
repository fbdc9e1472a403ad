"""Runs inside the SageMaker SDK v3 venv: ``ModelTrainer``, unchanged (role validation on), against
the endpoint from ``AWS_ENDPOINT_URL``. argv: a JSON file with ``source_dir``, ``bucket``, ``role``,
``image`` and ``runs`` (``name``, ``instance_count``, ``torchrun``); prints one JSON line per run."""

import json
import logging
import sys

from sagemaker.train import ModelTrainer
from sagemaker.train.configs import Compute, InputData, SourceCode
from sagemaker.train.distributed import Torchrun

logging.basicConfig(level=logging.INFO)  # the SDK leaves logging (its streamed job logs too) to the app
config = json.load(open(sys.argv[1]))
for run in config["runs"]:
    trainer = ModelTrainer(
        training_image=config["image"],
        source_code=SourceCode(source_dir=config["source_dir"], entry_script="train.py"),
        compute=Compute(instance_type="ml.m5.xlarge", instance_count=run["instance_count"]),
        distributed=Torchrun() if run["torchrun"] else None,
        role=config["role"],
        base_job_name=run["name"],
        hyperparameters={"epochs": 2},
    )
    trainer.train(
        input_data_config=[InputData(channel_name="train", data_source=f"s3://{config['bucket']}/data/")]
    )
    job = trainer._latest_training_job
    job.refresh()
    print(
        "SDK-RESULT "
        + json.dumps(
            {
                "name": run["name"],
                "status": job.training_job_status,
                "model_data": job.model_artifacts.s3_model_artifacts,
            }
        ),
        flush=True,
    )
