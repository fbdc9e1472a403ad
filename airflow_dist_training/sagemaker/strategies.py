"""Distribution strategies: validation rules and HyperParameters encoding, one entry per strategy.

The encoding is the SageMaker Python SDK v2's (``sagemaker_*`` hyperparameters, each value
``json.dumps``-ed, read by the sagemaker-training-toolkit inside the DLC), and the messages are the
SDK's own where it has one (``fw_utils.validate_*``). Rules the SDK leaves to the service are
checked here too, with our own messages. The launcher strategy instead overrides the container
entrypoint (see ``airflow_dist_training.sagemaker.launcher``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from airflow_dist_training.errors import Problem
from airflow_dist_training.sagemaker.catalog import instance_family, is_gpu_family, is_trainium
from airflow_dist_training.spec.training import Strategy, TrainingJobSpec

# fw_utils.SM_DATAPARALLEL_SUPPORTED_FRAMEWORK_VERSIONS (SDK 2.257.x)
SMDDP_FRAMEWORK_VERSIONS = {
    "pytorch": [
        "1.6", "1.6.0", "1.7", "1.7.1", "1.8", "1.8.0", "1.8.1", "1.9", "1.9.0", "1.9.1", "1.10", "1.10.0",
        "1.10.2", "1.11", "1.11.0", "1.12", "1.12.0", "1.12.1", "1.13.1", "2.0.0", "2.0.1", "2.1.0", "2.1.2",
        "2.2.0",
    ],
    "tensorflow": [
        "2.3", "2.3.1", "2.3.2", "2.4", "2.4.1", "2.4.3", "2.5", "2.5.0", "2.5.1", "2.6", "2.6.0", "2.6.2",
        "2.6.3", "2.7", "2.7.1", "2.8", "2.8.0", "2.9", "2.9.1", "2.10", "2.10.1", "2.11", "2.11.0",
    ],
}  # fmt: skip
# fw_utils.TORCH_DISTRIBUTED_GPU_SUPPORTED_FRAMEWORK_VERSIONS
TORCH_DISTRIBUTED_GPU_VERSIONS = [
    "1.13.1", "2.0.0", "2.0.1", "2.1.0", "2.1.2", "2.2.0", "2.3.0", "2.3.1", "2.4.1", "2.5.1", "2.6.0",
    "2.7.1", "2.8.0",
]  # fmt: skip
# fw_utils.TRAINIUM_SUPPORTED_TORCH_DISTRIBUTED_FRAMEWORK_VERSIONS
TORCH_DISTRIBUTED_TRAINIUM_VERSIONS = ["1.11", "1.11.0", "1.12", "1.12.0", "1.12.1", "1.13.1", "2.0.0"]
UNSUPPORTED_DLC_IMAGE_FOR_SM_PARALLELISM = ("2.0.1-gpu-py310-cu121",)

_SMP_ENUMS = {
    "pipeline": ("simple", "interleaved", "_only_forward"),
    "placement_strategy": ("spread", "cluster"),
    "optimize": ("speed", "memory"),
}
_SMP_POSITIVE_INTS = ("microbatches", "partitions", "active_microbatches")
_SMP_BOOLS = ("auto_partition", "contiguous", "load_partition", "horovod", "ddp", "deterministic_server")

# Fields of DistributionSpec that only some strategies read (for "invalid combination" errors).
_FIELD_STRATEGIES: dict[str, set[Strategy]] = {
    "custom_mpi_options": {Strategy.SMDDP, Strategy.PYTORCHDDP, Strategy.MPI, Strategy.SMP_V1},
    "torch_distributed": {Strategy.SMDDP, Strategy.PYTORCHDDP},
    "smp": {Strategy.SMP_V1, Strategy.SMP_V2},
    "launcher": {Strategy.LAUNCHER},
}
# Strategies that run on one instance group of a heterogeneous cluster (SDK ``validate_distribution``).
# torch_distributed accepts the group but the SDK encodes nothing for it (a known SDK gap).
_GROUP_STRATEGIES = {
    Strategy.SMDDP,
    Strategy.PYTORCHDDP,
    Strategy.MPI,
    Strategy.SMP_V1,
    Strategy.TORCH_DISTRIBUTED,
}
# The SDK rejects an instance group for these ("no distribution strategies enabled").
_NO_GROUP_STRATEGIES = {Strategy.SMP_V2, Strategy.PARAMETER_SERVER, Strategy.MULTI_WORKER_MIRRORED}
_FRAMEWORKS: dict[Strategy, set[str]] = {
    Strategy.PYTORCHDDP: {"pytorch"},
    Strategy.TORCH_DISTRIBUTED: {"pytorch"},
    Strategy.SMP_V2: {"pytorch"},
    Strategy.PARAMETER_SERVER: {"tensorflow"},
    Strategy.MULTI_WORKER_MIRRORED: {"tensorflow"},
}


@dataclass
class StrategyContext:
    """What a strategy rule needs to know beyond the spec."""

    spec: TrainingJobSpec
    image_uri: str
    problems: list[Problem] = field(default_factory=list)

    @property
    def framework(self) -> str | None:
        return self.spec.image.framework

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
        if len(groups) == 1 and dist.strategy not in (Strategy.NONE, Strategy.LAUNCHER):
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
        compute = self.spec.compute
        if compute.instance_groups:
            return None
        return compute.instance_type

    def error(self, path: str, message: str) -> None:
        self.problems.append(Problem(path, message))

    def warn(self, path: str, message: str) -> None:
        self.problems.append(Problem(path, message, severity="warning"))


def _dumps(value: Any) -> str:
    return json.dumps(value)


# ---------------------------------------------------------------------------------------------- rules


def check_distribution(ctx: StrategyContext) -> None:
    """All strategy rules; problems are appended to ``ctx.problems``."""
    dist = ctx.spec.distribution
    strategy = dist.strategy
    for name, allowed in _FIELD_STRATEGIES.items():
        if (
            name in dist.model_fields_set
            and getattr(dist, name) not in (None, False)
            and strategy not in allowed
        ):
            ctx.error(
                f"distribution.{name}",
                f"is not used by strategy {strategy.value!r}; it applies to: "
                + ", ".join(sorted(s.value for s in allowed)),
            )
    frameworks = _FRAMEWORKS.get(strategy)
    if (
        strategy == Strategy.MULTI_WORKER_MIRRORED
        and frameworks
        and ctx.framework
        and ctx.framework not in frameworks
    ):
        ctx.error(  # the SDK's Framework._validate_mwms_config message
            "distribution.strategy",
            "Multi Worker Mirrored Strategy is currently only supported with dict_keys(['tensorflow']) "
            f"frameworks but received {ctx.framework}",
        )
    elif frameworks and ctx.framework and ctx.framework not in frameworks:
        ctx.error(
            "distribution.strategy",
            f"{strategy.value} is only supported with the {'/'.join(sorted(frameworks))} framework, "
            f"not {ctx.framework}",
        )
    _check_trainium(ctx)
    _check_instance_group(ctx)
    RULES.get(strategy, lambda _ctx: None)(ctx)
    from airflow_dist_training.sagemaker.hardware import check_hardware

    check_hardware(ctx)


def _check_trainium(ctx: StrategyContext) -> None:
    """SDK ``validate_distribution_for_instance_type``: Trainium only runs torch_distributed."""
    strategy = ctx.spec.distribution.strategy
    if not any(is_trainium(t) for t in ctx.validation_instance_types):
        return
    if strategy in (Strategy.NONE, Strategy.TORCH_DISTRIBUTED, Strategy.LAUNCHER):
        return
    sdk_key = {
        Strategy.SMDDP: "smdistributed",
        Strategy.PYTORCHDDP: "pytorchddp",
        Strategy.SMP_V1: "smdistributed",
        Strategy.SMP_V2: "smdistributed",
        Strategy.MPI: "mpi",
        Strategy.PARAMETER_SERVER: "parameter_server",
        Strategy.MULTI_WORKER_MIRRORED: "multi_worker_mirrored_strategy",
    }[strategy]
    ctx.error(
        "distribution.strategy",
        f"Provided distribution strategy {sdk_key} is not supported for Trainium instances. "
        "Please specify one of the following supported distribution strategies: ['torch_distributed'] "
        "(or our 'launcher')",
    )


def _check_instance_group(ctx: StrategyContext) -> None:
    """SDK ``validate_distribution`` and ``_distribution_configuration`` rules for heterogeneous clusters."""
    dist = ctx.spec.distribution
    groups = ctx.spec.compute.instance_groups
    strategy = dist.strategy
    if dist.instance_group is None:
        if groups and len(groups) > 1 and strategy in _GROUP_STRATEGIES | _NO_GROUP_STRATEGIES:
            ctx.error(
                "distribution.instance_group",
                "Distribution should only contain one instance group name ! "
                f"Name the instance group that runs {strategy.value}: one of "
                + ", ".join(g.name for g in groups),
            )
        elif ctx.training_group and strategy in _NO_GROUP_STRATEGIES:
            ctx.error(
                "compute.instance_groups",
                "Don't set training instance groups while no distribution strategies enabled! "
                f"({strategy.value} does not run on an instance group; use instance_type and instance_count)",
            )
        return
    if strategy not in _GROUP_STRATEGIES:
        message = f"is not used by strategy {strategy.value!r}"
        if strategy in _NO_GROUP_STRATEGIES:
            message = (
                f"Don't set training instance groups while no distribution strategies enabled! ({message})"
            )
        ctx.error(
            "distribution.instance_group",
            f"{message}; it applies to: " + ", ".join(sorted(s.value for s in _GROUP_STRATEGIES)),
        )
        return
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


def _check_smddp(ctx: StrategyContext) -> None:
    """SDK ``_validate_smdataparallel_args`` (pytorchddp is validated as SMDDP since 2.221.1)."""
    if ctx.distribution_instance_type is None and ctx.training_group is None:
        ctx.error(
            "compute.instance_type",
            "Please specify an instance_type for smdataparallel (or distribution.instance_group on a heterogeneous cluster).",
        )
    if not ctx.explicit_image and ctx.framework in SMDDP_FRAMEWORK_VERSIONS:
        version = ctx.spec.image.framework_version
        supported = SMDDP_FRAMEWORK_VERSIONS[ctx.framework]
        if version not in supported:
            ctx.error(
                "image.framework_version",
                f"Provided framework_version {version} is not supported by smdataparallel. "
                f"Please specify one of the supported framework versions: {supported} "
                "(PyTorch 2.3 and later need an explicit image.uri for SMDDP)",
            )
        py = ctx.spec.image.py_version
        if py is not None and "py3" not in py:
            ctx.error(
                "image.py_version",
                f"Provided py_version {py} is not supported by smdataparallel. Please specify py_version>=py3",
            )
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
    py = ctx.spec.image.py_version
    if py is not None and "py3" not in py:
        ctx.error(
            "image.py_version",
            f"Provided py_version {py} is not supported by torch_distributed. Please specify py_version>=py3",
        )
    version = ctx.spec.image.framework_version
    for instance_type in ctx.validation_instance_types:
        if is_trainium(instance_type):
            supported = TORCH_DISTRIBUTED_TRAINIUM_VERSIONS
        elif is_gpu_family(instance_type):
            supported = TORCH_DISTRIBUTED_GPU_VERSIONS
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
    for key in (
        "hybrid_shard_degree",
        "tensor_parallel_degree",
        "context_parallel_degree",
        "expert_parallel_degree",
    ):
        value = smp.parameters.get(key)
        if key in smp.parameters and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
            ctx.error(f"distribution.smp.parameters.{key}", "must be a positive integer")
    if not ctx.explicit_image and not ctx.instance_types[0].startswith(("ml.p", "ml.g")):
        ctx.error("compute.instance_type", "SMP v2 needs GPU instances (ml.p* or ml.g*)")


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
    version = ctx.spec.image.framework_version
    if version is not None and ctx.framework == "tensorflow" and _version_tuple(version) < (2, 9):
        ctx.error(
            "image.framework_version",
            f"Multi Worker Mirrored Strategy is only supported from framework_version 2.9 but received {version}",
        )


def _check_launcher(ctx: StrategyContext) -> None:
    if ctx.spec.distribution.launcher == "torchrun" and not ctx.spec.source.entry_point.endswith(".py"):
        ctx.error("source.entry_point", "the torchrun launcher runs python programs (*.py) only")
    if ctx.spec.network.network_isolation is False:
        return
    # Our launcher reads its config and code from channels, so network isolation is fine.


def _version_tuple(version: str) -> tuple[int, ...]:
    parts = []
    for part in version.split("."):
        digits = "".join(ch for ch in part if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


RULES: dict[Strategy, Callable[[StrategyContext], None]] = {
    Strategy.SMDDP: _check_smddp,
    Strategy.PYTORCHDDP: _check_smddp,
    Strategy.TORCH_DISTRIBUTED: _check_torch_distributed,
    Strategy.SMP_V1: _check_smp_v1,
    Strategy.SMP_V2: _check_smp_v2,
    Strategy.PARAMETER_SERVER: _check_parameter_server,
    Strategy.MULTI_WORKER_MIRRORED: _check_mwms,
    Strategy.LAUNCHER: _check_launcher,
}


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
    keys.update(_instance_group_keys(ctx))
    return keys


def _torch_distributed_keys(ctx: StrategyContext) -> dict[str, str]:
    keys = {"sagemaker_torch_distributed_enabled": _dumps(True)}
    if ctx.distribution_instance_type is not None:
        keys["sagemaker_instance_type"] = _dumps(ctx.distribution_instance_type)
    return keys


def _mp_parameters(ctx: StrategyContext) -> str:
    smp = ctx.spec.distribution.smp
    return _dumps(smp.parameters if smp else {})


def _smp_v1_keys(ctx: StrategyContext) -> dict[str, str]:
    keys = {"sagemaker_mpi_enabled": _dumps(True)}
    keys.update(_mpi_process_keys(ctx))
    keys.update(
        {
            "mp_parameters": _mp_parameters(ctx),
            "sagemaker_distributed_dataparallel_enabled": _dumps(False),
            "sagemaker_instance_type": _dumps(ctx.distribution_instance_type),
        }
    )
    keys.update(_instance_group_keys(ctx))
    return keys


def _smp_v2_keys(ctx: StrategyContext) -> dict[str, str]:
    return {
        "mp_parameters": _mp_parameters(ctx),
        "sagemaker_distributed_dataparallel_enabled": _dumps(False),
        "sagemaker_instance_type": _dumps(ctx.distribution_instance_type),
        "sagemaker_torch_distributed_enabled": _dumps(True),
    }


def _mpi_process_keys(ctx: StrategyContext) -> dict[str, str]:
    dist = ctx.spec.distribution
    keys = {}
    if dist.processes_per_host:
        keys["sagemaker_mpi_num_of_processes_per_host"] = _dumps(dist.processes_per_host)
    keys["sagemaker_mpi_custom_mpi_options"] = _dumps(dist.custom_mpi_options or "")
    return keys


def _mpi_keys(ctx: StrategyContext) -> dict[str, str]:
    keys = {"sagemaker_mpi_enabled": _dumps(True)}
    keys.update(_mpi_process_keys(ctx))
    keys.update(_instance_group_keys(ctx))
    return keys


def _instance_group_keys(ctx: StrategyContext) -> dict[str, str]:
    group = ctx.training_group
    return {"sagemaker_distribution_instance_groups": _dumps([group])} if group else {}


ENCODERS: dict[Strategy, Callable[[StrategyContext], dict[str, str]]] = {
    Strategy.NONE: lambda ctx: {},
    Strategy.SMDDP: _smddp_keys,
    Strategy.PYTORCHDDP: _smddp_keys,
    Strategy.TORCH_DISTRIBUTED: _torch_distributed_keys,
    Strategy.SMP_V1: _smp_v1_keys,
    Strategy.SMP_V2: _smp_v2_keys,
    Strategy.MPI: _mpi_keys,
    Strategy.PARAMETER_SERVER: lambda ctx: {"sagemaker_parameter_server_enabled": _dumps(True)},
    Strategy.MULTI_WORKER_MIRRORED: lambda ctx: {
        "sagemaker_multi_worker_mirrored_strategy_enabled": _dumps(True)
    },
    Strategy.LAUNCHER: lambda ctx: {},  # the launcher reads its own config channel
}


def distribution_hyperparameters(ctx: StrategyContext) -> dict[str, str]:
    return ENCODERS[ctx.spec.distribution.strategy](ctx)


def uses_mpi(strategy: Strategy) -> bool:
    return strategy in (Strategy.MPI, Strategy.SMP_V1)


def model_parallel_degree(spec: TrainingJobSpec) -> int:
    """How many devices hold one model replica (1 for pure data parallelism)."""
    smp = spec.distribution.smp
    if smp is None or spec.distribution.strategy not in (Strategy.SMP_V1, Strategy.SMP_V2):
        return 1
    p = smp.parameters
    degree = 1
    for key in (
        "partitions",
        "pipeline_parallel_degree",
        "tensor_parallel_degree",
        "context_parallel_degree",
    ):
        value = p.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            degree *= value
    return degree
