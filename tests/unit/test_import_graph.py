"""The package's import graph has no cycle: every arrow points one way (docs/architecture: layers).

Every import counts, at module level or inside a function (a function-level import only hides a
cycle from Python, not from the reader), and so do imports under ``if TYPE_CHECKING:``: they do not
run, but a reader follows them both ways all the same. The layer rules below read the imports that
run. Print the cycles with ``python tests/unit/test_import_graph.py``.
"""

from __future__ import annotations

import ast
import sys
from functools import cache
from pathlib import Path

from tests.paths import REPO

PACKAGE = REPO / "airflow_dist_training"


def _modules() -> dict[str, Path]:
    modules = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    return modules


class _Imports(ast.NodeVisitor):
    def __init__(self, module: str, is_package: bool, known: set[str], *, type_only: bool = False) -> None:
        self.package = module if is_package else module.rpartition(".")[0]
        self.known = known
        self.type_only = type_only  # also read the imports under ``if TYPE_CHECKING:``
        self.found: set[str] = set()

    def visit_If(self, node: ast.If) -> None:
        if not self.type_only and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.orelse:
                self.visit(child)
            return
        self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        self.found.update(alias.name for alias in node.names)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        base = node.module or ""
        if node.level:
            parts = self.package.split(".")
            parts = parts[: len(parts) - (node.level - 1)]
            base = ".".join([*parts, base] if base else parts)
        for alias in node.names:
            candidate = f"{base}.{alias.name}"
            self.found.add(candidate if candidate in self.known else base)


@cache
def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"))


@cache
def import_graph(*, type_only: bool = False) -> dict[str, set[str]]:
    """Module -> the package's modules it imports (``type_only``: with those under TYPE_CHECKING)."""
    modules = _modules()
    known = set(modules)
    graph = {}
    for name, path in modules.items():
        visitor = _Imports(name, path.name == "__init__.py", known, type_only=type_only)
        visitor.visit(_tree(path))
        graph[name] = {m for m in visitor.found if m in known and m != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_package_has_no_import_cycle() -> None:
    graph = import_graph(type_only=True)
    assert "airflow_dist_training.sagemaker.request" in graph  # the walk found the package
    assert cycles(graph) == []


def test_a_type_only_import_counts() -> None:
    """An import under ``if TYPE_CHECKING:`` closes a cycle for the reader, so the walk reads it."""
    source = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.b import B\n"
    for type_only, expected in ((True, {"pkg.b"}), (False, set())):
        visitor = _Imports("pkg.a", False, {"pkg.a", "pkg.b"}, type_only=type_only)
        visitor.visit(ast.parse(source))
        assert visitor.found - {"typing"} == expected


def test_the_pure_core_imports_no_adapter() -> None:
    """spec, planning (``sagemaker/``, ``planning.py``) and the local contract import no hook,
    operator or trigger: the plan task hands ``planning.plan_run`` its backend and region."""
    graph = import_graph()
    core = (
        "airflow_dist_training.spec",
        "airflow_dist_training.sagemaker",
        "airflow_dist_training.planning",
        "airflow_dist_training.local.contract",
    )
    adapters = (
        "airflow_dist_training.hooks",
        "airflow_dist_training.operators",
        "airflow_dist_training.triggers",
    )
    leaks = {
        (module, dep)
        for module, deps in graph.items()
        if module.startswith(core)
        for dep in deps
        if dep.startswith(adapters)
    }
    assert leaks == set()


LOCAL = "airflow_dist_training.local"
# the core: the local backend checks the spec and executes the planner's request
LOCAL_CORE = ("airflow_dist_training.spec", "airflow_dist_training.sagemaker")
# besides the standard library, its own modules and the core, these modules exactly, each for one reason
LOCAL_MAY_IMPORT = {
    "airflow_dist_training.errors": "a leaf: the error types every layer raises (Problem, TrainingJobError)",
    "airflow_dist_training.results": "a leaf: the result every backend returns (TrainingResult)",
    "airflow_dist_training.storage": "the store seam: one protocol for every store, chosen by a location's scheme",
    "airflow_dist_training.storage.location": "a leaf: Location, the one value type of a place, and the URI split",
    "airflow_dist_training.source_archive": "a leaf: packs a local source folder, as the SageMaker hook does",
    "boto3": "inside functions only (ruff bans it at module level): a store that uses real S3",
    "psutil": "a stop finds the workers torchrun starts in sessions of their own (Airflow needs it too)",
}


def _all_imports(module: str, path: Path) -> set[str]:
    """Every module ``module`` imports: of the package (as in the graph) and outside it."""
    known = set(_modules())
    visitor = _Imports(module, path.name == "__init__.py", known)
    visitor.visit(_tree(path))
    return visitor.found


def _allowed_in_local(dep: str) -> bool:
    if dep.split(".")[0] in sys.stdlib_module_names or dep in LOCAL_MAY_IMPORT:
        return True
    return any(dep == package or dep.startswith(package + ".") for package in (LOCAL, *LOCAL_CORE))


def test_the_local_backend_imports_only_the_core_and_its_own_modules() -> None:
    """Every module of ``local/`` (at module level or in a function): no hook, operator, trigger,
    Airflow or other layer; each exception above says why it is needed."""
    local = {name: path for name, path in _modules().items() if name == LOCAL or name.startswith(LOCAL + ".")}
    assert f"{LOCAL}.executor" in local and f"{LOCAL}.contract" in local  # the walk found the layer
    leaks = {
        (module, dep)
        for module, path in local.items()
        for dep in _all_imports(module, path)
        if not _allowed_in_local(dep)
    }
    assert leaks == set()


def test_the_local_rule_catches_a_hook_import() -> None:
    assert not _allowed_in_local("airflow_dist_training.hooks.training")
    assert not _allowed_in_local("airflow.sdk")
    assert not _allowed_in_local("airflow_dist_training.storage.s3")  # the S3 store reaches the AWS hooks
    assert _allowed_in_local("airflow_dist_training.local.store") and _allowed_in_local("json")


if __name__ == "__main__":
    found = cycles(import_graph(type_only=True))
    print(f"{len(found)} import cycles (type-only imports included)")
    for component in found:
        print("  " + " <-> ".join(component))
