#!/usr/bin/env python3
"""airflow-dist-training launcher: runs torchrun or mpirun inside ANY SageMaker training image.

Shipped to the job as the ``adt_launcher`` input channel and run as the container entrypoint.
Standard library only (the image needs python3 and, for torchrun, torch). It:

1. reads SageMaker's ``/opt/ml/input/config/resourceconfig.json`` (hosts, current host) and
   ``hyperparameters.json``;
2. unpacks the code tarball into ``/opt/ml/code``;
3. exports the basic ``SM_*`` variables scripts expect, plus the SageMaker Python SDK v3
   ``ModelTrainer`` Torchrun driver's (``SM_HOST_COUNT``, ``SM_CURRENT_HOST_RANK``,
   ``SM_MASTER_ADDR``, ``SM_MASTER_PORT``, ``SM_SOURCE_DIR``, ``SM_ENTRY_SCRIPT``,
   ``SM_DISTRIBUTED_CONFIG``...), so scripts written for ``ModelTrainer`` run unchanged;
4. starts ``torchrun`` on every host (node rank = position of the host in the sorted host list,
   rendezvous on the first host, port 7777); every host's torchrun exits when the job ends.
   ``mpirun`` mode starts from the first host; it refuses up front, with the reason, when
   ``mpirun`` or ``sshd`` is missing (worker hosts exit once the master's ``orted`` is gone);
5. writes ``/opt/ml/output/failure`` in the toolkit's format (the script's error lines) when the
   job fails, unless the script wrote its own reason there;
6. forwards SageMaker's stop signal: a StopTrainingJob, a spot interruption or MaxRuntimeInSeconds
   sends SIGTERM to PID 1 (this launcher) and SIGKILL 120 s later. The launcher passes the SIGTERM
   to the training processes (the script, or torchrun's workers; not torchrun itself, which would
   SIGKILL its workers 30 s later), so a script can save a checkpoint in the window.

``ADT_OPT_ML``, ``ADT_MASTER_ADDR`` and ``ADT_MASTER_PORT`` exist for the local backend's fallback
layout only (no namespaces): the ``/opt/ml`` folder and the rendezvous address to use instead.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from collections import deque

OPT_ML = os.environ.get("ADT_OPT_ML", "/opt/ml")
MASTER_PORT = 7777


def _read_json(path: str, default: object) -> object:
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except FileNotFoundError:
        return default


def user_args(hyperparameters: dict) -> list[str]:
    args: list[str] = []
    for key, value in sorted(hyperparameters.items()):
        args += [f"--{key}", str(value)]
    return args


def build_command(config: dict, resource: dict, hyperparameters: dict, gpu_count: int) -> list[str] | None:
    """The command to run on this host, or None when this host only waits (mpirun workers)."""
    hosts = sorted(resource.get("hosts", ["algo-1"]))
    current = resource.get("current_host", hosts[0])
    instance_type = resource.get("current_instance_type", "")
    per_host = config.get("processes_per_host", {}).get(instance_type) or gpu_count or 1
    entry = os.path.join(OPT_ML, "code", config["entry_point"])
    args = user_args(hyperparameters)
    if config.get("launcher", "torchrun") == "torchrun":
        return [
            sys.executable, "-m", "torch.distributed.run",
            f"--nnodes={len(hosts)}", f"--nproc-per-node={per_host}", f"--node-rank={hosts.index(current)}",
            f"--master-addr={os.environ.get('ADT_MASTER_ADDR', hosts[0])}",
            f"--master-port={os.environ.get('ADT_MASTER_PORT', config.get('master_port', MASTER_PORT))}",
            entry, *args,
        ]  # fmt: skip
    if current != hosts[0]:
        return None
    host_list = ",".join(f"{h}:{per_host}" for h in hosts)
    return [
        "mpirun", "--host", host_list, "-np", str(per_host * len(hosts)), "--allow-run-as-root",
        *shlex.split(config.get("custom_mpi_options", "")),
        sys.executable, entry, *args,
    ]  # fmt: skip


def mpirun_refusal() -> str | None:
    """Why mpirun mode cannot run on this image (None: it can)."""
    missing = [tool for tool in ("mpirun", "sshd") if shutil.which(tool) is None and not os.path.exists(f"/usr/sbin/{tool}")]
    if missing:
        return (
            f"launcher mpirun needs {' and '.join(missing)} on every host (not found in this image); "
            "use launcher: torchrun"
        )
    return None


def v3_environment(config: dict, resource: dict, hyperparameters: dict, per_host: int) -> dict[str, str]:
    """The variables the SDK v3 ``ModelTrainer`` driver (``scripts/environment.py``) exports."""
    hosts = sorted(resource.get("hosts", ["algo-1"]))
    current = resource.get("current_host", hosts[0])
    env = {
        "SM_HOST_COUNT": str(len(hosts)),
        "SM_CURRENT_HOST_RANK": str(hosts.index(current)),
        "SM_MASTER_ADDR": hosts[0],
        "SM_MASTER_PORT": str(MASTER_PORT),
        "SM_SOURCE_DIR": os.path.join(OPT_ML, "code"),
        "SM_ENTRY_SCRIPT": config.get("entry_point", ""),
        "SM_DISTRIBUTED_DRIVER_DIR": os.path.dirname(os.path.abspath(__file__)),
        "SM_DISTRIBUTED_CONFIG": json.dumps({"process_count_per_node": per_host, "smp": None}),
        "SM_NUM_GPUS": str(gpu_count()),
        "SM_NUM_CPUS": str(os.cpu_count() or 1),
        "SM_NUM_NEURONS": "0",
        "SM_OUTPUT_DIR": os.path.join(OPT_ML, "output"),
        "SM_INPUT_DIR": os.path.join(OPT_ML, "input"),
        "SM_CURRENT_INSTANCE_TYPE": str(resource.get("current_instance_type", "")),
        "SM_TRAINING_ENV": json.dumps({"hosts": hosts, "current_host": current, "hyperparameters": hyperparameters}),
    }
    for key, value in hyperparameters.items():
        env[f"SM_HP_{key.upper().replace('-', '_')}"] = str(value)
    return env


def sm_environment(resource: dict, hyperparameters: dict) -> dict[str, str]:
    channels = (
        sorted(d for d in os.listdir(os.path.join(OPT_ML, "input", "data")) if d not in ("adt_launcher",))
        if os.path.isdir(os.path.join(OPT_ML, "input", "data"))
        else []
    )
    env = {
        "SM_MODEL_DIR": os.path.join(OPT_ML, "model"),
        "SM_OUTPUT_DATA_DIR": os.path.join(OPT_ML, "output", "data"),
        "SM_INPUT_CONFIG_DIR": os.path.join(OPT_ML, "input", "config"),
        "SM_HOSTS": json.dumps(sorted(resource.get("hosts", []))),
        "SM_CURRENT_HOST": str(resource.get("current_host", "")),
        "SM_HPS": json.dumps(hyperparameters),
        "SM_CHANNELS": json.dumps(channels),
        "SM_USER_ARGS": json.dumps(user_args(hyperparameters)),
    }
    for name in channels:
        env[f"SM_CHANNEL_{name.upper()}"] = os.path.join(OPT_ML, "input", "data", name)
    for key, value in hyperparameters.items():
        env[f"SM_HP_{key.upper()}"] = str(value)
    return env


def _children_by_parent() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", encoding="utf-8") as handle:
                    parent = int(handle.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry))
    return children


def _argv(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return [a.decode(errors="replace") for a in handle.read().split(b"\0") if a]
    except OSError:
        return []


def passes_on(argv: list[str]) -> bool:
    """Whether a process is a go-between the stop signal must not reach: a shell, torchrun (it would
    SIGKILL its workers 30 s later) or AWS's toolkit (it dies of SIGTERM without passing it on)."""
    if not argv:
        return True
    names = [os.path.basename(a) for a in argv[:2]]
    return (
        names[0] in ("sh", "bash", "dash")
        or "torchrun" in names
        or "torch.distributed.run" in argv
        or "train" in names
        or any("sagemaker_training" in a for a in argv)
    )


def training_processes(root: int) -> list[int]:
    """The processes below ``root`` that train: every descendant but the go-betweens."""
    children = _children_by_parent()
    found: list[int] = []
    todo = list(children.get(root, []))
    while todo:
        pid = todo.pop(0)
        todo += children.get(pid, [])
        if not passes_on(_argv(pid)):
            found.append(pid)
    return found


class Forwarder:
    """SIGTERM handler of PID 1: passes the signal on to the training processes below ``child``."""

    def __init__(self) -> None:
        self.child: int | None = None
        self.received = False

    def __call__(self, signum: int, _frame: object) -> None:
        self.received = True
        targets = training_processes(os.getpid()) if self.child is not None else []
        for pid in targets:
            try:
                os.kill(pid, signum)
            except OSError:
                pass
        print(f"adt-launch: SIGTERM forwarded to {len(targets)} training process(es) {targets}", flush=True)

    def install(self) -> None:
        signal.signal(signal.SIGTERM, self)
        if sys.platform.startswith("linux"):  # adopt orphans: a script still saving when its parent died
            try:
                import ctypes

                ctypes.CDLL(None).prctl(36, 1)  # PR_SET_CHILD_SUBREAPER
            except (OSError, AttributeError):
                pass

    def drain(self) -> None:
        """After a stop: wait for the adopted processes still saving (SIGKILL ends them at the deadline)."""
        if not self.received:
            return
        while True:
            try:
                os.waitpid(-1, 0)
            except ChildProcessError:
                return
            except InterruptedError:
                continue


def wrap(command: list[str]) -> int:
    """The toolkit shim: run ``command`` (default: the toolkit's ``train``, through the DLC's own
    entrypoint script when the image has it) and forward SIGTERM to the script below it."""
    if not command:
        command = ["train"]
        dlc_entry = shutil.which("start_with_right_hostname.sh")
        if dlc_entry:
            command = ["bash", "-m", dlc_entry, "train"]
    forwarder = Forwarder()
    forwarder.install()
    print("adt-launch: wrapping", " ".join(shlex.quote(c) for c in command), "(SIGTERM is forwarded)", flush=True)
    process = subprocess.Popen(command)
    forwarder.child = process.pid
    code = process.wait()
    forwarder.drain()
    return code


def gpu_count() -> int:
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30, check=False)
        return len([line for line in out.stdout.splitlines() if line.startswith("GPU ")])
    except (OSError, subprocess.SubprocessError):
        return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--wrap"]:
        return wrap(argv[1:])
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--config", required=True)
    options = parser.parse_args(argv)
    forwarder = Forwarder()
    forwarder.install()
    config = _read_json(options.config, {})
    assert isinstance(config, dict)
    resource = _read_json(os.path.join(OPT_ML, "input", "config", "resourceconfig.json"), {})
    hyperparameters = _read_json(os.path.join(OPT_ML, "input", "config", "hyperparameters.json"), {})
    assert isinstance(resource, dict) and isinstance(hyperparameters, dict)
    code_dir = os.path.join(OPT_ML, "code")
    os.makedirs(code_dir, exist_ok=True)
    tarball = config.get("code_tarball", "")
    if tarball.startswith("/opt/ml/") and OPT_ML != "/opt/ml":  # the local fallback layout
        tarball = os.path.join(OPT_ML, tarball[len("/opt/ml/") :])
    if tarball and os.path.exists(tarball):
        with tarfile.open(tarball) as archive:
            archive.extractall(code_dir, filter="data")
    if config.get("launcher", "torchrun") == "mpirun":
        refusal = mpirun_refusal()
        if refusal is not None:
            write_failure(refusal)
            print(f"adt-launch: {refusal}", file=sys.stderr, flush=True)
            return 1
    gpus = gpu_count()
    command = build_command(config, resource, hyperparameters, gpus)
    if command is None:
        return wait_for_orted()
    instance_type = resource.get("current_instance_type", "")
    per_host = config.get("processes_per_host", {}).get(instance_type) or gpus or 1
    env = {
        **os.environ,
        **v3_environment(config, resource, hyperparameters, per_host),
        **sm_environment(resource, hyperparameters),
    }
    print("adt-launch:", " ".join(shlex.quote(c) for c in command), flush=True)
    tail: deque[str] = deque(maxlen=40)
    process = subprocess.Popen(
        command, cwd=code_dir, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    forwarder.child = process.pid
    assert process.stdout is not None
    for line in process.stdout:
        sys.stdout.write(line)
        sys.stdout.flush()
        tail.append(line)
    code = process.wait()
    forwarder.drain()
    if code != 0:
        write_failure(failure_text(code, list(tail), command))
    return code


# where torchrun's elastic agent starts its own report: the script's error is above it
AGENT_FAILURE_MARK = "torch/distributed/elastic/multiprocessing/api.py"


def failure_text(code: int, tail: list[str], command: list[str]) -> str:
    """The toolkit's ``ExecuteUserScriptError`` text: the script's error lines, whole (not torchrun's
    report, nor a line cut in the middle), and the command."""
    mark = next((i for i, line in enumerate(tail) if AGENT_FAILURE_MARK in line), len(tail))
    lines = [line.rstrip("\n") for line in tail[:mark] if line.strip()]
    start = next((i for i, line in enumerate(lines) if "Error" in line or "Exception" in line), None)
    excerpt = lines[start:] if start is not None else lines[-5:]
    while len("\n".join(excerpt)) > 700 and len(excerpt) > 1:  # FailureReason keeps 1,024 characters
        excerpt = excerpt[1:] if start is None else excerpt[:-1]
    message = "\n".join(excerpt)
    return f'ExecuteUserScriptError:\nExitCode {code}\nErrorMessage "{message}"\nCommand "{" ".join(command)}"'


def write_failure(text: str) -> None:
    """``/opt/ml/output/failure``, unless the script wrote its own (the toolkit's rule: its words win)."""
    failure = os.path.join(OPT_ML, "output", "failure")
    os.makedirs(os.path.dirname(failure), exist_ok=True)
    if os.path.exists(failure) and os.path.getsize(failure) > 0:
        return
    with open(failure, "w", encoding="utf-8") as handle:
        handle.write(text)


def wait_for_orted(appear_seconds: float = 600.0) -> int:
    """mpirun worker: wait for the master's ``orted`` to appear, then exit when it is gone."""
    def running() -> bool:
        out = subprocess.run(["pgrep", "-x", "orted"], capture_output=True, check=False)
        return out.returncode == 0

    deadline = time.time() + appear_seconds
    while not running():
        if time.time() > deadline:
            write_failure("mpirun worker: the master host never started orted here")
            return 1
        time.sleep(1)
    while running():
        time.sleep(1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
