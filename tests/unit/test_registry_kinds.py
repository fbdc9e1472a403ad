"""Registry kinds are chosen by name once (``spec/registries.py``); everything else reads the record.

Outside the registry modules, no code of the package compares a registry-ish value with a
registered kind's name, tells kinds apart by their step classes (``isinstance(step,
SageMakerRegistry)``), or keeps a table keyed by kind names. A new registry is then one record.
"""

from __future__ import annotations

import ast
import re
import sys
import textwrap
import types
from pathlib import Path
from typing import Any

import pytest

from airflow_dist_training.spec import registries
from airflow_dist_training.spec.registries import registry_kinds
from tests.paths import REPO

PACKAGE = REPO / "airflow_dist_training"
REGISTRY_MODULES = {"spec/registries.py", "hooks/registry.py"}


def _names_in(node: ast.expr) -> set[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return {e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}
    return set()


def registry_kind_decisions(source: str, kinds: set[str], step_classes: set[str]) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            registry_ish = any("regist" in ast.unparse(o).lower() for o in operands)
            if registry_ish and set().union(*(_names_in(o) for o in operands)) & kinds:
                found.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.Dict) and len(node.keys) > 1:
            keys = [k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]
            if len(keys) == len(node.keys) and set(keys) <= kinds:
                found.append((node.lineno, "a table keyed by registry kinds"))
        elif (
            isinstance(node, ast.Name | ast.alias)
            and (node.id if isinstance(node, ast.Name) else node.name) in step_classes
        ):
            found.append(
                (
                    node.lineno,
                    f"the step class {ast.unparse(node) if isinstance(node, ast.Name) else node.name}",
                )
            )
        elif isinstance(node, ast.Name) and node.id == "REGISTRY_KINDS":
            found.append((node.lineno, "REGISTRY_KINDS"))
    return found


def _built_in_step_classes() -> set[str]:
    return {registries.find_registry(k).step.__name__ for k in ("local", "sagemaker")}  # type: ignore[union-attr]


def test_no_module_outside_the_registry_modules_decides_by_registry_kind() -> None:
    kinds, classes = set(registry_kinds()), _built_in_step_classes()
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        if relative in REGISTRY_MODULES:
            continue
        for line, text in registry_kind_decisions(path.read_text(), kinds, classes):
            offenders.append(f"airflow_dist_training/{relative}:{line}: {text}")
    assert not offenders, "use the kind's record (spec/registries.py) instead:\n" + "\n".join(offenders)


@pytest.mark.parametrize(
    "code",
    [
        "if registry == 'local': pass",
        "ok = step.registry.kind in ('local', 'sagemaker')",
        "KINDS = {'sagemaker': A, 'local': B}",
        "from airflow_dist_training.spec.registries import LocalRegistry",
        "ok = isinstance(registry, SageMakerRegistry)",
        "model = REGISTRY_KINDS[kind]",
    ],
)
def test_the_scan_finds_a_decision_by_registry_kind(code: str) -> None:
    assert registry_kind_decisions(code, {"local", "sagemaker"}, _built_in_step_classes())


def test_the_scan_leaves_other_vocabularies_alone() -> None:
    code = "a = location.kind == 'local'\nb = registry_record(kind).local_dir\nc = mode == 'fsx'"
    assert registry_kind_decisions(code, {"local", "sagemaker"}, _built_in_step_classes()) == []


def test_a_third_party_registry_is_found_through_its_entry_point(tmp_path, monkeypatch) -> None:
    """An installed distribution declares ``[airflow_dist_training.registries] name = module:RECORD``."""
    import importlib
    import sys

    (tmp_path / "wandb_registry.py").write_text(
        "from typing import Literal\n"
        "from airflow_dist_training.spec.registries import RegistryRecord, RegistryStepModel\n"
        "class Step(RegistryStepModel):\n"
        "    kind: Literal['wandb'] = 'wandb'\n"
        "    tracking_uri: str\n"
        "RECORD = RegistryRecord(name='wandb', step=Step, factory='wandb_registry:make')\n"
    )
    dist_info = tmp_path / "wandb_registry-1.0.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: wandb-registry\nVersion: 1.0\n")
    (dist_info / "entry_points.txt").write_text(
        "[airflow_dist_training.registries]\nwandb = wandb_registry:RECORD\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    monkeypatch.setattr(registries.REGISTRIES, "entry_points_loaded", False)
    try:
        record = registries.registry_record("wandb")
        step = registries.TypedRegistry  # the pipeline's step type validates the new kind
        from pydantic import TypeAdapter

        assert (
            TypeAdapter(step).validate_python({"kind": "wandb", "tracking_uri": "http://m"}).kind == "wandb"
        )
        assert "wandb" in registry_kinds() and record.step.__name__ == "Step"
    finally:
        registries.forget_registry("wandb")
        sys.modules.pop("wandb_registry", None)


# ------------------------------------------------------------------ docs/architecture.md's answer

FENCE = re.compile(r"^  ```python\s*\n(.*?)^  ```", re.M | re.S)


def test_the_architecture_pages_registry_answer_runs(tmp_path: Path) -> None:
    """The page's code block is the whole registry: pipelines, operators and get_registry take it."""
    from airflow_dist_training.hooks.registry import get_registry
    from airflow_dist_training.operators.evaluation import RegisterModelOperator
    from airflow_dist_training.pipeline_checks import load_pipeline

    text = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = text[text.index("- **A model registry**") :]
    [block] = FENCE.findall(section.split("\n- **", 1)[0])
    module = types.ModuleType("docs_architecture")  # pydantic resolves the step's types in its module
    sys.modules[module.__name__] = module
    namespace: dict[str, Any] = module.__dict__
    try:
        exec(compile(textwrap.dedent(block), "docs/architecture.md", "exec"), namespace)
        path = tmp_path / "p.yaml"
        spec = REPO / "examples" / "specs" / "local_demo.yaml"
        path.write_text(f"dag_id: d\ntraining: {spec}\nregistry: {{kind: memory, auto_approve: true}}\n")
        pipeline = load_pipeline(path)
        assert isinstance(pipeline.registry, namespace["MemoryStep"]) and pipeline.registry.auto_approve
        RegisterModelOperator(
            task_id="r", evaluation="e", model_package_group_name="g", registry="memory", model_data_uri="m"
        )
        evaluation = tmp_path / "evaluation.json"
        evaluation.write_text('{"metrics": {"accuracy": 0.9}}')
        registry = get_registry("memory", group="churn")
        assert registry.get_champion() is None
        result = registry.register(
            model_data_uri="m",
            image_uri=None,
            evaluation_uri=str(evaluation),
            decision={"passed": True},
            auto_approve=True,
        )
        assert result["package_id"] == "churn/1" and result["approval_status"] == "Approved"
        champion = registry.get_champion()
        assert (
            champion is not None
            and champion.id == "churn/1"
            and champion.evaluation.metrics == {"accuracy": 0.9}
        )
    finally:
        registries.forget_registry("memory")
        del sys.modules[module.__name__]
