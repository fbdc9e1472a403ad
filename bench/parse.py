"""Parse-time cost: marginal import time of our public modules vs the Amazon provider's SageMaker operators.

Each sample runs in a fresh interpreter that has already imported ``airflow.sdk`` and the names
every DAG file uses from it (``DAG``, ``BaseOperator``, ``task``, ``Param``: ``airflow.sdk`` loads
them lazily), then times one more import. Ours and the anchor are measured alternately in the
same run, so machine noise hits both. Prints medians and the ratio (goal: <= 0.15x).

Both sides are measured with their bytecode caches, as in any deployed Airflow (pip compiles the
Amazon provider's ``.pyc`` files at install): the probes run with ``PYTHONDONTWRITEBYTECODE``
unset and one discarded warm-up round writes our ``__pycache__``. Without it ours would be timed
compiling source (about 2x slower) and the anchor not.

    .venv/bin/python bench/parse.py [--rounds 9]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys

ANCHOR = ["airflow.providers.amazon.aws.operators.sagemaker"]
OURS = [
    "airflow_dist_training.operators.training",
    "airflow_dist_training.sensors.training",
    "airflow_dist_training.operators.fsx",
    "airflow_dist_training.operators.checkpoints",
    "airflow_dist_training.operators.evaluation",
    "airflow_dist_training.task_groups",
    "airflow_dist_training.dag_factory",
]

PROBE = """
import json, sys, time
import airflow.sdk  # already paid for by every DAG file ...
from airflow.sdk import DAG, BaseOperator, BaseSensorOperator, Param, task  # ... and so are these names
start = time.perf_counter()
for name in {modules!r}:
    __import__(name)
elapsed = time.perf_counter() - start
heavy = [m for m in ("boto3", "botocore", "torch") if m in sys.modules]
print(json.dumps({{"seconds": elapsed, "heavy": heavy}}))
"""


PROBE_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def sample(modules: list[str]) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(modules=modules)],
        capture_output=True,
        text=True,
        check=True,
        env=PROBE_ENV,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--quick", action="store_true", help="tiny sizes, 1 round: the suite checks the bench still runs")
    args = parser.parse_args()
    if args.quick:
        args.rounds = 1
    ours = [m for m in OURS if importlib.util.find_spec(m) is not None]
    ours_times, anchor_times, heavy = [], [], set()
    sample(ours), sample(ANCHOR)  # warm-up: writes bytecode caches, not counted
    for _ in range(args.rounds):
        result = sample(ours)
        ours_times.append(result["seconds"])
        heavy.update(result["heavy"])
        anchor_times.append(sample(ANCHOR)["seconds"])
    ours_median = statistics.median(ours_times)
    anchor_median = statistics.median(anchor_times)
    print(f"modules measured (ours): {', '.join(ours)}")
    print(f"anchor: {ANCHOR[0]}")
    print(f"ours   median {ours_median * 1000:8.1f} ms  (heavy modules pulled in: {sorted(heavy) or 'none'})")
    print(f"anchor median {anchor_median * 1000:8.1f} ms")
    print(f"ratio ours/anchor = {ours_median / anchor_median:.3f}x  (goal <= 0.15x), {args.rounds} rounds")


if __name__ == "__main__":
    main()
