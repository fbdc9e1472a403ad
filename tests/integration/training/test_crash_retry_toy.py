"""Crash/retry on a durable backend that is not SageMaker: at every named crash point, 0 duplicates.

The crash points are read from the package's code (every ``_fault_point("<name>")`` call), so a
point someone adds is crashed here too. ``crash_driver.py`` runs the training task on the toy
backend (``tests/toy_backend.py``: the backend protocol alone, jobs in a directory its processes
share; here each runs no code for a second, so it outlives the process that created it) through
Airflow's task runner, one DAG run per point: a real process dies (``os._exit``) at the point, then
the retry runs to the end. The toy's ledger counts every create.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
from test_crash_retry import run_driver

import airflow_dist_training
from tests.toy_backend import creates

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def fault_points() -> list[str]:
    """The name of every ``_fault_point("...")`` call in the package, in a stable order."""
    found = set()
    for path in Path(airflow_dist_training.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "_fault_point"
                and node.args
                and isinstance(node.args[0], ast.Constant)
            ):
                found.add(str(node.args[0].value))
    return sorted(found)


def test_a_crash_at_every_fault_point_on_a_durable_toy_backend_creates_exactly_one_job(
    airflow_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    points = fault_points()
    assert {"before_create", "after_create", "after_persist", "wait"} <= set(points), points
    monkeypatch.setenv("TOY_SERVICE_DIR", str(tmp_path / "toy-service"))
    # long enough that a crash right after the create finds the job still running
    monkeypatch.setenv("TOY_JOB_SECONDS", "1")
    proc = run_driver(
        tmp_path, airflow_db / "airflow.db", runs=len(points), first=2000, seed=0, impl="toy", points=points
    )
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, out[-3000:] + err[-3000:]
    records = [json.loads(line[7:]) for line in out.splitlines() if line.startswith("RESULT ")]
    assert [r["point"] for r in records] == points
    assert [(r["point"], r["crash_rc"]) for r in records] == [(p, 137) for p in points]  # each died there
    assert [r for r in records if not r["retry_ok"]] == []  # and its retry succeeded
    created = creates()
    per_run = {r["point"]: [name for name in created if name.startswith(r["prefix"])] for r in records}
    assert {point: len(jobs) for point, jobs in per_run.items()} == dict.fromkeys(points, 1), per_run
    assert len(created) == len(set(created)) == len(points)  # never a name created twice
    from airflow_dist_training.compat import HAS_RESUMABLE_JOBS

    if HAS_RESUMABLE_JOBS:  # task_state_store holds the one job of the run: the retry finished with it
        assert all([r["stored_job"]] == per_run[r["point"]] for r in records), records
    # the retry of a try that died before its create created the job; every other retry found it
    # (after_create: its name never reached task_state_store, the retry found the job by name)
    expected = {"before_create": {"created"}, "after_create": {"job name"}}
    found = {"task_state_store: running job", "task_state_store: completed job", "job name"}
    wrong = [r for r in records if r["retry_found_job_by"] not in expected.get(r["point"], found)]
    assert wrong == [], wrong
