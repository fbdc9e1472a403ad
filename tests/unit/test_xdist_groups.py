"""The suite's ``xdist_group`` marks must hold: each e2e Airflow stack and the SageMaker emulator are
started once per group, on one worker. pytest 9.2 with pytest-xdist 3.8 silently ignored them (xdist
rewrites ``item._nodeid``, pytest 9.2 reads ``item._id``), so both workers started every stack."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

GROUPED = textwrap.dedent(
    """
    import os
    import pytest

    @pytest.mark.xdist_group(name="stack")
    @pytest.mark.parametrize("n", range(6))
    def test_grouped(n):
        with open(os.environ["ADT_XDIST_OUT"], "a") as f:
            f.write(os.environ["PYTEST_XDIST_WORKER"] + "\\n")

    @pytest.mark.parametrize("n", range(6))
    def test_free(n):
        pass
    """
)


def test_tests_of_one_xdist_group_run_on_one_worker(tmp_path: Path) -> None:
    (tmp_path / "suite").mkdir()
    (tmp_path / "suite" / "test_grouped.py").write_text(GROUPED)
    (tmp_path / "suite" / "pytest.ini").write_text("[pytest]\n")
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-q", "-p", "no:cacheprovider",
         "test_grouped.py"],
        cwd=tmp_path / "suite", capture_output=True, text=True, timeout=120,
        env={**os.environ, "ADT_XDIST_OUT": str(tmp_path / "workers")},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    workers = (tmp_path / "workers").read_text().split()
    assert len(workers) == 6
    assert len(set(workers)) == 1, f"the group ran on {sorted(set(workers))}"
