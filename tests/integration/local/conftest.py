"""Fixtures for the local backend: real torchrun launches on 127.0.0.1 (gloo on CPU)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.datasets import make_dataset
from tests.paths import REPO

EXAMPLES = REPO / "examples"


@pytest.fixture(scope="session")
def demo_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_dataset(tmp_path_factory.mktemp("demo-data"), train=2000, test=500)


def script_spec(tmp_path: Path, script: str, *, name: str = "t.py", **over: Any) -> dict[str, Any]:
    """A spec running ``script`` (source text) from a fresh source dir."""
    code = tmp_path / "code"
    code.mkdir(exist_ok=True)
    (code / name).write_text(script)
    spec: dict[str, Any] = {
        "name": "t",
        "image": {"framework": "pytorch", "framework_version": "2.8.0"},
        "source": {"entry_point": name, "source_dir": str(code)},
        "compute": {"instance_type": "ml.m5.xlarge", "instance_count": 1},
        "distribution": {"strategy": "torch_distributed", "processes_per_host": 1},
        "stopping": {"max_runtime_seconds": 300},
    }
    spec.update(over)
    return spec


def job_processes(job_name: str) -> list[psutil.Process]:
    """Live processes whose environment names this training job (launchers and workers)."""
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.environ().get("TRAINING_JOB_NAME") == job_name and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found


@pytest.fixture
def collect() -> Callable[[], tuple[list[str], Callable[[str], None]]]:
    def make() -> tuple[list[str], Callable[[str], None]]:
        lines: list[str] = []
        return lines, lines.append

    return make
