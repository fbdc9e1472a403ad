"""What each command sets up: the demo only the provider with ``[local]`` and the job environment
(``--emulator`` adds ``[emulator]``); the test command everything else. The scripts run for real in a
copy of the repository whose installers (pip, apt-get, the job-env builder, the install check, the
prod-stack setup) are stubs that record their arguments."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.paths import REPO

STUB = '#!/bin/sh\necho "$(basename "$0") $*" >> "$ADT_STUB_LOG"\n'


def _sandbox(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    repo = tmp_path / "repo"
    (repo / "scripts").mkdir(parents=True)
    for name in ("setup.sh", "demo.sh", "test.sh"):
        shutil.copy2(REPO / "scripts" / name, repo / "scripts" / name)
    for name in ("pyproject.toml", "constraints.txt"):
        shutil.copy2(REPO / name, repo / name)
    stubs = [
        repo / ".venv/bin" / n for n in ("python", "pip", "airflow-dist-training", "ruff", "mypy", "mkdocs")
    ]
    stubs += [repo / "scripts" / n for n in ("check-install.sh", "setup-prod-stack.sh", "mlflow-server-env.sh")]
    bin_dir = tmp_path / "bin"
    stubs += [bin_dir / n for n in ("apt-get", "sudo")]
    for stub in stubs:
        stub.parent.mkdir(parents=True, exist_ok=True)
        stub.write_text(STUB)
        stub.chmod(0o755)
    log = tmp_path / "calls.log"
    log.touch()
    env = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "TMPDIR": str(tmp_path),  # test.sh's mktemp
        "ADT_STUB_LOG": str(log),
        "ADT_DEMO_DIR": str(tmp_path / "demo"),
    }
    return repo, env


def _run(repo: Path, env: dict[str, str], *argv: str) -> list[str]:
    subprocess.run(["bash", *argv], cwd=repo, env=env, capture_output=True, text=True, timeout=60)
    return Path(env["ADT_STUB_LOG"]).read_text().splitlines()


def _installs(calls: list[str]) -> list[str]:
    return [c.split()[-1] for c in calls if c.startswith("pip install") and " -e " in c]


@pytest.mark.parametrize(
    ("argv", "extras"),
    [
        (("scripts/demo.sh",), ".[local]"),
        (("scripts/demo.sh", "--emulator"), ".[emulator,local]"),
    ],
)
def test_the_demo_sets_up_only_the_provider_with_local_and_the_job_environment(
    tmp_path: Path, argv: tuple[str, ...], extras: str
) -> None:
    repo, env = _sandbox(tmp_path)
    calls = _run(repo, env, *argv)
    assert _installs(calls) == [extras]
    assert "airflow-dist-training job-env" in calls
    assert not [
        c
        for c in calls
        if c.startswith(("apt-get", "sudo", "check-install.sh", "setup-prod-stack.sh", "mlflow-server-env.sh"))
        or "--recipe" in c  # the Hugging Face images' environment is the tests', not the demo's
    ]
    # a second run finds the stamp: nothing is installed again
    Path(env["ADT_STUB_LOG"]).write_text("")
    assert _installs(_run(repo, env, *argv)) == []


def test_the_test_command_sets_up_everything_else(tmp_path: Path) -> None:
    repo, env = _sandbox(tmp_path)
    _run(repo, env, "scripts/demo.sh")  # a demo first: the test command adds to it
    Path(env["ADT_STUB_LOG"]).write_text("")
    calls = _run(repo, env, "scripts/test.sh", "-k", "nothing")
    assert _installs(calls) == [".[docs,emulator,local,test,toolkit]"]
    assert "check-install.sh .venv constraints.txt" in calls
    assert "setup-prod-stack.sh " in calls
    assert "mlflow-server-env.sh " in calls  # the tests' MLflow server, in its own venv
    # the Hugging Face Trainer jobs' environment, a layer over the default one
    assert calls.index("airflow-dist-training job-env") < calls.index(
        "airflow-dist-training job-env --recipe huggingface"
    )
    chromium = shutil.which("chromium", path=env["PATH"])
    assert chromium or any(c.startswith("apt-get install") and "chromium" in c for c in calls)
    assert "python -m pytest -n 2 --dist loadgroup -q -p no:cacheprovider --durations=25 -k nothing" in calls
    # the demo after the tests keeps what is installed; the tests again install and check nothing
    Path(env["ADT_STUB_LOG"]).write_text("")
    assert _installs(_run(repo, env, "scripts/demo.sh")) == []
    again = _run(repo, env, "scripts/test.sh")
    assert _installs(again) == [] and not [c for c in again if c.startswith("check-install.sh")]


def test_an_unknown_option_is_refused_before_anything_is_installed(tmp_path: Path) -> None:
    repo, env = _sandbox(tmp_path)
    done = subprocess.run(
        ["bash", "scripts/demo.sh", "--emulatr"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "unknown option --emulatr" in done.stderr
    assert Path(env["ADT_STUB_LOG"]).read_text() == ""
    assert os.access(repo / "scripts" / "setup.sh", os.X_OK)
