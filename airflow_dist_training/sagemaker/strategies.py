"""Distribution strategies: validation rules and HyperParameters encoding, one entry per strategy.

The encoding is the SageMaker Python SDK v2's (``sagemaker_*`` hyperparameters, each value
``json.dumps``-ed, read by the sagemaker-training-toolkit inside the DLC), and the messages are the
SDK's own where it has one (``fw_utils.validate_*``). Rules the SDK leaves to the service are
checked here too, with our own messages. The launcher strategy instead overrides the container
entrypoint (see ``airflow_dist_training.sagemaker.launcher``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, Literal

from airflow_dist_training.errors import Problem
from airflow_dist_training.sagemaker.catalog import (
    instance_family,
    is_gpu_family,
    is_trainium,
    sdk_version_lists,
)
from airflow_dist_training.sagemaker.hardware import hardware_problems, instance_info
from airflow_dist_training.sagemaker.hyperparameters import encode_script_mode
from airflow_dist_training.spec.records import Records
from airflow_dist_training.spec.training import Strategy, TrainingJobSpec, extend_strategy, forget_strategy

# The SDK's version lists (fw_utils.SM_DATAPARALLEL_SUPPORTED_FRAMEWORK_VERSIONS,
# TORCH_DISTRIBUTED_GPU_SUPPORTED_FRAMEWORK_VERSIONS, TRAINIUM_SUPPORTED_TORCH_DISTRIBUTED_FRAMEWORK_VERSIONS)
# live in data/sdk_versions.json, generated from the installed SDK by tests/parity/regenerate_images.py.
UNSUPPORTED_DLC_IMAGE_FOR_SM_PARALLELISM = ("2.0.1-gpu-py310-cu121",)

_SMP_ENUMS = {
    "pipeline": ("simple", "interleaved", "_only_forward"),
    "placement_strategy": ("spread", "cluster"),
    "optimize": ("speed", "memory"),
}
_SMP_POSITIVE_INTS = ("microbatches", "partitions", "active_microbatches")
_SMP_BOOLS = ("auto_partition", "contiguous", "load_partition", "horovod", "ddp", "deterministic_server")


@dataclass
class StrategyContext:
    """What a strategy rule needs to know beyond the spec."""

    spec: TrainingJobSpec
    image_uri: str
    problems: list[Problem] = field(default_factory=list)

    @property
    def framework(self) -> str | None:
        """The framework the SDK validates the strategy for (for Hugging Face: its base framework)."""
        return self.spec.image.base_framework

    @property
    def framework_version(self) -> str | None:
        return self.spec.image.base_framework_version

    @property
    def huggingface(self) -> bool:
        return self.spec.image.framework == "huggingface"

    @property
    def explicit_image(self) -> bool:
        return self.spec.image.uri is not None

    @property
    def instance_types(self) -> list[str]:
        return [g.instance_type for g in self.spec.compute.groups]

    @property
    def training_group(self) -> str | None:
        """The instance group that runs the distributed job (the SDK's ``distribution["instance_groups"]``).

        As the SDK's ``validate_distribution``: a single-group cluster uses its only group when
        ``distribution.instance_group`` is not given.
        """
        groups = self.spec.compute.instance_groups
        dist = self.spec.distribution
        if not groups:
            return None
        if dist.instance_group is not None:
            return dist.instance_group
        if len(groups) == 1 and record_for(dist.strategy).instance_groups != "unused":
            return groups[0].name
        return None

    @property
    def validation_instance_types(self) -> list[str]:
        """The instance types the SDK validates the strategy against: the training group's, or all."""
        group = self.training_group
        types = [g.instance_type for g in self.spec.compute.groups if g.name == group]
        return types or self.instance_types

    @property
    def distribution_instance_type(self) -> str | None:
        """The instance type the SDK writes into ``sagemaker_instance_type`` (None when heterogeneous)."""
        return None if self.spec.compute.instance_groups else self.spec.compute.instance_type

    def error(self, path: str, message: str) -> None:
        self.problems.append(Problem(path, message))

    def warn(self, path: str, message: str) -> None:
        self.problems.append(Problem(path, message, severity="warning"))


_dumps = encode_script_mode  # the sagemaker_* keys are script-mode HyperParameters


# ---------------------------------------------------------------------------------------------- rules


def record_in(ctx: StrategyContext) -> StrategyRecord:
    """The strategy's record for this job's estimator (its Hugging Face variant for huggingface images)."""
    record = record_for(ctx.spec.distribution.strategy)
    return replace(record, **dict(record.huggingface)) if ctx.huggingface else record


def check_distribution(ctx: StrategyContext) -> None:
    """All strategy rules; problems are appended to ``ctx.problems``."""
    record = record_in(ctx)
    _check_fields(ctx)
    _check_framework(ctx, record)
    _check_trainium(ctx, record)
    _check_instance_group(ctx, record)
    for rule in record.rules:
        rule(ctx)
    ctx.problems += hardware_problems(
        ctx.spec,
        ctx.image_uri,
        ctx.validation_instance_types,
        smddp_instances=record.smddp_instances,
        processes=record.processes,
        per_host_strategies=[r.strategy.value for r in records() if r.processes == "per_host"],
    )


def _check_fields(ctx: StrategyContext) -> None:
    """A DistributionSpec field set for a strategy that does not read it is an invalid combination."""
    dist = ctx.spec.distribution
    for name in STRATEGY_FIELDS:
        if name not in dist.model_fields_set or getattr(dist, name) in (None, False):
            continue
        allowed = [r.strategy.value for r in records() if name in r.fields]
        if name not in record_for(dist.strategy).fields:
            ctx.error(
                f"distribution.{name}",
                f"is not used by strategy {dist.strategy.value!r}; it applies to: "
                + ", ".join(sorted(allowed)),
            )


def _check_framework(ctx: StrategyContext, record: StrategyRecord) -> None:
    frameworks = record.frameworks
    if not frameworks or not ctx.framework or ctx.framework in frameworks:
        return
    if record.framework_message is not None:
        ctx.error("distribution.strategy", record.framework_message.format(framework=ctx.framework))
        return
    ctx.error(
        "distribution.strategy",
        f"{record.strategy.value} is only supported with the {'/'.join(sorted(frameworks))} framework, "
        f"not {ctx.framework}",
    )


def _check_trainium(ctx: StrategyContext, record: StrategyRecord) -> None:
    """SDK ``validate_distribution_for_instance_type``: Trainium only runs torch_distributed.

    The SDK counts the keys of its distribution dict: a named training group adds
    ``instance_groups``, so a Trainium group never runs a strategy there, torch_distributed included.
    """
    if not record.script_mode or not any(is_trainium(t) for t in ctx.validation_instance_types):
        return
    if ctx.spec.distribution.instance_group is not None and record.strategy != Strategy.NONE:
        ctx.error(
            "distribution.instance_group",
            "Multiple distribution strategies are not supported for Trainium instances. Please specify one "
            f"of the following supported distribution strategies: {sdk_version_lists()['trainium_strategies']} "
            "(the SDK counts the named instance group as a second strategy: leave distribution.instance_group "
            "out on a single-group cluster, or use our 'launcher')",
        )
        return
    if record.trainium_name is None:
        return
    ctx.error(
        "distribution.strategy",
        f"Provided distribution strategy {record.trainium_name} is not supported for Trainium instances. "
        "Please specify one of the following supported distribution strategies: ['torch_distributed'] "
        "(or our 'launcher')",
    )


def _check_instance_group(ctx: StrategyContext, record: StrategyRecord) -> None:
    """SDK ``validate_distribution`` and ``_distribution_configuration`` rules for heterogeneous clusters."""
    dist = ctx.spec.distribution
    groups = ctx.spec.compute.instance_groups
    strategy = dist.strategy
    if dist.instance_group is None:
        if groups and len(groups) > 1 and record.instance_groups != "unused":
            ctx.error(
                "distribution.instance_group",
                "Distribution should only contain one instance group name ! "
                f"Name the instance group that runs {strategy.value}: one of "
                + ", ".join(g.name for g in groups),
            )
        elif ctx.training_group and record.instance_groups == "rejected":
            ctx.error(
                "compute.instance_groups",
                "Don't set training instance groups while no distribution strategies enabled! "
                f"({strategy.value} does not run on an instance group; use instance_type and instance_count)",
            )
        return
    if record.instance_groups != "one_group":
        message = f"is not used by strategy {strategy.value!r}"
        if record.instance_groups == "rejected":
            message = (
                f"Don't set training instance groups while no distribution strategies enabled! ({message})"
            )
        ctx.error(
            "distribution.instance_group",
            f"{message}; it applies to: "
            + ", ".join(sorted(r.strategy.value for r in records() if r.instance_groups == "one_group")),
        )
        return
    _check_named_group(ctx)


def _check_named_group(ctx: StrategyContext) -> None:
    dist = ctx.spec.distribution
    groups = ctx.spec.compute.instance_groups
    if not groups:
        ctx.error(
            "distribution.instance_group",
            "Instance groups not specified in the estimator ! (compute.instance_groups is empty)",
        )
        return
    if dist.instance_group not in {g.name for g in groups}:
        ctx.error(
            "distribution.instance_group",
            f"Invalid training instance group {dist.instance_group} ! Known groups: "
            + ", ".join(g.name for g in groups),
        )


def _check_p5(ctx: StrategyContext, smdistributed: str) -> None:
    """SDK ``Framework._distribution_configuration``: SMDDP/SMP need torch_distributed on p5."""
    if ctx.spec.distribution.torch_distributed:
        return
    if any("p5.48xlarge" in t for t in ctx.instance_types):
        ctx.error(
            "distribution.torch_distributed" if smdistributed == "dataparallel" else "compute.instance_type",
            "SMModelParallel and SMDataParallel currently do not support p5 instances."
            + (
                " Set distribution.torch_distributed: true to launch SMDDP through torchrun."
                if smdistributed == "dataparallel"
                else ""
            ),
        )
    for bad in UNSUPPORTED_DLC_IMAGE_FOR_SM_PARALLELISM:
        if bad in ctx.image_uri:
            ctx.error(
                "image.uri",
                f"SMDistributed is currently incompatible with DLC image: {ctx.image_uri}. "
                "(Could be due to CUDA version being greater than 11.)",
            )


def _check_py3(ctx: StrategyContext, strategy: str) -> None:
    py = ctx.spec.image.py_version
    if py is not None and "py3" not in py:
        ctx.error(
            "image.py_version",
            f"Provided py_version {py} is not supported by {strategy}. Please specify py_version>=py3",
        )


def _check_smddp(ctx: StrategyContext) -> None:
    """SDK ``_validate_smdataparallel_args`` (pytorchddp is validated as SMDDP since 2.221.1)."""
    if ctx.distribution_instance_type is None and ctx.training_group is None:
        ctx.error(
            "compute.instance_type",
            "Please specify an instance_type for smdataparallel (or distribution.instance_group on a heterogeneous cluster).",
        )
    smddp_versions: dict[str, list[str]] = sdk_version_lists()["smddp"]
    if not ctx.explicit_image and ctx.framework in smddp_versions:
        version = ctx.framework_version
        supported = smddp_versions[ctx.framework]
        if version not in supported:
            ctx.error(
                "image.framework_version",
                f"Provided framework_version {version} is not supported by smdataparallel. "
                f"Please specify one of the supported framework versions: {supported} "
                "(PyTorch 2.3 and later need an explicit image.uri for SMDDP)",
            )
        _check_py3(ctx, "smdataparallel")
    _check_p5(ctx, "dataparallel")


def _check_torch_distributed(ctx: StrategyContext) -> None:
    """SDK ``validate_torch_distributed_distribution`` (version rules skipped with an explicit image)."""
    entry = ctx.spec.source.entry_point
    if not entry.endswith(".py"):
        ctx.error(
            "source.entry_point",
            "Unsupported entry point type for the distribution torch_distributed. "
            "Only python programs (*.py) are supported.",
        )
    if ctx.explicit_image:
        return
    _check_py3(ctx, "torch_distributed")
    version = ctx.framework_version
    lists = sdk_version_lists()
    for instance_type in ctx.validation_instance_types:
        if is_trainium(instance_type):
            supported = lists["torch_distributed_trainium"]
        elif is_gpu_family(instance_type):
            supported = lists["torch_distributed_gpu"]
        else:
            ctx.error(
                "compute.instance_type",
                f"Currently torch_distributed is supported only for GPU and Trainium instances. ({instance_type} is neither)",
            )
            continue
        if version not in supported:
            ctx.error(
                "image.framework_version",
                f"Provided framework_version {version} is not supported by torch_distributed for instance "
                f"{instance_type}. Please specify one of the supported framework versions:{supported}",
            )


def smp_parameter_problems(parameters: dict[str, Any]) -> list[tuple[str, str]]:
    """SDK ``fw_utils.validate_mp_config``: (parameter key, message) for each invalid SMP v1 parameter."""
    return _smp_value_problems(parameters) + _smp_relation_problems(parameters)


def _smp_value_problems(parameters: dict[str, Any]) -> list[tuple[str, str]]:
    """Each SMP v1 parameter on its own: enums, positive integers, booleans."""
    problems: list[tuple[str, str]] = []
    for key, allowed in _SMP_ENUMS.items():
        if key in parameters and parameters[key] not in allowed:
            problems.append((key, f"must be one of {list(allowed)}, got {parameters[key]!r}"))
    for key in _SMP_POSITIVE_INTS:
        value = parameters.get(key)
        if key in parameters and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
            problems.append(
                (key, f"must be a positive integer (The number of {key} must be a positive integer.)")
            )
    for key in _SMP_BOOLS:
        if key in parameters and not isinstance(parameters[key], bool):
            problems.append((key, f"must be a boolean, got {parameters[key]!r}"))
    return problems


def _smp_relation_problems(parameters: dict[str, Any]) -> list[tuple[str, str]]:
    """SMP v1 parameters against each other (partitions, memory weight, ddp/horovod)."""
    problems: list[tuple[str, str]] = []
    if parameters.get("auto_partition") is False and "default_partition" not in parameters:
        problems.append(
            ("default_partition", "default_partition must be supplied if auto_partition is set to False!")
        )
    partitions = parameters.get("partitions")
    default_partition = parameters.get("default_partition")
    if (
        isinstance(default_partition, int)
        and isinstance(partitions, int)
        and not isinstance(partitions, bool)
        and default_partition >= partitions
    ):
        problems.append(
            ("default_partition", "default_partition must be less than the number of partitions!")
        )
    if "memory_weight" in parameters:
        weight = parameters["memory_weight"]
        if not isinstance(weight, int | float) or isinstance(weight, bool) or not 0.0 <= weight <= 1.0:
            problems.append(("memory_weight", "memory_weight must be between 0.0 and 1.0!"))
    for key in ("ddp_port", "ddp_dist_backend"):
        if key in parameters and "ddp" not in parameters:
            problems.append((key, "`ddp_port` and `ddp_dist_backend` need `ddp` to be set"))
    if parameters.get("ddp") and parameters.get("horovod"):
        problems.append(("ddp", "'ddp' and 'horovod' cannot be simultaneously enabled."))
    return problems


def _check_smp_v1(ctx: StrategyContext) -> None:
    smp = ctx.spec.distribution.smp
    if smp is None:
        ctx.error(
            "distribution.smp", "is required for smp_v1 (give smp.parameters, e.g. partitions, microbatches)"
        )
    else:
        if "partitions" not in smp.parameters:
            ctx.error("distribution.smp.parameters.partitions", "is required for SMP v1")
        for key, message in smp_parameter_problems(smp.parameters):
            ctx.error(f"distribution.smp.parameters.{key}", message)
    _check_p5(ctx, "modelparallel")


def _check_smp_v2(ctx: StrategyContext) -> None:
    smp = ctx.spec.distribution.smp
    if smp is None:
        ctx.error(
            "distribution.smp", "is required for smp_v2 (give smp.parameters, e.g. hybrid_shard_degree)"
        )
        return
    for key, message in smp_v2_degree_problems(smp.parameters, smp_v2_world_size(ctx.spec)):
        ctx.error(f"distribution.smp.parameters.{key}", message)
    if not ctx.explicit_image and not ctx.instance_types[0].startswith(("ml.p", "ml.g")):
        ctx.error("compute.instance_type", "SMP v2 needs GPU instances (ml.p* or ml.g*)")


_SMP_V2_DEGREES = (
    "hybrid_shard_degree",
    "tensor_parallel_degree",
    "context_parallel_degree",
    "expert_parallel_degree",
)


def smp_v2_world_size(spec: TrainingJobSpec) -> int:
    """SMP v2's ``world_size``: one torchrun process per GPU on every instance (SMP v2 takes no instance groups)."""
    return sum(g.instance_count * instance_info(g.instance_type).devices for g in spec.compute.groups)


def smp_v2_degree_problems(parameters: dict[str, Any], world_size: int) -> list[tuple[str, str]]:
    """(parameter key, message) for each SMP v2 degree that cannot fit ``world_size`` GPUs.

    The ranges are the SMP v2 reference's ("The value must be between 1 and world_size", and
    ``hybrid_shard_degree`` "between 0 and world_size"). The divisibility is its configuration
    pages' ("a value that evenly divides the number of GPUs in your cluster"). The products follow
    from the device mesh torch.sagemaker builds: tensor- and context-parallel groups split the world,
    and the hybrid shard group is taken from what is left (``hybrid_shard_degree: 0`` means "the
    largest possible", world_size / tensor_parallel_degree).
    """
    problems, degrees = _smp_v2_single_degrees(parameters, world_size)
    return problems or _smp_v2_products(degrees, world_size)


def _smp_v2_single_degrees(
    parameters: dict[str, Any], world_size: int
) -> tuple[list[tuple[str, str]], dict[str, int]]:
    """Each degree on its own: its range and whether it divides the world; the valid degrees."""
    problems: list[tuple[str, str]] = []
    degrees: dict[str, int] = {}
    for key in _SMP_V2_DEGREES:
        value = parameters.get(key)
        if key not in parameters:
            continue
        lowest = 0 if key == "hybrid_shard_degree" else 1
        if not isinstance(value, int) or isinstance(value, bool) or value < lowest:
            what = "a non-negative integer (0: the largest possible)" if lowest == 0 else "a positive integer"
            problems.append((key, f"must be {what}, got {value!r}"))
            continue
        if value > world_size:
            problems.append(
                (
                    key,
                    f"{value} is larger than the world size {world_size} (instances x GPUs per instance): "
                    f"The value must be between {lowest} and world_size.",
                )
            )
            continue
        degrees[key] = value
    for key in ("tensor_parallel_degree", "context_parallel_degree", "expert_parallel_degree"):
        value = degrees.get(key)
        if value is not None and world_size % value:
            problems.append(
                (
                    key,
                    f"{value} does not divide the world size {world_size} (instances x GPUs per instance): "
                    "set a value that evenly divides the number of GPUs in your cluster "
                    f"(one of {_divisors(world_size)})",
                )
            )
            degrees.pop(key)
    return problems, degrees


def _smp_v2_products(degrees: dict[str, int], world_size: int) -> list[tuple[str, str]]:
    """The degrees together: tensor x context groups tile the world, the shard group fits what is left."""
    problems: list[tuple[str, str]] = []
    tp = degrees.get("tensor_parallel_degree", 1)
    cp = degrees.get("context_parallel_degree", 1)
    hsd = degrees.get("hybrid_shard_degree", 0)
    if tp * cp > world_size or world_size % (tp * cp):
        return [
            (
                "context_parallel_degree",
                f"tensor_parallel_degree x context_parallel_degree = {tp} x {cp} = {tp * cp} does not divide "
                f"the world size {world_size}: the tensor- and context-parallel groups must tile the GPUs",
            )
        ]
    if hsd > 1 and (tp * hsd > world_size or (world_size // tp) % hsd):
        problems.append(
            (
                "hybrid_shard_degree",
                f"{hsd} shards x tensor_parallel_degree {tp} = {tp * hsd} does not fit the world size {world_size}: "
                f"with tensor parallelism the shards are taken from world_size / tensor_parallel_degree = "
                f"{world_size // tp} GPUs, so hybrid_shard_degree must divide {world_size // tp} "
                f"(one of {_divisors(world_size // tp)}; 0 picks the largest)",
            )
        )
    shard_group = hsd or world_size // tp
    if cp > shard_group:
        problems.append(
            (
                "context_parallel_degree",
                f"{cp} is larger than the hybrid shard degree {shard_group}: "
                "The value must be between 1 and world_size , and must be <= hybrid_shard_degree.",
            )
        )
    return problems


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _check_parameter_server(ctx: StrategyContext) -> None:
    """SDK ``warn_if_parameter_server_with_multi_gpu``."""
    for instance_type in ctx.instance_types:
        if instance_family(instance_type).startswith("p") and instance_type not in (
            "ml.p2.xlarge",
            "ml.p3.2xlarge",
        ):
            ctx.warn(
                "distribution.strategy",
                f"parameter_server on a multi-GPU instance ({instance_type}) does not use all GPUs by itself; "
                "your script must place work on every GPU (SDK PARAMETER_SERVER_MULTI_GPU_WARNING)",
            )


def _check_mwms(ctx: StrategyContext) -> None:
    """SDK ``Framework._validate_mwms_config``."""
    version = ctx.framework_version
    if version is not None and ctx.framework == "tensorflow" and _version_tuple(version) < (2, 9):
        ctx.error(
            "image.framework_version",
            f"Multi Worker Mirrored Strategy is only supported from framework_version 2.9 but received {version}",
        )


def _check_launcher(ctx: StrategyContext) -> None:
    if ctx.spec.distribution.launcher == "torchrun" and not ctx.spec.source.entry_point.endswith(".py"):
        ctx.error("source.entry_point", "the torchrun launcher runs python programs (*.py) only")
    # Our launcher reads its config and code from channels, so network isolation is fine.


def _version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int("".join(ch for ch in part if ch.isdigit()) or 0) for part in version.split("."))


# ------------------------------------------------------------------------------------------- encoding


def _smddp_keys(ctx: StrategyContext) -> dict[str, str]:
    dist = ctx.spec.distribution
    keys = {
        "sagemaker_distributed_dataparallel_enabled": _dumps(True),
        "sagemaker_instance_type": _dumps(ctx.distribution_instance_type),
        "sagemaker_distributed_dataparallel_custom_mpi_options": _dumps(dist.custom_mpi_options or ""),
    }
    if dist.torch_distributed:
        keys["sagemaker_torch_distributed_enabled"] = _dumps(True)
    return keys | _instance_group_keys(ctx)


def _enabled(key: str, *, instance_type: bool = False) -> Encoder:
    """The encoder of one ``sagemaker_*_enabled`` key, with ``sagemaker_instance_type`` when asked
    and the cluster is homogeneous."""

    def encode(ctx: StrategyContext) -> dict[str, str]:
        keys = {key: _dumps(True)}
        if instance_type and ctx.distribution_instance_type is not None:
            keys["sagemaker_instance_type"] = _dumps(ctx.distribution_instance_type)
        return keys

    return encode


def _smp_keys(ctx: StrategyContext) -> dict[str, str]:
    smp = ctx.spec.distribution.smp
    return {
        "mp_parameters": _dumps(smp.parameters if smp else {}),
        "sagemaker_distributed_dataparallel_enabled": _dumps(False),
        "sagemaker_instance_type": _dumps(ctx.distribution_instance_type),
    }


def _smp_v2_keys(ctx: StrategyContext) -> dict[str, str]:
    return {**_smp_keys(ctx), "sagemaker_torch_distributed_enabled": _dumps(True)}


def _mpi_keys(ctx: StrategyContext, *, smp: bool = False) -> dict[str, str]:
    """The MPI runner's keys; SMP v1 (``smp``) runs on it, its keys before the instance group's."""
    dist = ctx.spec.distribution
    keys = {"sagemaker_mpi_enabled": _dumps(True)}
    if dist.processes_per_host:
        keys["sagemaker_mpi_num_of_processes_per_host"] = _dumps(dist.processes_per_host)
    keys["sagemaker_mpi_custom_mpi_options"] = _dumps(dist.custom_mpi_options or "")
    return {**keys, **(_smp_keys(ctx) if smp else {}), **_instance_group_keys(ctx)}


def _instance_group_keys(ctx: StrategyContext) -> dict[str, str]:
    group = ctx.training_group
    return {"sagemaker_distribution_instance_groups": _dumps([group])} if group else {}


def _no_keys(ctx: StrategyContext) -> dict[str, str]:
    return {}


# -------------------------------------------------------------------------------------------- records

Rule = Callable[[StrategyContext], None]
Encoder = Callable[[StrategyContext], dict[str, str]]
#: How a strategy uses an instance group of a heterogeneous cluster (SDK ``validate_distribution``):
#: "one_group" runs on the named group; "rejected" refuses groups ("no distribution strategies
#: enabled"); "unused" ignores them (no strategy, our launcher).
GroupSupport = Literal["one_group", "rejected", "unused"]
#: Processes per host on SageMaker: one per device whatever processes_per_host says (toolkit torchrun /
#: smdataparallel runners), processes_per_host as given (MPI runner, our launcher), or one per host.
Processes = Literal["per_device", "per_host", "one_per_host"]
#: DistributionSpec fields that only some strategies read (the others reject them).
STRATEGY_FIELDS = ("custom_mpi_options", "torch_distributed", "smp", "launcher")
_MODEL_PARALLEL_KEYS = (
    "partitions",
    "pipeline_parallel_degree",
    "tensor_parallel_degree",
    "context_parallel_degree",
)


@dataclass(frozen=True)
class LocalRun:
    """How the local backend runs a strategy: with torchrun or as one process per host, or not at all."""

    launch: Literal["torchrun", "process"]
    refusal: str | None = None  # why the local backend cannot run it (shown at distribution.strategy)
    check: Callable[[TrainingJobSpec], list[Problem]] | None = None  # extra local-only rules


@dataclass(frozen=True)
class StrategyRecord:
    """Everything the project knows about one distribution strategy: the one place to add a strategy."""

    strategy: Strategy
    encode: Encoder  # the ``sagemaker_*`` HyperParameters (script mode)
    local: LocalRun
    rules: tuple[Rule, ...] = ()  # SageMaker validation beyond the shared field/framework/group rules
    frameworks: frozenset[str] = frozenset()  # empty: any framework
    framework_message: str | None = None  # the SDK's own message when the framework is wrong
    fields: frozenset[str] = frozenset()  # which of STRATEGY_FIELDS it reads
    trainium_name: str | None = None  # the SDK's name in its Trainium refusal; None: runs on Trainium
    instance_groups: GroupSupport = "unused"
    processes: Processes = "per_device"
    script_mode: bool = True  # False: the container entrypoint is overridden (our launcher)
    uses_mpi: bool = False  # the toolkit's MPI runner (TensorFlow model_dir stays local)
    model_parallel: bool = False  # SMP parameters split the model (model-parallel degree)
    smp_v2_image: bool = False  # needs the SMP v2 image (image resolution)
    smddp_instances: bool = False  # only on SMDDP's instance types (hardware rules)
    distributed: bool = True  # False: a single-process job (EFA warnings, scaling advice, Debugger)
    processes_from_hosts: bool = False  # cluster facts count one process per host
    tensorflow_debug_hook: bool = True  # False: the SDK drops DebugHookConfig for TensorFlow
    # field -> value where the SDK's HuggingFace estimator treats the strategy differently
    huggingface: tuple[tuple[str, Any], ...] = ()

    @property
    def name(self) -> str:
        return self.strategy.value


def _refuse(message: str) -> LocalRun:
    return LocalRun(launch="process", refusal=message)


def _launcher_local_check(spec: TrainingJobSpec) -> list[Problem]:
    if spec.distribution.launcher != "mpirun":
        return []
    return [
        Problem(
            "distribution.launcher",
            "mpirun cannot run on the local backend (it needs MPI and SSH between hosts); use launcher: torchrun",
        )
    ]


def _smddp_refusal(name: str) -> str:
    return (
        f"{name} cannot run on the local backend: SMDDP needs NVIDIA GPUs, EFA and the "
        "smdistributed library; the nearest local equivalent is strategy torch_distributed with "
        'dist.init_process_group(backend="gloo") on CPU'
    )


_SMDDP = {
    "encode": _smddp_keys,
    "rules": (_check_smddp,),
    "fields": frozenset({"custom_mpi_options", "torch_distributed"}),
    "instance_groups": "one_group",
    "smddp_instances": True,
}

_BUILTIN = (
    StrategyRecord(
        Strategy.NONE,
        encode=_no_keys,
        local=LocalRun("process"),
        processes="one_per_host",
        distributed=False,
        processes_from_hosts=True,
    ),
    StrategyRecord(
        Strategy.SMDDP,
        local=LocalRun("torchrun", refusal=_smddp_refusal("smddp")),
        trainium_name="smdistributed",
        **_SMDDP,  # type: ignore[arg-type]
    ),
    StrategyRecord(
        Strategy.PYTORCHDDP,  # validated and encoded as SMDDP, as SDK >= 2.221.1 does
        local=LocalRun("torchrun", refusal=_smddp_refusal("pytorchddp")),
        frameworks=frozenset({"pytorch"}),
        trainium_name="pytorchddp",
        # the HuggingFace estimator keeps plain PyTorch DDP (HuggingFace._huggingface_distribution_configuration):
        # its own key, no SMDDP version/instance rules
        huggingface=(
            ("encode", _enabled("sagemaker_pytorch_ddp_enabled", instance_type=True)),
            ("rules", ()),
            ("smddp_instances", False),
        ),
        **_SMDDP,  # type: ignore[arg-type]
    ),
    StrategyRecord(
        Strategy.TORCH_DISTRIBUTED,
        encode=_enabled("sagemaker_torch_distributed_enabled", instance_type=True),
        local=LocalRun("torchrun"),
        rules=(_check_torch_distributed,),
        frameworks=frozenset({"pytorch"}),
        instance_groups="one_group",  # accepted, but the SDK encodes no group for it (a known SDK gap)
    ),
    StrategyRecord(
        Strategy.SMP_V1,
        encode=partial(_mpi_keys, smp=True),
        local=_refuse(
            "smp_v1 cannot run on the local backend: SageMaker model parallel needs the smdistributed "
            "library, MPI and GPUs; use strategy torch_distributed for local runs"
        ),
        rules=(_check_smp_v1,),
        fields=frozenset({"custom_mpi_options", "smp"}),
        trainium_name="smdistributed",
        instance_groups="one_group",
        processes="per_host",
        uses_mpi=True,
        model_parallel=True,
    ),
    StrategyRecord(
        Strategy.SMP_V2,
        encode=_smp_v2_keys,
        local=_refuse(
            "smp_v2 cannot run on the local backend: SageMaker model parallel v2 needs the SMP image "
            "(torch.sagemaker) and GPUs; use strategy torch_distributed for local runs"
        ),
        rules=(_check_smp_v2,),
        frameworks=frozenset({"pytorch"}),
        fields=frozenset({"smp"}),
        trainium_name="smdistributed",
        instance_groups="rejected",
        model_parallel=True,
        smp_v2_image=True,
    ),
    StrategyRecord(
        Strategy.MPI,
        encode=_mpi_keys,
        local=_refuse(
            "mpi cannot run on the local backend: it needs mpirun and SSH between hosts; "
            "use strategy torch_distributed (torchrun) for local runs"
        ),
        fields=frozenset({"custom_mpi_options"}),
        trainium_name="mpi",
        instance_groups="one_group",
        processes="per_host",
        uses_mpi=True,
    ),
    StrategyRecord(
        Strategy.PARAMETER_SERVER,
        encode=_enabled("sagemaker_parameter_server_enabled"),
        local=_refuse(
            "parameter_server is a TensorFlow strategy; the local backend runs PyTorch (torchrun) only"
        ),
        rules=(_check_parameter_server,),
        frameworks=frozenset({"tensorflow"}),
        trainium_name="parameter_server",
        instance_groups="rejected",
        processes="one_per_host",
        processes_from_hosts=True,  # one worker per host
        tensorflow_debug_hook=False,
    ),
    StrategyRecord(
        Strategy.MULTI_WORKER_MIRRORED,
        encode=_enabled("sagemaker_multi_worker_mirrored_strategy_enabled"),
        local=_refuse(
            "multi_worker_mirrored is a TensorFlow strategy; the local backend runs PyTorch (torchrun) only"
        ),
        rules=(_check_mwms,),
        frameworks=frozenset({"tensorflow"}),
        framework_message=(  # the SDK's Framework._validate_mwms_config message
            "Multi Worker Mirrored Strategy is currently only supported with dict_keys(['tensorflow']) "
            "frameworks but received {framework}"
        ),
        trainium_name="multi_worker_mirrored_strategy",
        instance_groups="rejected",
        processes="one_per_host",
    ),
    StrategyRecord(
        Strategy.LAUNCHER,  # our launcher: reads its own config channel, no sagemaker_* keys
        encode=_no_keys,
        local=LocalRun("torchrun", check=_launcher_local_check),
        rules=(_check_launcher,),
        fields=frozenset({"launcher"}),
        processes="per_host",
        script_mode=False,
    ),
)
REGISTRY = Records(StrategyRecord, "distribution strategy", "strategies", builtin=_BUILTIN)
register = REGISTRY.register  # a strategy defined outside this module (tests, extensions)
records = REGISTRY.records
define_strategy = extend_strategy  # a Strategy value the spec accepts (then ``register`` its record)


def record_for(strategy: Strategy | str) -> StrategyRecord:
    return REGISTRY.get(strategy, field="distribution.strategy")


def unregister(strategy: Strategy) -> None:
    REGISTRY.forget(strategy.value)
    forget_strategy(strategy.value)


def distribution_hyperparameters(ctx: StrategyContext) -> dict[str, str]:
    return record_in(ctx).encode(ctx)


def model_parallel_degree(spec: TrainingJobSpec) -> int:
    """How many devices hold one model replica (1 for pure data parallelism).

    Tensor, context and pipeline parallel ranks share one batch; sharded data parallelism
    (``hybrid_shard_degree``) splits the model's state but each rank still reads its own batch, so
    it divides the memory, not the replicas.
    """
    smp = spec.distribution.smp
    if smp is None or not record_for(spec.distribution.strategy).model_parallel:
        return 1
    values = [smp.parameters.get(key) for key in _MODEL_PARALLEL_KEYS]
    return math.prod(v for v in values if isinstance(v, int) and not isinstance(v, bool) and v > 0)
