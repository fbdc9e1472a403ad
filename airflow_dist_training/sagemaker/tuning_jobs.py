"""What a tuning job does with its training jobs: the pure parts shared by the test endpoint
(``emulator/tuning.py``) and the local backend (``local/tuning.py``), so the same request and seed
give the same configurations, job names, requests and outcome wherever the tuning job runs.

Bayesian and Hyperband fall back to random sampling: no model of the objective is fitted.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import random
import statistics
from typing import Any

from airflow_dist_training.spec.sweep import sample_in_range

RUNNING = ("InProgress", "Stopping")
# CreateTrainingJob fields a tuning job's TrainingJobDefinition carries as they are, both ways
DEFINITION_FIELDS = (
    "InputDataConfig",
    "VpcConfig",
    "EnableNetworkIsolation",
    "EnableInterContainerTrafficEncryption",
    "EnableManagedSpotTraining",
    "CheckpointConfig",
    "RetryStrategy",
    "Environment",
)
# what a training job of the tuning job takes from its TrainingJobDefinition as it is
_PASSED_ON = ("RoleArn", "OutputDataConfig", "StoppingCondition", *DEFINITION_FIELDS)


def _sample_number(rng: random.Random, spec: dict[str, Any], integer: bool) -> str:
    low, high = float(spec["MinValue"]), float(spec["MaxValue"])
    # Auto: SageMaker picks the scale; uniform here, as a sweep's draw (spec/sweep.py)
    value = sample_in_range(rng, low, high, spec.get("ScalingType") or "Auto")
    if integer:
        return str(min(max(round(value), math.ceil(low)), math.floor(high)))
    return repr(value)


def sample_configurations(
    ranges: dict[str, Any], strategy: str, count: int | None, seed: int
) -> list[dict[str, str]]:
    """One ``{hyperparameter: value string}`` per training job (see the module docstring)."""
    if strategy == "Grid":
        categorical = ranges.get("CategoricalParameterRanges") or []
        names = [r["Name"] for r in categorical]
        grid = [
            dict(zip(names, combo, strict=True))
            for combo in itertools.product(*(r["Values"] for r in categorical))
        ]
        return grid[:count] if count is not None else grid
    rng = random.Random(seed)
    configs = []
    for _ in range(count or 1):
        config: dict[str, str] = {}
        for spec in ranges.get("ContinuousParameterRanges") or []:
            config[spec["Name"]] = _sample_number(rng, spec, integer=False)
        for spec in ranges.get("IntegerParameterRanges") or []:
            config[spec["Name"]] = _sample_number(rng, spec, integer=True)
        for spec in ranges.get("CategoricalParameterRanges") or []:
            config[spec["Name"]] = rng.choice(list(spec["Values"]))
        configs.append(config)
    return configs


def training_job_name(tuning_job: str, index: int) -> str:
    """``<tuning job>-<NNN>-<8 hex>``, as SageMaker names a tuning job's training jobs."""
    digest = hashlib.sha256(f"{tuning_job}:{index}".encode()).hexdigest()[:8]
    return f"{tuning_job}-{index:03d}-{digest}"


OBJECTIVE_HYPERPARAMETER = "_tuning_objective_metric"


def objective_hyperparameter(request: dict[str, Any]) -> dict[str, str]:
    """What SageMaker adds to a tuning job's static hyperparameters: ``_tuning_objective_metric``,
    JSON-quoted for a framework (script-mode) container, whose hyperparameters are all JSON."""
    definition = request.get("TrainingJobDefinition") or {}
    objective = (request.get("HyperParameterTuningJobConfig") or {}).get(
        "HyperParameterTuningJobObjective"
    ) or {}
    metric = str(objective.get("MetricName") or "")
    script_mode = "sagemaker_program" in (definition.get("StaticHyperParameters") or {})
    return {OBJECTIVE_HYPERPARAMETER: json.dumps(metric) if script_mode else metric}


def training_request(request: dict[str, Any], name: str, tuned: dict[str, str]) -> dict[str, Any]:
    """The ``CreateTrainingJob`` request of one of the tuning job's training jobs."""
    definition = request["TrainingJobDefinition"]
    algorithm = definition["AlgorithmSpecification"]
    resource = dict(
        definition.get("HyperParameterTuningResourceConfig") or definition.get("ResourceConfig") or {}
    )
    job: dict[str, Any] = {
        "TrainingJobName": name,
        "AlgorithmSpecification": {k: v for k, v in algorithm.items() if k != "AlgorithmName"},
        "ResourceConfig": {
            k: resource[k]
            for k in ("InstanceType", "InstanceCount", "VolumeSizeInGB", "VolumeKmsKeyId")
            if k in resource
        },
        "HyperParameters": {
            **(definition.get("StaticHyperParameters") or {}),
            **objective_hyperparameter(request),
            **tuned,
        },
    }
    job.update({k: definition[k] for k in _PASSED_ON if k in definition})
    if request.get("Tags"):  # the tuning job's tags go to every training job it launches
        job["Tags"] = list(request["Tags"])
    return job


def tuning_seed(request: dict[str, Any]) -> int:
    """``RandomSeed``, or else a number from the tuning job's name (reproducible either way)."""
    seed = request["HyperParameterTuningJobConfig"].get("RandomSeed")
    if seed is not None:
        return int(seed)
    return int(hashlib.sha256(str(request["HyperParameterTuningJobName"]).encode()).hexdigest()[:8], 16)


def tuning_configurations(request: dict[str, Any]) -> list[dict[str, str]]:
    """The tuned hyperparameters of each training job the request's tuning job starts, in order."""
    config = request["HyperParameterTuningJobConfig"]
    limit = config["ResourceLimits"].get("MaxNumberOfTrainingJobs")
    return sample_configurations(
        config.get("ParameterRanges") or {},
        str(config["Strategy"]),
        int(limit) if limit else None,
        tuning_seed(request),
    )


def stops_early(current: list[float], earlier: list[list[float]], objective_type: str) -> float | None:
    """SageMaker's early stopping (``TrainingJobEarlyStoppingType: Auto``): after each epoch (each
    value of the objective metric), the median of the earlier training jobs' running averages of
    the objective up to that epoch; the job stops when its value is worse. Returns that median when
    the job is to stop, else None (no epoch yet, or no earlier job that reached it)."""
    epoch = len(current)
    averages = [statistics.fmean(series[:epoch]) for series in earlier if epoch and len(series) >= epoch]
    if not averages:
        return None
    median = statistics.median(averages)
    worse = current[-1] < median if objective_type == "Maximize" else current[-1] > median
    return median if worse else None


def runtime_exceeded(created: float, limits: dict[str, Any], now: float) -> int | None:
    """``ResourceLimits.MaxRuntimeInSeconds`` when a tuning job created at ``created`` (POSIX time)
    has run past it at ``now``, else None: the tuning job then stops its running training jobs and
    starts no more, and ends as its training jobs did."""
    limit = limits.get("MaxRuntimeInSeconds")
    return int(limit) if limit and now - created >= float(limit) else None


def objective_fields(
    status: str, final_metrics: dict[str, Any], metric: str, objective_type: str
) -> dict[str, Any]:
    """A training job summary's ``ObjectiveStatus`` (and its objective once it has ended): the final
    value of the objective metric (``FinalMetricDataList``); none from a job that ended is Failed."""
    value = final_metrics.get(metric) if status not in RUNNING else None
    if value is None:
        return {"ObjectiveStatus": "Pending" if status in RUNNING else "Failed"}
    return {
        "FinalHyperParameterTuningJobObjectiveMetric": {
            "Type": objective_type,
            "MetricName": metric,
            "Value": float(value),
        },
        "ObjectiveStatus": "Succeeded",
    }


def objective_value(summary: dict[str, Any]) -> float | None:
    metric = summary.get("FinalHyperParameterTuningJobObjectiveMetric") or {}
    value = metric.get("Value")
    return float(value) if value is not None else None


def best_summary(summaries: list[dict[str, Any]], objective_type: str) -> dict[str, Any] | None:
    """``BestTrainingJob``: the summary with the best objective (the first of equals), None before one."""
    scored = [s for s in summaries if s["ObjectiveStatus"] == "Succeeded"]
    if not scored:
        return None
    sign = 1 if objective_type == "Maximize" else -1
    return max(scored, key=lambda s: sign * s["FinalHyperParameterTuningJobObjectiveMetric"]["Value"])


def tuning_outcome(
    summaries: list[dict[str, Any]], metric: str, *, stop_requested: bool
) -> tuple[str, str | None]:
    """(HyperParameterTuningJobStatus, FailureReason) once every training job has ended."""
    if stop_requested:
        return "Stopped", None
    if any(s["ObjectiveStatus"] == "Succeeded" for s in summaries):
        return "Completed", None
    reasons = [s.get("FailureReason") for s in summaries if s.get("FailureReason")]
    reason = f"No training job reported the objective metric {metric!r} ({len(summaries)} training jobs)"
    reason += f"; first failure: {reasons[0]}" if reasons else ""
    return "Failed", reason[:1024]


def job_table(summaries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The training jobs as the operator's result lists them: name, status, tuned hyperparameters
    (as passed), objective value and failure reason, in launch order."""
    return [
        {
            "job_name": s["TrainingJobName"],
            "status": s["TrainingJobStatus"],
            "tuned_hyperparameters": dict(s.get("TunedHyperParameters") or {}),
            "objective_value": objective_value(s),
            "failure_reason": s.get("FailureReason"),
        }
        for s in summaries
    ]


def job_counters(summaries: Any) -> dict[str, int]:
    """``TrainingJobStatusCounters`` of these training job summaries."""
    counters = {"Completed": 0, "InProgress": 0, "RetryableError": 0, "NonRetryableError": 0, "Stopped": 0}
    for s in summaries or []:
        status, reason = s["TrainingJobStatus"], str(s.get("FailureReason") or "")
        if status in RUNNING:
            counters["InProgress"] += 1
        elif status == "Completed":
            counters["Completed"] += 1
        elif status == "Stopped":
            counters["Stopped"] += 1
        elif "InsufficientCapacity" in reason or "InternalServerError" in reason:
            counters["RetryableError"] += 1  # SageMaker may retry these
        else:
            counters["NonRetryableError"] += 1
    return counters


def objective_counters(summaries: Any) -> dict[str, int]:
    """``ObjectiveStatusCounters`` of these training job summaries."""
    counters = {"Succeeded": 0, "Pending": 0, "Failed": 0}
    for s in summaries:
        counters[s["ObjectiveStatus"]] += 1
    return counters
