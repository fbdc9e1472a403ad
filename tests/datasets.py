"""The demo's synthetic dataset for tests (``examples/make_dataset.py``, the script users run)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.paths import REPO


def make_dataset(out: Path, *, train: int | None = None, test: int | None = None, seed: int = 0) -> Path:
    """Write ``<out>/train/data.csv`` and ``<out>/test/data.csv``; returns ``out``.

    ``train``/``test`` are row counts; ``None`` keeps the script's defaults (the README's demo data).
    """
    sizes = [*(("--train", str(train)) if train is not None else ()), *(("--test", str(test)) if test is not None else ())]
    subprocess.run(
        [sys.executable, str(REPO / "examples" / "make_dataset.py"), "--out", str(out), "--seed", str(seed), *sizes],
        check=True,
        capture_output=True,
    )
    return out
