"""The typed, declarative training-job spec: one model for Python objects, dicts and YAML.

Pure: imports only the standard library and pydantic. Every model is frozen and forbids unknown
fields, so a typo in YAML is an error naming the field rather than a silently ignored key.
Cross-field rules that need catalogs (instance types, framework versions) live in
``airflow_dist_training.sagemaker.preflight`` (spec checks) and
``airflow_dist_training.sagemaker.strategies`` (one record per distribution strategy).
"""

from __future__ import annotations

import re
from enum import StrEnum
from pathlib import PurePosixPath
from types import UnionType
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    Strict,
    field_validator,
    model_validator,
)

from airflow_dist_training.storage.location import split_uri, uri_scheme

S3_URI = r"^s3://[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9](/.*)?$"
ROLE_ARN = r"^arn:aws[a-z\-]*:iam::\d{12}:role/.+$"

PositiveInt = Annotated[int, Field(gt=0)]
# None is sent as "null", as the SDK's json.dumps does
HyperparameterValue = str | int | float | bool | list[Any] | dict[str, Any] | None


def _scalar_kinds(annotation: Any) -> set[Any]:
    """The plain scalar types a field annotation accepts (``int | None`` -> {int, NoneType})."""
    args = get_args(annotation)
    if get_origin(annotation) is Annotated:
        return _scalar_kinds(args[0])
    if args and get_origin(annotation) in (Union, UnionType):
        return set().union(*(_scalar_kinds(a) for a in args))
    return {annotation} if isinstance(annotation, type) else set()


def make_scalars_strict(model: type[BaseModel]) -> None:
    """Strict integers and booleans: YAML's ``true`` is no count, ``"3"`` no number, ``"yes"`` no switch.

    pydantic's lax mode would take ``instance_count: true`` as 1. Fields that are exactly an int or
    a bool (optionally None) get ``Strict()``; unions with str (hyperparameters) are left alone.
    """
    for info in model.model_fields.values():
        kinds = _scalar_kinds(info.annotation) - {type(None)}
        if kinds in ({int}, {bool}) and not any(isinstance(m, Strict) for m in info.metadata):
            info.metadata.append(Strict())


class _Model(BaseModel):
    # defer_build: validators are built on first use, not at import (DAG-parse time stays light)
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True, defer_build=True)

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        make_scalars_strict(cls)


class Strategy(StrEnum):
    """Every distribution strategy of the SageMaker distributed-training guide, plus our launcher."""

    NONE = "none"
    SMDDP = "smddp"  # smdistributed.dataparallel
    PYTORCHDDP = "pytorchddp"  # encoded as SMDDP, as SageMaker SDK >= 2.221.1 does
    TORCH_DISTRIBUTED = "torch_distributed"  # torchrun, GPU and Trainium
    SMP_V1 = "smp_v1"  # SageMaker model parallel v1: modelparallel + MPI
    SMP_V2 = "smp_v2"  # SageMaker model parallel v2: torch_distributed + modelparallel, SMP image
    MPI = "mpi"  # plain MPI, Horovod
    PARAMETER_SERVER = "parameter_server"  # TensorFlow
    MULTI_WORKER_MIRRORED = "multi_worker_mirrored"  # TensorFlow MultiWorkerMirroredStrategy
    LAUNCHER = "launcher"  # our launcher: torchrun/mpirun on any image, no training toolkit

    @classmethod
    def _missing_(cls, value: object) -> Strategy | None:
        # strategies defined outside the enum (``extend_strategy``) are pseudo-members, as Flag's are
        return _EXTRA_STRATEGIES.get(value) if isinstance(value, str) else None


_EXTRA_STRATEGIES: dict[str, Strategy] = {}


def extend_strategy(value: str) -> Strategy:
    """A ``Strategy`` value beyond the built-in members, accepted by the spec from now on.

    Used by ``sagemaker.strategies.define_strategy``: a strategy is added by one registry record,
    the enum needs no edit. ``list(Strategy)`` (and the JSON schema) keep the built-in members only.
    """
    if value in Strategy._value2member_map_:
        return Strategy(value)
    member = str.__new__(Strategy, value)
    member._name_ = value.upper()
    member._value_ = value
    _EXTRA_STRATEGIES[value] = member
    return member


def forget_strategy(value: str) -> None:
    """Undo ``extend_strategy`` (tests)."""
    _EXTRA_STRATEGIES.pop(value, None)


class ImageSpec(_Model):
    """The training image: an explicit URI, or a framework version resolved to the AWS DLC URI.

    Hugging Face (the SDK's ``HuggingFace`` estimator): ``framework: huggingface`` with
    ``transformers_version`` and one of ``pytorch_version`` / ``tensorflow_version``.
    """

    uri: str | None = Field(default=None, description="Explicit ECR image URI; skips version rules.")
    framework: Literal["pytorch", "tensorflow", "huggingface"] | None = None
    framework_version: str | None = Field(default=None, min_length=1, description="e.g. 2.8.0")
    transformers_version: str | None = Field(
        default=None, min_length=1, description="Hugging Face only: the transformers version, e.g. 4.56.2"
    )
    pytorch_version: str | None = Field(
        default=None, min_length=1, description="Hugging Face only: the PyTorch version of the image, e.g. 2.8.0"
    )
    tensorflow_version: str | None = Field(
        default=None, min_length=1, description="Hugging Face only: the TensorFlow version of the image"
    )
    py_version: str | None = Field(default=None, min_length=1, description="e.g. py312")
    container_entry_point: list[str] | None = Field(
        default=None,
        min_length=1,
        description=(
            "AlgorithmSpecification.ContainerEntrypoint: the command the container runs instead of its "
            "image's ENTRYPOINT (the SDK's container_entry_point); needs uri."
        ),
    )
    container_arguments: list[str] | None = Field(
        default=None,
        min_length=1,
        description="AlgorithmSpecification.ContainerArguments: arguments of container_entry_point.",
    )
    repository_access_mode: Literal["Platform", "Vpc"] | None = Field(
        default=None, description="TrainingImageConfig: Vpc pulls the image from a private registry in your VPC."
    )
    repository_credentials_provider_arn: str | None = Field(
        default=None,
        pattern=r"^arn:[\w\-]+:lambda:",
        description="TrainingImageConfig: a Lambda returning the private registry's credentials (Vpc mode).",
    )

    @model_validator(mode="after")
    def _uri_or_framework(self) -> ImageSpec:
        if self.framework == "huggingface" or self._hf_fields():
            self._check_huggingface()
        elif self.uri is None and (self.framework is None or self.framework_version is None):
            raise ValueError("give either uri, or framework and framework_version")
        self._check_entry_point()
        if self.uri is not None and not self.uri.strip():
            raise ValueError("uri must not be empty")
        if self.repository_credentials_provider_arn and self.repository_access_mode != "Vpc":
            raise ValueError("repository_credentials_provider_arn needs repository_access_mode: Vpc")
        return self

    def _hf_fields(self) -> list[str]:
        return [n for n in ("transformers_version", "pytorch_version", "tensorflow_version") if getattr(self, n)]

    def _check_huggingface(self) -> None:
        """The SDK's ``HuggingFace._validate_args`` rules and messages (skipped with a uri, as there)."""
        if self.framework != "huggingface":
            raise ValueError(f"{', '.join(self._hf_fields())}: only with framework: huggingface")
        if self.framework_version is not None:
            raise ValueError("framework_version: a huggingface image takes transformers_version instead")
        if self.uri is not None:
            return
        if self.transformers_version is None:
            raise ValueError(
                "transformers_version, and image_uri are both None. Specify either transformers_version or image_uri"
            )
        if self.tensorflow_version is not None and self.pytorch_version is not None:
            raise ValueError(
                "tensorflow_version and pytorch_version are both not None. "
                "Specify only tensorflow_version or pytorch_version."
            )
        base = self.tensorflow_version or self.pytorch_version
        if base is None:
            raise ValueError(
                "tensorflow_version and pytorch_version are both None. "
                "Specify either tensorflow_version or pytorch_version."
            )
        if len(base.split(".")) != len(self.transformers_version.split(".")):
            raise ValueError(
                "Please use either full version or shortened version for both "
                "transformers_version, tensorflow_version and pytorch_version."
            )

    def _check_entry_point(self) -> None:
        if (self.container_entry_point or self.container_arguments) and self.uri is None:
            raise ValueError(
                "container_entry_point/container_arguments run your own image's command: they need uri"
            )
        if self.container_arguments and not self.container_entry_point:
            raise ValueError(
                "container_arguments needs container_entry_point (the image's own ENTRYPOINT is not known here)"
            )

    @property
    def base_framework(self) -> str | None:
        """The deep-learning framework underneath: pytorch/tensorflow (for Hugging Face, its base)."""
        if self.framework == "huggingface":
            return "tensorflow" if self.tensorflow_version else ("pytorch" if self.pytorch_version else None)
        return self.framework

    @property
    def base_framework_version(self) -> str | None:
        """The version of ``base_framework`` (for Hugging Face: pytorch_version / tensorflow_version)."""
        if self.framework == "huggingface":
            return self.tensorflow_version or self.pytorch_version
        return self.framework_version

    @property
    def version(self) -> str | None:
        """The image's own version: transformers_version for Hugging Face, else framework_version."""
        return self.transformers_version if self.framework == "huggingface" else self.framework_version


def dependency_name(path: str) -> str:
    """The name a dependency has in the code archive (its last path part)."""
    return PurePosixPath(split_uri(path)[2].rstrip("/")).name


def dependencies_problem(paths: list[str]) -> str | None:
    """What is wrong with a ``dependencies`` list (training's and evaluation's), or None: each entry
    is a local file or directory, and no two land at the same archive path."""
    for path in paths:
        if not path.strip() or ("://" in path and not path.startswith("file://")):
            return f"{path!r}: each entry must be a local file or directory"
    names = [dependency_name(p) for p in paths]
    clashes = sorted({n for n in names if names.count(n) > 1})
    if clashes:
        return f"two entries would land at the same archive path: {', '.join(clashes)}"
    return None


def _valid_dependencies(paths: list[str]) -> list[str]:
    problem = dependencies_problem(paths)
    if problem:
        raise ValueError(problem)
    return paths


# training's source.dependencies and evaluation's dependencies: one rule for what may be shipped
ShippedDependencies = Annotated[list[str], AfterValidator(_valid_dependencies), Field(default_factory=list)]


class SourceSpec(_Model):
    """Where the training code comes from."""

    entry_point: str = Field(description="Script path relative to source_dir, e.g. train.py")
    source_dir: str | None = Field(
        default=None,
        description="An s3:// URI of a sourcedir.tar.gz, or a local directory the operator packs and uploads.",
    )
    dependencies: ShippedDependencies = Field(
        description=(
            "Local files or directories packed with source_dir at the archive's root under their own "
            "names (the SageMaker SDK's dependencies), e.g. a helper module the image lacks."
        ),
    )

    @model_validator(mode="after")
    def _dependencies_need_a_local_source_dir(self) -> SourceSpec:
        if self.dependencies and (not self.source_dir or self.is_s3):
            raise ValueError(
                "dependencies are packed with a local source_dir; with an s3:// tarball, put them in it"
            )
        return self

    @field_validator("entry_point")
    @classmethod
    def _relative_entry_point(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be empty")
        if value.startswith("/") or "://" in value:
            raise ValueError("must be a path relative to source_dir, e.g. train.py")
        return value

    @property
    def is_s3(self) -> bool:
        return uri_scheme(self.source_dir) == "s3"


class InstanceGroup(_Model):
    """One group of a heterogeneous cluster."""

    name: str = Field(pattern=r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,63}$")
    instance_type: str
    instance_count: PositiveInt


class ComputeSpec(_Model):
    """The cluster: instance type and count, or heterogeneous instance groups."""

    instance_type: str | None = None
    instance_count: int | None = Field(default=None, ge=1)
    instance_groups: list[InstanceGroup] | None = None
    volume_size_gb: int = Field(default=30, ge=1, le=16384)
    volume_kms_key: str | None = None
    keep_alive_seconds: int | None = Field(default=None, ge=0, le=21600)
    training_plan_arn: str | None = Field(
        default=None,
        pattern=r"^arn:aws[a-z\-]*:sagemaker:[a-z0-9\-]*:[0-9]{12}:training-plan/.*$",
        description="ResourceConfig.TrainingPlanArn: run on the reserved capacity of a SageMaker training plan.",
    )

    @model_validator(mode="after")
    def _type_count_or_groups(self) -> ComputeSpec:
        if self.instance_groups:
            if self.instance_type is not None or self.instance_count is not None:
                raise ValueError("instance_count and instance_type cannot be set when instance_groups is set")
            names = [g.name for g in self.instance_groups]
            if len(set(names)) != len(names):
                raise ValueError("instance group names must be unique")
        elif self.instance_type is None:
            raise ValueError("instance_type is required when instance_groups is not set")
        return self

    @property
    def groups(self) -> list[InstanceGroup]:
        """The cluster as groups (a homogeneous cluster is one group)."""
        if self.instance_groups:
            return list(self.instance_groups)
        assert self.instance_type is not None
        return [InstanceGroup(name="main", instance_type=self.instance_type, instance_count=self.count)]

    @property
    def count(self) -> int:
        if self.instance_groups:
            return sum(g.instance_count for g in self.instance_groups)
        return self.instance_count if self.instance_count is not None else 1


class SmpSpec(_Model):
    """SageMaker model parallel (SMP) settings; ``parameters`` become ``mp_parameters``."""

    parameters: dict[str, Any] = Field(default_factory=dict)


class DistributionSpec(_Model):
    """How the job's processes are launched and talk to each other."""

    strategy: Strategy = Strategy.NONE
    processes_per_host: int | None = Field(
        default=None,
        ge=1,
        description="MPI processes or torchrun workers per host; default: devices per host.",
    )
    custom_mpi_options: str | None = Field(
        default=None, description="Extra mpirun options (SMDDP, MPI, SMP v1)."
    )
    torch_distributed: bool = Field(
        default=False, description="SMDDP only: launch through torchrun (required on ml.p5 instances)."
    )
    smp: SmpSpec | None = None
    launcher: Literal["torchrun", "mpirun"] = Field(
        default="torchrun", description="Launcher strategy only: which launcher our entrypoint runs."
    )
    instance_group: str | None = Field(
        default=None, description="Heterogeneous clusters: the instance group that runs the distributed job."
    )


class InputMode(StrEnum):
    FILE = "File"
    PIPE = "Pipe"
    FAST_FILE = "FastFile"


class S3Channel(_Model):
    """An S3 prefix or manifest as a training channel."""

    type: Literal["s3"] = "s3"
    uri: str = Field(pattern=S3_URI)
    data_type: Literal["S3Prefix", "ManifestFile", "AugmentedManifestFile"] = "S3Prefix"
    distribution: Literal["FullyReplicated", "ShardedByS3Key"] = "FullyReplicated"
    input_mode: InputMode | None = None
    content_type: str | None = None
    compression: Literal["None", "Gzip"] | None = None
    instance_groups: list[str] | None = None
    local_source: str | None = Field(
        default=None, description="Local backend: a local path or file:// URI used instead of the S3 URI."
    )
    record_wrapping: Literal["None", "RecordIO"] | None = Field(
        default=None, description="RecordWrapperType: RecordIO wraps each record (Pipe mode algorithms)."
    )
    shuffle_seed: int | None = Field(
        default=None, ge=0, description="ShuffleConfig.Seed: shuffle the S3 prefix's objects each epoch (Pipe mode)."
    )
    attribute_names: list[str] | None = Field(
        default=None,
        min_length=1,
        max_length=16,
        description="AugmentedManifestFile channels: the JSON attributes each record passes on.",
    )


class FSxChannel(_Model):
    """An FSx for Lustre file system as a training channel (needs VPC subnets and security groups)."""

    type: Literal["fsx"] = "fsx"
    file_system_id: str = Field(pattern=r"^fs-[0-9a-f]{8,}$", min_length=11, max_length=21)
    directory_path: str = Field(max_length=4096, description="/<mount name>/<path>")
    access_mode: Literal["ro", "rw"] = "ro"
    content_type: str | None = None
    local_source: str | None = Field(
        default=None, description="Local backend: the local path standing in for this file system path."
    )

    @field_validator("directory_path")
    @classmethod
    def _absolute(cls, value: str) -> str:
        if not value.startswith("/"):
            raise ValueError(
                "must be absolute and start with the file system's mount name, e.g. /abcdefgh/data"
            )
        return value


class EFSChannel(_Model):
    """An EFS file system as a training channel (needs VPC subnets and security groups)."""

    type: Literal["efs"] = "efs"
    file_system_id: str = Field(pattern=r"^fs-[0-9a-f]{8,}$", min_length=11, max_length=21)
    directory_path: str = Field(max_length=4096)
    access_mode: Literal["ro", "rw"] = "ro"
    content_type: str | None = None
    local_source: str | None = None


Channel = Annotated[S3Channel | FSxChannel | EFSChannel, Field(discriminator="type")]


class OutputSpec(_Model):
    s3_path: str = Field(pattern=S3_URI, description="Where model.tar.gz and output.tar.gz go.")
    kms_key: str | None = None
    compression: Literal["GZIP", "NONE"] = "GZIP"
    local_uri: str | None = Field(
        default=None,
        description="Local backend: a local directory, file:// URI or registered store's URI used instead of s3_path.",
    )


def _known_layout(name: str) -> str:
    from airflow_dist_training.checkpoints.layouts import layout_problem

    if (problem := layout_problem(name)) is not None:
        raise ValueError(problem)
    return name


def _step_pattern(pattern: str | None) -> str | None:
    from airflow_dist_training.checkpoints.layouts import step_pattern_problem

    if pattern is not None and (problem := step_pattern_problem(pattern)) is not None:
        raise ValueError(problem)
    return pattern


class CheckpointSpec(_Model):
    s3_uri: str = Field(pattern=S3_URI)
    local_path: str | None = Field(
        default=None, description="In-container path; service default /opt/ml/checkpoints"
    )
    local_uri: str | None = Field(
        default=None,
        description="Local backend: a local directory, file:// URI or registered store's URI used instead of s3_uri as the checkpoint store.",
    )
    layout: Annotated[str, AfterValidator(_known_layout)] = Field(
        default="auto",
        description="How the script writes checkpoints: manifest, dcp, hf-trainer, single-file (or a registered "
        "layout); auto detects it per checkpoint (docs/checkpoints.md).",
    )
    step_pattern: Annotated[str | None, AfterValidator(_step_pattern)] = Field(
        default=None,
        description="single-file layout: the file name, e.g. epoch={epoch}-step={step}.ckpt ({step} required; "
        "any other {name} is a metric).",
    )


# Jobs one run of a training task may create (spot replacements included): the operator's limit,
# and the planner's for a spot run's cost bound when spot.max_interruptions is not set.
MAX_RUN_JOBS = 50


class SpotSpec(_Model):
    """Managed spot training, and what a run does when spot capacity is reclaimed.

    An interrupted job (spot capacity reclaimed until ``MaxWaitTimeInSeconds`` ran out) is replaced
    by the run's next job within the same task try, resuming from the latest complete checkpoint.
    Interruptions have their own budget: they never use up the task's ``retries``, which count
    real failures only (as Ray's ``FailureConfig`` does for preemptions).
    """

    enabled: bool = False
    max_wait_seconds: int | None = Field(default=None, ge=1)
    # interrupted jobs a run may replace; None: up to the run's job limit (MAX_RUN_JOBS)
    max_interruptions: int | None = Field(default=None, ge=0)
    # after this many interruptions (capacity errors included) the run's next job is on-demand
    on_demand_after_interruptions: int | None = Field(default=None, ge=1)


class StoppingSpec(_Model):
    max_runtime_seconds: int = Field(default=86400, ge=1)
    forward_sigterm: bool = Field(
        default=False,
        description=(
            "Script mode: run AWS's training toolkit under the project's shim (shipped in an input "
            "channel), which forwards the SIGTERM of a stop, a spot interruption or MaxRuntimeInSeconds "
            "to the script, so it can save in SageMaker's 120 s; the toolkit alone does not. The "
            "launcher strategy always forwards."
        ),
    )
    max_pending_seconds: int | None = Field(
        default=None,
        ge=7200,
        le=2419200,
        description="MaxPendingTimeInSeconds: give up if capacity (e.g. a training plan's) is not there in time.",
    )


class NetworkSpec(_Model):
    subnets: list[str] = Field(default_factory=list)
    security_group_ids: list[str] = Field(default_factory=list)
    network_isolation: bool = False
    inter_container_encryption: bool = False


class MetricDefinition(_Model):
    name: str = Field(min_length=1, max_length=255)
    regex: str = Field(min_length=1, max_length=500)

    @field_validator("regex")
    @classmethod
    def _compiles(cls, value: str) -> str:
        try:
            re.compile(value)
        except re.error as exc:
            raise ValueError(f"is not a valid regular expression ({exc})") from None
        return value


_MLFLOW_NAME = r"^[a-zA-Z0-9\-_./]+$"  # MlflowConfig's experiment and run names (the API's pattern)


class TensorBoardSpec(_Model):
    s3_path: str = Field(pattern=S3_URI)
    local_path: str | None = None


class MlflowSpec(_Model):
    """SageMaker managed MLflow (``CreateTrainingJob.MlflowConfig``): the job logs to this tracking
    server or MLflow App; SageMaker gives it the tracking URI and run settings (docs/mlflow.md)."""

    resource_arn: str = Field(
        max_length=2048,
        pattern=r"^arn:aws[a-z\-]*:sagemaker:[a-z0-9\-]*:[0-9]{12}:mlflow-(app|tracking-server)/.+$",
        description="MlflowResourceArn: the ARN of a managed MLflow tracking server or MLflow App.",
    )
    experiment_name: str | None = Field(
        default=None, min_length=1, max_length=256, pattern=_MLFLOW_NAME, description="MlflowExperimentName."
    )
    run_name: str | None = Field(
        default=None, min_length=1, max_length=256, pattern=_MLFLOW_NAME, description="MlflowRunName."
    )


class DebuggerSpec(_Model):
    """SageMaker Debugger hook and profiler switches (the SDK's defaults: both on)."""

    hook: bool = True
    profiler: bool = True


class BatchSpec(_Model):
    """The scaling facts: global batch = data-parallel replicas x per-replica batch.

    Give the per-device batch (global batch follows the cluster size) or the global batch (the
    per-device batch shrinks as the cluster grows). ``min_per_device_batch_size`` is the floor
    below which convergence suffers: the plan warns when the cluster pushes the batch under it.
    """

    per_device_batch_size: int | None = Field(default=None, ge=1)
    global_batch_size: int | None = Field(default=None, ge=1)
    min_per_device_batch_size: int | None = Field(default=None, ge=1)

    @model_validator(mode="after")
    def _one_of(self) -> BatchSpec:
        if self.per_device_batch_size is not None and self.global_batch_size is not None:
            raise ValueError("give per_device_batch_size or global_batch_size, not both")
        return self


class LocalSettings(_Model):
    """Local backend only: how this machine runs the job (never part of the SageMaker request)."""

    python: dict[str, str] = Field(
        default_factory=dict,
        description=(
            "Interpreter per image URI, '<framework>-<version>', '<framework>' or 'default' "
            "(default: the interpreter of the process that starts the job)."
        ),
    )
    runner: Literal["auto", "toolkit", "builtin"] = Field(
        default="auto",
        description="auto: AWS's in-container toolkit when installed and namespaces work, else the builtin runner.",
    )
    isolation: Literal["auto", "namespaces", "none"] | None = Field(
        default=None, description="Simulated hosts in Linux namespaces (default: $ADT_LOCAL_ISOLATION or auto)."
    )
    hang_seconds: float = Field(
        default=60.0, gt=0, description="A rendezvous or name-resolution hang fails the job after this long."
    )


class TrainingJobSpec(_Model):
    """A distributed training job, independent of where it runs (SageMaker or the local backend)."""

    name: str = Field(min_length=1, description="Job name base; the job name adds a run identity hash.")
    image: ImageSpec
    source: SourceSpec
    role_arn: str | None = Field(default=None, pattern=ROLE_ARN, description="SageMaker execution role.")
    compute: ComputeSpec
    distribution: DistributionSpec = Field(default_factory=DistributionSpec)
    hyperparameters: dict[str, HyperparameterValue] = Field(default_factory=dict)
    environment: dict[str, str] = Field(default_factory=dict)
    channels: dict[str, Channel] = Field(default_factory=dict)
    input_mode: InputMode = InputMode.FILE
    output: OutputSpec | None = None
    checkpoint: CheckpointSpec | None = None
    spot: SpotSpec = Field(default_factory=SpotSpec)
    stopping: StoppingSpec = Field(default_factory=StoppingSpec)
    network: NetworkSpec = Field(default_factory=NetworkSpec)
    metric_definitions: list[MetricDefinition] = Field(default_factory=list)
    max_retry_attempts: int | None = Field(default=None, ge=1, le=30)
    tags: dict[str, str] = Field(default_factory=dict)
    tensorboard: TensorBoardSpec | None = None
    mlflow: MlflowSpec | None = Field(default=None, description="MlflowConfig: SageMaker managed MLflow.")
    debugger: DebuggerSpec = Field(default_factory=DebuggerSpec)
    batch: BatchSpec | None = None
    infra_check: bool | None = Field(default=None, description="InfraCheckConfig: health-check the instances first.")
    remote_debug: bool | None = Field(default=None, description="RemoteDebugConfig: allow SSM access to the containers.")
    session_tag_chaining: bool | None = Field(
        default=None, description="SessionChainingConfig: pass the session tags on to the job's role sessions."
    )
    container_log_level: int = Field(
        default=20,
        ge=0,
        le=50,
        description="Python logging level of the training toolkit (sagemaker_container_log_level; 10 = DEBUG).",
    )
    # the YAML file this spec was loaded from (not a field: planning errors name it)
    _source_file: str | None = PrivateAttr(default=None)

    @property
    def source_file(self) -> str | None:
        return self._source_file

    @model_validator(mode="before")
    @classmethod
    def _smddp_needs_an_instance_type(cls, data: Any) -> Any:
        """The SDK's own message (``_validate_smdataparallel_args``) for SMDDP without an instance type."""
        if isinstance(data, dict):
            compute, dist = data.get("compute"), data.get("distribution")
            if (
                isinstance(compute, dict)
                and isinstance(dist, dict)
                and dist.get("strategy") in ("smddp", "pytorchddp")
                and compute.get("instance_type") is None
                and not compute.get("instance_groups")
            ):
                raise ValueError("compute.instance_type: Please specify an instance_type for smdataparallel.")
        return data
    local: LocalSettings | None = None

    @field_validator("channels")
    @classmethod
    def _channel_names(cls, value: dict[str, Any]) -> dict[str, Any]:
        for name in value:
            if not re.fullmatch(r"[A-Za-z0-9\.\-_]{1,64}", name):
                raise ValueError(f"channel name {name!r} must match [A-Za-z0-9.-_]{{1,64}}")
        return value
