"""Training backends: where a training job runs, behind one interface.

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
from typing import TYPE_CHECKING, Any, Protocol

from airflow_dist_training.hooks.aws import AwsConnectionMixin, local_region, task_region
from airflow_dist_training.job_states import SUCCESS_STATES
from airflow_dist_training.results import TrainingResult
from airflow_dist_training.spec.backends import BackendRecord, backend_record
from airflow_dist_training.spec.training import TrainingJobSpec

if TYPE_CHECKING:
    from airflow_dist_training.planning import RunPlan


class TrainingBackend(Protocol):
    """What operators and task groups need from a place that runs training jobs."""

    #: the backend's name and declared capabilities (``spec/backends.py``)
    record: BackendRecord

    def plan(
        self, spec: TrainingJobSpec, *, job_name: str, region: str, run_identity: str | None = None
    ) -> dict[str, Any]:
        """``{"request", "warnings", "summary", "cost_bound_usd"}``; launches nothing."""

    def submit(
        self,
        spec: TrainingJobSpec,
        job_name: str,
        *,
        log: Callable[[str], None] | None = None,
        run_identity: str | None = None,
        request: Mapping[str, Any] | None = None,
        uploads: Iterable[Any] = (),
    ) -> str:
        """Create the job: ``request`` (and its ``uploads``) as planned, else planned from ``spec``."""

    def describe(self, job_name: str) -> dict[str, Any]: ...

    def stop(self, job_name: str, *, reason: str = "airflow") -> bool: ...

    def logs(self, job_name: str) -> list[str]: ...

    def result(self, job_name: str) -> TrainingResult:
        """The result of a Completed job (waits for a local job); ``TrainingJobError`` otherwise."""


class DurableBackend(TrainingBackend, Protocol):
    """A backend whose jobs outlive the worker (``record.durable``): the training operator finds
    the run's job by its names, creates it once, defers on the backend's trigger or waits, and
    reads its result, through these methods only."""

    def region(self) -> str: ...

    def find_or_create(
        self,
        names: Iterable[str],
        request_for: Callable[[str, tuple[dict[str, Any], ...]], Mapping[str, Any]],
        *,
        exhausted: Callable[[], Exception],
        on_ended: Callable[[str, dict[str, Any], int], None] | None = None,
    ) -> Any:
        """The run's live or completed job among ``names``, else the first free name created."""

    def preflight(self, spec: TrainingJobSpec, *, log: Callable[..., None]) -> None:
        """Check what the job reads before creating it (refuse with ``SpecValidationError``)."""

    def put_uploads(self, uploads: Iterable[Any]) -> None: ...

    def describe_or_none(self, job_name: str) -> dict[str, Any] | None: ...

    def stop_requested(self, description: Mapping[str, Any]) -> bool:
        """Airflow asked for the stop that ended this job."""

    def trigger(self, job_name: str, **settings: Any) -> Any:
        """The trigger to defer on until the job ends."""

    def wait(self, job_name: str, **settings: Any) -> dict[str, Any]:
        """Wait in this process until the job ends (``TimeoutError`` past ``max_wait_seconds``)."""

    def result_of(self, description: Mapping[str, Any]) -> TrainingResult:
        """The result of a job as described; ``TrainingJobError`` unless it succeeded."""

    def links(self, description: Mapping[str, Any]) -> dict[str, Any]:
        """What the operator's extra links and the Training view need (``links.persist``)."""

    def stop_run_jobs(self, run_hash: str, *, reason: str) -> list[str]:
        """Stop the run's jobs still running (a teardown: the task died without ``on_kill``)."""


class SageMakerBackend(AwsConnectionMixin):
    """Jobs on SageMaker, through ``SageMakerTrainingHook``."""

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

    def submit(
        self,
        spec: TrainingJobSpec,
        job_name: str,
        *,
        log: Callable[[str], None] | None = None,
        run_identity: str | None = None,
        request: Mapping[str, Any] | None = None,
        uploads: Iterable[Any] = (),
    ) -> str:
        if request is not None:
            planned: dict[str, Any] = {"request": dict(request), "uploads": list(uploads)}
        else:
            region = self.region_name or self.hook.conn_region_name or "us-east-1"
            planned = self.plan(spec, job_name=job_name, region=region, run_identity=run_identity)
        self.hook.put_uploads(planned["uploads"])
        self.hook.create_training_job(planned["request"])
        return job_name

    def describe(self, job_name: str) -> dict[str, Any]:
        return dict(self.hook.describe_training_job(job_name))

    def stop(self, job_name: str, *, reason: str = "airflow") -> bool:
        return bool(self.hook.stop_training_job(job_name, reason=reason))

    def logs(self, job_name: str) -> list[str]:
        return [event.format() for event in self.hook.fetch_log_events(job_name)]

    def result(self, job_name: str) -> TrainingResult:
        return self.result_of(self.hook.describe_training_job(job_name))

    # the durable lifecycle (DurableBackend)
    def region(self) -> str:
        return task_region(self.aws_conn_id, self.region_name, hook=self.hook)

    def find_or_create(
        self, names: Iterable[str], request_for: Callable[..., Mapping[str, Any]], **options: Any
    ) -> Any:
        return self.hook.jobs.find_or_create(names, request_for, **options)

    def preflight(self, spec: TrainingJobSpec, *, log: Callable[..., None]) -> None:
        """FSx channels: file system AVAILABLE, same AZ, Lustre ports open, mount name."""
        from airflow_dist_training.spec.training import FSxChannel

        if not any(isinstance(c, FSxChannel) for c in spec.channels.values()):
            return
        from airflow_dist_training.hooks.fsx import FSxHook
        from airflow_dist_training.operators.fsx import preflight_training_spec

        fsx = FSxHook(aws_conn_id=self.aws_conn_id, region_name=self.region_name)
        for warning in preflight_training_spec(fsx, spec):
            log("FSx pre-flight: %s", warning)

    def put_uploads(self, uploads: Iterable[Any]) -> None:
        self.hook.put_uploads(uploads)

    def describe_or_none(self, job_name: str) -> dict[str, Any] | None:
        return self.hook.describe_training_job_or_none(job_name)  # type: ignore[no-any-return]

    def stop_requested(self, description: Mapping[str, Any]) -> bool:
        return bool(self.hook.stop_requested(description))

    def trigger(self, job_name: str, **settings: Any) -> Any:
        from airflow_dist_training.triggers.training import TrainingJobTrigger

        return TrainingJobTrigger(job_name=job_name, aws_conn_id=self.aws_conn_id, region_name=self.region(), **settings)

    def wait(self, job_name: str, **settings: Any) -> dict[str, Any]:
        return dict(self.hook.wait_for_job(job_name, **settings))

    def result_of(self, description: Mapping[str, Any]) -> TrainingResult:
        from airflow_dist_training.hooks.training import error_for_terminal_state, result_from_description

        if description.get("TrainingJobStatus") not in SUCCESS_STATES:
            raise error_for_terminal_state(dict(description), stop_requested=self.stop_requested(description))
        return result_from_description(dict(description))

    def stop_run_jobs(self, run_hash: str, *, reason: str) -> list[str]:
        return list(self.hook.stop_run_jobs(run_hash, reason=reason))

    def links(self, description: Mapping[str, Any]) -> dict[str, Any]:
        return {
            "region": self.region(),
            "job_name": str(description["TrainingJobName"]),
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
        **_: Any,
    ) -> None:
        self.record = record or backend_record("local")
        self.hook_kwargs = dict(hook_kwargs or {})
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

    def submit(self, spec: TrainingJobSpec, job_name: str, **settings: Any) -> str:
        """``TrainingBackend.submit`` (``settings``: its keyword arguments)."""
        self.hook.start_job(spec, job_name, **settings, region=self.region())
        return job_name

    def region(self) -> str:
        return local_region(self.region_name)

    def _job(self, job_name: str) -> Any:
        job = self.hook.executor().get(job_name)
        if job is None:
            raise KeyError(f"no local training job {job_name!r} in this process")
        return job

    def describe(self, job_name: str) -> dict[str, Any]:
        return dict(self._job(job_name).describe())

    def stop(self, job_name: str, *, reason: str = "airflow") -> bool:
        return bool(self.hook.stop(job_name))

    def logs(self, job_name: str) -> list[str]:
        return list(self._job(job_name).logs())

    def result(self, job_name: str) -> TrainingResult:
        return self._job(job_name).result()  # type: ignore[no-any-return]

    def run(self, spec: TrainingJobSpec, job_name: str, **settings: Any) -> TrainingResult:
        """submit + result, stopping the job if this process gets SIGTERM (the task is killed)."""
        return self.hook.run_job(spec, job_name, **settings, region=self.region())  # type: ignore[no-any-return]


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
    """The backend of an operator's jobs, sharing the operator's hooks: ``on_kill`` stops what
    ``execute`` started, and a hook handed to the operator (a recording or fault-injecting one) is
    the one its backend calls. No I/O until a method is called."""
    backend = get_backend(
        operator.backend,
        aws_conn_id=operator.aws_conn_id,
        region_name=operator.region_name,
        local_hook_kwargs=operator.local_hook_kwargs,
    )
    if isinstance(backend, LocalBackend):
        backend.hook = operator.local_hook
    elif "hook" in vars(operator):
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
    region = task_region(aws_conn_id, region_name) if training_backend.record.on_aws else local_region(region_name)
    return plan_run(spec, backend=training_backend, region=region, base_dir=base_dir, **plan_kwargs)
