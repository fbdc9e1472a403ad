"""Fault injection with real processes: kill the task at random points, retry, count creates.

A driver subprocess (fresh interpreter, its own AIRFLOW_HOME) forks a real child per task try that
runs ``airflow tasks test`` (Airflow's task runner, its Execution API and the ``task_state_store``
table), kills it at a random point (``os._exit`` at submit/after-create/after-persist/wait, or
SIGKILL after a random delay), then runs the retry for the same DAG run in another child. The moto
server runs in this process, where the lifecycle fake counts every CreateTrainingJob: exactly one
per successful run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from fake_sagemaker_training import FakeTrainingLifecycle

pytestmark = [pytest.mark.integration, pytest.mark.slow]

DRIVER = Path(__file__).parent / "crash_driver.py"
# DAG runs per driver (two drivers). The seeds draw every crash point at least twice within 6 runs
# each; more runs draw more kill timings (ADT_CRASH_RUNS=25 for a longer soak).
RUNS = int(os.environ.get("ADT_CRASH_RUNS", "10"))


def run_driver(
    tmp_path: Path,
    migrated_db: Path,
    *,
    runs: int,
    first: int,
    seed: int,
    impl: str = "ours",
    points: list[str] | None = None,
) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            str(DRIVER),
            "--impl",
            impl,
            "--runs",
            str(runs),
            "--first",
            str(first),
            "--seed",
            str(seed),
            "--home",
            str(tmp_path / f"home-{first}"),
            "--migrated-db",
            str(migrated_db),
            *(["--points", ",".join(points)] if points else []),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def test_crash_at_random_points_then_retry_creates_exactly_one_job(
    fake: FakeTrainingLifecycle, airflow_db: Path, tmp_path: Path
) -> None:
    fake.complete_after = 2.0  # a real wait phase: some retries reattach to a running job
    db = airflow_db / "airflow.db"
    # 2 drivers x RUNS runs = randomized crash points, in parallel.
    procs = [
        run_driver(tmp_path, db, runs=RUNS, first=0, seed=11),
        run_driver(tmp_path, db, runs=RUNS, first=RUNS, seed=29),
    ]
    records = []
    for proc in procs:
        out, err = proc.communicate(timeout=540 * max(RUNS, 25) // 25)
        assert proc.returncode == 0, out[-3000:] + err[-3000:]
        records += [json.loads(line[7:]) for line in out.splitlines() if line.startswith("RESULT ")]
    assert len(records) == 2 * RUNS
    points = Counter(r["point"].split("@")[0] for r in records)
    if RUNS >= 6:  # seeds 11 and 29 draw every crash point within 6 runs per driver
        assert set(points) >= {"before_create", "after_create", "after_persist", "wait", "sigkill"}, points
    assert [r for r in records if not r["retry_ok"]] == []
    per_run = {
        r["prefix"]: sum(n for name, n in fake.creates.items() if name.startswith(r["prefix"]))
        for r in records
    }
    assert all(n == 1 for n in per_run.values()), {k: v for k, v in per_run.items() if v != 1}
    assert fake.total_creates == 2 * RUNS
    assert all(n == 1 for n in fake.creates.values())  # never a duplicate create of one name
    from airflow_dist_training.compat import HAS_RESUMABLE_JOBS

    if HAS_RESUMABLE_JOBS:
        # The job name is in Airflow's task_state_store table, and the retry found the job the way it must.
        assert all(r["stored_job"] and r["stored_job"].startswith(r["prefix"]) for r in records)
        stored = {"task_state_store: running job", "task_state_store: completed job"}
    else:  # Airflow before 3.3: no store; every retry finds its job by the deterministic name
        assert all(r["stored_job"] is None for r in records)
        stored = {"job name"}
    expected = {
        "before_create": {"created"},
        "after_create": {"job name"},  # the name never reached task_state_store
        "after_persist": stored,
        "wait": stored,
    }
    wrong = [
        r for r in records if r["point"] in expected and r["retry_found_job_by"] not in expected[r["point"]]
    ]
    assert wrong == []
    print(
        "crash points:",
        dict(points),
        "retry found its job by:",
        dict(Counter(r["retry_found_job_by"] for r in records)),
    )


def test_crash_at_random_points_on_a_mapped_task_creates_exactly_one_job_per_member(
    fake: FakeTrainingLifecycle, airflow_db: Path, tmp_path: Path
) -> None:
    """Issue 26: the same guarantee per map index. Three members per DAG run, each map index killed
    at a random point and retried: one job per member, none created twice, each retry finds its own
    member's job (never a sibling's)."""
    fake.complete_after = 2.0
    runs = max(4, RUNS // 6)  # 3 members each: at least 12 trials
    proc = run_driver(tmp_path, airflow_db / "airflow.db", runs=runs, first=1000, seed=1, impl="mapped")
    out, err = proc.communicate(timeout=900)
    assert proc.returncode == 0, out[-3000:] + err[-3000:]
    records = [json.loads(line[7:]) for line in out.splitlines() if line.startswith("RESULT ")]
    assert len(records) == 3 * runs >= 12
    assert sorted({r["map_index"] for r in records}) == [0, 1, 2]
    if runs == 4:  # seed 1 draws every crash point within the 12 trials
        points = {r["point"].split("@")[0] for r in records}
        assert points == {"before_create", "after_create", "after_persist", "wait", "sigkill"}, points
    assert [r for r in records if not r["retry_ok"]] == []
    per_member = {
        r["prefix"]: sum(n for name, n in fake.creates.items() if name.startswith(r["prefix"]))
        for r in records
    }
    assert all(n == 1 for n in per_member.values()), {k: v for k, v in per_member.items() if v != 1}
    mapped_creates = {name: n for name, n in fake.creates.items() if name.startswith("crash1")}
    assert sum(mapped_creates.values()) == 3 * runs and all(n == 1 for n in mapped_creates.values())
    from airflow_dist_training.compat import HAS_RESUMABLE_JOBS

    if HAS_RESUMABLE_JOBS:  # each map index stored its own member's job
        assert all(r["stored_job"] and r["stored_job"].startswith(r["prefix"]) for r in records)
    print(
        "mapped crash points:",
        dict(Counter(r["point"].split("@")[0] for r in records)),
        "retry found its job by:",
        dict(Counter(r["retry_found_job_by"] for r in records)),
    )
