"""Training backends: where a training job runs, behind one interface (``planning.TrainingBackend``).

Operators and task groups ask :func:`get_backend` for the configured backend (by its name in
``spec/backends.py``) and use its methods and its record's capabilities; they never compare backend
names. ``SageMakerBackend`` runs the job on SageMaker, ``LocalBackend`` the same ``CreateTrainingJob``
request on this machine: both plan with the one SageMaker planner, so the request is identical.
Constructing a backend does no I/O (safe at DAG-parse time); hooks are created on first use.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from functools import cached_property
from typing import TYPE_CHECKING, Any

from airflow_dist_training.errors import SpecValidationError
from airflow_dist_training.hooks.aws import AwsConnectionMixin, local_region, task_region
from airflow_dist_training.job_states import STOPPABLE_STATES, JobPhase, JobStatus
from airflow_dist_training.results import TrainingResult
from airflow_dist_training.spec.backends import BackendRecord, backend_record
from airflow_dist_training.spec.training import TrainingJobSpec
from airflow_dist_training.storage.location import uri_scheme

if TYPE_CHECKING:
    from airflow_dist_training.hooks.sagemaker_jobs import DurableJob, JobRef
    from airflow_dist_training.planning import RunJob, RunPlan, TrainingBackend


class SageMakerBackend(AwsConnectionMixin):
    """Jobs on SageMaker: the run's lifecycle on ``DurableJob`` (describe before create, idempotent
    stop, polling), requests sent through ``SageMakerTrainingHook`` (its client, uploads, logs)."""

    def __init__(
        self,
        *,
        aws_conn_id: str | None = "aws_default",
        region_name: str | None = None,
        record: BackendRecord | None = None,
        **_: Any,
    ) -> None:
        self.record = record or backend_record("sagemaker")
        self._set_aws_connection(aws_conn_id, region_name)

    @cached_property
    def hook(self) -> Any:
        from airflow_dist_training.hooks.training import SageMakerTrainingHook

        return SageMakerTrainingHook(aws_conn_id=self.aws_conn_id, region_name=self.region_name)

    @property
    def jobs(self) -> DurableJob:
        """The training jobs, on the hook's client (a hook handed to the operator is the one called)."""
        return self.hook.jobs  # type: ignore[no-any-return]

    def plan(
        self, spec: TrainingJobSpec, *, job_name: str, region: str, run_identity: str | None = None
    ) -> dict[str, Any]:
        from airflow_dist_training.sagemaker.request import plan_training_job
        from airflow_dist_training.sagemaker.summary import render_plan

        plan = plan_training_job(spec, job_name=job_name, region=region, run_identity=run_identity)
        lines = [render_plan(plan), "Request:", json.dumps(plan.request, indent=1, sort_keys=True)]
        return {
            "request": plan.request,
            "warnings": [str(w) for w in plan.warnings],
            "summary": "\n".join(lines),
            "cost_bound_usd": plan.cost_bound_usd,
            "uploads": plan.uploads,
        }

    def region(self) -> str:
        return task_region(self.aws_conn_id, self.region_name, hook=self.hook)

    def status_of(self, description: Mapping[str, Any]) -> JobStatus:
        """A ``DescribeTrainingJob`` response as a ``JobStatus`` (its tags read for a stopped job)."""
        from airflow_dist_training.hooks.training import job_status_from_description

        return job_status_from_description(description, stop_tags=lambda: self.jobs.stop_tags(description))

    def status(self, job_name: str) -> JobStatus | None:
        description = self.jobs.describe_or_none(job_name)
        return None if description is None else self.status_of(description)

    def stop(self, job_name: str, *, reason: str = "airflow", cause: str | None = None) -> bool:
        return self.jobs.stop(job_name, reason=reason, cause=cause)

    def find_or_create(
        self,
        names: Iterable[str],
        request_for: Callable[[str, tuple[JobStatus, ...]], RunJob],
        *,
        exhausted: Callable[[], Exception],
        on_ended: Callable[[JobStatus, int], None] | None = None,
    ) -> JobRef:
        ended: list[JobStatus] = []  # each ended job's status, built once

        def heard(_name: str, description: dict[str, Any], next_generation: int) -> None:
            ended.append(self.status_of(description))
            if on_ended is not None:
                on_ended(ended[-1], next_generation)

        def request(name: str, _descriptions: tuple[dict[str, Any], ...]) -> dict[str, Any]:
            launch = request_for(name, tuple(ended))
            if launch.request is None:
                raise SpecValidationError(
                    [("backend", f"{self.record.name!r} creates planned requests only; {name} has none")]
                )
            self.hook.put_uploads(launch.uploads)
            return launch.request

        return self.jobs.find_or_create(names, request, exhausted=exhausted, on_ended=heard)

    def preflight(self, spec: TrainingJobSpec, *, log: Callable[..., None]) -> None:
        """FSx channels: file system AVAILABLE, same AZ, Lustre ports open, mount name."""
        from airflow_dist_training.spec.training import FSxChannel

        if not any(isinstance(c, FSxChannel) for c in spec.channels.values()):
            return
        from airflow_dist_training.fsx.preflight import preflight_training_spec
        from airflow_dist_training.hooks.fsx import FSxHook

        fsx = FSxHook(aws_conn_id=self.aws_conn_id, region_name=self.region_name)
        for warning in preflight_training_spec(fsx, spec):
            log("FSx pre-flight: %s", warning)

    def trigger(self, job_name: str, **settings: Any) -> Any:
        from airflow_dist_training.triggers.training import TrainingJobTrigger

        return TrainingJobTrigger(
            job_name=job_name, aws_conn_id=self.aws_conn_id, region_name=self.region(), **settings
        )

    def wait(
        self,
        job_name: str,
        *,
        poll_interval: float = 30.0,
        max_wait_seconds: float | None = None,
        log: Callable[[str], None] | None = None,
        stream_logs: bool = True,
    ) -> JobStatus:
        """Poll until the job ends, logging its status transitions and (``stream_logs``) its
        CloudWatch lines; ``TimeoutError`` only past a ``max_wait_seconds`` the user set."""
        description = self.jobs.wait(
            job_name,
            poll_interval=poll_interval,
            timeout=max_wait_seconds,
            limit=f"max_wait_seconds={max_wait_seconds}",
            on_poll=self.hook.report_progress(job_name, log or self.hook.log.info, stream_logs=stream_logs),
        )
        return self.status_of(description)

    def result_of(self, status: JobStatus) -> TrainingResult:
        from airflow_dist_training.hooks.training import error_for_terminal_state, result_from_description

        if status.phase is not JobPhase.COMPLETED:
            raise error_for_terminal_state(status.detail, stop_requested=status.stop_requested)
        return result_from_description(status.detail)

    def stop_run_jobs(self, run_hash: str, *, reason: str) -> list[str]:
        """Stop every active job of one run (its names carry ``run_hash``); returns their names."""
        names = (
            str(job["TrainingJobName"])
            for state in sorted(STOPPABLE_STATES)
            for job in self.jobs.list(NameContains=run_hash, StatusEquals=state)
        )
        return [name for name in names if run_hash in name and self.jobs.stop(name, reason=reason)]

    def checkpoint_location(self, spec: TrainingJobSpec, uri: str) -> str:
        return uri  # the job's S3 location, as the worker reads it too

    def links(self, status: JobStatus) -> dict[str, Any]:
        description = status.detail
        return {
            "region": self.region(),
            "job_name": status.name,
            "output_uri": (description.get("OutputDataConfig") or {}).get("S3OutputPath"),
            "checkpoint_uri": (description.get("CheckpointConfig") or {}).get("S3Uri"),
        }


class LocalBackend:
    """The same request on this machine: simulated hosts (``local/executor.py``)."""

    def __init__(
        self,
        hook_kwargs: Mapping[str, Any] | None = None,
        *,
        record: BackendRecord | None = None,
        region_name: str | None = None,
        aws_conn_id: str | None = "aws_default",
        **_: Any,
    ) -> None:
        self.record = record or backend_record("local")
        self.hook_kwargs = {
            "aws_conn_id": aws_conn_id,
            **dict(hook_kwargs or {}),
        }  # S3 through the task's connection
        self.region_name = region_name  # the region its requests are planned for (``local_region``)

    @cached_property
    def hook(self) -> Any:
        from airflow_dist_training.hooks.local_training import LocalTrainingHook

        return LocalTrainingHook(**self.hook_kwargs)

    def plan(
        self, spec: TrainingJobSpec, *, job_name: str, region: str, run_identity: str | None = None
    ) -> dict[str, Any]:
        sub = self.hook.submission(
            spec, job_name, check_paths=False, region=region, run_identity=run_identity, stage=False
        )
        rp = self.hook.executor().plan(sub.request, store=sub.store, options=sub.options)
        hosts = rp.plan.hosts
        lines = [
            f"Local job        {job_name}",
            f"Hosts            {len(hosts)} simulated host(s): {', '.join(hosts)} "
            f"({'Linux namespaces: /opt/ml, algo-N names, port 7777' if rp.isolation.namespaces else 'relocated layout: ' + rp.isolation.why})",
            f"Runner           {rp.mode} ({_RUNNER_TEXT[rp.mode]})",
            f"Python           {rp.python} ({rp.python_why})",
            "Cost bound       $0 (local)",
            "Request (the exact CreateTrainingJob request SageMaker would receive):",
            json.dumps(sub.request, indent=1, sort_keys=True),
        ]
        return {
            "request": sub.request,
            "warnings": list(sub.warnings) + list(rp.warnings),
            "summary": "\n".join(lines),
            "cost_bound_usd": 0.0,
            "uploads": sub.uploads,
        }

    def checkpoint_location(self, spec: TrainingJobSpec, uri: str) -> str:
        if uri_scheme(uri) != "s3":
            return uri
        return str(self.hook.object_store(spec).local_uri(uri))  # S3 with credentials, else its mirror

    def region(self) -> str:
        return local_region(self.region_name)

    def _job(self, job_name: str) -> Any:
        job = self.hook.executor().get(job_name)
        if job is None:
            raise KeyError(f"no local training job {job_name!r} in this process")
        return job

    def stop(self, job_name: str, *, reason: str = "airflow", cause: str | None = None) -> bool:
        return bool(self.hook.stop(job_name))

    # the run's lifecycle (TrainingBackend): a job lives in this process, no earlier one is found
    def find_or_create(
        self,
        names: Iterable[str],
        request_for: Callable[[str, tuple[JobStatus, ...]], RunJob],
        *,
        exhausted: Callable[[], Exception],
        on_ended: Callable[[JobStatus, int], None] | None = None,
    ) -> JobRef:
        """Start the run's first job (again, on a retry: its directory, so its checkpoints, are reused)."""
        from airflow_dist_training.hooks.sagemaker_jobs import JobRef

        name = next(iter(names))
        launch = request_for(name, ())
        self.hook.start_job(
            launch.spec,
            name,
            request=launch.request,
            uploads=launch.uploads,
            run_identity=launch.run_identity,
            region=self.region(),
        )
        return JobRef(name, None)

    def preflight(self, spec: TrainingJobSpec, *, log: Callable[..., None]) -> None:
        """Nothing beyond what starting the job checks (``local/request_plan.py``)."""

    def status(self, job_name: str) -> JobStatus | None:
        from airflow_dist_training.hooks.training import job_status_from_description

        job = self.hook.executor().get(job_name)
        return None if job is None else job_status_from_description(job.describe())

    def trigger(self, job_name: str, **settings: Any) -> None:
        return None  # the job's processes are this task's: it waits for them

    def wait(self, job_name: str, *, max_wait_seconds: float | None = None, **_: Any) -> JobStatus:
        """Wait here (the job's lines reach the task log as they come), stopping the job if this
        process gets SIGTERM (the task is killed)."""
        from airflow_dist_training.hooks.local_training import stop_on_sigterm

        job = self._job(job_name)
        with stop_on_sigterm(job, self.hook.stop_grace_seconds):
            job.wait(max_wait_seconds)
        if not job.done:
            raise TimeoutError(
                f"training job {job_name} still running after max_wait_seconds={max_wait_seconds:g}"
            )
        status = self.status(job_name)
        assert status is not None
        return status

    def result_of(self, status: JobStatus) -> TrainingResult:
        return self._job(status.name).result()  # type: ignore[no-any-return]

    def links(self, status: JobStatus) -> dict[str, Any]:
        """The Training view and the job's local artefacts (its folder; its outputs once it completed)."""
        result: Mapping[str, Any] = self.result_of(status) if status.phase is JobPhase.COMPLETED else {}
        return {
            "region": "local",
            "job_name": status.name,
            "output_uri": result.get("output_uri") or result.get("model_artifact_uri"),
            "checkpoint_uri": result.get("checkpoint_uri"),
            "backend": self.record.name,
            "job_dir": str(self.hook.job_dir(status.name)),
        }

    def stop_run_jobs(self, run_hash: str, *, reason: str) -> list[str]:
        return []  # a job ends with the process that ran it: none is left running


_RUNNER_TEXT = {
    "container": "the request's ContainerEntrypoint: launcher mode",
    "toolkit": "AWS's sagemaker-training toolkit, the image's 'train' entry point",
    "builtin": "the project's implementation of the toolkit contract",
}


def get_backend(
    backend: str,
    *,
    aws_conn_id: str | None = "aws_default",
    region_name: str | None = None,
    local_hook_kwargs: Mapping[str, Any] | None = None,
) -> TrainingBackend:
    """The backend registered as ``backend``; ``SpecValidationError`` naming the registered ones."""
    record = backend_record(backend)
    return record.load_factory()(  # type: ignore[no-any-return]
        aws_conn_id=aws_conn_id, region_name=region_name, hook_kwargs=local_hook_kwargs, record=record
    )


def operator_backend(operator: Any) -> TrainingBackend:
    """The backend of an operator's jobs (its ``backend``, a registered name), sharing the operator's hooks: ``on_kill`` stops what
    ``execute`` started, and a hook handed to the operator (a recording or fault-injecting one) is
    the one its backend calls. No I/O until a method is called."""
    backend = get_backend(
        operator.backend,
        aws_conn_id=operator.aws_conn_id,
        region_name=operator.region_name,
        local_hook_kwargs=getattr(operator, "local_hook_kwargs", None),
    )
    if "hook" in vars(operator):
        backend.hook = vars(operator)["hook"]  # type: ignore[attr-defined]
    return backend


def plan_on_backend(
    spec: TrainingJobSpec,
    *,
    backend: str,
    aws_conn_id: str | None = None,
    region_name: str | None = None,
    base_dir: str | None = None,
    local_hook_kwargs: Mapping[str, Any] | None = None,
    **plan_kwargs: Any,
) -> RunPlan:
    """The plan task: ``planning.plan_run`` on the configured backend, in the task's region.

    The region is the one rule the training task uses too (``hooks/aws.task_region``, locally
    ``local_region``: no AWS lookup); a local plan uses the training task's ``local_hook_kwargs``
    (its S3 use decides a channel's URI), so the request shown is the one the job runs.
    """
    from airflow_dist_training.planning import plan_run

    hook_kwargs = {"base_dir": base_dir, **dict(local_hook_kwargs or {})}
    training_backend = get_backend(
        backend, aws_conn_id=aws_conn_id, region_name=region_name, local_hook_kwargs=hook_kwargs
    )
    region = (
        task_region(aws_conn_id, region_name) if training_backend.record.on_aws else local_region(region_name)
    )
    return plan_run(spec, backend=training_backend, region=region, base_dir=base_dir, **plan_kwargs)
