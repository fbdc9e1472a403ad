"""The repository guard (tests/repo_guard.py) fails a pytest session that wrote into its repository and
names what it wrote; caches are allowed; it works under pytest-xdist (the controller checks)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.paths import REPO

LEAKY_TESTS = """
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_rewrites_a_tracked_page():
    (ROOT / "docs" / "page.md").write_text("rewritten by a test\\n")


def test_leaves_a_model_in_the_ignored_demo_folder():
    (ROOT / ".adt-demo" / "registry" / "v2.json").write_text("{}")
    (ROOT / ".adt-demo" / "old.txt").unlink()


def test_writes_only_caches_and_tmp(tmp_path):
    (tmp_path / "fine.txt").write_text("x")
    (ROOT / "__pycache__").mkdir(exist_ok=True)
    (ROOT / "__pycache__" / "x.pyc").write_bytes(b"")
    (ROOT / ".venv-extra").mkdir(exist_ok=True)
    (ROOT / ".venv-extra" / "y").write_text("y")
"""

CLEAN_TESTS = """
def test_writes_only_tmp(tmp_path):
    (tmp_path / "fine.txt").write_text("x")
"""


def _git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        cwd=repo,
        check=True,
        capture_output=True,
    )


def _repo(tmp_path: Path, tests: str) -> Path:
    repo = tmp_path / "repo"
    (repo / "docs").mkdir(parents=True)
    (repo / "docs" / "page.md").write_text("committed\n")
    (repo / ".gitignore").write_text(".adt-demo/\n__pycache__/\n.venv*/\n")
    (repo / "checks").mkdir()
    (repo / "checks" / "test_writes.py").write_text(tests)
    (repo / ".adt-demo" / "registry").mkdir(parents=True)  # a user's earlier demo run
    (repo / ".adt-demo" / "registry" / "v1.json").write_text("{}")
    (repo / ".adt-demo" / "old.txt").write_text("old")
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "init")
    return repo


def _pytest(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "tests.repo_guard",
            *args,
            "checks",
        ],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("parallel", [[], ["-p", "xdist", "-n", "2"]], ids=["serial", "xdist"])
def test_a_session_that_wrote_into_the_repository_fails_naming_the_paths(
    tmp_path: Path, parallel: list[str]
) -> None:
    repo = _repo(tmp_path, LEAKY_TESTS)
    done = _pytest(repo, *parallel)
    out = done.stdout
    assert done.returncode == 1, out + done.stderr
    assert "3 passed" in out  # every test passed: the guard alone fails the session
    assert "tests wrote into the repository" in out
    assert "created, changed or deleted 3 path(s)" in out
    assert "  changed docs/page.md" in out
    assert "  created .adt-demo/registry/v2.json" in out
    assert "  deleted .adt-demo/old.txt" in out
    assert "__pycache__" not in out and ".venv-extra" not in out
    assert out.count("changed docs/page.md") == 1  # reported once, by the controller


def test_a_session_that_wrote_only_to_tmp_passes(tmp_path: Path) -> None:
    repo = _repo(tmp_path, CLEAN_TESTS)
    done = _pytest(repo)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "tests wrote into the repository" not in done.stdout


def test_outside_a_git_work_tree_the_guard_stays_out_of_the_way(tmp_path: Path) -> None:
    folder = tmp_path / "plain"
    (folder / "checks").mkdir(parents=True)
    (folder / "checks" / "test_writes.py").write_text(
        "from pathlib import Path\n\ndef test_w():\n    (Path(__file__).parent / 'x').write_text('x')\n"
    )
    done = _pytest(folder)
    assert done.returncode == 0, done.stdout + done.stderr
