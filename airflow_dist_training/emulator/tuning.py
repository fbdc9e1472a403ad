"""Hyperparameter tuning jobs of the emulator: real training jobs with sampled hyperparameters.

``CreateHyperParameterTuningJob`` lands in moto's record as usual (moto answers Describe/List);
the emulator then runs it as SageMaker does, from the pure functions of ``sagemaker/tuning_jobs.py``
(sampling, job names, requests, counters, outcome): its training jobs go through the emulator's own
``CreateTrainingJob`` (real processes, logs, metrics), at most ``MaxParallelTrainingJobs`` at a
time. ``StopHyperParameterTuningJob`` stops its running training jobs. Bayesian and Hyperband
fall back to random sampling (docs/emulator.md).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from typing import Any

from airflow_dist_training.emulator.training import MotoRun, moto_now
from airflow_dist_training.sagemaker.tuning_jobs import (
    RUNNING,
    best_summary,
    job_counters,
    objective_fields,
    objective_hyperparameter,
    training_job_name,
    training_request,
    tuning_configurations,
    tuning_outcome,
    tuning_seed,
)

log = logging.getLogger(__name__)
POLL_SECONDS = 0.2


class TuningRun(MotoRun):
    """One tuning job: moto's record, its training jobs, its stop request."""

    def __init__(self, record: Any, request: dict[str, Any]) -> None:
        self.record = record
        self.request = request
        self.name = str(request["HyperParameterTuningJobName"])
        config = request["HyperParameterTuningJobConfig"]
        self.strategy = str(config["Strategy"])
        limits = config["ResourceLimits"]
        self.max_parallel = int(limits["MaxParallelTrainingJobs"])
        self.max_jobs = (
            int(limits["MaxNumberOfTrainingJobs"]) if limits.get("MaxNumberOfTrainingJobs") else None
        )
        objective = config.get("HyperParameterTuningJobObjective") or {}
        self.metric = str(objective.get("MetricName") or "")
        self.objective_type = str(objective.get("Type") or "Maximize")
        self.seed = tuning_seed(request)
        self.jobs: list[tuple[str, dict[str, str]]] = []  # (training job name, tuned hyperparameters)
        self.stop_requested = threading.Event()
        self.done = threading.Event()
        self.max_running = 0  # the most training jobs seen running at once


class TuningJobs:
    """Runs the emulator's tuning jobs (thread-safe) through the emulator's own training job
    calls; ``training_record``: moto's record of a training job by name (None: unknown)."""

    def __init__(
        self,
        create_training_job: Callable[[dict[str, Any]], Any],
        stop_training_job: Callable[[str], Any],
        training_record: Callable[[str], Any],
    ) -> None:
        self.create_training_job = create_training_job
        self.stop_training_job = stop_training_job
        self.training_record = training_record
        self.runs: dict[str, TuningRun] = {}
        self._lock = threading.Lock()
        self._closing = threading.Event()

    def start(self, record: Any, request: dict[str, Any]) -> None:
        run = TuningRun(record, request)
        definition = dict(record.training_job_definition or {})
        definition["StaticHyperParameters"] = {
            **(definition.get("StaticHyperParameters") or {}),
            **objective_hyperparameter(request),
        }
        run.set(
            training_job_definition=definition,
            hyper_parameter_tuning_job_status="InProgress",
            hyper_parameter_tuning_end_time=None,
            failure_reason=None,
            best_training_job=None,
            OverallBestTrainingJob=None,
            tuning_job_completion_details=None,
            consumed_resources=None,
            training_job_status_counters=job_counters({}),
            objective_status_counters={"Succeeded": 0, "Pending": 0, "Failed": 0},
        )
        with self._lock:
            self.runs[run.name] = run
        threading.Thread(
            target=self._main, args=(run,), name=f"emulator-tuning-{run.name}", daemon=True
        ).start()

    def get(self, name: str) -> TuningRun | None:
        with self._lock:
            return self.runs.get(name)

    def stop(self, name: str) -> bool:
        """StopHyperParameterTuningJob: ``Stopping``, its running training jobs stopped, then ``Stopped``."""
        run = self.get(name)
        if run is None or run.done.is_set() or run.stop_requested.is_set():
            return False
        run.set(hyper_parameter_tuning_job_status="Stopping")
        run.stop_requested.set()
        return True

    # -- the tuning job's loop --------------------------------------------------------------------

    def _main(self, run: TuningRun) -> None:
        try:
            pending = tuning_configurations(run.request)
            if run.strategy in ("Bayesian", "Hyperband"):
                log.info("emulator: tuning job %s: %s sampled at random", run.name, run.strategy)
            stopping_sent = False
            while not self._closing.is_set():
                summaries = self.summaries(run)
                running = [s for s in summaries if s["TrainingJobStatus"] in RUNNING]
                if run.stop_requested.is_set():
                    pending = []
                    if not stopping_sent:
                        for s in running:
                            self._stop_quietly(s["TrainingJobName"])
                        stopping_sent = True
                while pending and len(running) < run.max_parallel:
                    index = len(run.jobs) + 1
                    name = training_job_name(run.name, index)
                    tuned = pending.pop(0)
                    self.create_training_job(training_request(run.request, name, tuned))
                    run.jobs.append((name, tuned))
                    record = self.training_record(name)
                    if record is not None:
                        record.tuning_job_arn = run.record.arn
                    running.append({"TrainingJobName": name, "TrainingJobStatus": "InProgress"})
                run.max_running = max(run.max_running, len(running))
                self._report(run, self.summaries(run))
                if not pending and not running:
                    self._finish(run, summaries)
                    return
                time.sleep(POLL_SECONDS)
        except Exception as exc:  # never leave a tuning job InProgress forever
            log.exception("emulator: tuning job %s crashed", run.name)
            run.set(
                hyper_parameter_tuning_job_status="Failed",
                failure_reason=f"InternalServerError: emulator: {type(exc).__name__}: {exc}"[:1024],
                hyper_parameter_tuning_end_time=moto_now(),
            )
        finally:
            run.done.set()

    def _stop_quietly(self, name: str) -> None:
        try:
            self.stop_training_job(name)
        except Exception as exc:  # it ended meanwhile
            log.info("emulator: stopping training job %s: %s", name, exc)

    def _finish(self, run: TuningRun, summaries: list[dict[str, Any]]) -> None:
        self._report(run, summaries)
        status, reason = tuning_outcome(summaries, run.metric, stop_requested=run.stop_requested.is_set())
        created = run.record.creation_time
        run.set(
            hyper_parameter_tuning_job_status=status,
            failure_reason=reason[:1024] if reason else None,
            hyper_parameter_tuning_end_time=moto_now(),
            consumed_resources={"RuntimeInSeconds": int((moto_now() - created).total_seconds())},
        )

    def _report(self, run: TuningRun, summaries: list[dict[str, Any]]) -> None:
        """Counters and the best training job, as DescribeHyperParameterTuningJob gives them."""
        objectives = {"Succeeded": 0, "Pending": 0, "Failed": 0}
        for s in summaries:
            objectives[s["ObjectiveStatus"]] += 1
        best = self.best(run, summaries)
        fields = {
            "training_job_status_counters": job_counters(summaries),
            "objective_status_counters": objectives,
            "best_training_job": best,
        }
        if any(getattr(run.record, k, None) != v for k, v in fields.items()):
            run.set(**fields)

    def best(self, run: TuningRun, summaries: list[dict[str, Any]]) -> dict[str, Any] | None:
        return best_summary(summaries, run.objective_type)

    def summaries(self, run: TuningRun) -> list[dict[str, Any]]:
        """``HyperParameterTrainingJobSummary`` of each training job launched so far, in launch order."""
        out = []
        for name, tuned in list(run.jobs):
            record = self.training_record(name)
            if record is None:
                continue
            status = str(record.training_job_status)
            summary: dict[str, Any] = {
                "TrainingJobName": name,
                "TrainingJobArn": record.arn,
                "TuningJobName": run.name,
                "CreationTime": record.creation_time,
                "TrainingJobStatus": status,
                "TunedHyperParameters": dict(tuned),
            }
            for key, attr in (
                ("TrainingStartTime", "training_start_time"),
                ("TrainingEndTime", "training_end_time"),
            ):
                if getattr(record, attr, None) is not None:
                    summary[key] = getattr(record, attr)
            if getattr(record, "failure_reason", None):
                summary["FailureReason"] = record.failure_reason
            final = {
                m.get("MetricName"): m.get("Value")
                for m in getattr(record, "final_metric_data_list", None) or []
            }
            summary.update(objective_fields(status, final, run.metric, run.objective_type))
            out.append(summary)
        return out

    def list_training_jobs(self, name: str, params: dict[str, Any]) -> dict[str, Any]:
        """ListTrainingJobsForHyperParameterTuningJob (StatusEquals, SortBy, SortOrder, MaxResults, NextToken)."""
        run = self.get(name)
        assert run is not None
        jobs = self.summaries(run)
        if params.get("StatusEquals"):
            jobs = [j for j in jobs if j["TrainingJobStatus"] == params["StatusEquals"]]
        sort_by = params.get("SortBy") or "CreationTime"
        keys: dict[str, Callable[[dict[str, Any]], Any]] = {
            "Name": lambda j: j["TrainingJobName"],
            "CreationTime": lambda j: j["CreationTime"],
            "Status": lambda j: j["TrainingJobStatus"],
            "FinalObjectiveMetricValue": lambda j: (
                j.get("FinalHyperParameterTuningJobObjectiveMetric") or {}
            ).get("Value", -math.inf),
        }
        descending = (params.get("SortOrder") or "Descending") == "Descending"
        jobs.sort(key=keys[sort_by], reverse=descending)
        start = int(params.get("NextToken") or 0)
        size = int(params.get("MaxResults") or 10)
        page: dict[str, Any] = {"TrainingJobSummaries": jobs[start : start + size]}
        if start + size < len(jobs):
            page["NextToken"] = str(start + size)
        return page

    def shutdown(self, timeout: float = 30.0) -> None:
        """Stop launching; the training jobs themselves are stopped by the training jobs' shutdown."""
        self._closing.set()
        with self._lock:
            runs = list(self.runs.values())
        deadline = time.monotonic() + timeout
        for run in runs:
            run.done.wait(max(0.0, deadline - time.monotonic()))
