"""Fixtures of the parity suite: a throwaway SageMaker SDK v2 venv and one SDK run for all cases.

The venv lives in ``~/.cache/airflow-dist-training/parity/sdk-venv`` (``$ADT_PARITY_CACHE``; never
in the repository) and is reused while it has the pinned
version; on a clean machine it is created once (about 35 s here). All cases go to the SDK in one
process; its JSON output is cached in ``sdk-parity-<hash>.json`` beside it, keyed by the cases, the
driver source and the SDK version, so a re-run with nothing changed does not start the SDK at all.
Safe under pytest-xdist: creation and the SDK run are serialised with a file lock.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.parity.cases import ERROR_CASES, NAME_BASES, REGION, REQUEST_CASES, difference_cases, image_cases
from tests.parity.mapping import sdk_estimator_case
from tests.parity.tuning_cases import TUNING_CASES, sdk_tuning_case

SDK_VERSION = os.environ.get("ADT_PARITY_SDK_VERSION", "2.257.6")
CACHE = Path(
    os.environ.get("ADT_PARITY_CACHE") or Path.home() / ".cache" / "airflow-dist-training" / "parity"
).expanduser()
VENV = CACHE / "sdk-venv"
DRIVER = Path(__file__).with_name("sdk_driver.py")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if Path(str(item.fspath)).parent == here:
            item.add_marker(pytest.mark.parity)


@contextmanager
def _locked(name: str) -> Iterator[None]:
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / f"{name}.lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _venv_python() -> Path:
    return VENV / "bin" / "python"


def _installed_version() -> str | None:
    if not _venv_python().exists():
        return None
    proc = subprocess.run(
        [str(_venv_python()), "-c", "import importlib.metadata as m; print(m.version('sagemaker'))"],
        capture_output=True,
        text=True,
    )
    return proc.stdout.strip() if proc.returncode == 0 else None


def ensure_sdk_venv() -> Path:
    """Create (or reuse) the SDK venv; returns its python. Records the creation time."""
    with _locked("sdk-venv"):
        if _installed_version() == SDK_VERSION:
            return _venv_python()
        start = time.monotonic()
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(VENV)], check=True)
        subprocess.run(
            [str(_venv_python()), "-m", "pip", "install", "--quiet", f"sagemaker=={SDK_VERSION}"],
            check=True,
        )
        (CACHE / "sdk-venv-created.json").write_text(
            json.dumps({"sdk_version": SDK_VERSION, "seconds": round(time.monotonic() - start, 1)})
        )
        return _venv_python()


def all_sdk_cases() -> list[dict[str, Any]]:
    cases = [sdk_estimator_case(c.id, c.spec, job_name=c.job_name, region=c.region) for c in REQUEST_CASES]
    for e in ERROR_CASES:
        case = sdk_estimator_case(f"error:{e.id}", e.spec, job_name="parity-error", region=REGION)
        cases.append(case)
    cases += image_cases()
    cases += [{"id": f"name:{base}", "kind": "name", "base": base} for base in NAME_BASES]
    cases += [sdk_tuning_case(c) for c in TUNING_CASES]
    return cases + difference_cases()


@pytest.fixture(scope="session")
def sdk_results() -> dict[str, Any]:
    """``{case_id: result}`` from one SDK process for every case (cached on disk by content hash)."""
    cases = all_sdk_cases()
    payload = json.dumps(cases)  # insertion order kept: the SDK json.dumps dicts (mp_parameters) as given
    key = hashlib.sha256((payload + DRIVER.read_text() + SDK_VERSION).encode()).hexdigest()[:16]
    out = CACHE / f"sdk-parity-{key}.json"
    if out.exists():
        return json.loads(out.read_text())
    python = ensure_sdk_venv()
    with _locked("sdk-run"):
        if not out.exists():
            cases_file = CACHE / f"sdk-parity-{key}.cases.json"
            cases_file.write_text(payload)
            tmp = out.with_suffix(".tmp")
            env = {**os.environ, "SAGEMAKER_SUPPRESS_V2_WARNING": "1", "AWS_DEFAULT_REGION": REGION}
            for var in ("AWS_ENDPOINT_URL", "AWS_PROFILE"):
                env.pop(var, None)
            proc = subprocess.run(
                [str(python), str(DRIVER), str(cases_file), str(tmp)], capture_output=True, text=True, env=env
            )
            if proc.returncode != 0:
                pytest.fail(f"SDK driver failed:\n{proc.stdout}\n{proc.stderr}")
            tmp.rename(out)
            cases_file.unlink()
            for stale in CACHE.glob("sdk-parity-*.json"):  # results of older cases/driver versions
                if stale != out:
                    stale.unlink(missing_ok=True)
    results = json.loads(out.read_text())
    assert results["_sdk_version"] == SDK_VERSION
    return results
