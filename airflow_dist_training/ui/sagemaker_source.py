"""A SageMaker job for the Training view: ``DescribeTrainingJob`` plus its CloudWatch metrics.

SageMaker publishes each metric definition as a CloudWatch metric in the namespace
``/aws/sagemaker/TrainingJobs`` with the dimension ``Host=<job name>/algo-N``. One
``GetMetricData`` call reads every (metric, host) pair. The view's x axis is then seconds since the
first point (CloudWatch has no epoch). A progress counter (``train:epoch``, ``global_step``:
:func:`ui.data.counter_unit`) is read as the minute's ``Maximum``, the others as its ``Average``:
its observations, with their times, give the job's progress and ETA.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from airflow_dist_training.ui.data import counter_observations, counter_unit

NAMESPACE = "/aws/sagemaker/TrainingJobs"
MAX_QUERIES = 500  # GetMetricData's limit per call


def _query(job_name: str, name: str, host: int, stat: str, qid: str, label: str) -> dict[str, Any]:
    return {
        "Id": qid,
        "Label": label,
        "MetricStat": {
            "Metric": {
                "Namespace": NAMESPACE,
                "MetricName": name,
                "Dimensions": [{"Name": "Host", "Value": f"{job_name}/algo-{host}"}],
            },
            "Period": 60,
            "Stat": stat,
        },
        "ReturnData": True,
    }


def metric_queries(job_name: str, metric_names: list[str], host_count: int) -> list[dict[str, Any]]:
    """A query per (metric, host); a counter also has its minute's ``Minimum`` (``|min``): whether
    it counts from 0 or 1 (:func:`ui.data.progress_and_eta`), which the minute's maximum hides."""
    queries = []
    for mi, name in enumerate(metric_names):
        for h in range(1, host_count + 1):
            if counter_unit(name):
                queries.append(_query(job_name, name, h, "Maximum", f"m{mi}_h{h}", f"{name}|algo-{h}"))
                queries.append(
                    _query(job_name, name, h, "Minimum", f"m{mi}_h{h}_min", f"{name}|algo-{h}|min")
                )
            else:
                queries.append(_query(job_name, name, h, "Average", f"m{mi}_h{h}", f"{name}|algo-{h}"))
    return queries[:MAX_QUERIES]


def curves_from_metric_data(results: list[dict[str, Any]]) -> dict[str, Any]:
    """``GetMetricData`` results -> the view's ``{"axis": "seconds", "series": ..., "counter": ...}``."""
    points: list[tuple[str, str, float, float]] = []
    minima: list[float] = []
    for r in results:
        name, host, kind = ([*str(r.get("Label", "")).split("|"), "", ""])[:3]
        for ts, value in zip(r.get("Timestamps", []), r.get("Values", []), strict=False):
            if kind == "min":
                minima.append(float(value))
                continue
            t = ts.timestamp() if isinstance(ts, dt.datetime) else float(ts)
            points.append((name, host or "algo-1", t, float(value)))
    t0 = min((p[2] for p in points), default=0.0)
    series: dict[str, list[dict[str, Any]]] = {}
    for name, host, t, value in sorted(points, key=lambda p: p[2]):
        series.setdefault(name, []).append({"x": round(t - t0, 1), "value": value, "host": host})
    counter = counter_observations([{"name": n, "timestamp": t, "value": v} for n, _, t, v in points])
    if counter is not None and minima:
        counter["lowest"] = min([*minima, counter["lowest"]])
    return {"axis": "seconds", "series": series, "epochs": None, "counter": counter}


def sagemaker_job_view(
    job_name: str, region: str | None, aws_conn_id: str | None = "aws_default"
) -> dict[str, Any]:
    from airflow_dist_training.hooks.training import SageMakerTrainingHook, timeline_from_description

    hook = SageMakerTrainingHook(aws_conn_id=aws_conn_id, region_name=region)
    desc = hook.jobs.describe(job_name)
    count = int((desc.get("ResourceConfig") or {}).get("InstanceCount") or 1)
    for group in (desc.get("ResourceConfig") or {}).get("InstanceGroups") or []:
        count = max(count, int(group.get("InstanceCount") or 0))
    names = [
        str(m["Name"]) for m in (desc.get("AlgorithmSpecification") or {}).get("MetricDefinitions") or []
    ]
    metrics: dict[str, Any] = {"axis": "seconds", "series": {}, "epochs": None}
    start = desc.get("TrainingStartTime") or desc.get("CreationTime")
    if names and isinstance(start, dt.datetime):
        from airflow_dist_training.hooks.aws import aws_hook

        cw = aws_hook("cloudwatch", aws_conn_id=aws_conn_id, region_name=region).conn
        end = desc.get("TrainingEndTime") or dt.datetime.now(dt.UTC)
        response = cw.get_metric_data(
            MetricDataQueries=metric_queries(job_name, names, count),
            StartTime=start - dt.timedelta(minutes=1),
            EndTime=end + dt.timedelta(minutes=1),
        )
        metrics = curves_from_metric_data(response.get("MetricDataResults", []))
    return {
        "status": desc.get("TrainingJobStatus"),
        "secondary_status": desc.get("SecondaryStatus"),
        "timeline": timeline_from_description(desc),  # as the job's result has it
        "hosts": [f"algo-{i}" for i in range(1, count + 1)],
        "metric_definitions": names,
        "metrics": metrics,
        "failure_reason": desc.get("FailureReason"),
    }
