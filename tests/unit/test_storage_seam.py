"""Storage has one seam: URIs are taken apart only in ``storage/location.py``, and the modules that
read and write stores do not branch on S3 versus local (they call the ``ObjectStore`` protocol).
Outside ``storage/`` and the endpoint (``emulator/``), no code tests for S3 by the ``s3://`` prefix
(``storage.location.uri_scheme``) or cuts a URI at its slashes (``parent_uri``, ``uri_name``)."""

from __future__ import annotations

import ast
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
    "local/staging.py",
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


# where URIs are the subject: the seam itself and the SageMaker test endpoint
URI_HOMES = ("storage", "emulator")
# image URIs (registry/repository:tag) are not locations
NOT_LOCATIONS = {"sagemaker/hardware.py"}


def _named_uri(node: ast.expr) -> bool:
    name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""
    return name == "uri" or name.endswith("_uri")


def _uri_by_hand(node: ast.AST) -> str | None:
    """``x.startswith("s3://")`` (or a tuple holding it), or ``<..._uri>.(r)split("/")``."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args):
        return None
    arg, method = node.args[0], node.func.attr
    values = arg.elts if isinstance(arg, ast.Tuple) else [arg]
    texts = [v.value for v in values if isinstance(v, ast.Constant) and isinstance(v.value, str)]
    if method in ("startswith", "removeprefix") and any(t.startswith("s3://") for t in texts):
        return f"{method}({', '.join(map(repr, texts))})"
    if method in ("split", "rsplit") and texts == ["/"] and _named_uri(node.func.value):
        return f"{ast.unparse(node.func)}('/')"
    return None


def test_no_scheme_test_or_uri_cut_outside_storage() -> None:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel.split("/", 1)[0] in URI_HOMES or rel in NOT_LOCATIONS:
            continue
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if (what := _uri_by_hand(node)) is not None:
                found.append(f"{rel}:{node.lineno}: {what}")  # type: ignore[attr-defined]
    hint = "use storage.location (uri_scheme, parent_uri, uri_name, Location):\n"
    assert found == [], hint + "\n".join(found)


def test_the_shape_test_sees_what_it_forbids() -> None:
    for code in ('u.startswith("s3://")', 'u.startswith(("s3://", "/"))', "job.model_uri.rsplit('/', 1)"):
        assert _uri_by_hand(ast.parse(code).body[0].value) is not None, code  # type: ignore[attr-defined]
    for code in ('u.startswith("s3:/")', "image.rsplit('/', 1)", "uri_scheme(u)"):
        assert _uri_by_hand(ast.parse(code).body[0].value) is None, code  # type: ignore[attr-defined]
