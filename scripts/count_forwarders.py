"""Count forwarding one-liners: functions whose whole body hands their own arguments to one other callable.

A forwarder's body (docstring aside) is one ``return`` or expression statement whose value is a
call (at most wrapped in ``bool``/``dict``/``list``/``str``/``int``) passing on exactly the
function's own parameters, none dropped or computed: ``return self.jobs.stop(name, reason=reason)``.
Each is a layer a reader crosses without learning anything (issue 35's pass-through layers).

    python scripts/count_forwarders.py [PATH ...]   # default: the package; prints each, then the count
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

_WRAPPERS = {"bool", "dict", "list", "str", "int"}


def _params(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    a = fn.args
    names = {p.arg for p in a.posonlyargs + a.args + a.kwonlyargs}
    names |= {p.arg for p in (a.vararg, a.kwarg) if p is not None}
    return names - {"self", "cls"}


def _passed(call: ast.Call) -> set[str] | None:
    """The names a call passes on as they are; None when it passes anything else."""
    passed: set[str] = set()
    for arg in call.args:
        value = arg.value if isinstance(arg, ast.Starred) else arg
        if not isinstance(value, ast.Name):
            return None
        passed.add(value.id)
    for kw in call.keywords:
        if not isinstance(kw.value, ast.Name):
            return None
        passed.add(kw.value.id)
    return passed


def _forwarded_call(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> ast.Call | None:
    body = fn.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # the docstring
    if len(body) != 1 or not isinstance(body[0], ast.Return | ast.Expr) or body[0].value is None:
        return None
    value = body[0].value
    if isinstance(value, ast.Await):
        value = value.value
    if (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Name)
        and value.func.id in _WRAPPERS
        and len(value.args) == 1
        and isinstance(value.args[0], ast.Call)
    ):
        value = value.args[0]
    if not isinstance(value, ast.Call):
        return None
    passed = _passed(value)
    return value if passed is not None and passed == _params(fn) else None


def forwarders(path: Path) -> Iterator[tuple[int, str, str]]:
    """``(line, function, callee)`` of each forwarding one-liner in ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            call = _forwarded_call(node)
            if call is not None:
                yield node.lineno, node.name, ast.unparse(call.func)


def main(argv: list[str]) -> int:
    roots = [Path(a) for a in argv] or [Path(__file__).resolve().parent.parent / "airflow_dist_training"]
    files = sorted(f for root in roots for f in ([root] if root.is_file() else root.rglob("*.py")))
    count = 0
    for file in files:
        for line, name, callee in forwarders(file):
            print(f"{file}:{line}: {name} -> {callee}")
            count += 1
    print(f"forwarding one-liners: {count}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
