"""The SageMaker training-container contract, mapped onto one machine (pure: no I/O, no torch, no boto3).

``local/request_plan.py`` plans a request per host with what is here: the ``/opt/ml`` trees, the
config files, the ``SM_*`` environment and the user arguments exactly as the classic
``sagemaker-training`` toolkit produces them. :func:`validate_local` reports local-mode problems.

The deliberate differences from SageMaker (``lo`` as the network interface, ``SM_NUM_GPUS`` 0,
argv passed exactly, ``SM_CHECKPOINT_DIR`` added) are in docs/local-backend.md.
"""

from __future__ import annotations

import builtins
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from airflow_dist_training.errors import KILLED_BY_SIGKILL, Problem
from airflow_dist_training.sagemaker.hyperparameters import decode_hyperparameter
from airflow_dist_training.sagemaker.strategies import LocalRun, record_for
from airflow_dist_training.spec.training import (
    EFSChannel,
    FSxChannel,
    InputMode,
    S3Channel,
    TrainingJobSpec,
)
from airflow_dist_training.storage.location import Location, local_path, uri_scheme

HOST_PREFIX = "algo-"
NIC = "lo"  # every simulated host's network interface (eth0 in a namespace's resourceconfig.json)
HOMOGENEOUS_GROUP = "homogeneousCluster"
DEFAULT_LOG_LEVEL = 20
# TT:params.py#SAGEMAKER_HYPERPARAMETERS: never user hyperparameters, never framework params.
RESERVED_HYPERPARAMETERS = frozenset(
    {
        "sagemaker_program",
        "sagemaker_submit_directory",
        "sagemaker_enable_cloudwatch_metrics",
        "sagemaker_region",
        "sagemaker_container_log_level",
        "sagemaker_job_name",
        "default_user_module_name",
        "_tuning_objective_metric",
        "sagemaker_s3_output",
    }
)

Launch = Literal["torchrun", "process"]


# --------------------------------------------------------------------------- hyperparameters


def split_hyperparameters(
    file_values: Mapping[str, str],
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """Decode and split into (user, additional framework params, reserved), as the toolkit does."""
    user: dict[str, Any] = {}
    framework: dict[str, Any] = {}
    reserved: dict[str, Any] = {}
    for key, raw in file_values.items():
        value = decode_hyperparameter(raw)
        if key in RESERVED_HYPERPARAMETERS:
            reserved[key] = value
        elif key.startswith("sagemaker_"):
            framework[key] = value
        else:
            user[key] = value
    return user, framework, reserved


def to_env_value(value: Any) -> str:
    """TT:mapping.py#to_env_vars value rule."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    if isinstance(value, bytes):
        return value.decode("latin-1")
    return _json(value)


def env_name(key: str) -> str:
    """TT:mapping.py#to_env_vars name rule: ``SM_`` + upper case, no other change."""
    return "SM_" + str(key).upper()


def _arg_value(value: Any) -> str:
    if isinstance(value, dict):
        return ",".join(f"{k}={v}" for k, v in sorted(value.items()))
    if value is None:
        return ""
    if isinstance(value, bytes):
        return value.decode("latin-1")
    return str(value)


def to_cmd_args(user_hyperparameters: Mapping[str, Any]) -> list[str]:
    """TT:mapping.py#to_cmd_args: sorted keys, ``--key``/``-k``, Python ``str()`` values."""
    args: list[str] = []
    for key in sorted(user_hyperparameters):
        name = "" if key == "" else (f"-{key}" if len(key) == 1 else f"--{key}")
        args.extend([name, _arg_value(user_hyperparameters[key])])
    return args


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


# --------------------------------------------------------------------------- layout


class _Under:
    """A path under the host's ``base`` (``/opt/ml``), as a read-only attribute."""

    def __init__(self, *parts: str) -> None:
        self.parts = parts

    def __get__(self, layout: HostLayout, owner: object = None) -> Path:
        return layout.base.joinpath(*self.parts)


@dataclass(frozen=True)
class HostLayout:
    """The ``/opt/ml`` tree of one simulated host."""

    base: Path

    code_dir = _Under("code")
    input_dir = _Under("input")
    input_config_dir = _Under("input", "config")
    input_data_dir = _Under("input", "data")
    model_dir = _Under("model")
    output_dir = _Under("output")
    output_data_dir = _Under("output", "data")
    output_intermediate_dir = _Under("output", "intermediate")
    checkpoint_dir = _Under("checkpoints")
    failure_file = _Under("output", "failure")
    success_file = _Under("output", "success")

    def channel_dir(self, channel: str) -> Path:
        return self.input_data_dir / channel


def host_name(index: int) -> str:
    """``algo-<index+1>`` (TT/SDK3 local naming)."""
    return f"{HOST_PREFIX}{index + 1}"


def host_layout(job_dir: Path, index: int) -> HostLayout:
    return HostLayout(job_dir if index == 0 else job_dir / "hosts" / host_name(index))


# --------------------------------------------------------------------------- the plan


@dataclass(frozen=True)
class HostPlan:
    host: str
    index: int
    layout: HostLayout
    launch: Launch
    node_rank: int | None  # index among the torchrun hosts
    resource_config: dict[str, Any]
    env: dict[str, str]


@dataclass(frozen=True)
class LocalJobPlan:
    """Everything the launcher needs; computed without touching the file system."""

    job_name: str
    job_dir: Path
    root: Path
    hosts: list[str]
    torchrun_hosts: list[str]
    processes_per_host: int
    entry_point: str
    hyperparameters_file: dict[str, str]
    input_data_config: dict[str, dict[str, str]]
    user_args: list[str]
    checkpoint_store: Location | None
    output_compression: Literal["GZIP", "NONE"]
    metric_definitions: list[tuple[str, str]]
    host_plans: list[HostPlan]
    warnings: list[str] = field(default_factory=list)

    @property
    def job_arn(self) -> str:
        return f"local://{self.job_dir}"


def validate_local(
    spec: TrainingJobSpec,
    *,
    cpu_count: int,
    allow_oversubscribe: bool = False,
    s3_available: bool = False,
    base_dir: Path | None = None,
    check_paths: bool = True,
) -> tuple[list[Problem], list[str]]:
    """Local-mode problems (``(field path, message)``) and warnings; nothing is launched."""
    base = base_dir or Path.cwd()
    local = record_for(spec.distribution.strategy).local
    torchrun = local.launch == "torchrun"
    problems = _strategy_problems(spec, local)
    problems += _code_problems(
        spec, base, s3_available=s3_available, check_paths=check_paths, torchrun=torchrun
    )
    channel_problems, warnings = _channel_problems(
        spec, base, s3_available=s3_available, check_paths=check_paths
    )
    problems += channel_problems
    process_problems, process_warnings = _process_problems(
        spec, cpu_count=cpu_count, allow_oversubscribe=allow_oversubscribe, torchrun=torchrun
    )
    return problems + process_problems, warnings + process_warnings


def _strategy_problems(spec: TrainingJobSpec, local: LocalRun) -> list[Problem]:
    """The strategy's record: refused locally, its local-only checks; the distribution group exists."""
    problems: list[Problem] = []
    if local.refusal is not None:
        problems.append(Problem("distribution.strategy", local.refusal))
    if local.check is not None:
        problems += local.check(spec)
    dist = spec.distribution
    group_names = [g.name for g in spec.compute.instance_groups or []]
    if group_names and dist.instance_group is not None and dist.instance_group not in group_names:
        problems.append(
            Problem(
                "distribution.instance_group",
                f"{dist.instance_group!r} is not one of the instance groups {group_names}",
            )
        )
    return problems


def _code_problems(
    spec: TrainingJobSpec, base: Path, *, s3_available: bool, check_paths: bool, torchrun: bool
) -> list[Problem]:
    """The code: reachable (local directory, or S3 with credentials), and a .py file for torchrun."""
    problems: list[Problem] = []
    src = spec.source.source_dir
    if uri_scheme(src) == "s3":
        if not s3_available:
            problems.append(
                Problem(
                    "source.source_dir",
                    f"{src} is on S3 and no AWS credentials were found; give a local directory for local runs",
                )
            )
    elif check_paths:
        code_root = local_path(src, base) if src is not None else base
        assert code_root is not None
        if src is not None and not code_root.is_dir():
            problems.append(Problem("source.source_dir", f"local directory {code_root} does not exist"))
        elif not (code_root / spec.source.entry_point).is_file():
            problems.append(
                Problem("source.entry_point", f"{code_root / spec.source.entry_point} does not exist")
            )
        for index, dependency in enumerate(spec.source.dependencies):
            dep = local_path(dependency, base)
            if dep is not None and not dep.exists():
                problems.append(Problem(f"source.dependencies[{index}]", f"{dep} does not exist"))
    if torchrun and not spec.source.entry_point.endswith(".py"):
        problems.append(
            Problem(
                "source.entry_point",
                "torchrun runs Python entry points only (a .py file) on the local backend",
            )
        )
    return problems


def _channel_problems(
    spec: TrainingJobSpec, base: Path, *, s3_available: bool, check_paths: bool
) -> tuple[list[Problem], list[str]]:
    """Every channel has a local stand-in (or S3 credentials); Pipe mode is emulated."""
    problems: list[Problem] = []
    warnings: list[str] = []
    for name, channel in spec.channels.items():
        where = f"channels.{name}.local_source"
        if isinstance(channel, FSxChannel | EFSChannel) and channel.local_source is None:
            kind = "FSx for Lustre" if isinstance(channel, FSxChannel) else "EFS"
            problems.append(
                Problem(
                    where,
                    f"an {channel.type} channel needs local_source on the local backend: the local path or file:// "
                    f"URI standing in for {kind} {channel.file_system_id}:{channel.directory_path}",
                )
            )
            continue
        if isinstance(channel, S3Channel) and channel.local_source is None:
            if not s3_available:
                problems.append(
                    Problem(
                        where,
                        f"no local_source and no AWS credentials to download {channel.uri}; set local_source to a "
                        "local path or file:// URI",
                    )
                )
            continue
        assert channel.local_source is not None
        problems += _local_source_problems(where, channel.local_source, base, s3_available, check_paths)
        if isinstance(channel, S3Channel) and (channel.input_mode or spec.input_mode) == InputMode.PIPE:
            warnings.append(f"channels.{name}: Pipe mode is emulated as File mode on the local backend")
    return problems, warnings


def _local_source_problems(
    where: str, source: str, base: Path, s3_available: bool, check_paths: bool
) -> list[Problem]:
    path = local_path(source, base)
    if path is None:
        if not s3_available:
            return [Problem(where, f"{source} is on S3 and no AWS credentials were found")]
    elif check_paths and not path.exists():
        return [Problem(where, f"{path} does not exist")]
    return []


def _process_problems(
    spec: TrainingJobSpec, *, cpu_count: int, allow_oversubscribe: bool, torchrun: bool
) -> tuple[list[Problem], list[str]]:
    """torchrun processes against the machine's cores; processes_per_host ignored otherwise."""
    dist = spec.distribution
    hosts = spec.compute.count
    ppn = dist.processes_per_host or 1
    if torchrun:
        total = hosts * ppn
        if total > cpu_count and not allow_oversubscribe:
            return [
                Problem(
                    "distribution.processes_per_host",
                    f"{hosts} simulated host(s) x {ppn} process(es) per host = {total} processes, but this machine "
                    f"has {cpu_count} CPU core(s); lower processes_per_host or compute.instance_count, or pass "
                    "allow_oversubscribe=True to run more processes than cores",
                )
            ], []
    elif dist.processes_per_host not in (None, 1):
        return [], [
            f"distribution.processes_per_host: ignored for strategy {dist.strategy.value} (one process per host)"
        ]
    return [], []


@dataclass(frozen=True)
class HostFacts:
    """What one host's environment is computed from: the job's facts, then (the request executor
    fills them per host) the host's own."""

    entry: str
    job_name: str
    job_arn: str
    layout: HostLayout
    hosts: list[str]
    instance_groups: list[dict[str, Any]]
    distribution_hosts: list[str]
    master: str
    input_data_config: dict[str, dict[str, str]]
    user_hps: dict[str, Any]
    framework_params: dict[str, Any]
    reserved: dict[str, Any]
    user_args: list[str]
    cpu_count: int
    master_port: int
    region: str | None
    host: str = ""
    group: str = ""
    itype: str = ""
    group_hosts: list[str] = field(default_factory=list)
    resource_config: dict[str, Any] = field(default_factory=dict)

    @property
    def channel_dirs(self) -> dict[str, str]:
        return {c: str(self.layout.channel_dir(c)) for c in self.input_data_config}


def host_env(h: HostFacts) -> dict[str, str]:
    """The environment of one host's script: platform, image, toolkit and PyTorch-DLC variables."""
    env: dict[str, str] = {}
    # platform: the job identity
    env["TRAINING_JOB_NAME"] = h.job_name
    env["TRAINING_JOB_ARN"] = h.job_arn
    # image ENV (PyTorch DLC)
    env["PYTHONUNBUFFERED"] = "1"
    # toolkit (TT:environment.py#Environment.__init__)
    env["CURRENT_HOST"] = h.host
    env["SAGEMAKER_JOB_NAME"] = str(h.reserved.get("sagemaker_job_name", ""))
    if h.region:
        env["SAGEMAKER_REGION"] = h.region
    for key, value in _sm_variables(h).items():
        env[env_name(key)] = to_env_value(value) if key != "training_env" else _json(value)
    for channel, directory in h.channel_dirs.items():
        env[env_name(f"channel_{channel}")] = directory
    for key, value in h.user_hps.items():
        env[env_name(f"hp_{key}")] = to_env_value(value)
    # ours: the checkpoint directory (the classic toolkit exports none)
    env["SM_CHECKPOINT_DIR"] = str(h.layout.checkpoint_dir)
    # PyTorch DLC (PT:training.py#train): NCCL and master variables; torchrun overrides MASTER_* for workers
    env["NCCL_SOCKET_IFNAME"] = NIC
    env["NCCL_IB_DISABLE"] = "1"
    env["NCCL_DEBUG"] = "WARN"
    env["MASTER_ADDR"] = "127.0.0.1"  # stands in for the master host name, which does not resolve locally
    env["MASTER_PORT"] = str(h.master_port)
    env["PYTHONPATH"] = str(h.layout.code_dir)
    return env


# TT:environment.py#Environment.to_env_vars: the 31 fixed ``SM_*`` variables, in the toolkit's order;
# all but the six of ``sm_only`` are the same values as in ``SM_TRAINING_ENV``
_SM_VARIABLES = (
    "hosts", "network_interface_name", "hps", "user_entry_point", "framework_params", "resource_config",
    "input_data_config", "output_data_dir", "channels", "current_host", "current_instance_type",
    "current_instance_group", "current_instance_group_hosts", "instance_groups", "instance_groups_dict",
    "distribution_instance_groups", "is_hetero", "module_name", "log_level", "framework_module", "input_dir",
    "input_config_dir", "output_dir", "num_cpus", "num_gpus", "num_neurons", "model_dir", "module_dir",
    "training_env", "user_args", "output_intermediate_dir",
)  # fmt: skip


def _sm_variables(h: HostFacts) -> dict[str, Any]:
    training_env = _training_env(h)
    sm_only = {
        "hps": h.user_hps,
        "framework_params": h.framework_params,
        "channels": sorted(h.input_data_config),
        "framework_module": "",
        "training_env": training_env,
        "user_args": h.user_args,
    }
    return {k: sm_only[k] if k in sm_only else training_env[k] for k in _SM_VARIABLES}


def _training_env(h: HostFacts) -> dict[str, Any]:
    """``SM_TRAINING_ENV``: the toolkit's whole environment as one JSON object."""
    layout = h.layout
    return {
        "additional_framework_parameters": h.framework_params,
        "channel_input_dirs": h.channel_dirs,
        "current_host": h.host,
        "current_instance_group": h.group,
        "current_instance_group_hosts": list(h.group_hosts),
        "current_instance_type": h.itype,
        "distribution_hosts": h.distribution_hosts,
        "distribution_instance_groups": [h.group],
        "framework_module": None,
        "hosts": h.hosts,
        "hyperparameters": h.user_hps,
        "input_config_dir": str(layout.input_config_dir),
        "input_data_config": h.input_data_config,
        "input_dir": str(layout.input_dir),
        "instance_groups": [g["instance_group_name"] for g in h.instance_groups],
        "instance_groups_dict": {g["instance_group_name"]: g for g in h.instance_groups},
        "is_hetero": len(h.instance_groups) > 1,
        "is_master": h.host == h.master,
        "is_modelparallel_enabled": None,
        "is_smddpmprun_installed": False,
        "is_smddprun_installed": False,
        "job_name": h.job_name,
        "log_level": DEFAULT_LOG_LEVEL,
        "master_hostname": h.master,
        "model_dir": str(layout.model_dir),
        "module_dir": str(layout.code_dir),
        "module_name": h.entry.removesuffix(".py"),
        "network_interface_name": NIC,
        "num_cpus": h.cpu_count,
        "num_gpus": 0,
        "num_neurons": 0,
        "output_data_dir": str(layout.output_data_dir),
        "output_dir": str(layout.output_dir),
        "output_intermediate_dir": str(layout.output_intermediate_dir),
        "resource_config": h.resource_config,
        "topology": [],
        "user_entry_point": h.entry,
    }


def config_files(plan: LocalJobPlan, host: HostPlan, checkpoint_dir: str | None = None) -> dict[str, Any]:
    """The JSON files of one host's ``input/config`` directory (name -> content).

    ``checkpoint_dir``: the checkpoint path the script sees (``/opt/ml/checkpoints/`` in a
    namespace); default the host's relocated checkpoint directory.
    """
    files: dict[str, Any] = {
        "hyperparameters.json": plan.hyperparameters_file,
        "inputdataconfig.json": plan.input_data_config,
        "resourceconfig.json": host.resource_config,
    }
    if plan.checkpoint_store is not None:
        files["checkpointconfig.json"] = {"LocalPath": checkpoint_dir or str(host.layout.checkpoint_dir)}
    return files


# --------------------------------------------------------------------------- failure text

_EXCEPTION_NAMES = sorted(
    (
        n
        for n, o in vars(builtins).items()
        if isinstance(o, type) and issubclass(o, BaseException) and not issubclass(o, Warning)
    ),
    key=len,
    reverse=True,
)


def error_excerpt(lines: list[str]) -> str:
    """Deduplicated lines from the first one naming a built-in exception (TT:process.py#watch)."""
    start = next((i for i, line in enumerate(lines) if any(n in line for n in _EXCEPTION_NAMES)), None)
    return "" if start is None else "\n".join(dict.fromkeys(lines[start:]))


# where torchrun's elastic agent starts its own failure report (a traceback of the agent, not the script)
AGENT_FAILURE_MARK = "torch/distributed/elastic/multiprocessing/api.py"
# what the toolkit (and the backends standing in for it) write to output/failure when the script did not
GENERATED_FAILURE_PREFIXES = (
    "ExecuteUserScriptError:",
    "Framework Error:",
    "InstallRequirementsError:",
    "InstallModuleError:",
    "SMTrainingCompiler Error:",
)


TOOLKIT_LOGGER = "sagemaker-training-toolkit "  # the toolkit's own log lines: never the script's


def script_lines(lines: list[str]) -> list[str]:
    """A host's output without what the launchers add after the script: torchrun's agent failure
    report (from its first line on), the toolkit's log lines and its ``ExecuteUserScriptError``
    report. The script's stderr and the toolkit's log reach us through different pipes, so the
    script's last line may come after the toolkit's report: it is dropped, not cut at."""
    mark = next((i for i, line in enumerate(lines) if AGENT_FAILURE_MARK in line), len(lines))
    out: list[str] = []
    in_report = False
    for line in lines[:mark]:
        if in_report:  # ExitCode, ErrorMessage "..." (may span lines), then Command "..." ends it
            in_report = not line.lstrip().startswith('Command "')
        elif TOOLKIT_LOGGER in line:
            in_report = line.rstrip().endswith(GENERATED_FAILURE_PREFIXES)
        else:
            out.append(line)
    return out


# an exception's name alone on a line (``ModuleNotFoundError``, ``torch.OutOfMemoryError:``)
_BARE_EXCEPTION = re.compile(r"(?:\w+\.)*\w*(?:Error|Exception|Interrupt|Exit)\s*:?")


def rejoined_exception_lines(lines: list[str]) -> list[str]:
    """Non-empty ``lines``, with an exception line that reached the log in pieces put back together.

    The toolkit prints what it reads from the script in chunks, one printed line per chunk
    (TT:process.py#watch reads 4 KiB at a time); on a busy host the traceback's last line,
    written in pieces, comes out as ``ModuleNotFoundError`` / ``:`` / ``No module named 'x'``.
    """
    own = [line.strip() for line in lines if line.strip()]
    out: list[str] = []
    i = 0
    while i < len(own):
        line, j = own[i], i + 1
        if not _BARE_EXCEPTION.fullmatch(line):
            out.append(line)
            i = j
            continue
        name, colon, message = line.rstrip(": "), line.endswith(":"), ""
        if not colon and j < len(own) and own[j].startswith(":"):
            colon, message, j = True, own[j][1:].strip(), j + 1
        if colon and not message and j < len(own):
            message, j = own[j], j + 1
        out.append(f"{name}: {message}" if colon else line)
        i = j
    return out


def last_error_line(lines: list[str]) -> str:
    """The last line naming an exception (``ModuleNotFoundError: No module named 'x'``), before
    torchrun's own failure report; else the last non-empty line; else ``(no output)``."""
    own = rejoined_exception_lines(script_lines(lines))
    named = [line for line in own if any(name in line for name in _EXCEPTION_NAMES) or "Error:" in line]
    return (named or own or ["(no output)"])[-1][:500]


def failure_reason_text(host: str, failure: str, tail: list[str]) -> str:
    """``FailureReason`` after ``AlgorithmError: ``: the script's own ``output/failure`` text as it
    wrote it; else (the toolkit's text, or none) the failing host and its last error line first."""
    if failure.strip() and not failure.startswith(GENERATED_FAILURE_PREFIXES):
        return failure
    return f"{host}: {last_error_line(tail)}" + (f"\n{failure}" if failure.strip() else "")


def failure_text(exit_code: int, error_message: str, command: list[str]) -> str:
    """TT:errors.py#_CalledProcessError.__str__ for ExecuteUserScriptError."""
    text = f'ExecuteUserScriptError:\nExitCode {exit_code}\nErrorMessage "{error_message}"\nCommand "{" ".join(command)}"'
    if exit_code in (137, -9):
        text += f'\nExtraInfo "{KILLED_BY_SIGKILL}"'
    return text
