"""The package stays readable: no function over 80 lines (ruff's complexity rules cover the rest), and
one class per name (a reader who finds ``ObjectStore`` finds the one)."""

from __future__ import annotations

import ast
import functools
from collections import defaultdict
from pathlib import Path

from tests.paths import REPO

PACKAGE = REPO / "airflow_dist_training"
MAX_LINES = 80


@functools.cache
def _nodes() -> list[tuple[Path, ast.AST]]:
    """Every node of every module, parsed once for the tests here."""
    return [
        (path, node)
        for path in sorted(PACKAGE.rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path)))
    ]


def test_no_function_is_longer_than_80_lines() -> None:
    long = []
    for path, node in _nodes():
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            lines = (node.end_lineno or node.lineno) - node.lineno + 1
            if lines > MAX_LINES:
                long.append(f"{path.relative_to(REPO)}:{node.lineno} {node.name} ({lines} lines)")
    assert not long, "split these into named steps:\n" + "\n".join(long)


def test_one_class_per_name() -> None:
    where: dict[str, list[str]] = defaultdict(list)
    for path, node in _nodes():
        if isinstance(node, ast.ClassDef):
            where[node.name].append(f"{path.relative_to(REPO)}:{node.lineno}")
    twice = [f"{name}: {', '.join(places)}" for name, places in sorted(where.items()) if len(places) > 1]
    assert not twice, "two classes share a name; fold them or rename one:\n" + "\n".join(twice)
