"""Local backend benchmarks, measured side by side in one run.

1. Launch overhead of simulated hosts: a 2-host ``torch_distributed`` job of a trivial script run
   by the local backend (Linux namespaces per host + AWS's in-container toolkit, i.e. the whole
   ``LocalTrainingHook.run_job``: request planning, staging, config files, namespaces, the
   toolkit's ``train``, torchrun, streaming, packing) against **bare torchrun**: the same two
   ``python -m torch.distributed.run --nnodes=2`` launchers on 127.0.0.1 with the same script,
   alternating, several rounds. Ratio = median(local) / median(bare); goal <= 1.15.
   The builtin runner (namespaces, no toolkit) is measured too, so the toolkit's share shows.
   **Where the toolkit's time goes**, per host, measured in the same run: an interpreter that
   starts and imports the toolkit (``sagemaker_training`` pulls boto3, paramiko, psutil ...), the
   PyTorch container's own ``import torch`` (``_set_torch_version_environment``, before it starts
   torchrun) and that interpreter's shutdown with torch loaded (after torchrun has exited). These
   are sequential with torchrun inside each host, so they add to the job's wall time whatever the
   script does: the trivial script shows the worst case.
1b. The same comparison on a **realistic short job** (``--train-epochs`` > 0): 2-host DDP training
   of examples/train.py (gloo, CPU) over ``--train-samples`` samples, bare torchrun given the same
   data and arguments.
2. Namespace setup time: the job's network namespace (holder process, loopback, /etc/hosts) and,
   per host, entering it with its own mount/UTS/PID namespaces, /opt overlay and /opt/ml bind
   (a host that runs ``/bin/true``), median of several.
3. Throughput of the demo (examples/train.py, gloo on CPU) with 1 vs 2 processes on one host.

    .venv/bin/python bench/local_launch.py [--rounds 5] [--epochs 4] [--skip-demo]
        [--train-epochs 3 --train-samples 20000 --train-rounds 3]
"""

from __future__ import annotations

import argparse
import functools
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from airflow_dist_training.hooks.local_training import LocalTrainingHook
from airflow_dist_training.local.hosts import JobNetwork, probe
from airflow_dist_training.local.job_env import job_python

REPO = Path(__file__).resolve().parents[1]
# examples/train.py imports the checkpoint helper, which jobs get with their code (source.dependencies)
HELPER = REPO / "airflow_dist_training" / "checkpointing.py"
TRIVIAL = "import os\nprint(f\"hello from rank {os.environ.get('RANK')}\", flush=True)\n"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# Both sides run the interpreter a local job gets by default (local/job_env.py): the default job
# environment once built, so the ratio compares launchers, not torch builds.
PYTHON, PYTHON_WHY = job_python(None)


def bare_torchrun(code: Path, hosts: int, script: str = "trivial.py", args: tuple[str, ...] = ()) -> float:
    """``hosts`` torchrun launchers (static rendezvous on 127.0.0.1), as two machines would run them."""
    port = free_port()
    started = time.perf_counter()
    procs = [
        subprocess.Popen(
            [
                PYTHON,
                "-m",
                "torch.distributed.run",
                f"--nnodes={hosts}",
                "--nproc-per-node=1",
                f"--node-rank={rank}",
                "--master-addr=127.0.0.1",
                f"--master-port={port}",
                "--max-restarts=0",
                script,
                *args,
            ],
            cwd=code,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for rank in range(hosts)
    ]
    assert all(p.wait() == 0 for p in procs)
    return time.perf_counter() - started


def local_backend(hook: LocalTrainingHook, spec: dict[str, Any], name: str) -> float:
    started = time.perf_counter()
    hook.run_job(spec, name, log=lambda line: None)
    return time.perf_counter() - started


# The toolkit's fixed work in one host, in the order the PyTorch container does it: start and import
# the toolkit, ``import torch`` (sagemaker_pytorch_container.training._set_torch_version_environment),
# then, once torchrun has returned, the interpreter's exit with torch loaded.
TOOLKIT_STEPS = """
import sys, time
t0 = float(sys.argv[1])
import sagemaker_training.cli.train, sagemaker_training.runner, sagemaker_pytorch_container.training
t1 = time.time()
import torch
t2 = time.time()
print(t1 - t0, t2 - t1, t2, flush=True)
sys.exit(0)
"""


def toolkit_fixed_cost(python: str) -> tuple[float, float, float]:
    """(start + toolkit imports, import torch, exit with torch loaded) of one toolkit interpreter."""
    started = time.time()
    proc = subprocess.Popen([python, "-c", TOOLKIT_STEPS, repr(started)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    start_imports, torch_import, printed = (float(x) for x in proc.stdout.readline().split())
    proc.wait()
    return start_imports, torch_import, time.time() - printed


def namespace_setup(tmp: Path, rounds: int) -> tuple[list[float], list[float]]:
    isolation = probe()
    nets, host_times = [], []
    for i in range(rounds):
        job = tmp / f"ns-{i}"
        (job / "opt-ml").mkdir(parents=True)
        net = JobNetwork(job, ["algo-1", "algo-2"], isolation, [])
        net.start()
        nets.append(net.setup_seconds)
        try:
            for host in ["algo-1", "algo-2"]:
                cmd = net.host_command(host, job / "opt-ml", ["/bin/true"])
                started = time.perf_counter()
                subprocess.run(cmd, check=True)
                host_times.append(time.perf_counter() - started)
        finally:
            net.close()
    return nets, host_times


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--skip-demo", action="store_true")
    parser.add_argument("--train-epochs", type=int, default=0, help="> 0: also the realistic short job")
    parser.add_argument("--train-samples", type=int, default=20000)
    parser.add_argument("--train-rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="tiny sizes, 1 round: the suite checks the bench still runs")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.skip_demo, args.train_epochs = 1, True, 0
    isolation = probe()
    print(f"isolation: {isolation.mode} {isolation.why}")
    print(f"interpreter (both sides): {PYTHON} ({PYTHON_WHY})")

    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        code = tmp / "code"
        code.mkdir()
        (code / "trivial.py").write_text(TRIVIAL)
        hook = LocalTrainingHook(root=tmp / "root", use_s3=False, python=PYTHON)
        spec: dict[str, Any] = {
            "name": "bench",
            "image": {"framework": "pytorch", "framework_version": "2.8.0"},
            "source": {"entry_point": "trivial.py", "source_dir": str(code)},
            "compute": {"instance_type": "ml.m5.xlarge", "instance_count": 2},
            "distribution": {"strategy": "torch_distributed", "processes_per_host": 1},
            "hyperparameters": {"epochs": 1},
        }
        builtin = {**spec, "local": {"runner": "builtin"}}
        bare_torchrun(code, 2)  # warm the page cache once for every side
        bare: list[float] = []
        toolkit: list[float] = []
        own: list[float] = []
        fixed: list[float] = []
        parts: list[tuple[float, float, float]] = []

        def fixed_cost() -> float:
            parts.append(toolkit_fixed_cost(PYTHON))
            return sum(parts[-1])

        for i in range(args.rounds):
            sides: list[tuple[list[float], Callable[[], float]]] = [
                (bare, lambda: bare_torchrun(code, 2)),
                (toolkit, functools.partial(local_backend, hook, spec, f"bench-tk-{i}")),
                (own, functools.partial(local_backend, hook, builtin, f"bench-bi-{i}")),
                (fixed, fixed_cost),
            ]
            for store, measure in sides[i % 4 :] + sides[: i % 4]:  # rotate the order
                store.append(measure())
        mb, mt, mo = statistics.median(bare), statistics.median(toolkit), statistics.median(own)
        print(f"launch overhead ({args.rounds} rotating rounds, 2 hosts x 1 process, trivial script)")
        print(
            f"  bare torchrun (2 launchers)        median {mb:6.2f} s  runs {', '.join(f'{x:.2f}' for x in bare)}"
        )
        print(
            f"  local: namespaces + AWS toolkit    median {mt:6.2f} s  runs {', '.join(f'{x:.2f}' for x in toolkit)}"
        )
        print(
            f"  local: namespaces + builtin runner median {mo:6.2f} s  runs {', '.join(f'{x:.2f}' for x in own)}"
        )
        print(f"  ratio toolkit/bare = {mt / mb:.3f}x  builtin/bare = {mo / mb:.3f}x  (goal <= 1.15x)")
        mf = statistics.median(fixed)
        print(
            f"  the toolkit's fixed work per host (one interpreter, same rounds): median {mf:.2f} s = "
            f"start + toolkit imports {statistics.median(p[0] for p in parts):.2f} s, "
            f"import torch {statistics.median(p[1] for p in parts):.2f} s, "
            f"exit with torch loaded {statistics.median(p[2] for p in parts):.2f} s; "
            f"bare + that = {(mb + mf) / mb:.3f}x of bare"
        )
        if args.train_epochs > 0:
            realistic(hook, tmp, args)

        if isolation.namespaces:
            nets, hosts = namespace_setup(tmp, args.rounds)
            print(
                f"namespace setup: job network {statistics.median(nets) * 1000:.0f} ms (median of {len(nets)}), "
                f"per host (mount+UTS+PID namespaces, overlay, binds, exec /bin/true) "
                f"{statistics.median(hosts) * 1000:.0f} ms (median of {len(hosts)})"
            )
        if args.skip_demo:
            return
        data = tmp / "data"
        subprocess.run(
            [
                sys.executable,
                str(REPO / "examples" / "make_dataset.py"),
                "--out",
                str(data),
                "--train",
                "20000",
            ],
            check=True,
            capture_output=True,
        )
        results: dict[int, float] = {}
        for nproc in (1, 2):
            demo = {
                "name": "demo",
                "image": {"framework": "pytorch", "framework_version": "2.8.0"},
                "source": {"entry_point": "train.py", "source_dir": str(REPO / "examples"), "dependencies": [str(HELPER)]},
                "compute": {"instance_type": "ml.m5.xlarge", "instance_count": 1},
                "distribution": {"strategy": "launcher", "launcher": "torchrun", "processes_per_host": nproc},
                "hyperparameters": {"epochs": args.epochs, "batch-size": 64},
                # torchrun sets OMP_NUM_THREADS=1 only for >1 process; pin it for a fair comparison
                "environment": {"OMP_NUM_THREADS": "1"},
                "channels": {
                    "train": {
                        "type": "s3",
                        "uri": "s3://bench-bucket/train",
                        "local_source": str(data / "train"),
                    }
                },
                "metric_definitions": [
                    {"name": "samples_per_second", "regex": "samples_per_second=([0-9.]+)"},
                    {"name": "train:loss", "regex": "epoch=\\d+ loss=([0-9.]+)"},
                ],
            }
            started = time.perf_counter()
            result = hook.run_job(demo, f"demo-{nproc}", log=lambda line: None)
            wall = time.perf_counter() - started
            values = [p.value for p in hook.last_job.metric_points() if p.name == "samples_per_second"]
            results[nproc] = statistics.median(values) if values else float("nan")
            print(
                f"demo throughput, {nproc} process(es): {results[nproc]:9.0f} samples/s "
                f"(median epoch; wall {wall:.1f} s, training_seconds {result['training_seconds']}, "
                f"final loss {result['final_metrics'].get('train:loss', float('nan'))})"
            )
        print(f"  speed-up 2 vs 1 process(es) = {results[2] / results[1]:.2f}x  (cores: {os.cpu_count()})")


def realistic(hook: LocalTrainingHook, tmp: Path, args: argparse.Namespace) -> None:
    """A short real job: 2-host DDP training of examples/train.py, toolkit vs bare torchrun."""
    data = tmp / "train-data"
    subprocess.run(
        [sys.executable, str(REPO / "examples" / "make_dataset.py"), "--out", str(data),
         "--train", str(args.train_samples)],
        check=True, capture_output=True,
    )  # fmt: skip
    spec = {
        "name": "bench-train",
        "image": {"framework": "pytorch", "framework_version": "2.8.0"},
        "source": {"entry_point": "train.py", "source_dir": str(REPO / "examples"), "dependencies": [str(HELPER)]},
        "compute": {"instance_type": "ml.m5.xlarge", "instance_count": 2},
        "distribution": {"strategy": "torch_distributed", "processes_per_host": 1},
        "hyperparameters": {"epochs": args.train_epochs, "batch-size": 64},
        "channels": {
            "train": {"type": "s3", "uri": "s3://bench-bucket/train", "local_source": str(data / "train")}
        },
    }
    code = tmp / "train-code"  # what the job's code archive holds: the script and the helper
    code.mkdir()
    for path in (REPO / "examples" / "train.py", HELPER):
        shutil.copy(path, code / path.name)
    bare: list[float] = []
    toolkit: list[float] = []
    for i in range(args.train_rounds):
        out = tmp / f"bare-train-{i}"  # fresh model and checkpoint folders: no resume
        bare_args = (
            f"--epochs={args.train_epochs}", "--batch-size=64", f"--train={data / 'train'}",
            f"--model-dir={out / 'model'}", f"--checkpoint-dir={out / 'checkpoints'}",
        )  # fmt: skip
        sides: list[tuple[list[float], Callable[[], float]]] = [
            (bare, functools.partial(bare_torchrun, code, 2, "train.py", bare_args)),
            (toolkit, functools.partial(local_backend, hook, spec, f"bench-train-{i}")),
        ]
        for store, measure in sides[i % 2 :] + sides[: i % 2]:
            store.append(measure())
    mb, mt = statistics.median(bare), statistics.median(toolkit)
    print(
        f"realistic short job ({args.train_rounds} alternating rounds, examples/train.py, 2 hosts x 1 process, "
        f"{args.train_epochs} epochs of {args.train_samples} samples)"
    )
    print(
        f"  bare torchrun (2 launchers)        median {mb:6.2f} s  runs {', '.join(f'{x:.2f}' for x in bare)}"
    )
    print(
        f"  local: namespaces + AWS toolkit    median {mt:6.2f} s  runs {', '.join(f'{x:.2f}' for x in toolkit)}"
    )
    print(f"  ratio toolkit/bare = {mt / mb:.3f}x  (goal <= 1.15x)")


if __name__ == "__main__":
    main()
