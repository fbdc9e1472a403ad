"""A pytest plugin that fails the session when the run created, changed or deleted anything in the
repository (tests write to temporary folders; a test's model left in ``.adt-demo/`` becomes a user's
champion). Registered by ``tests/conftest.py``.

It compares a snapshot taken when the session starts with one taken when it ends, in the controlling
process only (under pytest-xdist, workers finish before the controller's ``pytest_sessionfinish``).
A snapshot is ``git status --porcelain --ignored`` with each listed file's size and mtime, and
untracked or ignored folders (``.adt-demo/``, ``.airflow/``) walked file by file: cheap, because
unchanged tracked files are not listed at all and the big ignored folders are skipped.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

# What may change during a run: interpreters' and tools' own caches (ruff or mypy may run beside
# it); ``.hypothesis`` holds the examples the ``explore`` profile finds, on purpose (the ``ci``
# profile has no example database).
ALLOWED_PARTS = ("__pycache__", ".pytest_cache", ".hypothesis", ".mypy_cache", ".ruff_cache")
ALLOWED_PREFIXES = (".venv",)

Snapshot = dict[str, tuple[str, int, int]]

_SNAPSHOT = pytest.StashKey[Snapshot]()
_ROOT = pytest.StashKey[Path]()
_CHANGES = pytest.StashKey[list[str]]()


def _allowed(relative: str) -> bool:
    parts = relative.rstrip("/").split("/")
    return parts[0].startswith(ALLOWED_PREFIXES) or any(part in ALLOWED_PARTS for part in parts)


def _stat(path: Path) -> tuple[int, int]:
    try:
        info = path.lstat()
    except FileNotFoundError:
        return (-1, -1)
    return (info.st_size, info.st_mtime_ns)


def git_root(start: Path) -> Path | None:
    """The work tree holding ``start``, or None when it is not in a git work tree (or git is absent)."""
    try:
        done = subprocess.run(
            ["git", "rev-parse", "--show-toplevel"], cwd=start, capture_output=True, text=True, check=False
        )
    except OSError:
        return None
    return Path(done.stdout.strip()) if done.returncode == 0 else None


def snapshot(root: Path) -> Snapshot:
    """Every path git reports as not clean (modified, untracked, ignored), file by file, with its
    status, size and mtime; allowed caches left out."""
    out = subprocess.run(
        ["git", "status", "--porcelain=v1", "-z", "--ignored", "--untracked-files=normal"],
        cwd=root,
        capture_output=True,
        check=True,
    ).stdout.decode(errors="surrogateescape")
    entries = out.split("\0")
    found: Snapshot = {}
    index = 0
    while index < len(entries):
        entry = entries[index]
        index += 1
        if not entry:
            continue
        status, relative = entry[:2], entry[3:]
        if "R" in status or "C" in status:
            index += 1  # a rename's or copy's original path follows
        if _allowed(relative):
            continue
        if not relative.endswith("/"):
            found[relative] = (status, *_stat(root / relative))
            continue
        listed = len(found)
        for folder, dirs, files in os.walk(root / relative):
            dirs[:] = [d for d in dirs if d not in ALLOWED_PARTS]
            for name in files + [d for d in dirs if (Path(folder) / d).is_symlink()]:
                path = Path(folder) / name
                found[path.relative_to(root).as_posix()] = (status, *_stat(path))
        if len(found) == listed:
            found[relative] = (status, 0, 0)  # an empty folder
    return found


def differences(before: Snapshot, after: Snapshot) -> list[str]:
    """One line per path the run created, changed or deleted."""
    lines = []
    for path in sorted(before.keys() | after.keys()):
        old, new = before.get(path), after.get(path)
        if old == new:
            continue
        if old is None:  # was clean (tracked) or absent
            assert new is not None
            verb = "deleted" if "D" in new[0] else "created" if new[0] in ("??", "!!") else "changed"
        elif new is None:  # is clean (tracked) or absent now
            verb = "deleted" if old[0] in ("??", "!!") else "changed"
        else:
            verb = "deleted" if new[1] < 0 or "D" in new[0] else "changed"
        lines.append(f"{verb} {path}")
    return lines


def _is_controller(config: pytest.Config) -> bool:
    return not hasattr(config, "workerinput")


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    config = session.config
    if not _is_controller(config):
        return
    root = git_root(config.rootpath)
    if root is None:
        return
    config.stash[_ROOT] = root
    config.stash[_SNAPSHOT] = snapshot(root)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    if _SNAPSHOT not in config.stash:
        return
    changes = differences(config.stash[_SNAPSHOT], snapshot(config.stash[_ROOT]))
    if changes:
        config.stash[_CHANGES] = changes
        if session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    changes = config.stash.get(_CHANGES, [])
    if not changes:
        return
    shown = 40
    terminalreporter.section("tests wrote into the repository", sep="=", red=True, bold=True)
    terminalreporter.write_line(
        f"this run created, changed or deleted {len(changes)} path(s) under {config.stash[_ROOT]} "
        "(tests must write to tmp_path or another temporary folder):"
    )
    for line in changes[:shown]:
        terminalreporter.write_line(f"  {line}")
    if len(changes) > shown:
        terminalreporter.write_line(f"  ... and {len(changes) - shown} more")
