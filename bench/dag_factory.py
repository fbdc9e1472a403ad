"""YAML pipelines parse time: 200 pipeline files through Airflow's DagBag, and per-DAG-file overhead.

Generates 200 pipeline YAML files (+ their two-line stubs) in a temporary folder, then parses them
with ``DagBag`` as the dag-processor does, in one process where Airflow is already imported.
Anchor for the per-file overhead: a plain Python DAG file with the same tasks built by hand
(``EmptyOperator``s), measured side by side in the same run. Goals: 200 files in <= 0.6 s in total,
at most 1.6 times the anchor.

    .venv/bin/python bench/dag_factory.py [--files 200] [--rounds 3]

It prints the ratio of wall times (medians) and of CPU times (fastest rounds): on a shared box the
CPU time is the steadier one. A third set of DAG files builds the same DAGs from pipelines validated
before the timed parse: its ratio is what Airflow's DAG, task group and operators cost for this DAG
shape (12 edges, 5 of our operators and 2 short circuits, against the anchor's chain of 7 empty
operators), the floor under the YAML ratio.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import tempfile
import time
import types
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

PIPELINE = """\
dag_id: pipeline_{i:04d}
schedule: "{minute} 3 * * *"
timezone: Europe/Amsterdam
backend: local
training:
  name: model-{i:04d}
  image: {{framework: pytorch, framework_version: "2.8.0", py_version: py312}}
  source: {{entry_point: train.py, source_dir: {repo}/examples}}
  compute: {{instance_type: ml.m5.xlarge, instance_count: 1}}
  distribution: {{strategy: torch_distributed, processes_per_host: 2}}
  hyperparameters: {{epochs: 3, lr: 0.05}}
  channels:
    train: {{type: s3, uri: s3://bucket/data/{i}/train, local_source: /tmp/data/{i}}}
  checkpoint: {{s3_uri: s3://bucket/ckpt/{i}, local_uri: /tmp/ckpt/{i}}}
  output: {{s3_path: s3://bucket/models/{i}, local_uri: /tmp/models/{i}}}
evaluation: {{script: {repo}/examples/evaluate.py, channel_source: /tmp/data/{i}/test}}
gate:
  thresholds:
    accuracy: {{min: 0.8, no_regression: true}}
registry: {{local_dir: /tmp/registry/{i}, auto_approve: true}}
"""
STUB = "from airflow_dist_training.dag_factory import dag_from_yaml\n\ndag = dag_from_yaml(__file__)\n"
ANCHOR = """\
import pendulum
from airflow.sdk import DAG
from airflow.providers.standard.operators.empty import EmptyOperator
with DAG("plain_{i:04d}", schedule="{minute} 3 * * *", start_date=pendulum.datetime(2026, 1, 1), catchup=False):
    names = ["plan", "launch_unless_dry_run", "train", "checkpoint_retention", "evaluate", "gate", "register"]
    tasks = [EmptyOperator(task_id=n) for n in names]
    for a, b in zip(tasks, tasks[1:]):
        a >> b
"""


# "built": the DAG file builds its DAG from a pipeline validated before the timed parse (held in
# BUILT_MODULE), so the parse pays for the DAG, the group and the operators only.
BUILT_MODULE = "adt_bench_pipelines"
BUILT = f"""\
from airflow_dist_training.dag_factory import build_dag
import {BUILT_MODULE}
dag = build_dag({BUILT_MODULE}.PIPELINES[{{i}}], base_dir={{base!r}}, fileloc=__file__)
"""


def write_files(folder: Path, count: int, kind: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    if kind == "built":
        from airflow_dist_training.pipeline_checks import load_pipeline

        yaml_dir = folder.parent / "yaml"
        pipelines = types.ModuleType(BUILT_MODULE)
        pipelines.PIPELINES = [load_pipeline(yaml_dir / f"pipeline_{i:04d}.yaml") for i in range(count)]  # type: ignore[attr-defined]
        sys.modules[BUILT_MODULE] = pipelines
    for i in range(count):
        if kind == "yaml":
            (folder / f"pipeline_{i:04d}.yaml").write_text(PIPELINE.format(i=i, minute=i % 60, repo=REPO))
            (folder / f"pipeline_{i:04d}.py").write_text(STUB)
        elif kind == "built":
            (folder / f"built_{i:04d}.py").write_text(BUILT.format(i=i, base=str(folder.parent / "yaml")))
        else:
            (folder / f"plain_{i:04d}.py").write_text(ANCHOR.format(i=i, minute=i % 60))


def parse(folder: Path) -> tuple[float, float, int, dict]:
    """Wall and CPU seconds of one ``DagBag`` fill, its DAG count and its import errors."""
    from airflow_dist_training.compat import DagBag

    # The DAGs of earlier parses stay loaded (sys.modules): without a collection first, a full
    # collection their allocations made due lands in whichever parse comes next (~0.3 s, the
    # anchor's whole parse). The dag-processor parses each file in a fresh process.
    gc.collect()
    start, cpu = time.perf_counter(), time.process_time()
    bag = DagBag(dag_folder=str(folder), safe_mode=False)
    return time.perf_counter() - start, time.process_time() - cpu, len(bag.dags), bag.import_errors


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="tiny sizes, 1 round: the suite checks the bench still runs")
    args = parser.parse_args()
    if args.quick:
        args.files, args.rounds = 5, 1
    os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
    import airflow.sdk  # noqa: F401  (already paid for by the dag-processor)

    import airflow_dist_training.dag_factory  # noqa: F401  (first-import cost measured separately below)

    with tempfile.TemporaryDirectory() as tmp:
        folders = {kind: Path(tmp) / kind for kind in ("yaml", "plain", "built")}
        for kind, folder in folders.items():
            write_files(folder, args.files, kind)
        wall: dict[str, list[float]] = {kind: [] for kind in folders}
        cpu: dict[str, list[float]] = {kind: [] for kind in folders}
        for _ in range(args.rounds):
            for kind, folder in folders.items():
                seconds, cpu_seconds, count, errors = parse(folder)
                if errors or count != args.files:
                    sys.exit(f"{kind}: parse failed: {count} DAGs, errors: {list(errors.items())[:1]}")
                wall[kind].append(seconds)
                cpu[kind].append(cpu_seconds)
    ours_s, anchor_s = statistics.median(wall["yaml"]), statistics.median(wall["plain"])
    n = args.files
    print(
        f"{n} YAML pipelines  : {ours_s:.3f} s total, {ours_s / n * 1000:.2f} ms per DAG file (goal: <= 0.6 s total)"
    )
    print(f"{n} plain DAG files : {anchor_s:.3f} s total, {anchor_s / n * 1000:.2f} ms per DAG file (anchor)")
    print(
        f"ratio YAML/plain = {ours_s / anchor_s:.2f}x; per-file overhead of the factory = "
        f"{(ours_s - anchor_s) / n * 1000:.2f} ms ({args.rounds} rounds, median)"
    )
    # On a shared box the wall time includes waiting for a core; the process's CPU time does not.
    ours_cpu, anchor_cpu, built_cpu = min(cpu["yaml"]), min(cpu["plain"]), min(cpu["built"])
    print(
        f"ratio YAML/plain CPU time = {ours_cpu / anchor_cpu:.2f}x ({ours_cpu:.3f} s vs {anchor_cpu:.3f} s, "
        f"fastest of {args.rounds} rounds each)"
    )
    # The same DAGs from pipelines validated beforehand: what Airflow's DAG, group and operators cost
    # with no YAML, validation or checks, the floor of the factory's ratio for this DAG shape.
    print(
        f"ratio built/plain CPU time = {built_cpu / anchor_cpu:.2f}x ({built_cpu:.3f} s: the same DAGs "
        "built from pipelines validated beforehand, no YAML, no checks)"
    )


if __name__ == "__main__":
    main()
