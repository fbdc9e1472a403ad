"""The Training view's SageMaker source against moto: describe + CloudWatch training metrics."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

pytestmark = pytest.mark.integration


def test_sagemaker_job_view_reads_the_jobs_cloudwatch_metrics_per_host(moto_reset: str) -> None:
    import boto3

    from airflow_dist_training.ui.sagemaker_source import NAMESPACE, sagemaker_job_view

    sm = boto3.client("sagemaker", region_name="us-east-1")
    sm.create_training_job(
        TrainingJobName="view-job",
        AlgorithmSpecification={
            "TrainingImage": "img:latest",
            "TrainingInputMode": "File",
            "MetricDefinitions": [{"Name": "train:loss", "Regex": "loss=([0-9.]+)"}],
        },
        RoleArn="arn:aws:iam::123456789012:role/SageMakerRole",
        OutputDataConfig={"S3OutputPath": "s3://bucket/out"},
        ResourceConfig={"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 2, "VolumeSizeInGB": 50},
        StoppingCondition={"MaxRuntimeInSeconds": 86400},
    )
    desc: dict[str, Any] = sm.describe_training_job(TrainingJobName="view-job")
    start = desc.get("TrainingStartTime") or desc["CreationTime"]
    # moto answers with its own canned MetricDefinitions: use whatever the job reports
    metric = desc["AlgorithmSpecification"]["MetricDefinitions"][0]["Name"]
    cw = boto3.client("cloudwatch", region_name="us-east-1")
    for host, values in (("algo-1", [0.9, 0.5]), ("algo-2", [0.8])):
        for i, value in enumerate(values):
            cw.put_metric_data(
                Namespace=NAMESPACE,
                MetricData=[
                    {
                        "MetricName": metric,
                        "Dimensions": [{"Name": "Host", "Value": f"view-job/{host}"}],
                        "Timestamp": start + dt.timedelta(seconds=1 + 30 * i),
                        "Value": value,
                    }
                ],
            )
    view = sagemaker_job_view("view-job", "us-east-1", aws_conn_id=None)
    assert view["hosts"] == ["algo-1", "algo-2"]
    assert view["metric_definitions"][0] == metric
    points = view["metrics"]["series"][metric]
    assert sorted((p["host"], p["value"]) for p in points) == [
        ("algo-1", 0.5),
        ("algo-1", 0.9),
        ("algo-2", 0.8),
    ] or sorted((p["host"], round(p["value"], 3)) for p in points) == [("algo-1", 0.7), ("algo-2", 0.8)]
    assert view["status"] == desc["TrainingJobStatus"]
