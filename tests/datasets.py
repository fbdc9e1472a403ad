"""The demo's synthetic dataset for tests (``examples/make_dataset.py``, the script users run)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.paths import REPO


def make_dataset(out: Path, *, train: int = 400, test: int = 200, seed: int = 0) -> Path:
    """Write ``<out>/train/data.csv`` and ``<out>/test/data.csv``; returns ``out``."""
    subprocess.run(
        [
            sys.executable,
            str(REPO / "examples" / "make_dataset.py"),
            *("--out", str(out), "--train", str(train), "--test", str(test), "--seed", str(seed)),
        ],
        check=True,
        capture_output=True,
    )
    return out
