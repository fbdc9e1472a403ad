"""Storage has one seam: URIs are taken apart only in ``storage/location.py``, and the modules that
read and write stores do not branch on S3 versus local (they call the ``ObjectStore`` protocol)."""

from __future__ import annotations

import io
import re
import tokenize

from tests.paths import REPO

PACKAGE = REPO / "airflow_dist_training"
THE_SPLITTER = PACKAGE / "storage" / "location.py"
# ways code has taken a URI apart by hand (use storage.location.split_uri / Location instead)
SPLITTING = re.compile(
    r"""len\(["'](s3|file)://["']\)|removeprefix\(["'](s3|file)://["']\)|\burl(parse|split)\b"""
    r"""|\[5:\]|\[7:\]|(partition|split)\(["']://["']"""
)
# the store users: checkpoint semantics, evaluation artefacts and the local registry, the local buckets,
# the checkpoint sync, the emulator's processing jobs
STORE_USERS = [
    "hooks/checkpoints.py",
    "hooks/evaluation.py",
    "hooks/registry.py",
    "local/store.py",
    "local/launcher.py",
    "emulator/processing.py",
]
S3_OR_LOCAL = re.compile(r"""startswith\(["']s3://["']\)|\bis_s3\b|kind == ["'](local|s3)["']""")


def _code(path) -> str:
    """The module's code without comments and strings' prose (docstrings may mention ``s3://``)."""
    lines = path.read_text().splitlines(keepends=True)
    for tok in reversed(list(tokenize.generate_tokens(io.StringIO("".join(lines)).readline))):
        if tok.type == tokenize.COMMENT or (tok.type == tokenize.STRING and len(tok.string) > 40):
            (row, col), (end_row, end_col) = tok.start, tok.end
            lines[row - 1] = lines[row - 1][:col] + lines[end_row - 1][end_col:]
            del lines[row:end_row]
    return "".join(lines)


def test_no_uri_is_split_outside_location() -> None:
    found = [
        f"{path.relative_to(REPO)}: {m.group(0)}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path != THE_SPLITTER
        for m in SPLITTING.finditer(_code(path))
    ]
    assert found == [], "take URIs apart with storage.location.split_uri / Location:\n" + "\n".join(found)


def test_store_users_do_not_branch_on_s3_or_local() -> None:
    found = [
        f"{name}: {m.group(0)}" for name in STORE_USERS for m in S3_OR_LOCAL.finditer(_code(PACKAGE / name))
    ]
    assert found == [], "call the ObjectStore protocol instead:\n" + "\n".join(found)
