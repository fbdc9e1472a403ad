"""The job's Python: which interpreter runs a job, and its ``requirements.txt``.

The spec's ``local.python`` maps an image URI (or ``<framework>-<version>``, or ``default``) to an
interpreter; without a match ``local/job_env.py`` chooses. ``requirements.txt`` is installed
*before* the hosts start, as a job's network has no route to the package index (docs/local-backend.md).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
from collections.abc import Callable, Mapping
from pathlib import Path

from airflow_dist_training.local.job_env import run_checked


def choose_python(
    mapping: Mapping[str, str], image_uri: str, framework: str | None, version: str | None
) -> str | None:
    """The interpreter the spec maps this image to (None: the default)."""
    for key in (image_uri, f"{framework}-{version}" if framework else "", framework or "", "default"):
        if key and key in mapping:
            return str(Path(mapping[key]).expanduser())
    return None


def install_requirements(
    requirements: Path,
    python: str,
    cache_root: Path,
    *,
    log: Callable[[str], None],
    code_dir: Path,
) -> Path:
    """Install ``requirements`` for ``python`` into a cached folder and return it (for PYTHONPATH)."""
    content = requirements.read_bytes()
    key = hashlib.sha256(str(Path(python).resolve()).encode() + b"\0" + content).hexdigest()[:16]
    target = cache_root / key
    cache_root.mkdir(parents=True, exist_ok=True)
    with open(cache_root / f".{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two jobs with the same requirements install once
        if (target / ".complete").exists():
            log(f"[local] requirements.txt: reusing the cached environment {target}")
            return target
        log(f"[local] requirements.txt: pip install -r into {target} (before the hosts start)")
        pip = [python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
        argv = [*pip, "--target", str(target), "-r", str(requirements)]
        run_checked(argv, "pip install -r requirements.txt", cwd=code_dir, environ=os.environ)
        (target / ".complete").write_text("")
    return target
