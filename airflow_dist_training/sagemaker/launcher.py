"""Plan the launcher strategy: run torchrun (or mpirun) on ANY image, no training toolkit needed.

The job's container entrypoint is overridden to run our small stdlib-only launcher
(``launcher_files/adt_launch.py``), shipped with a ``launch.json`` in an extra input channel. It
reads SageMaker's ``resourceconfig.json`` to find the hosts and its own rank, unpacks the code
channel, and starts the launcher across the hosts. This is what the SDK's ``ModelTrainer`` with
``Torchrun()`` does; the launcher is our own.
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


def plan_launch(spec: TrainingJobSpec, *, job_name: str, source_uri: str) -> LaunchPlan:
    assert spec.output is not None
    bucket = split_uri(spec.output.s3_path)[1]
    prefix = f"s3://{bucket}/{job_name}/{LAUNCHER_CHANNEL}"
    config = launch_config(spec)
    uploads = [
        Upload(
            s3_uri=f"{prefix}/{LAUNCHER_SCRIPT}",
            kind="file",
            content=launcher_script(),
            kms_key=spec.output.kms_key,
        ),
        Upload(
            s3_uri=f"{prefix}/launch.json",
            kind="file",
            content=json.dumps(config, indent=1, sort_keys=True).encode(),
            kms_key=spec.output.kms_key,
        ),
    ]
    all_groups = [g.name for g in spec.compute.instance_groups or []]
    assign_groups = bool(all_groups) and any(
        getattr(ch, "instance_groups", None) for ch in spec.channels.values()
    )

    def channel(name: str, uri: str) -> dict[str, Any]:
        source: dict[str, Any] = {
            "S3DataType": "S3Prefix",
            "S3Uri": uri,
            "S3DataDistributionType": "FullyReplicated",
        }
        if assign_groups:
            source["InstanceGroupNames"] = all_groups
        return {"ChannelName": name, "DataSource": {"S3DataSource": source}, "InputMode": "File"}

    return LaunchPlan(
        algorithm={
            "ContainerEntrypoint": ["python3", f"{CONTAINER_INPUT}/{LAUNCHER_CHANNEL}/{LAUNCHER_SCRIPT}"],
            "ContainerArguments": ["--config", f"{CONTAINER_INPUT}/{LAUNCHER_CHANNEL}/launch.json"],
        },
        channels=[channel(CODE_CHANNEL, source_uri), channel(LAUNCHER_CHANNEL, prefix + "/")],
        uploads=uploads,
        config=config,
    )
