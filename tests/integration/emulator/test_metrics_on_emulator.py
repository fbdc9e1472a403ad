"""Training metrics on the emulator go to CloudWatch as SageMaker puts them, and the Training view
reads them back: namespace ``/aws/sagemaker/TrainingJobs``, dimension ``Host=<job>/algo-N``, metric
name the definition's ``Name``, one value per matching output line, timestamped at the line."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest

from airflow_dist_training.ui.sagemaker_source import sagemaker_job_view

from .conftest import BUCKET, script_job_spec
from .test_training_on_emulator import operator, run_task

pytestmark = [pytest.mark.integration, pytest.mark.slow]
NAMESPACE = "/aws/sagemaker/TrainingJobs"
EPOCHS = 4
# each host prints its own losses, > 1 s apart: one point per 1-second period when read back
TRAIN = f"""\
import os, time
host = os.environ["SM_CURRENT_HOST"]
offset = 0.5 if host == "algo-2" else 0.0
for epoch in range({EPOCHS}):
    print(f"epoch={{epoch}} loss={{1.0 / (epoch + 1) + offset:.4f}} accuracy=0.{{epoch}}", flush=True)
    time.sleep(1.2)
"""


def _losses(host: str) -> list[float]:
    offset = 0.5 if host == "algo-2" else 0.0
    return [round(1.0 / (e + 1) + offset, 4) for e in range(EPOCHS)]


def test_training_metrics_are_published_to_cloudwatch_and_shown_by_the_training_view(
    sagemaker_endpoint: Any, tmp_path: Path
) -> None:
    sagemaker_endpoint.client("s3").create_bucket(Bucket=BUCKET)
    spec = script_job_spec(
        tmp_path,
        "emu-metrics",
        TRAIN,
        compute={"instance_type": "ml.m5.xlarge", "instance_count": 2},
        distribution={"strategy": "launcher", "launcher": "torchrun", "processes_per_host": 1},
        metric_definitions=[
            {"name": "train:loss", "regex": "loss=([0-9.]+)"},
            {"name": "train:accuracy", "regex": "accuracy=([0-9.]+)"},
        ],
    )
    from fake_sagemaker_training import make_context

    result = run_task(operator(spec), make_context("run-metrics"))
    job = result["job_name"]
    desc = sagemaker_endpoint.client("sagemaker").describe_training_job(TrainingJobName=job)
    start, end = desc["TrainingStartTime"], desc["TrainingEndTime"]

    cw = sagemaker_endpoint.client("cloudwatch")
    listed = cw.list_metrics(Namespace=NAMESPACE)["Metrics"]
    assert {(m["MetricName"], tuple((d["Name"], d["Value"]) for d in m["Dimensions"])) for m in listed} == {
        (name, (("Host", f"{job}/{host}"),))
        for name in ("train:loss", "train:accuracy")
        for host in ("algo-1", "algo-2")
    }
    # every line's value, at the time of its line (1-second periods: one line each)
    queries = [
        {
            "Id": f"loss_{host.replace('-', '_')}",
            "MetricStat": {
                "Metric": {
                    "Namespace": NAMESPACE,
                    "MetricName": "train:loss",
                    "Dimensions": [{"Name": "Host", "Value": f"{job}/{host}"}],
                },
                "Period": 1,
                "Stat": "Average",
            },
        }
        for host in ("algo-1", "algo-2")
    ]
    data = cw.get_metric_data(
        MetricDataQueries=queries,
        StartTime=start - dt.timedelta(minutes=1),
        EndTime=end + dt.timedelta(minutes=1),
        ScanBy="TimestampAscending",
    )["MetricDataResults"]
    for result_of_host, host in zip(data, ("algo-1", "algo-2"), strict=True):
        assert [round(v, 4) for v in result_of_host["Values"]] == _losses(host)
        stamps = result_of_host["Timestamps"]
        assert stamps == sorted(stamps) and len(set(stamps)) == EPOCHS
        assert start - dt.timedelta(seconds=1) <= stamps[0] and stamps[-1] <= end + dt.timedelta(seconds=1)
    final = {m["MetricName"]: m["Value"] for m in desc["FinalMetricDataList"]}
    assert round(final["train:loss"], 4) in (_losses("algo-1")[-1], _losses("algo-2")[-1])

    # the Training view's reader (GetMetricData by the job's own MetricDefinitions and hosts)
    view = sagemaker_job_view(job, "us-east-1", aws_conn_id=None)
    assert view["metric_definitions"] == ["train:loss", "train:accuracy"]
    loss = view["metrics"]["series"]["train:loss"]
    assert {p["host"] for p in loss} == {"algo-1", "algo-2"}
    for host in ("algo-1", "algo-2"):
        values = [p["value"] for p in loss if p["host"] == host]
        # one-minute averages of the host's lines
        assert values and all(min(_losses(host)) <= v <= max(_losses(host)) for v in values), values
