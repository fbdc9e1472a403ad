"""Local backend benchmarks, measured side by side in one run.

1. Launch overhead: the local backend (``LocalTrainingHook.run_job``: dirs, config files, env,
   code copy, torchrun, streaming, packing) against bare ``python -m torch.distributed.run`` on the
   same trivial script, alternating, several rounds. Ratio = median(local) / median(bare); goal <= 1.10.
2. Throughput of the demo (examples/train.py, gloo on CPU) with 1 vs 2 processes on one host:
   samples per second of the training epochs (the script's own figure, summed over the run).

    .venv/bin/python bench/local_launch.py [--rounds 5] [--epochs 4]
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from airflow_dist_training.hooks.local_training import LocalTrainingHook

REPO = Path(__file__).resolve().parents[1]
TRIVIAL = "import os\nprint(f\"hello from rank {os.environ.get('RANK')}\", flush=True)\n"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def bare_torchrun(code: Path, nproc: int) -> float:
    cmd = [
        sys.executable, "-m", "torch.distributed.run", "--nnodes=1", f"--nproc-per-node={nproc}",
        "--node-rank=0", "--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{free_port()}",
        "--max-restarts=0", "trivial.py",
    ]  # fmt: skip
    started = time.perf_counter()
    subprocess.run(cmd, cwd=code, check=True, capture_output=True)
    return time.perf_counter() - started


def local_backend(hook: LocalTrainingHook, spec: dict, name: str) -> float:
    started = time.perf_counter()
    hook.run_job(spec, name, log=lambda line: None)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--nproc", type=int, default=2)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        code = tmp / "code"
        code.mkdir()
        (code / "trivial.py").write_text(TRIVIAL)
        hook = LocalTrainingHook(root=tmp / "root", use_s3=False)
        spec = {
            "name": "bench",
            "image": {"framework": "pytorch", "framework_version": "2.8.0"},
            "source": {"entry_point": "trivial.py", "source_dir": str(code)},
            "compute": {"instance_type": "ml.m5.xlarge", "instance_count": 1},
            "distribution": {"strategy": "torch_distributed", "processes_per_host": args.nproc},
            "hyperparameters": {"epochs": 1},
        }
        bare_torchrun(code, args.nproc)  # warm the page cache once for both sides
        bare: list[float] = []
        local: list[float] = []
        for i in range(args.rounds):
            if i % 2 == 0:
                bare.append(bare_torchrun(code, args.nproc))
                local.append(local_backend(hook, spec, f"bench-{i}"))
            else:
                local.append(local_backend(hook, spec, f"bench-{i}"))
                bare.append(bare_torchrun(code, args.nproc))
        mb, ml = statistics.median(bare), statistics.median(local)
        print(f"launch overhead ({args.rounds} alternating rounds, {args.nproc} processes, trivial script)")
        print(f"  bare torchrun   median {mb:6.2f} s  runs {', '.join(f'{x:.2f}' for x in bare)}")
        print(f"  local backend   median {ml:6.2f} s  runs {', '.join(f'{x:.2f}' for x in local)}")
        print(f"  ratio local/bare = {ml / mb:.3f}x  (goal <= 1.10x)")

        # throughput of the demo, 1 vs 2 processes
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
                "source": {"entry_point": "train.py", "source_dir": str(REPO / "examples")},
                "compute": {"instance_type": "ml.m5.xlarge", "instance_count": 1},
                "distribution": {"strategy": "torch_distributed", "processes_per_host": nproc},
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
            results[nproc] = _epoch_throughput(hook)
            print(
                f"demo throughput, {nproc} process(es): {results[nproc]:9.0f} samples/s "
                f"(median epoch; wall {wall:.1f} s, training_seconds {result['training_seconds']}, "
                f"final loss {result['final_metrics'].get('train:loss', float('nan'))})"
            )
        print(f"  speed-up 2 vs 1 process(es) = {results[2] / results[1]:.2f}x  (cores: {os.cpu_count()})")


def _epoch_throughput(hook: LocalTrainingHook) -> float:
    run = hook.last_run
    assert run is not None
    values = [p.value for p in run.metrics.series if p.name == "samples_per_second"]
    return statistics.median(values) if values else float("nan")


if __name__ == "__main__":
    main()
