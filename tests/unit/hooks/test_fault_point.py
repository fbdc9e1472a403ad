"""The crash-injection hook: a task process dies at a named point, alone or with its whole worker."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

# A "worker" (this process group's leader) whose child, the "task" in a group of its own as
# Airflow's supervisor makes it, reaches the fault point "after_create".
WORKER = """
import os, subprocess, sys, time
task = subprocess.Popen([sys.executable, "-c", '''
from airflow_dist_training.hooks.training import _fault_point
_fault_point("before_create")
print("passed before_create", flush=True)
_fault_point("after_create")
print("passed after_create", flush=True)
'''], process_group=0)
print("task", task.wait(), flush=True)
time.sleep(30)
"""


@pytest.mark.parametrize("point", ["before_create", "after_create"])
def test_the_task_alone_dies_at_the_point(point: str) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", WORKER.replace("time.sleep(30)", "")],
        env={**os.environ, "ADT_CRASH_AT": point},
        stdout=subprocess.PIPE,
        text=True,
    )
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0  # the worker lives on and sees its task exit 137
    assert "task 137" in out
    assert ("passed before_create" in out) == (point == "after_create")
    assert "passed after_create" not in out


def test_with_a_process_group_the_whole_worker_dies_at_the_point() -> None:
    # the group's id is the worker's pid (it leads its group): pass it through a wrapper shell
    proc = subprocess.Popen(
        ["sh", "-c", f'export ADT_CRASH_KILL_PGID=$$; exec "{sys.executable}" -c "$0"', WORKER],
        env={**os.environ, "ADT_CRASH_AT": "after_create"},
        stdout=subprocess.PIPE,
        text=True,
        process_group=0,
    )
    start = time.monotonic()
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == -9  # SIGKILL, not the 30 s sleep's end
    assert time.monotonic() - start < 25
    assert "passed before_create" in out
    assert "task" not in out.replace("passed", "")  # the worker never saw its task's exit
