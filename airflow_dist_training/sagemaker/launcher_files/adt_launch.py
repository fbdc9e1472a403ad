#!/usr/bin/env python3
"""airflow-dist-training launcher: runs torchrun or mpirun inside ANY SageMaker training image.

Shipped to the job as the ``adt_launcher`` input channel and run as the container entrypoint.
Standard library only (the image needs python3 and, for torchrun, torch). It:

1. reads SageMaker's ``/opt/ml/input/config/resourceconfig.json`` (hosts, current host) and
   ``hyperparameters.json``;
2. unpacks the code tarball into ``/opt/ml/code``;
3. exports the basic ``SM_*`` variables scripts expect;
4. starts ``torchrun`` on every host (node rank = position of the host in the sorted host list,
   rendezvous on the first host), or ``mpirun`` from the first host;
5. writes ``/opt/ml/output/failure`` with the tail of the output when the job fails.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tarfile
import time
from collections import deque

OPT_ML = os.environ.get("ADT_OPT_ML", "/opt/ml")


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
            f"--master-addr={hosts[0]}", f"--master-port={config.get('master_port', 7777)}",
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


def gpu_count() -> int:
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30, check=False)
        return len([line for line in out.stdout.splitlines() if line.startswith("GPU ")])
    except (OSError, subprocess.SubprocessError):
        return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--config", required=True)
    options = parser.parse_args(argv)
    config = _read_json(options.config, {})
    assert isinstance(config, dict)
    resource = _read_json(os.path.join(OPT_ML, "input", "config", "resourceconfig.json"), {})
    hyperparameters = _read_json(os.path.join(OPT_ML, "input", "config", "hyperparameters.json"), {})
    assert isinstance(resource, dict) and isinstance(hyperparameters, dict)
    code_dir = os.path.join(OPT_ML, "code")
    os.makedirs(code_dir, exist_ok=True)
    tarball = config.get("code_tarball", "")
    if tarball and os.path.exists(tarball):
        with tarfile.open(tarball) as archive:
            archive.extractall(code_dir, filter="data")
    command = build_command(config, resource, hyperparameters, gpu_count())
    if command is None:
        # mpirun workers: stay alive while the master drives them over ssh/orted.
        while True:
            time.sleep(60)
    env = {**os.environ, **sm_environment(resource, hyperparameters)}
    print("adt-launch:", " ".join(shlex.quote(c) for c in command), flush=True)
    tail: deque[str] = deque(maxlen=40)
    process = subprocess.Popen(
        command, cwd=code_dir, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    assert process.stdout is not None
    for line in process.stdout:
        sys.stdout.write(line)
        sys.stdout.flush()
        tail.append(line)
    code = process.wait()
    if code != 0:
        failure = os.path.join(OPT_ML, "output", "failure")
        os.makedirs(os.path.dirname(failure), exist_ok=True)
        with open(failure, "w", encoding="utf-8") as handle:
            handle.write(f"{command[0]} exited with {code}\n" + "".join(tail)[-1000:])
    return code


if __name__ == "__main__":
    sys.exit(main())
