"""Plan the launcher strategy: run torchrun (or mpirun) on ANY image, no training toolkit needed.

The job's container entrypoint is overridden to run our small stdlib-only launcher
(``launcher_files/adt_launch.py``), shipped with a ``launch.json`` in an extra input channel. It
reads SageMaker's ``resourceconfig.json`` to find the hosts and its own rank, unpacks the code
channel, and starts the launcher across the hosts. This is what the SDK's ``ModelTrainer`` with
``Torchrun()`` does; the launcher is our own. As PID 1 it forwards SageMaker's stop SIGTERM to the
training processes; ``stopping.forward_sigterm`` runs AWS's toolkit under it for the same in script mode.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING, Any

from airflow_dist_training.sagemaker.catalog import assumed_instance, lookup_instance
from airflow_dist_training.sagemaker.uploads import Upload
from airflow_dist_training.storage.location import split_uri

if TYPE_CHECKING:
    from airflow_dist_training.spec.training import TrainingJobSpec

LAUNCHER_CHANNEL = "adt_launcher"
CODE_CHANNEL = "code"
LAUNCHER_SCRIPT = "adt_launch.py"
CONTAINER_INPUT = "/opt/ml/input/data"
WRAP_ARG = "--wrap"  # the launcher's toolkit-shim mode (launcher_files/adt_launch.py)


@dataclass(frozen=True)
class LaunchPlan:
    algorithm: dict[str, Any]  # merged into AlgorithmSpecification
    channels: list[dict[str, Any]]
    uploads: list[Upload]
    config: dict[str, Any]


def launcher_script() -> bytes:
    return (
        resources.files("airflow_dist_training.sagemaker")
        .joinpath("launcher_files", LAUNCHER_SCRIPT)
        .read_bytes()
    )


def launch_config(spec: TrainingJobSpec) -> dict[str, Any]:
    per_host = spec.distribution.processes_per_host
    processes = {}
    for group in spec.compute.groups:
        info = lookup_instance(group.instance_type) or assumed_instance(group.instance_type)
        processes[group.instance_type] = per_host or info.devices
    return {
        "version": 1,
        "launcher": spec.distribution.launcher,
        "entry_point": spec.source.entry_point,
        "processes_per_host": processes,
        "custom_mpi_options": spec.distribution.custom_mpi_options or "",
        "master_port": 7777,
        "code_tarball": f"{CONTAINER_INPUT}/{CODE_CHANNEL}/sourcedir.tar.gz",
    }


def _launcher_prefix(spec: TrainingJobSpec, job_name: str) -> str:
    assert spec.output is not None
    return f"s3://{split_uri(spec.output.s3_path)[1]}/{job_name}/{LAUNCHER_CHANNEL}"


def _launcher_upload(spec: TrainingJobSpec, prefix: str) -> Upload:
    assert spec.output is not None
    return Upload(
        s3_uri=f"{prefix}/{LAUNCHER_SCRIPT}", kind="file", content=launcher_script(), kms_key=spec.output.kms_key
    )


def _channel(spec: TrainingJobSpec, name: str, uri: str) -> dict[str, Any]:
    source: dict[str, Any] = {"S3DataType": "S3Prefix", "S3Uri": uri, "S3DataDistributionType": "FullyReplicated"}
    all_groups = [g.name for g in spec.compute.instance_groups or []]
    if all_groups and any(getattr(ch, "instance_groups", None) for ch in spec.channels.values()):
        source["InstanceGroupNames"] = all_groups  # assigned channels: ours go to every group
    return {"ChannelName": name, "DataSource": {"S3DataSource": source}, "InputMode": "File"}


def plan_toolkit_shim(spec: TrainingJobSpec, *, job_name: str) -> LaunchPlan:
    """``stopping.forward_sigterm`` in script mode: the image's toolkit (``train``) runs under our
    launcher's ``--wrap`` mode, which forwards SageMaker's SIGTERM to the script. The shim ships in
    the ``adt_launcher`` channel; the image gets nothing installed."""
    prefix = _launcher_prefix(spec, job_name)
    return LaunchPlan(
        algorithm={
            "ContainerEntrypoint": ["python3", f"{CONTAINER_INPUT}/{LAUNCHER_CHANNEL}/{LAUNCHER_SCRIPT}"],
            "ContainerArguments": [WRAP_ARG],
        },
        channels=[_channel(spec, LAUNCHER_CHANNEL, prefix + "/")],
        uploads=[_launcher_upload(spec, prefix)],
        config={},
    )


def plan_launch(spec: TrainingJobSpec, *, job_name: str, source_uri: str) -> LaunchPlan:
    assert spec.output is not None
    prefix = _launcher_prefix(spec, job_name)
    config = launch_config(spec)
    uploads = [
        _launcher_upload(spec, prefix),
        Upload(
            s3_uri=f"{prefix}/launch.json",
            kind="file",
            content=json.dumps(config, indent=1, sort_keys=True).encode(),
            kms_key=spec.output.kms_key,
        ),
    ]
    return LaunchPlan(
        algorithm={
            "ContainerEntrypoint": ["python3", f"{CONTAINER_INPUT}/{LAUNCHER_CHANNEL}/{LAUNCHER_SCRIPT}"],
            "ContainerArguments": ["--config", f"{CONTAINER_INPUT}/{LAUNCHER_CHANNEL}/launch.json"],
        },
        channels=[_channel(spec, CODE_CHANNEL, source_uri), _channel(spec, LAUNCHER_CHANNEL, prefix + "/")],
        uploads=uploads,
        config=config,
    )


def stop_signal_delivery(spec: TrainingJobSpec, *, script_mode: bool) -> str:
    """Whether the script sees the SIGTERM of a stop, a spot interruption or MaxRuntimeInSeconds on
    AWS (SageMaker sends it to the container's PID 1, then SIGKILL 120 s later)."""
    if not script_mode:
        return (
            "the script gets SIGTERM: our launcher (PID 1) forwards it to the training processes "
            "(not to torchrun); SIGKILL follows 120 s after the stop"
        )
    if spec.image.container_entry_point:
        return "SIGTERM goes to your container_entry_point (PID 1): the script gets it only if that forwards it"
    if spec.stopping.forward_sigterm:
        return (
            "the script gets SIGTERM: AWS's toolkit runs under our shim (PID 1), which forwards it; "
            "SIGKILL follows 120 s after the stop"
        )
    return (
        "the script does NOT get SIGTERM: AWS's toolkit does not forward it, and SIGKILL ends the job "
        "120 s after the stop; set stopping.forward_sigterm to save on a stop or spot interruption"
    )
