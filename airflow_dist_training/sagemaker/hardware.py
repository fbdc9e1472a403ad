"""Hardware rules: what each strategy needs from the instances, with the source of every rule.

Pure. ``hardware_problems`` returns the problems of one job (called by
``strategies.check_distribution`` with what the strategy's record says); it knows nothing of the
strategy records, so the strategies import this module and not the reverse. ``scaling_advice`` turns the distributed-training guide's
"scale up before scaling out" into plan output.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from airflow_dist_training.errors import Problem
from airflow_dist_training.sagemaker.catalog import (
    InstanceType,
    assumed_instance,
    hourly_price,
    instance_catalog,
    instance_family,
    is_gpu_family,
    is_trainium,
    lookup_instance,
)
from airflow_dist_training.spec.training import TrainingJobSpec

# SMDDP's instance types. The SDK still defines fw_utils.SM_DATAPARALLEL_SUPPORTED_INSTANCE_TYPES
# ("ml.p3.16xlarge", "ml.p3dn.24xlarge", "ml.p4d.24xlarge", "ml.p4de.24xlarge", "local_gpu") and its
# message (it stopped checking in v2.221.1, see the encoding reference §2.1); the SageMaker Developer
# Guide, "Supported frameworks, AWS Regions, and instance types" of the SMDDP library, adds the p5
# platform (ml.p5.48xlarge; p5e/p5en are the same platform with H200 GPUs). The library itself
# refuses other instances at start-up, after the job was billed, so we check before launch.
SMDDP_INSTANCE_TYPES = (
    "ml.p3.16xlarge",
    "ml.p3dn.24xlarge",
    "ml.p4d.24xlarge",
    "ml.p4de.24xlarge",
    "ml.p5.48xlarge",
    "ml.p5e.48xlarge",
    "ml.p5en.48xlarge",
    "local_gpu",
)


def is_neuron_image(uri: str) -> bool:
    """AWS Neuron DLCs: ``pytorch-training-neuronx``, ``...-neuron`` repositories and tags."""
    return "neuron" in uri.rsplit("/", 1)[-1]  # the repository and tag


def is_gpu_image(uri: str) -> bool:
    """CUDA images: DLC tags carry ``-gpu-`` (or a ``cuNNN`` CUDA suffix)."""
    tag = uri.rsplit(":", 1)[-1] if ":" in uri.rsplit("/", 1)[-1] else ""
    return "-gpu-" in f"-{tag}-" or any(part.startswith("cu1") for part in tag.split("-"))


def _is_neuron_instance(instance_type: str) -> bool:
    return is_trainium(instance_type) or instance_family(instance_type).startswith("inf")


def instance_info(instance_type: str) -> InstanceType:
    return lookup_instance(instance_type) or assumed_instance(instance_type)


@dataclass
class _Job:
    spec: TrainingJobSpec
    image_uri: str
    validation_instance_types: list[str]  # the training group's instance types, or all
    problems: list[Problem] = field(default_factory=list)

    def error(self, path: str, message: str) -> None:
        self.problems.append(Problem(path, message))

    def warn(self, path: str, message: str) -> None:
        self.problems.append(Problem(path, message, severity="warning"))


def hardware_problems(
    spec: TrainingJobSpec,
    image_uri: str,
    validation_instance_types: list[str],
    *,
    smddp_instances: bool,
    processes: str,
    per_host_strategies: list[str],
) -> list[Problem]:
    """The hardware rules of the job's strategy: SMDDP's instance types (``smddp_instances``), the
    image's accelerator, and processes_per_host against the devices (``processes``: how the strategy
    starts processes; ``per_host_strategies``: those honouring processes_per_host, for the warning)."""
    job = _Job(spec, image_uri, validation_instance_types)
    if smddp_instances:
        _check_smddp_instances(job)
    _check_image_accelerator(job)
    _check_processes_per_host(job, processes, per_host_strategies)
    return job.problems


def _check_smddp_instances(ctx: _Job) -> None:
    supported = SMDDP_INSTANCE_TYPES
    for instance_type in ctx.validation_instance_types:
        if instance_type not in supported:
            # the SDK's own message (fw_utils._validate_smdataparallel_args before v2.221.1)
            ctx.error(
                "compute.instance_type"
                if not ctx.spec.compute.instance_groups
                else "compute.instance_groups",
                f"Provided instance_type {instance_type} is not supported by smdataparallel. "
                f"Please specify one of the supported instance types:{supported} "
                "(use torch_distributed for DDP on other GPU instances)",
            )


def _check_image_accelerator(ctx: _Job) -> None:
    """Neuron images run only on Trainium/Inferentia, CUDA images not on them (AWS Deep Learning
    Containers, available_images.md: "Neuron containers ... for Trn1/Inf2 instances"; the SDK's
    image_uris picks the neuron image for ml.trn*)."""
    uri = ctx.image_uri
    if not uri:
        return
    path = "image.uri" if ctx.spec.image.uri is not None else "image.framework_version"
    types = [g.instance_type for g in ctx.spec.compute.groups]
    if is_neuron_image(uri):
        wrong = [t for t in types if not _is_neuron_instance(t)]
        if wrong and (any(is_gpu_family(t) for t in wrong) or len(wrong) == len(types)):
            ctx.error(
                path,
                f"{uri} is an AWS Neuron image: it runs only on Trainium/Inferentia instances (ml.trn*, ml.inf*), "
                f"not on {', '.join(sorted(set(wrong)))}",
            )
    elif is_gpu_image(uri):
        wrong = [t for t in types if _is_neuron_instance(t)]
        if wrong:
            ctx.error(
                path,
                f"{uri} is a CUDA (GPU) image: Trainium instances ({', '.join(sorted(set(wrong)))}) need an "
                "AWS Neuron image (e.g. pytorch-training-neuronx)",
            )


def _check_processes_per_host(ctx: _Job, processes: str, per_host_strategies: list[str]) -> None:
    """processes_per_host against the devices of the instances that run the strategy.

    MPI/Horovod and SMP v1 pin one process per GPU (SageMaker model parallel v1 docs: "processes_per_host
    ... should be equal to the number of GPUs"; Horovod: one process per GPU), so more processes than
    devices is an error on accelerator instances; the toolkit passes the number to mpirun as is.
    """
    dist = ctx.spec.distribution
    per_host = dist.processes_per_host
    if per_host is None:
        return
    strategy = dist.strategy
    if processes == "one_per_host":
        ctx.warn(
            "distribution.processes_per_host",
            f"is not used by strategy {strategy.value!r} (one process per host); it applies to: "
            + ", ".join(sorted(per_host_strategies)),
        )
        return
    if processes != "per_host":
        return  # torchrun/SMDDP: one process per device on SageMaker (request.py warns)
    for instance_type in ctx.validation_instance_types:
        known = lookup_instance(instance_type)
        info = known or assumed_instance(instance_type)
        if info.accelerator == "cpu" or per_host <= info.devices:
            continue
        unit = "NeuronCores" if info.accelerator == "trainium" else "GPUs"
        message = (
            f"{per_host} processes per host but {instance_type} has {info.devices} {unit}: "
            f"{strategy.value} runs one process per device; use at most {info.devices}"
        )
        if known is None:  # the device count is only assumed: do not block new hardware
            ctx.warn("distribution.processes_per_host", message)
        else:
            ctx.error("distribution.processes_per_host", message)


def scaling_advice(spec: TrainingJobSpec, region: str, *, distributed: bool = True) -> list[str]:
    """The guide's "scale up before you scale out": the same device count on fewer, larger instances
    of the same family (faster NVLink/NeuronLink inside one instance, less traffic between instances),
    with both on-demand cost bounds."""
    compute = spec.compute
    # not distributed: the strategy's record says it runs one process
    if compute.instance_groups or compute.instance_type is None or compute.count < 2 or not distributed:
        return []
    current = instance_info(compute.instance_type)
    if current.accelerator == "cpu":
        return []
    total = compute.count * current.devices
    candidates = [
        t
        for t in instance_catalog().values()
        if t.family == current.family
        and t.accelerator == current.accelerator
        and t.devices > current.devices
        and total % t.devices == 0
    ]
    if not candidates:
        return []
    # fewest instances; among equals, the cheapest known price, then the smallest memory
    best = min(
        candidates,
        key=lambda t: (total // t.devices, hourly_price(t.name, region) or float("inf"), t.memory_gib),
    )
    count = total // best.devices
    hours = spec.stopping.max_runtime_seconds / 3600

    def bound(name: str, n: int) -> str:
        price = hourly_price(name, region) or hourly_price(name)
        return f"${n * price * hours:,.2f}" if price is not None else "unknown"

    return [
        f"the same {total} devices fit on {count} x {best.name} instead of {compute.count} x "
        f"{compute.instance_type}: scale up before scaling out (the distributed-training guide), "
        f"the devices then talk over in-instance links; cost bound {bound(best.name, count)} vs "
        f"{bound(compute.instance_type, compute.count)}"
    ]
