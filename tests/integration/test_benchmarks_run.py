"""Benchmarks cannot rot: every ``bench/*.py`` (found, not listed: a new one is covered at once) runs
in its ``--quick`` mode (tiny sizes, 1 round) and must exit 0 and print its ratio against its anchor,
``ratio <what> = <n>x``. The figures themselves are not asserted: a quick run on a shared box
measures nothing worth comparing (docs/benchmarks.md holds the full runs').

Jobs a benchmark starts run in the default job environment, as a user's do.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.paths import REPO

BENCHES = sorted((REPO / "bench").glob("[!_]*.py"))
RATIO_LINE = re.compile(r"^\s*ratio [^=\n]+ = [0-9]+(\.[0-9]+)?x", re.MULTILINE)

pytestmark = [pytest.mark.slow]


def test_the_benchmarks_are_found() -> None:
    assert {"emulator_overhead.py", "parse.py"} <= {bench.name for bench in BENCHES}


@pytest.mark.parametrize("bench", BENCHES, ids=[bench.stem for bench in BENCHES])
def test_the_benchmark_runs_in_quick_mode_and_prints_its_ratio(bench: Path, tmp_path: Path) -> None:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, str(bench), "--quick"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    assert RATIO_LINE.search(done.stdout), f"no 'ratio <what> = <n>x' line:\n{done.stdout[-3000:]}"
