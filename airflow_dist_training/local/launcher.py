"""What one simulated host runs, and how a job's files move.

One launcher process per simulated host: the request's ``ContainerEntrypoint``, AWS's toolkit
(``train``), or the project's runner, whose torchrun command is in docs/local-backend.md.
:func:`sync_dir` restores and syncs checkpoints, :func:`pack_dirs` packs ``model.tar.gz``.
"""

from __future__ import annotations

import os
import shlex
import socket
import tarfile
from collections.abc import Mapping
from pathlib import Path

from airflow_dist_training.local.contract import HostPlan, LocalJobPlan
from airflow_dist_training.local.hosts import CONDA
from airflow_dist_training.local.job_env import IMAGE_PATH, inherited_environ
from airflow_dist_training.local.request_plan import RequestPlan
from airflow_dist_training.storage import StoreOptions, Stores, copy_between
from airflow_dist_training.storage.location import Location

_SKIP_SYNC_PREFIXES = ("._MANIFEST.json.tmp",)
# the worker's shell state: its folders (PWD, OLDPWD) and the command that started it (_)
_SHELL_STATE = ("PWD", "OLDPWD", "_")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _runner_argv(plan: LocalJobPlan, host: HostPlan, port: int, python: str) -> list[str]:
    """The argv the project's runner starts one simulated host with."""
    entry = plan.entry_point
    if host.launch == "torchrun":
        nnodes = len(plan.torchrun_hosts)
        cmd = [
            python,
            "-m",
            "torch.distributed.run",
            f"--nnodes={nnodes}",
            f"--nproc-per-node={plan.processes_per_host}",
            f"--node-rank={host.node_rank}",
        ]
        if nnodes == 1:
            # port 0: the agent's store binds a free port itself (torchrun --standalone), so no race
            cmd += ["--rdzv-backend=c10d", "--rdzv-endpoint=127.0.0.1:0", f"--rdzv-id={plan.job_name}"]
        else:
            cmd += ["--rdzv-backend=static", "--master-addr=127.0.0.1", f"--master-port={port}"]
        cmd += ["--max-restarts=0", entry, *plan.user_args]
        return cmd
    if entry.endswith(".py"):
        return [python, entry, *plan.user_args]
    return ["/bin/sh", "-c", " ".join(["./" + entry, *(shlex.quote(a) for a in plan.user_args)])]


PYTORCH_TRAINING_MODULE = "sagemaker_pytorch_container.training:main"
_TOOLKIT_TRAIN = "import sys; from sagemaker_training.cli.train import main; sys.exit(main())"


def _base_env(
    rp: RequestPlan, hp: HostPlan, python: str, python_path: str | None, extra_env: Mapping[str, str]
) -> dict[str, str]:
    env = dict(rp.image_environ) if rp.image_environ is not None else inherited_environ()
    if python == f"{CONDA}/bin/python":
        # the job environment is the image's /opt/conda (namespaces): nothing else of this machine
        # either, not its PATH, its shell's folders or Airflow's settings
        env = {k: v for k, v in env.items() if not k.startswith("AIRFLOW") and k not in _SHELL_STATE}
        env["PATH"] = IMAGE_PATH
    env["PATH"] = f"{Path(python).parent}{os.pathsep}{env.get('PATH', '')}"
    env.update({str(k): str(v) for k, v in (rp.request.get("Environment") or {}).items()})
    env["TRAINING_JOB_NAME"] = rp.plan.job_name
    env["TRAINING_JOB_ARN"] = rp.job_arn
    env["PYTHONUNBUFFERED"] = "1"
    # ours: the checkpoint directory (no SageMaker variable names it; scripts use /opt/ml/checkpoints)
    env["SM_CHECKPOINT_DIR"] = (
        "/opt/ml/checkpoints" if rp.isolation.namespaces else str(hp.layout.checkpoint_dir)
    )
    # the hosts have no network: pip must not wait for an index (requirements are pre-installed)
    env["PIP_NO_INDEX"] = "1"
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    if python_path:
        env["PYTHONPATH"] = python_path
        # the toolkit's own `pip install -r` inside the host goes to the same cached folder,
        # never into the worker's environment
        env["PIP_TARGET"] = python_path
    env.update(extra_env)
    return env


def host_process(
    rp: RequestPlan,
    hp: HostPlan,
    port: int,
    python_path: str | None,
    extra_env: Mapping[str, str],
    python: str | None = None,
) -> tuple[list[str], dict[str, str], str]:
    """argv, environment and working directory of one host (before the namespace wrapper);
    ``python``: the job's interpreter as the host sees it (default ``rp.python``), ``python_path``
    the code's installed requirements."""
    ns = rp.isolation.namespaces
    python = python or rp.python
    env = _base_env(rp, hp, python, python_path, extra_env)
    opt_ml = "/opt/ml" if ns else str(hp.layout.base)
    if rp.mode == "container":
        algorithm = rp.request["AlgorithmSpecification"]
        argv = [*algorithm["ContainerEntrypoint"], *(algorithm.get("ContainerArguments") or [])]
        if argv and argv[0] in ("python", "python3"):
            argv[0] = python
        if not ns:
            argv = [a.replace("/opt/ml", opt_ml) if a.startswith("/opt/ml") else a for a in argv]
            env["ADT_OPT_ML"] = opt_ml
            env["ADT_MASTER_ADDR"] = "127.0.0.1"
            env["ADT_MASTER_PORT"] = str(port)
        return argv, env, "/" if ns else str(hp.layout.base)
    if rp.mode == "toolkit":
        image = str(rp.request["AlgorithmSpecification"].get("TrainingImage", ""))
        if "pytorch" in image or not image:
            env["SAGEMAKER_TRAINING_MODULE"] = PYTORCH_TRAINING_MODULE
        return _shimmed(rp, opt_ml, python, [python, "-c", _TOOLKIT_TRAIN, "train"]), env, "/"
    # builtin: the project's re-implementation of the toolkit contract
    env.update(hp.env)
    env["MASTER_PORT"] = str(port)
    if python_path:
        env["PYTHONPATH"] = f"{hp.env.get('PYTHONPATH', '')}{os.pathsep}{python_path}"
    plan = rp.plan
    argv = _runner_argv(plan, hp, port, python)
    if ns:
        master = plan.torchrun_hosts[0] if plan.torchrun_hosts else plan.hosts[0]
        argv = [f"--master-addr={master}" if a == "--master-addr=127.0.0.1" else a for a in argv]
    return _shimmed(rp, opt_ml, python, argv), env, f"{opt_ml}/code"


def _shimmed(rp: RequestPlan, opt_ml: str, python: str, argv: list[str]) -> list[str]:
    """``argv`` under the request's toolkit shim (the entrypoint it names), when it has one."""
    if not rp.toolkit_shim:
        return argv
    entrypoint = list(rp.request["AlgorithmSpecification"]["ContainerEntrypoint"])
    if entrypoint[:1] in (["python"], ["python3"]):
        entrypoint[0] = python
    entrypoint = [a.replace("/opt/ml", opt_ml, 1) if a.startswith("/opt/ml") else a for a in entrypoint]
    return [*entrypoint, "--wrap", *argv]


# --------------------------------------------------------------------------- stores


# what a sync last copied, per local path (or target URI): (size, modified); a run keeps one across its syncs
SyncState = dict[str, tuple[int, float]]


def sync_dir(
    src: Location, dst: Location, state: SyncState | None = None, stores: Stores | None = None
) -> int:
    """Copy files that are missing, differ in size, or were rewritten from ``src`` to ``dst`` (never
    deletes; either side in any store); returns how many. A rewrite may keep the size, so each copy
    is remembered in ``state`` by size and modified time; without a memory, a target as large and
    not older is the same (S3 times have second resolution). A local target gets the source's
    time, so a restored file is not pushed back; manifests go last (docs/local-backend.md)."""
    state = {} if state is None else state
    stores = stores or Stores(StoreOptions(aws_conn_id=None))
    src, dst = src.as_dir(), dst.as_dir()
    src_store, dst_store = stores(src), stores(dst)
    existing = dst_store.list_tree(dst)
    copied = 0
    by_name = sorted(src_store.list_tree(src).items())  # then manifests last (a stable sort)
    for rel, (size, modified) in sorted(by_name, key=lambda kv: kv[0].rsplit("/", 1)[-1] == "_MANIFEST.json"):
        if not rel or ".." in rel.split("/") or rel.rsplit("/", 1)[-1].startswith(_SKIP_SYNC_PREFIXES):
            continue
        target = dst.join(rel)
        source_path, target_path = src_store.local_path(src.join(rel)), dst_store.local_path(target)
        memory = str(source_path or target_path or target.uri)
        remembered = state.get(memory)
        if remembered == (size, modified):
            continue
        there_size, there_modified = existing.get(rel, (-1, 0.0))
        if remembered is None and there_size == size and there_modified >= modified:
            state[memory] = (size, modified)
            continue
        copy_between(src_store, src.join(rel), dst_store, target, size)
        if target_path is not None and source_path is None:  # a local copy keeps its time already
            os.utime(target_path, (modified, modified))
        state[memory] = (size, modified)
        copied += 1
    return copied


def pack_dirs(dirs: list[Path], archive: Path) -> None:
    """One ``tar.gz`` of several directories merged, files at the archive root; later dirs win."""
    merged: dict[str, Path] = {}
    for directory in dirs:
        if directory.is_dir():
            for child in sorted(directory.iterdir()):
                merged[child.name] = child
    archive.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive, "w:gz", compresslevel=6) as tar:
        for name, path in sorted(merged.items()):
            tar.add(path, arcname=name)
