"""Plan one run of a training task: apply the run's overrides, validate, and describe the launch.

The DAGs' ``plan`` task (the dry-run view of the trigger form) emits one typed :class:`RunPlan`
and launches nothing; the training task sends its request, applying what the run learned since
with :func:`apply_run_state`, which names every difference it makes. Pure: the caller hands in
the backend and the region (``hooks/backends.plan_on_backend``).
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol

from airflow_dist_training.sagemaker import naming
from airflow_dist_training.sagemaker.uploads import Upload
from airflow_dist_training.spec.backends import BackendRecord, backend_record
from airflow_dist_training.spec.overrides import RunOverrides, apply_overrides
from airflow_dist_training.spec.training import TrainingJobSpec

if TYPE_CHECKING:
    from airflow_dist_training.hooks.sagemaker_jobs import JobRef
    from airflow_dist_training.job_states import JobStatus
    from airflow_dist_training.results import TrainingResult

# What the plan task shares (XCom keys): the typed plan, the training task's, and the fields the
# UI, the reports and the later steps' templates read on their own.
RUN_PLAN_XCOM_KEY = "run_plan"
PLAN_XCOM_KEYS = (
    "spec",
    "job_name",
    "run_hash",
    "backend",
    "dry_run",
    "summary",
    "request",
    "cost_bound_usd",
)
# Params of a trigger form that are not spec overrides.
_NON_SPEC_PARAMS = {"backend", "dry_run"}


class TrainingBackend(Protocol):
    """What operators and task groups need from a place that runs training jobs: the training
    operator finds the run's job by its names, creates it once, defers on the backend's trigger or
    waits, and reads its result, through these methods only (``job_states.JobStatus``)."""

    #: the backend's name and declared capabilities (``spec/backends.py``)
    record: BackendRecord

    def plan(
        self, spec: TrainingJobSpec, *, job_name: str, region: str, run_identity: str | None = None
    ) -> dict[str, Any]:
        """``{"request", "warnings", "summary", "cost_bound_usd"}``; launches nothing."""

    def region(self) -> str:
        """The region the run's requests are planned for."""

    def find_or_create(
        self,
        names: Iterable[str],
        request_for: Callable[[str, tuple[JobStatus, ...]], RunJob],
        *,
        exhausted: Callable[[], Exception],
        on_ended: Callable[[JobStatus, int], None] | None = None,
    ) -> JobRef:
        """The run's live or completed job among ``names``, else the first free name created as
        ``request_for(name, the run's ended jobs)`` says (its request, or its spec to plan); a
        backend whose jobs die with the worker finds none. ``on_ended(status, next generation)``
        hears of each ended job."""

    def preflight(self, spec: TrainingJobSpec, *, log: Callable[..., None]) -> None:
        """Check what the job reads before creating it (refuse with ``SpecValidationError``)."""

    def status(self, job_name: str) -> JobStatus | None:
        """The job's status (``job_states.JobStatus``); None when no job has this name."""

    def stop(self, job_name: str, *, reason: str = "airflow", cause: str | None = None) -> bool:
        """Stop the job; with a ``cause`` (e.g. ``checkpoint-stall``) its task fails with it, no new job."""

    def trigger(self, job_name: str, **settings: Any) -> Any:
        """The trigger to defer on until the job ends; None: the job lives in this process (``wait``)."""

    def wait(self, job_name: str, **settings: Any) -> JobStatus:
        """Wait in this process until the job ends (``TimeoutError`` past ``max_wait_seconds``);
        ``settings``: ``poll_interval``, ``max_wait_seconds``, ``log``, ``stream_logs``."""

    def result_of(self, status: JobStatus) -> TrainingResult:
        """The result of an ended job; ``TrainingJobError`` unless it succeeded."""

    def links(self, status: JobStatus) -> dict[str, Any]:
        """What the operator's extra links and the Training view need (``links.persist``)."""

    def stop_run_jobs(self, run_hash: str, *, reason: str) -> list[str]:
        """Stop the run's jobs still running (a teardown: the task died without ``on_kill``)."""

    def checkpoint_location(self, spec: TrainingJobSpec, uri: str) -> str:
        """Where this worker reads the job's checkpoint location ``uri`` (a local job's S3 may be
        the backend's own mirror of it)."""


@dataclass(frozen=True)
class RunPlan:
    """One run of a training task, as planned: JSON through XCom (``to_xcom``/``from_xcom``).

    ``spec`` is the run's spec (overrides applied) as written, with the spec's own checkpoint root;
    ``request`` is the first job's, checkpointing under ``run_checkpoint_uri`` (None: not planned
    yet, the local backend plans it when it runs).
    """

    spec: dict[str, Any]
    backend: str
    remote: bool
    region: str
    identity: str
    checkpoint_resume: str | None = None
    run_checkpoint_uri: str | None = None
    base_dir: str | None = None
    request: dict[str, Any] | None = None
    uploads: tuple[Upload, ...] = ()
    cost_bound_usd: float | None = None
    warnings: tuple[str, ...] = ()
    summary: str = ""
    # the spec as validated, when planned in this process (not sent through XCom)
    validated_spec: TrainingJobSpec | None = field(default=None, compare=False, repr=False)

    @property
    def identity_hash(self) -> str:
        """The hash every job name of the run ends with (and its run-identity tag carries)."""
        return naming.run_identity_hash(self.identity)

    @property
    def job_name_base(self) -> str:
        """The run's first job; later generations add ``-r<n>``."""
        return self.job_name(1)

    def job_name(self, generation: int = 1) -> str:
        return naming.job_name(str(self.spec["name"]), self.identity, generation)

    def to_xcom(self) -> dict[str, Any]:
        data = asdict(replace(self, validated_spec=None))
        del data["validated_spec"]
        data["uploads"] = uploads_to_xcom(list(self.uploads))
        data["warnings"] = list(self.warnings)
        return data

    @classmethod
    def from_xcom(cls, data: Mapping[str, Any]) -> RunPlan:
        uploads = tuple(uploads_from_xcom(list(data.get("uploads") or [])))
        return cls(**{**data, "uploads": uploads, "warnings": tuple(data.get("warnings") or ())})

    def xcoms(self, *, dry_run: bool) -> dict[str, Any]:
        """What the plan task pushes: the plan, and ``PLAN_XCOM_KEYS``."""
        data = self.to_xcom()
        read_alone = {"job_name": self.job_name_base, "run_hash": self.identity_hash, "dry_run": dry_run}
        return {RUN_PLAN_XCOM_KEY: data, **{k: read_alone.get(k, data.get(k)) for k in PLAN_XCOM_KEYS}}


@dataclass(frozen=True)
class RunState:
    """What the run learned after the plan task, each field a change to the plan."""

    generation: int = 1  # the run's n-th job (earlier ones ended failed, stopped or interrupted)
    on_demand: bool = False  # spot interruptions used up spot.on_demand_after_interruptions
    channels: Mapping[str, Any] = field(default_factory=dict)  # e.g. the FSx channel staging made
    warm_start_uri: str | None = None  # initial weights, channel ``warm_start``


def overrides_from_params(params: Mapping[str, Any] | None) -> dict[str, Any]:
    """The spec overrides among a run's params (``None`` values keep the spec's)."""
    if not params:
        return {}
    known = set(RunOverrides.model_fields)
    return {k: v for k, v in params.items() if k in known and k not in _NON_SPEC_PARAMS and v is not None}


def uploads_to_xcom(uploads: list[Upload]) -> list[dict[str, Any]]:
    """The plan's uploads as JSON for XCom (file contents base64), so the training task sends them."""
    return [{**asdict(u), "content": _b64(u.content), "dependencies": list(u.dependencies)} for u in uploads]


def uploads_from_xcom(data: list[Mapping[str, Any]]) -> list[Upload]:
    """The inverse of :func:`uploads_to_xcom`."""
    return [
        Upload(
            **{
                **d,
                "content": _b64(d.get("content"), decode=True),
                "dependencies": tuple(d.get("dependencies") or ()),
            }
        )
        for d in data
    ]


def _b64(value: Any, *, decode: bool = False) -> Any:
    if value is None:
        return None
    return base64.b64decode(value) if decode else base64.b64encode(value).decode("ascii")


def plan_run(
    spec: TrainingJobSpec,
    *,
    backend: TrainingBackend,
    region: str,
    overrides: Mapping[str, Any] | None,
    train_task_id: str,
    context: Mapping[str, Any],
    checkpoint_resume: str | None = None,
    base_dir: str | None = None,
) -> RunPlan:
    """The plan task's plan: the form's values checked, the overrides applied, the request planned.

    With a ``checkpoint_resume`` policy the request checkpoints where the training task's first
    job does (the run's own prefix, ``checkpoints/resume.run_checkpoint_location``), so the
    request shown is the one sent.
    """
    from airflow_dist_training.form_limits import check_form_limits

    check_form_limits(context)  # out-of-range form values are refused, never clamped into a run
    return plan_spec(
        apply_overrides(spec, overrides_from_params(overrides)),
        backend=backend,
        region=region,
        # the plan task's map index is its training task's (one member of a mapped group each)
        identity=naming.identity_from_context(context, train_task_id),
        checkpoint_resume=checkpoint_resume,
        base_dir=base_dir,
    )


def plan_spec(
    spec: TrainingJobSpec,
    *,
    backend: TrainingBackend,
    region: str,
    identity: str,
    checkpoint_resume: str | None = None,
    base_dir: str | None = None,
    plan_request: bool = True,
) -> RunPlan:
    """The run's plan for a validated spec; ``plan_request=False`` leaves the request to the
    backend that runs it (a local training task without a plan task)."""
    name = naming.job_name(spec.name, identity)
    run_spec, run_uri = _run_scoped(
        spec, checkpoint_resume, name, name, remote=backend.record.on_aws, base_dir=base_dir
    )
    plan = RunPlan(
        spec=spec.model_dump(mode="json", exclude_unset=True),
        backend=backend.record.name,
        remote=backend.record.on_aws,
        region=region,
        identity=identity,
        checkpoint_resume=checkpoint_resume,
        run_checkpoint_uri=run_uri,
        base_dir=base_dir,
        validated_spec=spec,
    )
    if not plan_request:
        return plan
    # the tag carries the identity's hash, as the training task sends it: the plan shows the request sent
    planned = backend.plan(run_spec, job_name=name, region=region, run_identity=plan.identity_hash)
    warnings = [str(w) for w in planned["warnings"]]
    summary = planned["summary"]
    return replace(
        plan,
        request=planned["request"],
        uploads=tuple(planned.get("uploads") or ()),
        cost_bound_usd=planned["cost_bound_usd"],
        warnings=tuple(warnings),
        summary="\n".join([summary] + [f"WARNING          {w}" for w in warnings if w not in summary]),
    )


@dataclass(frozen=True)
class RunJob:
    """One job of the run: the plan with the run's state applied."""

    name: str
    spec: TrainingJobSpec  # checkpoints under the run's prefix, the state's channels and spot
    state_spec: TrainingJobSpec  # the plan's spec with the state's channels: the run's later jobs reuse it
    request: dict[str, Any] | None  # None: a local job's, planned when the job runs
    uploads: tuple[Upload, ...] = ()
    warnings: tuple[str, ...] = ()
    planned_again: bool = False  # the state changed the request: planned here, not the plan task's
    changes: tuple[str, ...] = ()  # how the request differs from the plan's (``request_changes``)
    run_identity: str | None = None  # the run's identity hash: a backend planning ``request`` itself uses it


def apply_run_state(
    plan: RunPlan,
    state: RunState,
    *,
    backend: TrainingBackend | None = None,
    state_spec: TrainingJobSpec | None = None,
) -> RunJob:
    """The run's job in ``state``: the plan's own request when the state changes nothing, else
    planned again from the plan's spec by ``backend`` (default: the plan's, by its registered
    name), with the difference named.

    Validates the spec with the state's channels once (``state_spec``: an earlier job's of the
    same state, not validated again; a plan made in this process keeps the spec it validated); a
    changed request of a plan that is not on AWS is not planned here (a local job's stand-ins need
    this machine's paths): it is None, and the backend plans it from ``spec`` when it runs the job.
    """
    if state_spec is None:
        own = plan.validated_spec if not (state.channels or state.warm_start_uri) else None
        state_spec = own or _with_channels(plan, state)
    name = plan.job_name(state.generation)
    spec, _ = _run_scoped(
        state_spec,
        plan.checkpoint_resume,
        plan.job_name_base,
        name,
        remote=plan.remote,
        base_dir=plan.base_dir,
    )
    if state.on_demand:
        spec = spec.model_copy(update={"spot": type(spec.spot)()})
    if state == RunState():
        return RunJob(
            name, spec, state_spec, plan.request, plan.uploads, plan.warnings, run_identity=plan.identity_hash
        )
    if not plan.remote:
        return RunJob(name, spec, state_spec, None, planned_again=True, run_identity=plan.identity_hash)
    from airflow_dist_training.sagemaker.request import request_changes

    if backend is None:
        record = backend_record(plan.backend)
        backend = record.load_factory()(region_name=plan.region, record=record)
    planned = backend.plan(spec, job_name=name, region=plan.region, run_identity=plan.identity_hash)
    return RunJob(
        name,
        spec,
        state_spec,
        planned["request"],
        tuple(planned.get("uploads") or ()),
        tuple(str(w) for w in planned["warnings"]),
        planned_again=True,
        changes=tuple(request_changes(plan.request, planned["request"]) if plan.request is not None else ()),
        run_identity=plan.identity_hash,
    )


def _with_channels(plan: RunPlan, state: RunState) -> TrainingJobSpec:
    """The plan's spec with the state's channels (staged, warm start), validated."""
    from airflow_dist_training.spec.loading import load_spec

    data = dict(plan.spec)
    channels = dict(state.channels)
    if state.warm_start_uri:
        from airflow_dist_training.retraining.warm_start import CHANNEL, warm_start_channel

        channels[CHANNEL] = warm_start_channel(state.warm_start_uri)
    if channels:
        data["channels"] = {**data.get("channels", {}), **channels}
    return load_spec(data)


def _run_scoped(
    spec: TrainingJobSpec, policy: str | None, run_key: str, name: str, *, remote: bool, base_dir: str | None
) -> tuple[TrainingJobSpec, str | None]:
    """The spec as the run's job ``name`` sends it (checkpoints under the run's own prefix), and
    that run's checkpoint location (None without a policy or a checkpoint section)."""
    from airflow_dist_training.checkpoints.resume import run_checkpoint_location

    if policy is None:
        return spec, None
    run = run_checkpoint_location(
        spec, policy, run_key=run_key, job_name=name, local=not remote, base_dir=base_dir
    )
    return (run.spec, run.run_uri) if run is not None else (spec, None)
