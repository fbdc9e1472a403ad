"""Execute a SageMaker ``CreateTrainingJob`` request on this machine: the local backend's engine.

The request is the one the SageMaker planner (``sagemaker/request.py``) produces, unchanged:
its ``HyperParameters``, channels, ``Environment``, entry point and distribution flags are what the
simulated hosts see. Usable from a plain Python process (no Airflow import), thread-safe.

Public API (stable)::

    from airflow_dist_training.local.executor import LocalExecutor
    from airflow_dist_training.local.store import ObjectStore

    executor = LocalExecutor(jobs_root="/tmp/jobs", store=ObjectStore("/tmp/buckets"))
    job = executor.start(request)              # request: a CreateTrainingJob dict
    job.describe()                             # DescribeTrainingJob-shaped dict
    job.logs("algo-1")                         # that host's output lines so far
    job.stop()                                 # StopTrainingJob: SIGTERM, then SIGKILL
    job.wait(timeout=600)                      # -> describe() once the job has ended
    job.host_dirs()                            # {"algo-1": {"opt_ml", "model", "output", "checkpoints"}}
    executor.get(name)                         # the handle of a job started by this executor

* ``store``: where the request's ``s3://`` URIs live (:class:`~airflow_dist_training.local.store.ObjectStore`):
  a folder standing in for buckets (default ``<jobs_root>/_buckets``), real S3 through a boto3
  client, plus mounts of local folders. Code (``sagemaker_submit_directory`` or the ``code``
  channel) and channels are read from it, and ``model.tar.gz``, ``output.tar.gz`` and checkpoints
  are written to it, under the URIs the request names.
* Each simulated host ``algo-N`` gets its own ``/opt/ml`` tree under ``<jobs_root>/<job>/``
  (``algo-1``: the job folder itself, the others ``hosts/algo-N``), and runs in Linux namespaces
  when this machine allows it (``local/hosts.py``): real ``/opt/ml``, host names that resolve,
  master port 7777. Otherwise the relocated layout is used, with one warning.
* What runs on a host is decided by the request as on SageMaker:

  - ``AlgorithmSpecification.ContainerEntrypoint`` (our launcher mode, ``ModelTrainer``-style):
    that command and its ``ContainerArguments`` (``python``/``python3`` is the job's interpreter);
  - otherwise a framework image in script mode (``sagemaker_program``): AWS's own in-container
    toolkit (``sagemaker-training`` + ``sagemaker-pytorch-training``, the ``train`` entry point)
    when it is installed for the job's interpreter and namespaces are available; else the
    project's re-implementation of that contract (``local/contract.py``).

* Refused up front, with the reason and the nearest local equivalent: MPI (``sagemaker_mpi_enabled``,
  launcher ``mpirun``), SMDDP, SageMaker model parallel, TensorFlow parameter server /
  MultiWorkerMirrored, Pipe input mode. :class:`LocalRequestError` carries the problems.
* ``describe()`` reports ``TrainingJobStatus`` (InProgress, Stopping, Completed, Failed, Stopped),
  ``SecondaryStatus`` and its transitions, ``FailureReason`` (the failing host's
  ``/opt/ml/output/failure``, truncated to 1,024 characters as SageMaker does, or
  ``MaxRuntimeExceeded`` with the log tail, or a rendezvous/name-resolution hang with its cause),
  ``FinalMetricDataList`` (from ``MetricDefinitions``), ``ModelArtifacts`` and timestamps.
"""

from __future__ import annotations

import collections
import contextlib
import datetime as dt
import json
import os
import re
import shlex
import shutil
import sys
import tarfile
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from airflow_dist_training.errors import Problem, SpecValidationError, TrainingJobError, training_job_error
from airflow_dist_training.local import hosts as nshosts
from airflow_dist_training.local.contract import (
    HOMOGENEOUS_GROUP,
    HostFacts,
    HostLayout,
    HostPlan,
    LocalJobPlan,
    config_files,
    host_env,
    host_layout,
    host_name,
    split_hyperparameters,
    to_cmd_args,
)
from airflow_dist_training.local.job_env import inherited_environ, job_python
from airflow_dist_training.local.launcher import LocalJobRun, host_command, sync_dir
from airflow_dist_training.local.metrics import MetricPoint
from airflow_dist_training.local.store import ObjectStore
from airflow_dist_training.results import TrainingResult
from airflow_dist_training.spec.training import Strategy
from airflow_dist_training.storage.location import local_location, split_uri

LogFn = Callable[[str], None]
FAILURE_REASON_LIMIT = 1024  # SageMaker truncates FailureReason to 1,024 characters
PYTORCH_TRAINING_MODULE = "sagemaker_pytorch_container.training:main"
_RESOLUTION_MARKS = (
    "Name or service not known",
    "Temporary failure in name resolution",
    "nodename nor servname provided",
    "No address associated with hostname",
)
# Launcher-mode command the planner writes (sagemaker/launcher.py); its config file says the launcher.
_LAUNCH_CONFIG_ARG = "--config"

REFUSED_FLAGS: dict[str, str] = {
    "sagemaker_mpi_enabled": (
        "MPI (sagemaker_mpi_enabled) cannot run on the local backend: it needs mpirun, sshd on every "
        "host and fixed 30 s sleeps; the nearest local equivalent is distribution.strategy: "
        "torch_distributed (torchrun)"
    ),
    "sagemaker_distributed_dataparallel_enabled": (
        "SMDDP (SageMaker distributed data parallel) needs NVIDIA GPUs, EFA and the smdistributed "
        "library; the nearest local equivalent is distribution.strategy: torch_distributed with "
        'dist.init_process_group("gloo") on CPU'
    ),
    "sagemaker_parameter_server_enabled": (
        "the TensorFlow parameter server cannot run on the local backend (PyTorch only); the nearest "
        "local equivalent is distribution.strategy: torch_distributed"
    ),
    "sagemaker_multi_worker_mirrored_strategy_enabled": (
        "TensorFlow MultiWorkerMirroredStrategy cannot run on the local backend (PyTorch only); the "
        "nearest local equivalent is distribution.strategy: torch_distributed"
    ),
    "sagemaker_pytorch_xla_multi_worker_enabled": (
        "PyTorch/XLA (Trainium) needs Neuron devices; the nearest local equivalent is "
        "distribution.strategy: torch_distributed on CPU"
    ),
}
SMP_REASON = (
    "SageMaker model parallel (mp_parameters / smdistributed.modelparallel) needs GPUs and the SMP "
    "library; the nearest local equivalent is torch_distributed with plain PyTorch FSDP or DDP on CPU"
)


def _without_cut_path(text: str, local: str, public: str) -> str:
    """``text`` whose end is the start of ``local`` (a reason capped mid-path) with that start
    replaced by ``public``: the cap must not leave a piece of this machine's path."""
    start = text.rfind(local[:2]) if len(local) > 1 else -1
    while start != -1:
        tail = text[start:]
        if len(tail) < len(local) and local.startswith(tail) and "/" in tail[1:]:
            return text[:start] + public
        start = text.rfind(local[:2], 0, start)
    return text


class LocalRequestError(SpecValidationError):
    """The request cannot run on this machine; nothing was launched."""


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _decode(value: Any) -> Any:
    try:
        return json.loads(value)
    except (TypeError, ValueError):
        return value


def _truthy(value: Any) -> bool:
    value = _decode(value)
    return value is True or (isinstance(value, str) and value.lower() == "true")


@dataclass
class JobOptions:
    """Local settings of one job (nothing here changes the request).

    :param python: the interpreter that runs the job (default: this one); the spec's
        ``local.python`` mapping chooses it per image.
    :param processes_per_host: processes per host for the project's own torchrun runner (the
        toolkit uses the device count, 1 on CPU).
    :param runner: ``auto`` (AWS's toolkit when installed and namespaces are available),
        ``toolkit`` or ``builtin``.
    :param isolation: ``auto``, ``namespaces`` or ``none`` (default ``$ADT_LOCAL_ISOLATION``).
    :param relay_ports: ports on this machine's 127.0.0.1 the job can reach (added automatically:
        the port of ``AWS_ENDPOINT_URL``/``S3_ENDPOINT_URL`` when it is on loopback).
    :param hang_seconds: how long a rendezvous or name-resolution hang may last before the job
        fails with its cause.
    """

    python: str | None = None
    processes_per_host: int | None = None
    runner: str = "auto"
    isolation: str | None = None
    relay_ports: list[int] = field(default_factory=list)
    checkpoint_sync_seconds: float = 10.0
    stop_grace_seconds: float = 30.0
    hang_seconds: float = 60.0
    extra_env: dict[str, str] = field(default_factory=dict)

    def apply(self, local: Any, spec: Any) -> None:
        """Take the spec's ``local`` settings (``LocalSettings``)."""
        from airflow_dist_training.local.pythons import choose_python

        chosen = choose_python(
            local.python, spec.image.uri or "", spec.image.framework, spec.image.framework_version
        )
        if chosen:
            self.python = chosen
        self.runner = local.runner
        if local.isolation:
            self.isolation = local.isolation
        self.hang_seconds = local.hang_seconds


def toolkit_available(python: str) -> bool:
    """Whether AWS's in-container toolkit is installed for ``python`` (checked without importing it here)."""
    import importlib.util
    import subprocess

    if Path(python).resolve() == Path(sys.executable).resolve():
        return (
            importlib.util.find_spec("sagemaker_training") is not None
            and importlib.util.find_spec("sagemaker_pytorch_container") is not None
        )
    code = "import importlib.util as u,sys; sys.exit(0 if u.find_spec('sagemaker_training') else 1)"
    return subprocess.run([python, "-c", code], capture_output=True, check=False).returncode == 0


def loopback_ports(environ: Mapping[str, str]) -> list[int]:
    """Ports of endpoint URLs on 127.0.0.1/localhost (the S3 endpoint, the SageMaker test endpoint)."""
    ports = []
    for key in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "S3_ENDPOINT_URL", "AWS_ENDPOINT_URL_SAGEMAKER"):
        match = re.match(r"https?://(?:127\.0\.0\.1|localhost):(\d+)", environ.get(key, ""))
        if match:
            ports.append(int(match.group(1)))
    return ports


@dataclass
class RequestPlan:
    """What the request means on this machine (computed before anything is launched)."""

    request: dict[str, Any]
    mode: str  # container | toolkit | builtin
    plan: LocalJobPlan
    isolation: nshosts.Isolation
    code_uri: str | None  # script mode: sagemaker_submit_directory
    channel_uris: dict[str, str]  # channel -> s3:// URI (or mount key)
    checkpoint_uri: str | None
    output_path: str
    model_uri: str
    output_uri: str
    torch_distributed: bool
    python: str
    warnings: list[str] = field(default_factory=list)
    python_why: str = ""  # which setting chose the interpreter (local/job_env.py)


def _groups(resource: Mapping[str, Any]) -> list[tuple[str, str, list[str]]]:
    out: list[tuple[str, str, list[str]]] = []
    index = 0
    if resource.get("InstanceGroups"):
        for g in resource["InstanceGroups"]:
            hosts = [host_name(index + i) for i in range(int(g["InstanceCount"]))]
            index += len(hosts)
            out.append((str(g["InstanceGroupName"]), str(g["InstanceType"]), hosts))
    else:
        count = int(resource.get("InstanceCount", 1))
        out.append(
            (
                HOMOGENEOUS_GROUP,
                str(resource.get("InstanceType", "local")),
                [host_name(i) for i in range(count)],
            )
        )
    return out


def plan_request(
    request: Mapping[str, Any],
    jobs_root: Path,
    store: ObjectStore,
    options: JobOptions,
    *,
    environ: Mapping[str, str] | None = None,
) -> RequestPlan:
    """Check the request for this machine and compute the hosts' plan; raises :class:`LocalRequestError`."""
    environ = os.environ if environ is None else environ
    req: dict[str, Any] = json.loads(json.dumps(request, default=str))
    name = str(request.get("TrainingJobName") or "")
    algorithm = request.get("AlgorithmSpecification") or {}
    hyperparameters = {str(k): str(v) for k, v in (request.get("HyperParameters") or {}).items()}
    user_hps, framework, reserved = split_hyperparameters(hyperparameters)
    problems = _request_problems(request, name, algorithm, hyperparameters)
    mode = "container" if algorithm.get("ContainerEntrypoint") else "script"
    if mode == "script" and "sagemaker_program" not in reserved:
        problems.append(
            Problem(
                "AlgorithmSpecification",
                "has no ContainerEntrypoint and HyperParameters has no sagemaker_program: the local "
                "backend cannot tell what the image would run",
            )
        )
    groups = _groups(request.get("ResourceConfig") or {})
    isolation = nshosts.probe(options.isolation)
    try:
        python, python_why = job_python(
            options.python, environ, image_uri=str(algorithm.get("TrainingImage") or "")
        )
    except SpecValidationError as exc:  # no job environment for this image yet: how to build it
        raise LocalRequestError(exc.problems, source=f"local backend ({name or 'request'})") from None
    if os.sep not in python:  # a command name, e.g. python3: the one on PATH
        python = shutil.which(python) or python
    if not (Path(python).is_file() and os.access(python, os.X_OK)):
        # before anything runs it (the toolkit check below starts it): the setting's error, no traceback
        problems.append(Problem("local.python", f"{python} ({python_why}) is not an executable file"))
        raise LocalRequestError(problems, source=f"local backend ({name or 'request'})")
    torch_distributed = _truthy(hyperparameters.get("sagemaker_torch_distributed_enabled"))
    channel_uris, input_data_config = _request_channels(request, algorithm)
    launch_config: dict[str, Any] = {}
    if mode == "container":
        runner = "container"
        launcher_config = _launcher_config(algorithm, channel_uris, store, problems)
        if launcher_config is not None:
            launch_config = launcher_config
            torch_distributed = launch_config.get("launcher", "torchrun") == "torchrun"
    else:
        runner = _script_runner(options, python, isolation, problems)
    if problems:
        raise LocalRequestError(problems, source=f"local backend ({name or 'request'})")
    hosts = [h for _, _, hs in groups for h in hs]
    dist_hosts = list(hosts)
    if "sagemaker_distribution_instance_groups" in framework:
        wanted = set(framework["sagemaker_distribution_instance_groups"])
        dist_hosts = [h for n, _, hs in groups for h in hs if n in wanted]
    torchrun_hosts = dist_hosts if (torch_distributed and runner == "builtin") else []
    # the project's own runner needs the per-host environment and launch plan (local/contract.py)
    facts = _request_facts(
        jobs_root / name, groups, dist_hosts, reserved, framework, user_hps, input_data_config, environ,
        entry_point=str(reserved.get("sagemaker_program") or launch_config.get("entry_point") or ""),
        torch_distributed=torch_distributed,
    )  # fmt: skip
    host_plans = _request_host_plans(facts, groups, jobs_root / name, torchrun_hosts, isolation, runner)
    rp = _request_plan(
        request, req, jobs_root, store, options, facts, host_plans, runner, mode, torchrun_hosts, isolation,
        channel_uris, torch_distributed, python,
    )  # fmt: skip
    rp.python_why = python_why
    return rp


def _request_facts(
    job_dir: Path,
    groups: list[tuple[str, str, list[str]]],
    dist_hosts: list[str],
    reserved: dict[str, Any],
    framework: dict[str, Any],
    user_hps: dict[str, Any],
    input_data_config: dict[str, dict[str, str]],
    environ: Mapping[str, str],
    *,
    entry_point: str,
    torch_distributed: bool,
) -> HostFacts:
    """The facts every host's environment shares (per-host fields are set by ``_request_host_plans``)."""
    name = job_dir.name
    hosts = [h for _, _, hs in groups for h in hs]
    region = (
        reserved.get("sagemaker_region") or environ.get("AWS_REGION") or environ.get("AWS_DEFAULT_REGION")
    )
    return HostFacts(
        entry=entry_point,
        environment={},
        job_name=name,
        job_arn=job_arn(name),
        layout=host_layout(job_dir, 0),
        host=hosts[0] if hosts else "",
        hosts=hosts,
        group=groups[0][0],
        itype=groups[0][1],
        group_hosts=groups[0][2],
        instance_groups=[
            {"instance_group_name": n, "instance_type": t, "hosts": list(hs)} for n, t, hs in groups
        ],
        dist_groups=[],
        distribution_hosts=dist_hosts if torch_distributed else [],
        master=dist_hosts[0] if dist_hosts else (hosts[0] if hosts else ""),
        resource_config={},
        input_data_config=input_data_config,
        user_hps=user_hps,
        framework_params=framework,
        reserved=reserved,
        user_args=to_cmd_args(user_hps),
        cpu_count=len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1),
        num_gpus=0,
        nic="lo",
        master_port=nshosts.MASTER_PORT,
        region=str(region or "") or None,
    )


def _request_problems(
    request: Mapping[str, Any], name: str, algorithm: Mapping[str, Any], hyperparameters: Mapping[str, str]
) -> list[Problem]:
    """What the local backend refuses in the request itself (name, strategies it cannot run, Pipe mode)."""
    problems: list[Problem] = []
    if not re.fullmatch(r"[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}", name):
        problems.append(Problem("TrainingJobName", f"{name!r} is not a valid training job name"))
    for flag, reason in REFUSED_FLAGS.items():
        if _truthy(hyperparameters.get(flag)):
            problems.append(Problem(f"HyperParameters.{flag}", reason))
    if "mp_parameters" in hyperparameters:
        problems.append(Problem("HyperParameters.mp_parameters", SMP_REASON))
    if algorithm.get("TrainingInputMode") == "Pipe" or any(
        c.get("InputMode") == "Pipe" for c in request.get("InputDataConfig") or []
    ):
        problems.append(
            Problem(
                "AlgorithmSpecification.TrainingInputMode", "Pipe mode is not simulated locally; use File"
            )
        )
    return problems


def _request_channels(
    request: Mapping[str, Any], algorithm: Mapping[str, Any]
) -> tuple[dict[str, str], dict[str, dict[str, str]]]:
    """Each channel's URI (s3://, or fsx:// / efs:// mount keys) and ``inputdataconfig.json``."""
    channel_uris: dict[str, str] = {}
    input_data_config: dict[str, dict[str, str]] = {}
    for channel in request.get("InputDataConfig") or []:
        cname = str(channel["ChannelName"])
        source = channel.get("DataSource") or {}
        if "S3DataSource" in source:
            channel_uris[cname] = str(source["S3DataSource"]["S3Uri"])
            dist_type = str(source["S3DataSource"].get("S3DataDistributionType", "FullyReplicated"))
        else:
            fs = source.get("FileSystemDataSource") or {}
            scheme = "fsx" if fs.get("FileSystemType") == "FSxLustre" else "efs"
            channel_uris[cname] = (
                f"{scheme}://{fs.get('FileSystemId')}/{str(fs.get('DirectoryPath', '')).strip('/')}"
            )
            dist_type = "FullyReplicated"
        entry = {}
        if channel.get("ContentType"):
            entry["ContentType"] = str(channel["ContentType"])
        entry.update(
            {
                "TrainingInputMode": str(
                    channel.get("InputMode") or algorithm.get("TrainingInputMode", "File")
                ),
                "S3DistributionType": dist_type,
                "RecordWrapperType": str(channel.get("RecordWrapperType", "None")),
            }
        )
        if channel.get("CompressionType") and channel["CompressionType"] != "None":
            entry["CompressionType"] = str(channel["CompressionType"])
        input_data_config[cname] = entry
    return channel_uris, input_data_config


def _launcher_config(
    algorithm: Mapping[str, Any], channel_uris: Mapping[str, str], store: ObjectStore, problems: list[Problem]
) -> dict[str, Any] | None:
    """Our launcher's ``launch.json`` (None when the entrypoint is not our launcher); refuses mpirun."""
    if "adt_launcher" not in channel_uris or _LAUNCH_CONFIG_ARG not in (
        algorithm.get("ContainerArguments") or []
    ):
        return None
    launch_config: dict[str, Any] = {}
    with contextlib.suppress(Exception), tempfile.TemporaryDirectory() as tmp:
        store.get_file(channel_uris["adt_launcher"].rstrip("/") + "/launch.json", Path(tmp) / "l.json")
        launch_config = json.loads((Path(tmp) / "l.json").read_text())
    if launch_config.get("launcher") == "mpirun":
        problems.append(
            Problem(
                "distribution.launcher",
                "launcher mpirun cannot run on the local backend (it needs mpirun and sshd on every "
                "simulated host); use launcher: torchrun, the nearest local equivalent",
            )
        )
    return launch_config


def _script_runner(options: JobOptions, python: str, isolation: Any, problems: list[Problem]) -> str:
    """Script mode: AWS's toolkit, or the project's own runner (``builtin``)."""
    if options.runner == "builtin":
        return "builtin"
    if options.runner == "toolkit":
        if not toolkit_available(python):
            problems.append(
                Problem(
                    "local.runner",
                    f"toolkit: sagemaker-training is not installed for {python} (extra 'toolkit')",
                )
            )
        if not isolation.namespaces:
            problems.append(
                Problem(
                    "local.runner", f"toolkit needs namespaces (host names must resolve): {isolation.why}"
                )
            )
        return "toolkit"
    # the toolkit starts one process per device (CPU: one per host); more per host -> builtin
    single = (options.processes_per_host or 1) <= 1
    return "toolkit" if single and isolation.namespaces and toolkit_available(python) else "builtin"


def _request_host_plans(
    facts: HostFacts,
    groups: list[tuple[str, str, list[str]]],
    job_dir: Path,
    torchrun_hosts: list[str],
    isolation: Any,
    runner: str,
) -> list[HostPlan]:
    host_plans: list[HostPlan] = []
    for index, host in enumerate(facts.hosts):
        group, itype, group_hosts = next(g for g in groups if host in g[2])
        layout = host_layout(job_dir, index)
        # the paths a host's processes see: /opt/ml itself with namespaces, its folder otherwise
        seen = HostLayout(host, Path("/opt/ml"), Path("/opt/ml")) if isolation.namespaces else layout
        resource_config = {
            "current_host": host,
            "current_instance_type": itype,
            "current_group_name": group,
            "hosts": list(facts.hosts),
            "instance_groups": facts.instance_groups,
            "network_interface_name": "eth0" if isolation.namespaces else facts.nic,
        }
        env: dict[str, str] = {}
        if runner == "builtin":
            env = host_env(
                replace(
                    facts,
                    layout=seen,
                    host=host,
                    group=group,
                    itype=itype,
                    group_hosts=group_hosts,
                    dist_groups=[group],
                    resource_config=resource_config,
                )
            )
            if isolation.namespaces:
                env["MASTER_ADDR"] = facts.master
        launch = "torchrun" if host in torchrun_hosts else "process"
        host_plans.append(
            HostPlan(
                host=host,
                index=index,
                group=group,
                instance_type=itype,
                layout=layout,
                launch=launch,  # type: ignore[arg-type]
                node_rank=torchrun_hosts.index(host) if launch == "torchrun" else None,
                resource_config=resource_config,
                env=env,
            )
        )
    return host_plans


def _request_plan(
    request: Mapping[str, Any],
    req: dict[str, Any],
    jobs_root: Path,
    store: ObjectStore,
    options: JobOptions,
    facts: HostFacts,
    host_plans: list[HostPlan],
    runner: str,
    mode: str,
    torchrun_hosts: list[str],
    isolation: Any,
    channel_uris: dict[str, str],
    torch_distributed: bool,
    python: str,
) -> RequestPlan:
    """The stores (checkpoints, output) and the whole plan of a checked request."""
    name = facts.job_name
    algorithm = request.get("AlgorithmSpecification") or {}
    warnings: list[str] = []
    checkpoint_uri = (request.get("CheckpointConfig") or {}).get("S3Uri")
    local_path = (request.get("CheckpointConfig") or {}).get("LocalPath")
    if local_path and local_path.rstrip("/") != "/opt/ml/checkpoints":
        warnings.append(
            f"CheckpointConfig.LocalPath {local_path}: the local backend syncs /opt/ml/checkpoints only"
        )
    output_config = request.get("OutputDataConfig") or {}
    output_path = str(output_config.get("S3OutputPath") or f"s3://local-output/{name}")
    base = output_path.rstrip("/")
    plan = LocalJobPlan(
        job_name=name,
        job_dir=jobs_root / name,
        root=jobs_root,
        strategy=Strategy.LAUNCHER
        if mode == "container"
        else (Strategy.TORCH_DISTRIBUTED if torch_distributed else Strategy.NONE),
        hosts=facts.hosts,
        torchrun_hosts=torchrun_hosts,
        processes_per_host=max(1, int(options.processes_per_host or 1)) if runner == "builtin" else 1,
        entry_point=facts.entry,
        source_dir=None,
        hyperparameters_file={str(k): str(v) for k, v in (request.get("HyperParameters") or {}).items()},
        input_data_config=facts.input_data_config,
        user_args=facts.user_args,
        channel_sources={},
        checkpoint_store=store.resolve(checkpoint_uri) if checkpoint_uri else None,
        output_store=store.resolve(output_path),
        output_compression="NONE" if output_config.get("CompressionType") == "NONE" else "GZIP",
        metric_definitions=[(m["Name"], m["Regex"]) for m in algorithm.get("MetricDefinitions") or []],
        host_plans=host_plans,
        warnings=warnings,
    )
    return RequestPlan(
        request=req,
        mode=runner,
        plan=plan,
        isolation=isolation,
        code_uri=str(facts.reserved["sagemaker_submit_directory"])
        if "sagemaker_submit_directory" in facts.reserved
        else None,
        channel_uris=channel_uris,
        checkpoint_uri=checkpoint_uri,
        output_path=output_path,
        model_uri=f"{base}/{name}/output/model.tar.gz",
        output_uri=f"{base}/{name}/output/output.tar.gz",
        torch_distributed=torch_distributed,
        python=python,
        warnings=warnings,
    )


def _remove(path: Path) -> None:
    """Remove a file, symlink or directory tree (nothing when absent)."""
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path)


def job_arn(name: str) -> str:
    return f"arn:aws:sagemaker:local:000000000000:training-job/{name.lower()}"


class _RequestRun(LocalJobRun):
    """``LocalJobRun`` fed by a request: staging through the store, namespaces, the three runners."""

    def __init__(self, rp: RequestPlan, store: ObjectStore, options: JobOptions, log: LogFn) -> None:
        stopping = rp.request.get("StoppingCondition") or {}
        super().__init__(
            rp.plan,
            log=log,
            python=rp.python,
            checkpoint_sync_seconds=options.checkpoint_sync_seconds,
            stop_grace_seconds=options.stop_grace_seconds,
            max_runtime_seconds=float(stopping.get("MaxRuntimeInSeconds", 86400)),
        )
        self.rp = rp
        self.store = store
        self.checkpoint_stores = store.stores
        self.options = options
        self.network: nshosts.JobNetwork | None = None
        self.hang_reason: str | None = None
        self.setup_seconds: dict[str, float] = {}
        self.last_output: dict[str, float] = {h: time.time() for h in rp.plan.hosts}
        self.python_path: str | None = None
        # when the master host started torchrun: a rendezvous hang is measured from there
        self.torchrun_started: float | None = None
        self._refused: list[tuple[float, int]] = []
        self._refused_checked = 0.0
        # the master port was seen listening: the rendezvous happened, so a quiet 7777 later (hosts
        # finishing, the toolkit's interpreter exiting) is no rendezvous hang
        self._rendezvous_seen = False
        self._listen_checked = 0.0
        self._network_ready: threading.Thread | None = None
        self._network_error: BaseException | None = None

    # -- preparation: code, channels, config files, checkpoints, the job's Python
    def prepare(self) -> None:
        plan = self.plan
        self.transition("Starting", f"Preparing {len(plan.hosts)} simulated host(s) under {plan.job_dir}")
        if self.rp.isolation.namespaces and self.network is None:
            # the job's network namespace comes up while the files are staged (it needs none of them)
            self._network_ready = threading.Thread(target=self._start_network, daemon=True)
            self._network_ready.start()
        for warning in plan.warnings:
            self.log(f"[local] WARNING {warning}")
        self.log(f"[local] job Python: {self.rp.python} ({self.rp.python_why})")
        first = plan.host_plans[0].layout
        code = first.code_dir
        if code.exists():
            shutil.rmtree(code)
        code.mkdir(parents=True)
        self.transition("Downloading", "Downloading input data")
        if self.rp.code_uri:
            self._fetch_code(self.rp.code_uri, code)
        for hp in plan.host_plans:
            self._prepare_host(hp, first)
        self._download_channels(first)
        if plan.checkpoint_store is not None:
            for hp in plan.host_plans:
                n = sync_dir(
                    plan.checkpoint_store,
                    local_location(hp.layout.checkpoint_dir),
                    self._synced,
                    self.store.stores,
                )
                if n and hp.index == 0:
                    self.log(f"[local] restored {n} checkpoint file(s) from {self.rp.checkpoint_uri}")
        self._install_requirements()

    def _prepare_host(self, hp: HostPlan, first: HostLayout) -> None:
        """One host's /opt/ml tree: directories, its own code copy, shared input data, config files."""
        lay = hp.layout
        for d in (
            lay.input_config_dir,
            lay.model_dir,
            lay.output_data_dir,
            lay.checkpoint_dir,
            lay.output_intermediate_dir,
        ):
            d.mkdir(parents=True, exist_ok=True)
        for stale in (lay.failure_file, lay.success_file):
            stale.unlink(missing_ok=True)
        if not lay.is_shared_owner:
            self._share_with_first_host(lay, first)
        files = config_files(self.plan, hp, "/opt/ml/checkpoints/" if self.rp.isolation.namespaces else None)
        for fname, content in files.items():
            (lay.input_config_dir / fname).write_text(json.dumps(content))

    def _share_with_first_host(self, lay: HostLayout, first: HostLayout) -> None:
        """Each host has its own /opt/ml/code (a launcher unpacks the code on every host); the input
        data is the first host's (a bind mount with namespaces, a symlink otherwise)."""
        _remove(lay.code_dir)
        shutil.copytree(first.code_dir, lay.code_dir, symlinks=True)
        link, target = lay.input_data_dir, first.input_data_dir
        target.mkdir(parents=True, exist_ok=True)
        _remove(link)
        if self.rp.isolation.namespaces:
            link.mkdir(parents=True)  # a mount point: the host bind-mounts the shared data
        else:
            link.symlink_to(target, target_is_directory=True)

    def _download_channels(self, first: HostLayout) -> None:
        for cname, uri in self.rp.channel_uris.items():
            target = first.channel_dir(cname)
            if target.exists():
                shutil.rmtree(target)
            n = self.store.get_prefix(uri, target)
            self.log(f"[local] channel {cname}: {n} file(s) from {uri}")

    def _fetch_code(self, uri: str, code: Path) -> None:
        if uri.startswith("s3://"):
            with tempfile.TemporaryDirectory() as tmp:
                archive = Path(tmp) / "sourcedir.tar.gz"
                self.store.get_file(uri, archive)
                with tarfile.open(archive, "r:*") as tar:
                    tar.extractall(code, filter="data")
            return
        src = Path(split_uri(uri)[2])
        if src.is_file():
            with tarfile.open(src, "r:*") as tar:
                tar.extractall(code, filter="data")
        else:
            import shutil

            shutil.copytree(src, code, dirs_exist_ok=True, symlinks=True)

    def _install_requirements(self) -> None:
        """``requirements.txt`` in the code: installed before the hosts start (they have no network)."""
        from airflow_dist_training.local.pythons import install_requirements

        code = self.plan.host_plans[0].layout.code_dir
        requirements = code / "requirements.txt"
        if self.rp.mode == "container":
            # launcher mode ships the code as a tarball channel: look inside it
            tarball = self.plan.host_plans[0].layout.channel_dir("code") / "sourcedir.tar.gz"
            if tarball.is_file():
                with tarfile.open(tarball, "r:*") as tar:
                    member = next(
                        (m for m in tar.getmembers() if m.name.lstrip("./") == "requirements.txt"), None
                    )
                    if member is not None:
                        extracted = tar.extractfile(member)
                        assert extracted is not None
                        requirements = self.plan.job_dir / ".requirements.txt"
                        requirements.write_bytes(extracted.read())
        if not requirements.is_file():
            return
        self.python_path = str(
            install_requirements(
                requirements, self.rp.python, self.plan.root / "_envs", log=self.log, code_dir=code
            )
        )

    # -- launch
    def _start_network(self) -> None:
        plan = self.plan
        ports = list(self.options.relay_ports) + loopback_ports(os.environ)
        network = nshosts.JobNetwork(plan.job_dir, plan.hosts, self.rp.isolation, ports)
        self.network = network  # before start: close() cleans up whatever start() got to
        try:
            network.start()
        except BaseException as exc:
            self._network_error = exc
            return
        self.log(
            f"[local] job network namespace ready in {network.setup_seconds * 1000:.0f} ms (hosts: {', '.join(plan.hosts)}, master port {nshosts.MASTER_PORT})"
        )

    def _wait_network(self) -> None:
        if self._network_ready is not None:
            self._network_ready.join()
            self._network_ready = None

    def launch(self) -> None:
        plan = self.plan
        if self.rp.isolation.namespaces:
            if self.network is None and self._network_ready is None:
                self._network_ready = threading.Thread(target=self._start_network, daemon=True)
                self._network_ready.start()
            self._wait_network()
            if self._network_error is not None:
                raise self._network_error
        port = nshosts.MASTER_PORT if self.rp.isolation.namespaces else _free_port()
        if self.training_started is None:
            self.transition(
                "Training",
                f"Launching {len(plan.hosts)} host(s) ({self.rp.mode} runner, {'namespaces' if self.rp.isolation.namespaces else 'relocated layout'})",
            )
            self.training_started = time.time()

        for hp in plan.host_plans:
            cmd, env, cwd = self._host_command(hp, port)
            job_cmd = list(cmd)
            if self.network is not None:
                env["ADT_WORKDIR"] = cwd
                env["ADT_SHARED_DATA"] = str(plan.host_plans[0].layout.input_data_dir)
                cmd = self.network.host_command(hp.index, hp.host, hp.layout.base, cmd)
                cwd = "/"
            shown = " ".join(shlex.quote(c) for c in cmd[-8:]) if self.network else " ".join(cmd)
            if self._spawn(hp.host, cmd, env, cwd, shown, job_cmd) is None:
                return

    def _on_line(self, host: str, line: str) -> None:
        # what the hang watchdog needs, then the shared handling (tail, live metrics, log)
        self.last_output[host] = time.time()
        if self.torchrun_started is None and host == self.plan.hosts[0]:
            if "torchrun" in line or "torch.distributed.run" in line:
                self.torchrun_started = time.time()
        super()._on_line(host, line)

    def _base_env(self, hp: HostPlan) -> dict[str, str]:
        env = inherited_environ()
        python_bin = str(Path(self.rp.python).parent)
        env["PATH"] = f"{python_bin}{os.pathsep}{env.get('PATH', '')}"
        env.update({str(k): str(v) for k, v in (self.rp.request.get("Environment") or {}).items()})
        env["TRAINING_JOB_NAME"] = self.plan.job_name
        env["TRAINING_JOB_ARN"] = job_arn(self.plan.job_name)
        env["PYTHONUNBUFFERED"] = "1"
        env["ADT_LOCAL_BACKEND"] = "1"
        # ours: the checkpoint directory (no SageMaker variable names it; scripts use /opt/ml/checkpoints)
        env["SM_CHECKPOINT_DIR"] = (
            "/opt/ml/checkpoints" if self.rp.isolation.namespaces else str(hp.layout.checkpoint_dir)
        )
        # the hosts have no network: pip must not wait for an index (requirements are pre-installed)
        env["PIP_NO_INDEX"] = "1"
        env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
        if self.python_path:
            env["PYTHONPATH"] = self.python_path
            # the toolkit's own `pip install -r` inside the host goes to the same cached folder,
            # never into the worker's environment
            env["PIP_TARGET"] = self.python_path
        env.update(self.options.extra_env)
        return env

    def _host_command(self, hp: HostPlan, port: int) -> tuple[list[str], dict[str, str], str]:
        """argv, environment and working directory of one host (before the namespace wrapper)."""
        ns = self.rp.isolation.namespaces
        env = self._base_env(hp)
        opt_ml = "/opt/ml" if ns else str(hp.layout.base)
        if self.rp.mode == "container":
            algorithm = self.rp.request["AlgorithmSpecification"]
            argv = [*algorithm["ContainerEntrypoint"], *(algorithm.get("ContainerArguments") or [])]
            if argv and argv[0] in ("python", "python3"):
                argv[0] = self.rp.python
            if not ns:
                argv = [a.replace("/opt/ml", opt_ml) if a.startswith("/opt/ml") else a for a in argv]
                env["ADT_OPT_ML"] = opt_ml
                env["ADT_MASTER_ADDR"] = "127.0.0.1"
                env["ADT_MASTER_PORT"] = str(port)
            return argv, env, "/" if ns else str(hp.layout.base)
        if self.rp.mode == "toolkit":
            image = str(self.rp.request["AlgorithmSpecification"].get("TrainingImage", ""))
            if "pytorch" in image or not image:
                env["SAGEMAKER_TRAINING_MODULE"] = PYTORCH_TRAINING_MODULE
            argv = [
                self.rp.python,
                "-c",
                "import sys; from sagemaker_training.cli.train import main; sys.exit(main())",
                "train",
            ]
            return argv, env, "/"
        # builtin: the project's re-implementation of the toolkit contract
        env.update(hp.env)
        env["MASTER_PORT"] = str(port)
        if self.python_path:
            env["PYTHONPATH"] = f"{hp.env.get('PYTHONPATH', '')}{os.pathsep}{self.python_path}"
        argv = host_command(self.plan, hp, port, self.rp.python)
        if ns:
            master = self.plan.torchrun_hosts[0] if self.plan.torchrun_hosts else self.plan.hosts[0]
            argv = [f"--master-addr={master}" if a == "--master-addr=127.0.0.1" else a for a in argv]
        return argv, env, f"{opt_ml}/code"

    # -- waiting: the launcher's loop, plus the hang watchdog
    def _watch(self, now: float) -> None:
        if self.network is not None and not self._rendezvous_seen and now - self._listen_checked >= 0.5:
            self._listen_checked = now
            self._rendezvous_seen = self.network.listening(nshosts.MASTER_PORT)
        if self.hang_reason is None and not self.stop_requested.is_set():
            reason = self._hang(now)
            if reason is not None:
                self.hang_reason = reason
                self.log(f"[local] {reason}")
                self.stop(min(self.stop_grace_seconds, 5.0))

    def _resolution_hang(self, waited: float) -> str | None:
        """A host's recent output names a name-resolution failure."""
        for host, tail in self.tails.items():
            recent = list(tail)[-20:]
            mark = next(
                (line for line in reversed(recent) if any(m in line for m in _RESOLUTION_MARKS)), None
            )
            if mark is not None:
                return (
                    f"Name resolution hang on {host} after {waited:.0f} s: {mark.strip()[:300]}. "
                    f"Host names that resolve in this job: {', '.join(self.plan.hosts)}"
                )
        return None

    def _hang(self, now: float) -> str | None:
        """A rendezvous or name-resolution hang, with its cause (None: no hang seen)."""
        limit = self.options.hang_seconds
        if self.training_started is None or now - self.training_started < limit:
            return None
        waited = now - self.training_started
        resolution = self._resolution_hang(waited)
        if resolution is not None:
            return resolution
        if self.network is None or len(self.plan.hosts) < 2 or self._rendezvous_seen:
            return None
        master = self.plan.hosts[0]
        started = self.torchrun_started if self.rp.mode != "builtin" else self.training_started
        if (
            self.rp.torch_distributed
            and started is not None
            and now - started >= limit
            and all(p.poll() is None for p in self.processes.values())
        ):
            return (
                f"Rendezvous hang: nothing listens on {master}:{nshosts.MASTER_PORT} {now - started:.0f} s "
                "after torchrun started there, so the other hosts cannot join (the master host did not "
                "start its rendezvous store: check that the script or launcher uses the master address "
                "and port 7777)"
            )
        # a script doing its own rendezvous retries silently (torch reports only after its 30 min
        # timeout): refused connection attempts inside the job while nothing listens on 7777
        if now - self._refused_checked >= 1.0:
            self._refused_checked = now
            self._refused.append((now, self.network.refused_connections()))
            self._refused = [(t, n) for t, n in self._refused if now - t <= limit]
        window = [n for t, n in self._refused if now - t <= limit / 2]
        if len(self._refused) > 2 and window and self._refused[0][0] <= now - limit / 2:
            if window[-1] > window[0] and self._refused[-1][1] > self._refused[0][1]:
                return (
                    f"Rendezvous hang after {waited:.0f} s: connection attempts inside the job keep being "
                    f"refused ({self._refused[-1][1] - self._refused[0][1]} in the last {limit:.0f} s) and "
                    f"nothing listens on {master}:{nshosts.MASTER_PORT}: a host waits for a master that never "
                    "opened its rendezvous store (check the master address and port 7777, and that the "
                    "master host reaches init_process_group)"
                )
        for host, tail in self.tails.items():
            line = next(
                (
                    text
                    for text in reversed(list(tail)[-20:])
                    if str(nshosts.MASTER_PORT) in text
                    and any(m in text for m in ("failed to connect", "Connection refused", "timed out"))
                ),
                None,
            )
            if line is not None:
                return (
                    f"Rendezvous hang on {host} after {waited:.0f} s: it cannot reach "
                    f"{master}:{nshosts.MASTER_PORT}, where nothing listens ({line.strip()[:300]}). "
                    "The master host never opened its rendezvous store."
                )
        return None

    # -- failures like SageMaker's
    def fail(self, codes: dict[str, int]) -> TrainingJobError:
        error = super().fail(codes)
        plan = self.plan
        tail_host = next((h for h, c in codes.items() if c != 0), plan.hosts[0])
        if self.hang_reason is not None:
            error = training_job_error(
                f"Local training job {plan.job_name} failed: {self.hang_reason}",
                job_name=plan.job_name,
                status="Failed",
                failure_reason=f"AlgorithmError: {self.hang_reason}"[:FAILURE_REASON_LIMIT],
            )
        elif self.max_runtime_exceeded:
            tail = "\n".join(list(self.tails[tail_host])[-10:])
            reason = (
                f"MaxRuntimeExceeded: Training job timed out after {self.max_runtime_seconds:.0f} s. "
                f"Last lines of {tail_host}:\n{tail}"
            )
            error = TrainingJobError(
                f"Local training job {plan.job_name} exceeded MaxRuntimeInSeconds ({self.max_runtime_seconds:.0f} s). "
                f"Last lines of {tail_host}:\n{tail}",
                job_name=plan.job_name,
                status="Stopped",
                failure_reason=reason[:FAILURE_REASON_LIMIT],
            )
        elif error.failure_reason:
            error.failure_reason = self.public_text(error.failure_reason)[:FAILURE_REASON_LIMIT]
        return error

    def public_text(self, text: str) -> str:
        """``text`` as SageMaker would give it: no path of this machine. The hosts' folders are
        ``/opt/ml``; the job's environment is the image's ``/opt/conda``."""
        replacements = [(str(hp.layout.base), "/opt/ml") for hp in self.plan.host_plans]
        python = Path(self.rp.python)
        if (python.parent.parent / "pyvenv.cfg").is_file():  # a virtualenv: the job environment
            replacements.append((str(python.parent.parent), "/opt/conda"))
        else:
            replacements.append((str(python), "python3"))
        for local, public in sorted(replacements, key=lambda r: -len(r[0])):
            text = text.replace(local, public)
            text = _without_cut_path(text, local, public)
        return text

    # -- artifacts through the store
    def finish(self) -> tuple[str, str]:
        plan = self.plan
        self.transition("Uploading", f"Uploading generated training model to {self.rp.output_path}")
        if plan.checkpoint_store is not None:
            n = self.sync_checkpoints()
            self.log(f"[local] synced {n} checkpoint file(s) to {self.rp.checkpoint_uri}")
        for hp in plan.host_plans:
            hp.layout.success_file.write_text("")
        with tempfile.TemporaryDirectory() as tmp:
            from airflow_dist_training.local.launcher import pack_dirs

            if plan.output_compression == "NONE":
                model_prefix = self.rp.model_uri.rsplit("/", 1)[0] + "/model"
                for hp in plan.host_plans:
                    for path in sorted(hp.layout.model_dir.rglob("*")):
                        if path.is_file():
                            self.store.put_file(
                                path, f"{model_prefix}/{path.relative_to(hp.layout.model_dir).as_posix()}"
                            )
                model = self.store.local_uri(model_prefix)
            else:
                pack_dirs([hp.layout.model_dir for hp in plan.host_plans], Path(tmp) / "model.tar.gz")
                model = self.store.put_file(Path(tmp) / "model.tar.gz", self.rp.model_uri)
            pack_dirs([hp.layout.output_data_dir for hp in plan.host_plans], Path(tmp) / "output.tar.gz")
            output = self.store.put_file(Path(tmp) / "output.tar.gz", self.rp.output_uri)
        self.log(f"[local] model artifact: {self.rp.model_uri} ({model})")
        return model, output

    def close(self) -> None:
        self._wait_network()  # a failed preparation still closes the namespace started beside it
        if self.network is not None:
            self.network.close()


def _free_port() -> int:
    from airflow_dist_training.local.launcher import free_port

    return free_port()


class LocalTrainingJob:
    """The handle of one job started by :meth:`LocalExecutor.start` (thread-safe)."""

    def __init__(self, rp: RequestPlan, store: ObjectStore, options: JobOptions, log: LogFn | None) -> None:
        self.name = rp.plan.job_name
        self.arn = job_arn(self.name)
        self.job_dir = rp.plan.job_dir
        self.request = rp.request
        self.plan = rp
        self.store = store
        self.created = _now()
        self._lock = threading.Lock()
        self._lines: collections.deque[str] = collections.deque(maxlen=20000)
        self._user_log = log
        self._run = _RequestRun(rp, store, options, self._log)
        self._result: TrainingResult | None = None
        self._error: TrainingJobError | None = None
        self._ended: dt.datetime | None = None
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._main, name=f"local-job-{self.name}", daemon=True)

    def _log(self, line: str) -> None:
        self._lines.append(line)
        if self._user_log is not None:
            self._user_log(line)

    def _main(self) -> None:
        try:
            if self._run.rp.isolation.namespaces is False:
                warning = nshosts.warn_fallback_once(self._run.rp.isolation)
                if warning:
                    self._log(f"[local] WARNING {warning}")
            self._result = self._run.run()
        except TrainingJobError as exc:
            self._error = exc
        except BaseException as exc:  # a bug or an I/O error: the job fails with it, never hangs
            self._error = TrainingJobError(
                f"Local training job {self.name} failed: {type(exc).__name__}: {exc}",
                job_name=self.name,
                status="Failed",
                failure_reason=f"InternalServerError: {type(exc).__name__}: {exc}"[:FAILURE_REASON_LIMIT],
            )
            with contextlib.suppress(Exception):
                self._run.transition("Failed", str(exc))
        finally:
            with contextlib.suppress(Exception):
                self._run.close()
            self._ended = _now()
            self._done.set()

    # -- public API
    def stop(self, grace_seconds: float | None = None, *, wait: bool = False) -> None:
        """Stop the job (SIGTERM to every host, SIGKILL after the grace period).

        Returns at once, unless ``wait``: then once every host process is gone."""
        if self._done.is_set():
            return
        if wait:
            self._run.stop(grace_seconds)
            return
        threading.Thread(target=self._run.stop, args=(grace_seconds,), daemon=True).start()
        self._run.stop_requested.set()

    def wait(self, timeout: float | None = None) -> dict[str, Any]:
        """Wait for the job to end (or ``timeout``) and return :meth:`describe`."""
        self._done.wait(timeout)
        return self.describe()

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def logs(self, host: str | None = None) -> list[str]:
        """Output lines so far: one host's (without the ``[algo-N]`` prefix), or all (with it)."""
        lines = list(self._lines)
        if host is None:
            return lines
        prefix = f"[{host}] "
        return [line[len(prefix) :] for line in lines if line.startswith(prefix)]

    def metric_points(self, start: int = 0) -> list[MetricPoint]:
        """The points parsed so far from the hosts' output lines by ``MetricDefinitions``, from the
        ``start``-th on (each with its host and the time its line was seen)."""
        return list(self._run.metrics.series[start:])

    def host_dirs(self) -> dict[str, dict[str, str]]:
        """Each host's ``/opt/ml`` folder and its model, output and checkpoint folders."""
        return {
            hp.host: {
                "opt_ml": str(hp.layout.base),
                "model": str(hp.layout.model_dir),
                "output": str(hp.layout.output_dir),
                "checkpoints": str(hp.layout.checkpoint_dir),
            }
            for hp in self._run.plan.host_plans
        }

    def result(self) -> TrainingResult:
        """The XCom result of a Completed job; raises ``TrainingJobError`` otherwise (waits for the end)."""
        self._done.wait()
        if self._error is not None:
            raise self._error
        assert self._result is not None
        return self._result

    def _statuses(self, secondary: str) -> tuple[str, str, str | None]:
        """(TrainingJobStatus, SecondaryStatus, FailureReason) as SageMaker reports them."""
        run = self._run
        if not self._done.is_set():
            if run.stop_requested.is_set():
                return "Stopping", "Stopping", None
            return "InProgress", secondary, None
        if self._error is None:
            return "Completed", secondary, None
        status = self._error.status if self._error.status in ("Failed", "Stopped") else "Failed"
        if run.max_runtime_exceeded:
            return status, "MaxRuntimeExceeded", self._error.failure_reason
        if status == "Stopped":
            return status, "Stopped", None
        return status, "Failed", self._error.failure_reason

    def describe(self) -> dict[str, Any]:
        """A ``DescribeTrainingJob``-shaped dict (datetimes as ``datetime``, like boto3)."""
        run = self._run
        timeline = list(run.timeline)
        status, secondary, failure = self._statuses(timeline[-1]["status"] if timeline else "Starting")
        transitions = [
            {
                "Status": t["status"],
                "StartTime": _parse(t["start"]),
                **({"EndTime": _parse(t["end"])} if t["end"] else {}),
                "StatusMessage": t["message"],
            }
            for t in timeline
        ]
        now = _now()
        metrics = [
            {"MetricName": k, "Value": float(v), "Timestamp": self._ended or now}
            for k, v in sorted(run.metrics.final.items())
        ]
        desc: dict[str, Any] = {
            "TrainingJobName": self.name,
            "TrainingJobArn": self.arn,
            "TrainingJobStatus": status,
            "SecondaryStatus": secondary,
            "SecondaryStatusTransitions": transitions,
            "CreationTime": self.created,
            "LastModifiedTime": self._ended or now,
            "FinalMetricDataList": metrics,
            "ModelArtifacts": {"S3ModelArtifacts": self.plan.model_uri},
        }
        for key in (
            "AlgorithmSpecification",
            "RoleArn",
            "HyperParameters",
            "InputDataConfig",
            "OutputDataConfig",
            "ResourceConfig",
            "StoppingCondition",
            "CheckpointConfig",
            "Environment",
            "VpcConfig",
            "EnableNetworkIsolation",
            "EnableManagedSpotTraining",
            "RetryStrategy",
            "TensorBoardOutputConfig",
        ):
            if key in self.request:
                desc[key] = self.request[key]
        if run.training_started is not None:
            desc["TrainingStartTime"] = dt.datetime.fromtimestamp(run.training_started, dt.UTC)
        if self._done.is_set():
            desc["TrainingEndTime"] = self._ended
            if run.training_started is not None:
                seconds = int((run.training_ended or time.time()) - run.training_started)
                desc["TrainingTimeInSeconds"] = seconds
                desc["BillableTimeInSeconds"] = 0  # nothing is billed locally
        if failure:
            desc["FailureReason"] = failure
        return desc


def _parse(stamp: str) -> dt.datetime:
    return dt.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=dt.UTC)


class LocalExecutor:
    """Runs ``CreateTrainingJob`` requests on this machine; one handle per job name (thread-safe).

    :param jobs_root: where each job's folder (``<jobs_root>/<job name>``) is created.
    :param store: where the request's ``s3://`` URIs live (default: ``<jobs_root>/_buckets``).
    :param options: default :class:`JobOptions` of the jobs started.
    """

    def __init__(
        self, jobs_root: str | Path, store: ObjectStore | None = None, options: JobOptions | None = None
    ) -> None:
        self.jobs_root = Path(jobs_root).absolute()
        self.store = store or ObjectStore(self.jobs_root / "_buckets")
        self.options = options or JobOptions()
        self._jobs: dict[str, LocalTrainingJob] = {}
        self._lock = threading.Lock()

    def plan(
        self,
        request: Mapping[str, Any],
        *,
        store: ObjectStore | None = None,
        options: JobOptions | None = None,
    ) -> RequestPlan:
        """Check a request without running it (raises :class:`LocalRequestError`)."""
        return plan_request(request, self.jobs_root, store or self.store, options or self.options)

    def start(
        self,
        request: Mapping[str, Any],
        *,
        store: ObjectStore | None = None,
        options: JobOptions | None = None,
        log: LogFn | None = None,
    ) -> LocalTrainingJob:
        """Start a job from a ``CreateTrainingJob`` request; returns at once with its handle.

        Raises :class:`LocalRequestError` (nothing launched) when the request cannot run here, and
        ``ValueError`` when a job of that name is still running in this executor.
        """
        store = store or self.store
        rp = plan_request(request, self.jobs_root, store, options or self.options)
        with self._lock:
            current = self._jobs.get(rp.plan.job_name)
            if current is not None and not current.done:
                raise ValueError(f"training job {rp.plan.job_name} is already running")
            job = LocalTrainingJob(rp, store, options or self.options, log)
            self._jobs[job.name] = job
        job._thread.start()
        return job

    def get(self, name: str) -> LocalTrainingJob | None:
        with self._lock:
            return self._jobs.get(name)

    def jobs(self) -> list[LocalTrainingJob]:
        with self._lock:
            return list(self._jobs.values())
