"""A retraining pipeline described as data: one YAML file -> one DAG.

Pure (pydantic + stdlib). The DAG factory (``airflow_dist_training.dag_factory``) turns a
``PipelineSpec`` into stage -> train -> checkpoints -> evaluate -> gate -> register tasks.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field, PlainValidator, SerializeAsAny, field_validator, model_validator

from airflow_dist_training.spec.backends import BackendName, BackendRecord, find_backend
from airflow_dist_training.spec.evaluations import evaluation_record
from airflow_dist_training.spec.gate import GateSpec
from airflow_dist_training.spec.members import Member, MemberList
from airflow_dist_training.spec.records import Factory, KindsSchema, Records, step_of_kind
from airflow_dist_training.spec.registries import RegistryStep, RegistryStepModel, TypedRegistry
from airflow_dist_training.spec.sweep import SweepSpec
from airflow_dist_training.spec.training import ShippedDependencies, TrainingJobSpec, _Model
from airflow_dist_training.spec.tuning import TuningSpec
from airflow_dist_training.storage.location import uri_scheme

if TYPE_CHECKING:
    from airflow_dist_training.errors import Problem

# Airflow's schedule presets (airflow.sdk.definitions.timetables._cron.CRON_PRESETS, plus @once and
# @continuous of airflow.sdk.definitions.dag); any other "@name" fails at DAG creation.
SCHEDULE_PRESETS = ("@once", "@continuous", "@hourly", "@daily", "@weekly", "@monthly", "@quarterly", "@yearly")


class ScratchFileSystem(_Model):
    """An FSx for Lustre file system created for the run and deleted afterwards (even on failure)."""

    subnet_id: str = Field(description="Use the training subnet: the file system must share its AZ")
    security_group_ids: list[str] = Field(
        min_length=1, description="Must allow Lustre traffic (TCP 988, 1018-1023)"
    )
    storage_capacity_gib: int = Field(default=1200, ge=1200)
    deployment_type: Literal["SCRATCH_1", "SCRATCH_2", "PERSISTENT_1", "PERSISTENT_2"] = "SCRATCH_2"


class StagingStepModel(_Model):
    """The fields every staging step has; a kind's step model subclasses it with ``kind: Literal[...]``."""

    channel: str = Field(default="train", description="The training channel the staged data feeds.")
    source: str = Field(description="s3://, file:// or a local path")
    kind: str


class FSxStaging(StagingStepModel):
    """Import an S3 prefix into an FSx for Lustre file system; the channel reads it there."""

    kind: Literal["fsx"] = "fsx"
    file_system_path: str = Field(description="Path inside the file system, e.g. /data/train")
    file_system_id: str | None = Field(default=None, description="The FSx for Lustre file system")
    scratch_file_system: ScratchFileSystem | None = Field(
        default=None, description="Create a file system for this run instead of file_system_id"
    )

    @model_validator(mode="after")
    def _one_file_system(self) -> FSxStaging:
        if self.scratch_file_system is not None and self.file_system_id is not None:
            raise ValueError("give file_system_id or scratch_file_system, not both")
        if self.scratch_file_system is None and self.file_system_id is None:
            raise ValueError("give file_system_id or scratch_file_system")
        return self


class DirectoryStaging(StagingStepModel):
    """Copy the dataset into the channel's local folder (the job reads its local source)."""

    kind: Literal["directory"] = "directory"
    file_system_id: str | None = Field(default=None, description="The FSx file system id the channel names")
    file_system_path: str | None = Field(default=None, description="The FSx path the channel names")


@dataclass(frozen=True)
class StagingRecord(Factory):
    """A staging kind: its pipeline step, what the job needs to read the staged data, and its task."""

    name: str
    step: type[StagingStepModel]
    #: ``"module:attribute"`` (imported on first use) or a callable; called with the task group
    #: being built (``task_groups.py``), the typed step and the data asset (or None), it adds and
    #: returns the staging task
    factory: str | Callable[..., Any]
    #: the staging task returns the channel the job reads (it replaces the spec's channel, whose
    #: data is then fingerprinted at the step's ``source``; a tuning job cannot read it)
    returns_channel: bool = False
    #: the job reaches the staged data over its VPC: the spec needs subnets and security groups
    needs_vpc: bool = False
    description: str = ""


STAGINGS: Records[StagingRecord] = Records(StagingRecord, "staging kind", "kinds", "airflow_dist_training.staging")
register_staging = STAGINGS.register
forget_staging = STAGINGS.forget
#: the record of a kind; ``SpecValidationError`` naming ``field`` and the registered kinds
staging_record = partial(STAGINGS.get, field="staging")

register_staging(
    StagingRecord(
        name="fsx",
        step=FSxStaging,
        factory="airflow_dist_training.task_groups:fsx_staging_task",
        returns_channel=True,
        needs_vpc=True,
        description="import an S3 prefix into an FSx for Lustre file system",
    )
)
register_staging(
    StagingRecord(
        name="directory",
        step=DirectoryStaging,
        factory="airflow_dist_training.task_groups:local_staging_task",
        description="copy the dataset into the channel's local folder",
    )
)


def _typed_staging(value: Any) -> StagingStepModel:
    return step_of_kind(STAGINGS, value, "staging", typed=StagingStepModel, untyped=StagingStep)  # type: ignore[no-any-return]


#: a pipeline's staging step, of a registered kind
TypedStaging = Annotated[SerializeAsAny[StagingStepModel], PlainValidator(_typed_staging), KindsSchema(STAGINGS)]


class StagingStep(StagingStepModel):
    """A staging step written for any backend: ``kind`` (default: how the backend stages data)
    picks the kind's step model; fields the kind does not have are not used."""

    kind: str | None = None  # type: ignore[assignment]
    file_system_id: str | None = None
    file_system_path: str | None = None
    scratch_file_system: ScratchFileSystem | None = None

    def for_backend(self, backend: BackendRecord) -> StagingStepModel:
        """The typed staging step on ``backend``, its rules checked (``SpecValidationError``)."""
        from airflow_dist_training.spec.loading import validate_model

        kind = self.kind or backend.staging
        model = staging_record(kind, field="staging.kind").step
        kept = {k: v for k, v in self.model_dump(exclude_unset=True).items() if k in model.model_fields}
        return validate_model(model, {**kept, "kind": kind}, prefix="staging", pipeline=True)


class CheckpointFreshness(_Model):
    """Alarm when a running job stops writing complete checkpoints (a watcher task beside ``train``).

    The clock starts when the job starts training (``TrainingStartTime``: provisioning and image
    download are not a stall) and restarts at each new complete checkpoint under the job's
    checkpoint location.
    """

    max_age_seconds: float = Field(
        gt=0, description="Longest time without a new complete checkpoint before the alarm (seconds)"
    )
    on_stall: Literal["alarm", "stop"] = Field(
        default="alarm",
        description="alarm: fail the watcher task with the reason (its callbacks fire); the job runs on. "
        "stop: also stop the job (the training task then fails, and is not retried)",
    )


class CheckpointStep(_Model):
    resume: Literal["fresh", "latest", "none"] = Field(
        default="latest",
        description="fresh/latest: retries and spot replacements of a run resume from the run's own "
        "latest checkpoint; a new run never resumes another run's (use warm_start). none: never resume",
    )
    keep_last: int = Field(default=3, ge=1)
    keep_best: int = Field(default=1, ge=0)
    metric: str | None = None
    mode: Literal["min", "max"] = "min"
    promote_to: str | None = Field(
        default=None, description="Stable location the best checkpoint is copied to"
    )
    freshness: CheckpointFreshness | None = Field(
        default=None,
        description="Watch the running job's checkpoints and alarm on a stall (durable backends: SageMaker)",
    )


class EvaluationStep(_Model):
    script: str = Field(description="Evaluation script; writes evaluation.json")
    channel_source: str | None = Field(default=None, description="Held-out data for the evaluation")
    arguments: dict[str, Any] = Field(default_factory=dict)
    dependencies: ShippedDependencies = Field(
        description=(
            "Local files or directories shipped with the script, beside it under their own names "
            "(the SageMaker SDK's processing dependencies), e.g. a helper module the image lacks"
        ),
    )

    @model_validator(mode="after")
    def _dependencies_need_a_local_script(self) -> EvaluationStep:
        if self.dependencies and uri_scheme(self.script) == "s3":
            raise ValueError("dependencies are shipped with a local script; with an s3:// script, put them in its folder")
        return self


def resolve_steps(
    backend: BackendRecord,
    staging: StagingStep | TypedStaging | None,
    registry: RegistryStep | TypedRegistry | None,
) -> tuple[StagingStepModel | None, RegistryStepModel | None]:
    """The staging and registry steps as they run on ``backend``: each kind decided, its rules checked."""
    if isinstance(registry, RegistryStep):
        registry = registry.for_backend(backend)
    if isinstance(staging, StagingStep):
        staging = staging.for_backend(backend)
    return staging, registry


class PipelineSpec(_Model):
    """One retraining pipeline: schedule, training spec, gate and registry."""

    dag_id: str
    description: str | None = None
    schedule: str | None = Field(default=None, description="cron expression, @daily, ... or null")
    timezone: str = "UTC"
    assets: list[str] = Field(
        default_factory=list, description="Asset URIs whose updates also trigger the DAG"
    )
    start_date: str = "2026-01-01"
    backend: BackendName = "local"
    aws_conn_id: str = "aws_default"
    region_name: str | None = None
    owner: str = "ml-platform"
    retries: int = Field(default=2, ge=0)
    tags: list[str] = Field(default_factory=list)
    training: TrainingJobSpec
    staging: TypedStaging | None = Field(
        default=None, description="kind: a registered staging kind, e.g. directory or fsx (default: the backend's)"
    )
    checkpoints: CheckpointStep = Field(default_factory=CheckpointStep)
    evaluation: EvaluationStep | None = None
    gate: GateSpec | None = None
    fail_on_reject: bool = False
    registry: TypedRegistry | None = Field(
        default=None, description="kind: a registered registry kind, e.g. sagemaker or local (default: the backend's)"
    )
    force: bool = Field(
        default=False,
        description="Train even when data, code and spec equal the champion's (else the run is skipped)",
    )
    warm_start: Literal["none", "champion", "promoted"] = Field(
        default="none",
        description="Initialise from the champion's model or the last promoted checkpoint (channel warm_start)",
    )
    deferrable: bool | None = Field(
        default=None,
        description="Wait for SageMaker jobs in the triggerer (default: yes on the sagemaker backend, "
        "so no worker slot is held while a job runs); false waits in the worker",
    )
    for_each: list[Member] | None = Field(
        default=None,
        min_length=1,
        description="Train one model per member (a mapped task group): each member's name and its "
        "overrides of hyperparameters, channels, environment and compute; its own job, checkpoints, "
        "champion, gate and model package group (<group>-<member>)",
    )

    sweep: SweepSpec | None = Field(
        default=None,
        description="Train a grid or random sample of hyperparameter sets as members; only the best "
        "(the objective metric) is gated and registered",
    )

    tuning: TuningSpec | None = Field(
        default=None,
        description="Train as a hyperparameter tuning job (SageMaker's, or the local backend's): its "
        "best training job is evaluated, gated and registered (docs/tuning.md)",
    )

    @field_validator("for_each")
    @classmethod
    def _member_names(cls, value: list[Member] | None) -> list[Member] | None:
        if value is not None:
            MemberList(members=value)  # unique names, at most MAX_MEMBERS
        return value

    @field_validator("dag_id")
    @classmethod
    def _dag_id(cls, value: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9_.\-]{1,250}", value):
            raise ValueError("must contain only letters, digits, '_', '.' and '-' (at most 250)")
        return value

    @field_validator("timezone")
    @classmethod
    def _timezone(cls, value: str) -> str:
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(
                f"unknown time zone {value!r} (use an IANA name such as Europe/Amsterdam)"
            ) from None
        return value

    @field_validator("schedule")
    @classmethod
    def _schedule(cls, value: str | None) -> str | None:
        if value is None:
            return value
        if value.startswith("@"):
            if value not in SCHEDULE_PRESETS:
                raise ValueError(f"unknown schedule preset {value!r}; one of {', '.join(SCHEDULE_PRESETS)}")
            return value
        from croniter import croniter

        if len(value.split()) not in (5, 6) or not croniter.is_valid(value):
            raise ValueError(f"{value!r} is not a cron expression (5 fields: minute hour day month weekday)")
        return value

    @field_validator("start_date")
    @classmethod
    def _start_date(cls, value: str) -> str:
        from datetime import datetime

        try:
            datetime.fromisoformat(value)
        except ValueError:
            raise ValueError(f"{value!r} is not an ISO date or date-time, e.g. 2026-01-01") from None
        return value

    @model_validator(mode="after")
    def _one_fan_out(self) -> PipelineSpec:
        if self.for_each is not None and self.sweep is not None:
            raise ValueError("give for_each (named members) or sweep (members from hyperparameter sets), not both")
        if self.tuning is not None and (self.for_each is not None or self.sweep is not None):
            raise ValueError("give tuning (one model, its hyperparameters searched) or for_each/sweep, not both")
        return self

    @model_validator(mode="before")
    @classmethod
    def _kinds_from_backend(cls, data: Any) -> Any:
        """A registry or staging step without ``kind`` is of the backend's kind (its capability)."""
        if not isinstance(data, dict):
            return data
        record = find_backend(data.get("backend", "local"))
        if record is None:
            return data  # the backend field's own error names the registered backends
        for step, kind in (("registry", record.default_registry), ("staging", record.staging)):
            if isinstance(data.get(step), dict) and "kind" not in data[step]:
                data = {**data, step: {"kind": kind, **data[step]}}
        return data


@dataclass(frozen=True)
class S3Location:
    """An S3 location a run uses: ``field`` names it for the user; inputs must hold objects."""

    field: str
    uri: str
    is_input: bool


# registry/repository[:tag|@digest]: what CreateModelPackage accepts as an inference image
_IMAGE = re.compile(r"^[\w.\-]+(:\d+)?/[\w.\-/]+([:@][\w.\-:]+)?$")


def step_problems(
    training: TrainingJobSpec,
    backend: BackendRecord,
    *,
    staging: StagingStep | TypedStaging | None = None,
    evaluation: EvaluationStep | None = None,
    gate: GateSpec | Mapping[str, Any] | None = None,
    registry: RegistryStep | TypedRegistry | None = None,
    inference_image: str | None = None,
) -> list[Problem]:
    """Every rule between a pipeline's steps and of each step's own fields, on ``backend``: their one
    home. Pure: no I/O (``pipeline_checks.check_steps`` adds what needs the files, for the parse, the
    CLI's ``validate`` and the plan task alike)."""
    from airflow_dist_training.errors import Problem, SpecValidationError

    problems: list[Problem] = []
    if gate is not None and evaluation is None:
        problems.append(Problem("gate", "needs an evaluation step (the gate reads its evaluation.json)"))
    if staging is not None:
        problems += _staging_problems(training, backend, staging)
    if evaluation is not None and evaluation_record(backend.evaluation).on_aws:
        problems += _processing_job_problems(training)
    for step in (staging, registry):
        if isinstance(step, StagingStep | RegistryStep):
            try:
                step.for_backend(backend)
            except SpecValidationError as exc:
                problems += exc.problems
    if evaluation is not None:
        problems += _evaluation_problems(evaluation, backend)
    if isinstance(gate, Mapping):  # a GateSpec was parsed already
        problems += _gate_problems(gate)
    if registry is not None:
        problems += _registry_problems(registry, backend, inference_image)
    return problems


def _staging_problems(
    training: TrainingJobSpec, backend: BackendRecord, staging: StagingStep | TypedStaging
) -> list[Problem]:
    from airflow_dist_training.errors import Problem

    problems: list[Problem] = []
    if staging.channel not in training.channels:
        known = ", ".join(sorted(training.channels)) or "none"
        problems.append(
            Problem(
                "staging.channel",
                f"{staging.channel!r} names no channel of the training spec (its channels: {known}); "
                "the staged data would never reach the job",
            )
        )
    kind = STAGINGS.find(staging.kind or backend.staging)
    if kind is not None and kind.needs_vpc and not (training.network.subnets and training.network.security_group_ids):
        problems.append(
            Problem(
                "training.network",
                "staging to FSx for Lustre needs VPC access: set network.subnets and "
                "network.security_group_ids in the training spec",
            )
        )
    return problems


def _processing_job_problems(training: TrainingJobSpec) -> list[Problem]:
    """An evaluation run as a SageMaker processing job writes to S3 under a role."""
    from airflow_dist_training.errors import Problem

    problems: list[Problem] = []
    if training.output is None or not training.output.s3_path:
        why = "evaluation.json goes to <output.s3_path>/evaluation/<run>"
        problems.append(Problem("output.s3_path", f"is required for a SageMaker evaluation: {why}"))
    if not training.role_arn:
        problems.append(Problem("role_arn", "is required for a SageMaker evaluation (the processing job's role)"))
    return problems


def _evaluation_problems(step: EvaluationStep, backend: BackendRecord) -> list[Problem]:
    """The script's and the data's form; whether local ones exist is ``pipeline_checks``' (I/O)."""
    from airflow_dist_training.errors import Problem

    problems: list[Problem] = []
    script, data = step.script, step.channel_source
    if not script.endswith(".py"):
        problems.append(Problem("evaluation.script", f"must be a .py file, got {script!r}"))
    if uri_scheme(script) not in (None, "file") and not evaluation_record(backend.evaluation).on_aws:
        problems.append(
            Problem("evaluation.script", f"{script}: the {backend.name} backend runs a local script, not a URI")
        )
    elif uri_scheme(script) not in (None, "file", "s3"):
        problems.append(Problem("evaluation.script", f"{script}: must be a local path or an s3:// URI"))
    if uri_scheme(data) not in (None, "file", "s3"):
        problems.append(Problem("evaluation.channel_source", f"{data}: must be a local path or an s3:// URI"))
    return problems


def _gate_problems(gate: Mapping[str, Any]) -> list[Problem]:
    from airflow_dist_training.errors import Problem, SpecValidationError
    from airflow_dist_training.spec.gate import parse_gate_spec

    try:
        parse_gate_spec(
            dict(gate.get("thresholds") or {}),
            require_same_evaluation_set=bool(gate.get("require_same_evaluation_set", False)),
        )
    except SpecValidationError as exc:
        return [Problem(f"gate.{p.path}".rstrip("."), p.message) for p in exc.problems]
    return []


def _registry_problems(
    registry: RegistryStep | TypedRegistry, backend: BackendRecord, inference_image: str | None
) -> list[Problem]:
    """The registry's inference image (the form's overrides the step's) and its local directory."""
    from airflow_dist_training.errors import Problem
    from airflow_dist_training.spec.registries import find_registry

    record = find_registry(registry.kind or backend.default_registry)
    if record is None or (record.local_dir and getattr(registry, "local_dir", None)):
        return []
    if record.local_dir:
        message = "not set: the local registry goes to .adt-demo/registry"
        return [Problem("registry.local_dir", message, "warning")]
    image = inference_image or registry.inference_image
    if not record.needs_image or not image or _IMAGE.match(image):
        return []
    message = f"{image!r} is not an image URI (<registry>/<repository>:<tag> or @<digest>)"
    return [Problem("registry.inference_image", message)]


def s3_locations(
    spec: TrainingJobSpec,
    *,
    evaluation: EvaluationStep | None = None,
    staging: StagingStep | TypedStaging | None = None,
) -> list[S3Location]:
    """The S3 locations a SageMaker run reads (inputs) and writes, with the field naming each.

    A channel the staging step replaces (FSx) is read from the staging source, not its own URI."""
    from airflow_dist_training.spec.training import S3Channel

    found: list[S3Location] = []
    if staging is not None and uri_scheme(staging.source) == "s3":
        found.append(S3Location("staging.source", staging.source, True))
    for name, channel in spec.channels.items():
        if staging is not None and name == staging.channel:
            continue
        if isinstance(channel, S3Channel):
            found.append(S3Location(f"channels.{name}.uri", channel.uri, True))
    source_dir = spec.source.source_dir
    if source_dir and uri_scheme(source_dir) == "s3":
        found.append(S3Location("source.source_dir", source_dir, True))
    if spec.output is not None and spec.output.s3_path:
        found.append(S3Location("output.s3_path", spec.output.s3_path, False))
    if spec.checkpoint is not None and spec.checkpoint.s3_uri:
        found.append(S3Location("checkpoint.s3_uri", spec.checkpoint.s3_uri, False))
    if evaluation is not None:  # its script and the data channel it reads
        found += [
            S3Location(f"evaluation.{name}", str(uri), True)
            for name, uri in (("script", evaluation.script), ("channel_source", evaluation.channel_source))
            if uri_scheme(uri) == "s3"
        ]
    return found


def resolve_training_reference(data: dict[str, Any], base_dir: Path) -> dict[str, Any]:
    """Allow ``training: path/to/spec.yaml`` (relative to the pipeline file) as well as an inline spec.

    Relative local paths inside a referenced spec are made absolute against *that spec file's*
    folder (where its author wrote them from), not the pipeline's; an inline spec's paths stay
    relative to the pipeline file.
    """
    training = data.get("training")
    if isinstance(training, str):
        from airflow_dist_training.spec.loading import read_yaml_file

        path = (base_dir / training).resolve()
        loaded = read_yaml_file(path)
        if isinstance(loaded, dict):
            loaded = absolutize_spec_paths(loaded, path.parent)
        data = {**data, "training": loaded}
    return data


def _absolute(value: Any, folder: Path) -> Any:
    if not isinstance(value, str) or not value or "://" in value or value.startswith("/"):
        return value
    return str((folder / value).resolve())


# The spec fields that hold local paths (in-container paths such as checkpoint.local_path are not).
LOCAL_PATH_FIELDS = (("source", "source_dir"), ("output", "local_uri"), ("checkpoint", "local_uri"))


def absolutize_spec_paths(data: dict[str, Any], folder: Path) -> dict[str, Any]:
    """A copy of raw spec data with its relative local paths made absolute against ``folder``."""
    out = dict(data)
    for section, key in LOCAL_PATH_FIELDS:
        part = out.get(section)
        if isinstance(part, dict) and key in part:
            out[section] = {**part, key: _absolute(part[key], folder)}
    source = out.get("source")
    if isinstance(source, dict) and isinstance(source.get("dependencies"), list):
        out["source"] = {**source, "dependencies": [_absolute(d, folder) for d in source["dependencies"]]}
    channels = out.get("channels")
    if isinstance(channels, dict):
        out["channels"] = {
            name: {**ch, "local_source": _absolute(ch["local_source"], folder)}
            if isinstance(ch, dict) and "local_source" in ch
            else ch
            for name, ch in channels.items()
        }
    return out
