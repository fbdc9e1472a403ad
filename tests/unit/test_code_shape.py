"""The package stays readable: no function over 80 lines (ruff's complexity rules cover the rest)."""

from __future__ import annotations

import ast

from tests.paths import REPO

PACKAGE = REPO / "airflow_dist_training"
MAX_LINES = 80


def test_no_function_is_longer_than_80_lines() -> None:
    long = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > MAX_LINES:
                    long.append(f"{path.relative_to(REPO)}:{node.lineno} {node.name} ({lines} lines)")
    assert not long, "split these into named steps:\n" + "\n".join(long)
