"""What a ``CreateTrainingJob`` request means on this machine, computed before anything launches.

:func:`plan_request` checks the request (the strategies and modes the local backend refuses, with
the nearest local equivalent) and turns it into a :class:`RequestPlan`: the runner, the hosts'
plans (``local/contract.py``), the stores. Its only looks outside the request: the isolation
probe, the job's interpreter (and whether AWS's toolkit is installed for it), and the launcher's
``launch.json`` in the store.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from airflow_dist_training.errors import Problem, SpecValidationError
from airflow_dist_training.local import hosts as nshosts
from airflow_dist_training.local.contract import (
    HOMOGENEOUS_GROUP,
    NIC,
    HostFacts,
    HostLayout,
    HostPlan,
    LocalJobPlan,
    host_env,
    host_layout,
    host_name,
    split_hyperparameters,
    to_cmd_args,
)
from airflow_dist_training.local.job_env import job_python
from airflow_dist_training.local.store import RequestStore
from airflow_dist_training.sagemaker.hyperparameters import decode_hyperparameter

# the account of local jobs' ARNs (the test endpoint passes its own)
LOCAL_ACCOUNT = "000000000000"
# Launcher-mode command the planner writes (sagemaker/launcher.py); its config file says the launcher.
_LAUNCH_CONFIG_ARG = "--config"
_WRAP_ARG = "--wrap"  # the same launcher as the toolkit shim (sagemaker/launcher.py: WRAP_ARG)

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


class LocalRequestError(SpecValidationError):
    """The request cannot run on this machine; nothing was launched."""


def _truthy(value: Any) -> bool:
    value = decode_hyperparameter(value)
    return value is True or (isinstance(value, str) and value.lower() == "true")


STOP_GRACE_ENV = "ADT_STOP_GRACE_SECONDS"
SAGEMAKER_STOP_GRACE_SECONDS = 120.0  # API_StopTrainingJob: SIGTERM, then SIGKILL 120 s later


def default_stop_grace_seconds(environ: Mapping[str, str] | None = None) -> float:
    """SageMaker's SIGTERM-to-SIGKILL window, or ``$ADT_STOP_GRACE_SECONDS`` (shorter in tests; a
    setting of this machine's local backend and test endpoint, never passed to a job)."""
    value = (os.environ if environ is None else environ).get(STOP_GRACE_ENV, "").strip()
    if not value:
        return SAGEMAKER_STOP_GRACE_SECONDS
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds <= 3600:
        raise ValueError(f"{STOP_GRACE_ENV} must be a number of seconds from 0 to 3600, got {value!r}")
    return seconds


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
    :param stop_grace_seconds: SIGTERM-to-SIGKILL window of a stop (SageMaker's 120 s by default).
    :param region: the region the job runs in (its ARN, ``SAGEMAKER_REGION``); default ``local``
        in the ARN and the caller's ``AWS_REGION`` for the toolkit.
    :param account: the account in the job's ARN (the test endpoint passes its own).
    :param image_environ: the environment the job starts from, under SageMaker's variables (the
        test endpoint: :func:`~airflow_dist_training.local.job_env.image_environ`); default: this
        process's (:func:`~airflow_dist_training.local.job_env.inherited_environ`).
    """

    python: str | None = None
    processes_per_host: int | None = None
    runner: str = "auto"
    isolation: str | None = None
    relay_ports: list[int] = field(default_factory=list)
    checkpoint_sync_seconds: float = 10.0
    stop_grace_seconds: float = field(default_factory=default_stop_grace_seconds)
    hang_seconds: float = 60.0
    extra_env: dict[str, str] = field(default_factory=dict)
    region: str | None = None
    account: str = LOCAL_ACCOUNT
    image_environ: dict[str, str] | None = None

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
    torch_distributed: bool
    python: str
    python_why: str  # which setting chose the interpreter (local/job_env.py)
    job_arn: str  # TRAINING_JOB_ARN, as DescribeTrainingJob reports it
    image_environ: dict[str, str] | None  # JobOptions.image_environ
    toolkit_shim: bool = False  # script mode under our launcher's --wrap (stopping.forward_sigterm)

    @property
    def warnings(self) -> list[str]:
        return self.plan.warnings

    @property
    def model_uri(self) -> str:
        return f"{self.output_path.rstrip('/')}/{self.plan.job_name}/output/model.tar.gz"

    @property
    def output_uri(self) -> str:
        return f"{self.output_path.rstrip('/')}/{self.plan.job_name}/output/output.tar.gz"


def _groups(resource: Mapping[str, Any]) -> list[tuple[str, str, list[str]]]:
    """``(group name, instance type, hosts)`` of each instance group (one group when homogeneous)."""
    if not resource.get("InstanceGroups"):
        hosts = [host_name(i) for i in range(int(resource.get("InstanceCount", 1)))]
        return [(HOMOGENEOUS_GROUP, str(resource.get("InstanceType", "local")), hosts)]
    out: list[tuple[str, str, list[str]]] = []
    for g in resource["InstanceGroups"]:
        first = sum(len(hosts) for _, _, hosts in out)  # host names run on across the groups
        hosts = [host_name(first + i) for i in range(int(g["InstanceCount"]))]
        out.append((str(g["InstanceGroupName"]), str(g["InstanceType"]), hosts))
    return out


def plan_request(
    request: Mapping[str, Any],
    jobs_root: Path,
    store: RequestStore,
    options: JobOptions,
    *,
    environ: Mapping[str, str] | None = None,
) -> RequestPlan:
    """Check the request for this machine and compute the hosts' plan; raises :class:`LocalRequestError`."""
    environ = os.environ if environ is None else environ
    name = str(request.get("TrainingJobName") or "")
    algorithm = request.get("AlgorithmSpecification") or {}
    hyperparameters = {str(k): str(v) for k, v in (request.get("HyperParameters") or {}).items()}
    user_hps, framework, reserved = split_hyperparameters(hyperparameters)
    problems = _request_problems(request, name, algorithm, hyperparameters)
    # stopping.forward_sigterm: script mode, the toolkit under our launcher's --wrap (it forwards SIGTERM)
    arguments = list(algorithm.get("ContainerArguments") or [])
    toolkit_shim = arguments[:1] == [_WRAP_ARG] and "sagemaker_program" in reserved
    mode = "container" if algorithm.get("ContainerEntrypoint") and not toolkit_shim else "script"
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
    channel_uris, input_data_config = request_channels(request, algorithm)
    launch_config: dict[str, Any] | None = None
    if mode == "container":
        runner = "container"
        launch_config = _launcher_config(algorithm, channel_uris, store, problems)
        if launch_config is not None:
            torch_distributed = launch_config.get("launcher", "torchrun") == "torchrun"
    else:
        runner = _script_runner(options, python, isolation, problems)
    if problems:
        raise LocalRequestError(problems, source=f"local backend ({name or 'request'})")
    # the project's own runner needs the per-host environment and launch plan (local/contract.py)
    arn = job_arn(name, options.region, options.account)
    facts = _request_facts(
        jobs_root / name, groups, reserved, framework, user_hps, input_data_config, environ, arn, options.region,
        entry_point=str(reserved.get("sagemaker_program") or (launch_config or {}).get("entry_point") or ""),
        torch_distributed=torch_distributed,
    )  # fmt: skip
    torchrun_hosts = facts.distribution_hosts if runner == "builtin" else []
    host_plans = _request_host_plans(facts, groups, jobs_root / name, torchrun_hosts, isolation, runner)
    return RequestPlan(
        request=json.loads(json.dumps(request, default=str)),
        mode=runner,
        plan=_job_plan(request, jobs_root, store, options, facts, host_plans, runner),
        isolation=isolation,
        code_uri=str(reserved["sagemaker_submit_directory"])
        if "sagemaker_submit_directory" in reserved
        else None,
        channel_uris=channel_uris,
        checkpoint_uri=(request.get("CheckpointConfig") or {}).get("S3Uri"),
        output_path=_output_path(request),
        torch_distributed=torch_distributed,
        python=python,
        python_why=python_why,
        job_arn=arn,
        image_environ=options.image_environ,
        toolkit_shim=toolkit_shim,
    )


def _request_facts(
    job_dir: Path,
    groups: list[tuple[str, str, list[str]]],
    reserved: dict[str, Any],
    framework: dict[str, Any],
    user_hps: dict[str, Any],
    input_data_config: dict[str, dict[str, str]],
    environ: Mapping[str, str],
    arn: str,
    job_region: str | None,
    *,
    entry_point: str,
    torch_distributed: bool,
) -> HostFacts:
    """The facts every host's environment shares (per-host fields are set by ``_request_host_plans``)."""
    name = job_dir.name
    hosts = [h for _, _, hs in groups for h in hs]
    dist_hosts = list(hosts)
    if "sagemaker_distribution_instance_groups" in framework:
        wanted = set(framework["sagemaker_distribution_instance_groups"])
        dist_hosts = [h for n, _, hs in groups for h in hs if n in wanted]
    region = (
        job_region
        or reserved.get("sagemaker_region")
        or environ.get("AWS_REGION")
        or environ.get("AWS_DEFAULT_REGION")
    )
    return HostFacts(
        entry=entry_point,
        job_name=name,
        job_arn=arn,
        layout=host_layout(job_dir, 0),
        hosts=hosts,
        instance_groups=[
            {"instance_group_name": n, "instance_type": t, "hosts": list(hs)} for n, t, hs in groups
        ],
        distribution_hosts=dist_hosts if torch_distributed else [],
        master=dist_hosts[0] if dist_hosts else (hosts[0] if hosts else ""),
        input_data_config=input_data_config,
        user_hps=user_hps,
        framework_params=framework,
        reserved=reserved,
        user_args=to_cmd_args(user_hps),
        cpu_count=nshosts.available_cpus(),
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


def request_channels(
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
        mode = channel.get("InputMode") or algorithm.get("TrainingInputMode", "File")
        entry = {"ContentType": str(channel["ContentType"])} if channel.get("ContentType") else {}
        entry["TrainingInputMode"] = str(mode)
        entry["S3DistributionType"] = dist_type
        entry["RecordWrapperType"] = str(channel.get("RecordWrapperType", "None"))
        if channel.get("CompressionType") and channel["CompressionType"] != "None":
            entry["CompressionType"] = str(channel["CompressionType"])
        input_data_config[cname] = entry
    return channel_uris, input_data_config


def _launcher_config(
    algorithm: Mapping[str, Any],
    channel_uris: Mapping[str, str],
    store: RequestStore,
    problems: list[Problem],
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
        seen = HostLayout(Path("/opt/ml")) if isolation.namespaces else layout
        resource_config = {
            "current_host": host,
            "current_instance_type": itype,
            "current_group_name": group,
            "hosts": list(facts.hosts),
            "instance_groups": facts.instance_groups,
            "network_interface_name": "eth0" if isolation.namespaces else NIC,
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
                layout=layout,
                launch=launch,  # type: ignore[arg-type]
                node_rank=torchrun_hosts.index(host) if launch == "torchrun" else None,
                resource_config=resource_config,
                env=env,
            )
        )
    return host_plans


def _output_path(request: Mapping[str, Any]) -> str:
    name = request.get("TrainingJobName")
    return str((request.get("OutputDataConfig") or {}).get("S3OutputPath") or f"s3://local-output/{name}")


def _job_plan(
    request: Mapping[str, Any],
    jobs_root: Path,
    store: RequestStore,
    options: JobOptions,
    facts: HostFacts,
    host_plans: list[HostPlan],
    runner: str,
) -> LocalJobPlan:
    """The stores (checkpoints, output) and the whole plan of a checked request."""
    name = facts.job_name
    algorithm = request.get("AlgorithmSpecification") or {}
    warnings: list[str] = []
    checkpoint = request.get("CheckpointConfig") or {}
    local_path = checkpoint.get("LocalPath")
    if local_path and local_path.rstrip("/") != "/opt/ml/checkpoints":
        warnings.append(
            f"CheckpointConfig.LocalPath {local_path}: the local backend syncs /opt/ml/checkpoints only"
        )
    return LocalJobPlan(
        job_name=name,
        job_dir=jobs_root / name,
        root=jobs_root,
        hosts=facts.hosts,
        torchrun_hosts=[hp.host for hp in host_plans if hp.launch == "torchrun"],
        processes_per_host=max(1, int(options.processes_per_host or 1)) if runner == "builtin" else 1,
        entry_point=facts.entry,
        hyperparameters_file={str(k): str(v) for k, v in (request.get("HyperParameters") or {}).items()},
        input_data_config=facts.input_data_config,
        user_args=facts.user_args,
        checkpoint_store=store.resolve(checkpoint["S3Uri"]) if checkpoint.get("S3Uri") else None,
        output_compression="NONE"
        if (request.get("OutputDataConfig") or {}).get("CompressionType") == "NONE"
        else "GZIP",
        metric_definitions=[(m["Name"], m["Regex"]) for m in algorithm.get("MetricDefinitions") or []],
        host_plans=host_plans,
        warnings=warnings,
    )


def job_arn(name: str, region: str | None = None, account: str = LOCAL_ACCOUNT) -> str:
    """A training job's ARN (SageMaker lowercases the name in it)."""
    return f"arn:aws:sagemaker:{region or 'local'}:{account}:training-job/{name.lower()}"
