"""Pre-flight checks that need no AWS call: the API's limits and the rules the SDK leaves to the service.

Each check returns ``Problem``s (errors and warnings) with the spec field path, so the user sees
every problem at once, before anything is launched.
"""

from __future__ import annotations

import re

from airflow_dist_training.errors import Problem
from airflow_dist_training.sagemaker.catalog import (
    is_instance_name,
    lookup_instance,
    malformed_instance_message,
    unknown_instance_message,
)
from airflow_dist_training.sagemaker.strategies import record_for
from airflow_dist_training.spec.training import EFSChannel, FSxChannel, InputMode, TrainingJobSpec
from airflow_dist_training.storage.location import uri_scheme

MAX_HYPERPARAMETERS = 100
MAX_HYPERPARAMETER_KEY = 256
MAX_HYPERPARAMETER_VALUE = 2500
MAX_ENVIRONMENT = 100
MAX_ENVIRONMENT_VALUE = 512
ENV_KEY = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
MAX_SUBNETS = 16
MAX_SECURITY_GROUPS = 5
MAX_TAGS = 50
SUBNET_ID = re.compile(r"^subnet-[0-9a-z]+$")
SECURITY_GROUP_ID = re.compile(r"^sg-[0-9a-z]+$")
# The SDK adds these itself; they count against the API's 100-entry limit too.
_SDK_KEYS_PATHS = {"mp_parameters": "distribution.smp.parameters"}


def check_spec(spec: TrainingJobSpec) -> list[Problem]:
    return [
        *_check_instances(spec), *_check_network(spec), *_check_channels(spec), *_check_stopping(spec),
        *_check_environment(spec.environment), *_check_tags(spec.tags), *_check_source(spec),
    ]  # fmt: skip


def _instance_problem(path: str, name: str) -> Problem | None:
    """A malformed name is an error; a well-formed type the catalog lacks is only a warning."""
    if not is_instance_name(name):
        return Problem(path, malformed_instance_message(name))
    if lookup_instance(name) is None:
        return Problem(path, unknown_instance_message(name), severity="warning")
    return None


def _check_instances(spec: TrainingJobSpec) -> list[Problem]:
    compute = spec.compute
    paths = (
        [(f"compute.instance_groups[{i}].instance_type", g.instance_type) for i, g in enumerate(compute.instance_groups)]
        if compute.instance_groups
        else [("compute.instance_type", compute.instance_type)] if compute.instance_type is not None else []
    )
    return [problem for path, name in paths if (problem := _instance_problem(path, name)) is not None]


def _check_network(spec: TrainingJobSpec) -> list[Problem]:
    net = spec.network
    problems = []
    if bool(net.subnets) != bool(net.security_group_ids):
        missing = "network.security_group_ids" if net.subnets else "network.subnets"
        problems.append(
            Problem(missing, "When setting up custom VPC, both subnets and security_group_ids must be set")
        )
    if len(net.subnets) > MAX_SUBNETS:
        problems.append(
            Problem("network.subnets", f"has {len(net.subnets)} subnets; the API allows 1 to {MAX_SUBNETS}")
        )
    if len(net.security_group_ids) > MAX_SECURITY_GROUPS:
        problems.append(
            Problem(
                "network.security_group_ids",
                f"has {len(net.security_group_ids)} security groups; the API allows 1 to {MAX_SECURITY_GROUPS}",
            )
        )
    for i, subnet in enumerate(net.subnets):
        if not SUBNET_ID.match(subnet):
            problems.append(Problem(f"network.subnets[{i}]", f"{subnet!r} is not a subnet ID (subnet-...)"))
    for i, group in enumerate(net.security_group_ids):
        if not SECURITY_GROUP_ID.match(group):
            problems.append(
                Problem(f"network.security_group_ids[{i}]", f"{group!r} is not a security group ID (sg-...)")
            )
    return problems


def _check_channels(spec: TrainingJobSpec) -> list[Problem]:
    problems = []
    for name, channel in spec.channels.items():
        if isinstance(channel, FSxChannel | EFSChannel):
            problems += _file_system_channel_problems(spec, name, channel)
        elif channel.instance_groups:
            known = {g.name for g in spec.compute.instance_groups or []}
            problems += [
                Problem(f"channels.{name}.instance_groups", f"unknown instance group {group!r}; known: {sorted(known)}")
                for group in channel.instance_groups
                if group not in known
            ]
    reserved = {"adt_launcher"}
    if spec.network.network_isolation or not record_for(spec.distribution.strategy).script_mode:
        reserved.add("code")  # the code tarball travels as a channel of this name
    for name in spec.channels:
        if name in reserved:
            problems.append(
                Problem(
                    f"channels.{name}",
                    f"the channel name {name!r} is reserved for the job's code/launcher; rename it",
                )
            )
    return problems


def _file_system_channel_problems(
    spec: TrainingJobSpec, name: str, channel: FSxChannel | EFSChannel
) -> list[Problem]:
    """FSx/EFS channels need VPC access and File (or FastFile) mode."""
    problems = []
    net = spec.network
    kind = "FSx for Lustre" if isinstance(channel, FSxChannel) else "EFS"
    if not (net.subnets and net.security_group_ids):
        problems.append(
            Problem(
                f"channels.{name}",
                f"an {kind} channel needs VPC access: set network.subnets and network.security_group_ids "
                "(in the file system's VPC and Availability Zone)",
            )
        )
    if spec.input_mode == InputMode.PIPE:
        problems.append(Problem("input_mode", f"{kind} does not support Pipe mode (channel {name!r})"))
    return problems


def _check_stopping(spec: TrainingJobSpec) -> list[Problem]:
    problems = []
    max_run = spec.stopping.max_runtime_seconds
    spot = spec.spot
    if spot.enabled:
        if spot.max_wait_seconds is None:
            problems.append(
                Problem(
                    "spot.max_wait_seconds",
                    "is required for managed spot training (time to wait for capacity plus run time)",
                )
            )
        elif spot.max_wait_seconds < max_run:
            problems.append(
                Problem(
                    "spot.max_wait_seconds",
                    f"({spot.max_wait_seconds}) must be >= stopping.max_runtime_seconds ({max_run}); "
                    "the API rejects MaxWaitTimeInSeconds < MaxRuntimeInSeconds",
                )
            )
        if spec.checkpoint is None:
            problems.append(
                Problem(
                    "checkpoint",
                    "spot training without checkpointing restarts from scratch after every interruption; "
                    "set checkpoint.s3_uri",
                    severity="warning",
                )
            )
    else:
        for field in ("max_wait_seconds", "max_interruptions", "on_demand_after_interruptions"):
            if getattr(spot, field) is not None:
                problems.append(Problem(f"spot.{field}", "is only used with spot.enabled: true"))
    return problems


def _check_environment(environment: dict[str, str]) -> list[Problem]:
    problems = []
    if len(environment) > MAX_ENVIRONMENT:
        problems.append(
            Problem(
                "environment", f"has {len(environment)} entries; the API allows at most {MAX_ENVIRONMENT}"
            )
        )
    for key, value in environment.items():
        if not ENV_KEY.match(key):
            problems.append(Problem(f"environment.{key}", "key must match [a-zA-Z_][a-zA-Z0-9_]*"))
        if len(key) > MAX_ENVIRONMENT_VALUE:
            problems.append(
                Problem(f"environment.{key}", f"key is longer than {MAX_ENVIRONMENT_VALUE} characters")
            )
        if len(value) > MAX_ENVIRONMENT_VALUE:
            problems.append(
                Problem(
                    f"environment.{key}",
                    f"value is {len(value)} characters; the API allows at most {MAX_ENVIRONMENT_VALUE}",
                )
            )
    return problems


def _check_tags(tags: dict[str, str]) -> list[Problem]:
    problems = []
    if len(tags) > MAX_TAGS:
        problems.append(Problem("tags", f"has {len(tags)} tags; the API allows at most {MAX_TAGS}"))
    for key, value in tags.items():
        if not 1 <= len(key) <= 128:
            problems.append(Problem(f"tags.{key}", "key must be 1 to 128 characters"))
        if key.lower().startswith("aws:"):
            problems.append(Problem(f"tags.{key}", "keys starting with 'aws:' are reserved"))
        if len(value) > 256:
            problems.append(Problem(f"tags.{key}", "value must be at most 256 characters"))
    return problems


def _check_source(spec: TrainingJobSpec) -> list[Problem]:
    source_dir = spec.source.source_dir
    if uri_scheme(source_dir) == "s3" and not str(source_dir).endswith(".tar.gz"):
        return [
            Problem(
                "source.source_dir",
                "an s3:// source must be a .tar.gz archive (e.g. s3://bucket/code/sourcedir.tar.gz)",
            )
        ]
    if uri_scheme(source_dir) not in (None, "s3", "file"):
        return [Problem("source.source_dir", "must be an s3:// tarball or a local directory")]
    return []


def check_hyperparameters(spec: TrainingJobSpec, encoded: dict[str, str]) -> list[Problem]:
    """API limits on the final, encoded HyperParameters (SDK-added keys count too)."""
    problems = []
    if len(encoded) > MAX_HYPERPARAMETERS:
        added = len(encoded) - len(spec.hyperparameters)
        problems.append(
            Problem(
                "hyperparameters",
                f"the request would carry {len(encoded)} hyperparameters ({len(spec.hyperparameters)} yours + "
                f"{added} added for the framework and strategy); the API allows at most {MAX_HYPERPARAMETERS}",
            )
        )
    for key, value in encoded.items():
        path = _SDK_KEYS_PATHS.get(key, f"hyperparameters.{key}")
        if key in (
            "sagemaker_mpi_custom_mpi_options",
            "sagemaker_distributed_dataparallel_custom_mpi_options",
        ):
            path = "distribution.custom_mpi_options"
        if len(key) > MAX_HYPERPARAMETER_KEY:
            problems.append(
                Problem(
                    path, f"key is {len(key)} characters; the API allows at most {MAX_HYPERPARAMETER_KEY}"
                )
            )
        if len(value) > MAX_HYPERPARAMETER_VALUE:
            problems.append(
                Problem(
                    path,
                    f"encodes to {len(value)} characters; the API allows at most {MAX_HYPERPARAMETER_VALUE}",
                )
            )
    return problems


def errors_only(problems: list[Problem]) -> list[Problem]:
    return [p for p in problems if p.severity == "error"]


def warnings_only(problems: list[Problem]) -> list[Problem]:
    return [p for p in problems if p.severity == "warning"]
