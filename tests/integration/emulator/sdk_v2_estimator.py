"""Runs inside the SageMaker SDK v2 venv: the PyTorch estimator, unchanged, against the endpoint.

argv: a JSON file with ``source_dir``, ``bucket``, ``role`` and ``runs`` (each ``name``,
``instance_count``, ``distribution``); prints one JSON line per run with what the SDK reports.
The endpoint comes from ``AWS_ENDPOINT_URL`` (the SDK's boto3 honours it).
"""

import json
import sys

import sagemaker
from sagemaker.pytorch import PyTorch

config = json.load(open(sys.argv[1]))
session = sagemaker.Session()
estimators = {}
for run in config["runs"]:  # both jobs start, then the SDK streams each one's log until it ends
    estimators[run["name"]] = estimator = PyTorch(
        entry_point="train.py",
        source_dir=config["source_dir"],
        role=config["role"],
        framework_version="2.8.0",
        py_version="py312",
        instance_count=run["instance_count"],
        instance_type=run["instance_type"],
        distribution=run["distribution"],
        hyperparameters={"epochs": 2},
        metric_definitions=[{"Name": "train:loss", "Regex": "loss=([0-9.]+)"}],
        output_path=f"s3://{config['bucket']}/output",
        base_job_name=run["name"],
        sagemaker_session=session,
        disable_profiler=True,
        debugger_hook_config=False,
    )
    estimator.fit({"train": f"s3://{config['bucket']}/data/"}, wait=False)
for name, estimator in estimators.items():
    estimator.latest_training_job.wait(logs="All")
    description = estimator.latest_training_job.describe()
    print(
        "SDK-RESULT "
        + json.dumps(
            {
                "name": name,
                "job": estimator.latest_training_job.name,
                "status": description["TrainingJobStatus"],
                "metrics": {m["MetricName"]: m["Value"] for m in description.get("FinalMetricDataList", [])},
                "model_data": estimator.model_data,
            }
        ),
        flush=True,
    )
