"""Backends are chosen by name once; everything else reads their declared capabilities.

Outside the backend modules, no code of the package compares a value with a registered backend's
name (``==``/``!=``/``in``/``not in``/``match`` against "local", "sagemaker", ...). A new backend
is then one record, not an edit in every module that once asked "is this SageMaker?".
"""

from __future__ import annotations

import ast

import pytest

from airflow_dist_training.errors import SpecValidationError
from airflow_dist_training.spec.backends import (
    BackendRecord,
    backend_names,
    backend_record,
    forget_backend,
    register_backend,
)
from tests.paths import REPO

PACKAGE = REPO / "airflow_dist_training"
# where backends are defined: the registry and the implementations
BACKEND_MODULES = {"spec/backends.py", "hooks/backends.py"}


def _names_in(node: ast.expr) -> set[str]:
    """The string constants an operand of a comparison is or holds (a tuple/list/set of them)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return {e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}
    return set()


def _is_a_kind(node: ast.expr) -> bool:
    """``x.kind``: a storage location's or registry's kind, another vocabulary that shares words."""
    return isinstance(node, ast.Attribute) and node.attr == "kind"


def backend_name_comparisons(source: str, names: set[str]) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            if any(_is_a_kind(o) for o in operands):
                continue
            hits = set().union(*(_names_in(o) for o in operands)) & names
            if hits:
                found.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.MatchValue) and _names_in(node.value) & names:
            found.append((node.lineno, f"case {ast.unparse(node.value)}"))
    return found


def test_no_module_outside_the_backend_modules_compares_backend_names() -> None:
    names = set(backend_names())
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        if relative in BACKEND_MODULES:
            continue
        for line, text in backend_name_comparisons(path.read_text(), names):
            offenders.append(f"airflow_dist_training/{relative}:{line}: {text}")
    assert not offenders, "use the backend's record (spec/backends.py) instead:\n" + "\n".join(offenders)


@pytest.mark.parametrize(
    "code",
    [
        "if backend == 'sagemaker': pass",
        "ok = info.get('backend') != 'local'",
        "ok = backend in ('local', 'sagemaker')",
        "match backend:\n    case 'local':\n        pass",
    ],
)
def test_the_scan_finds_a_backend_name_comparison(code: str) -> None:
    assert backend_name_comparisons(code, {"local", "sagemaker"})


def test_the_scan_leaves_other_vocabularies_alone() -> None:
    code = "a = location.kind == 'local'\nb = backend_record(name).on_aws\nc = mode == 'fsx'"
    assert backend_name_comparisons(code, {"local", "sagemaker"}) == []


def test_a_backend_registered_at_run_time_is_known_and_validated_by_the_pipeline_spec() -> None:
    from airflow_dist_training.spec.loading import validate_model
    from airflow_dist_training.spec.pipeline import PipelineSpec

    spec = (REPO / "examples" / "specs" / "local_demo.yaml").as_posix()
    data = {"dag_id": "d", "backend": "toy", "training": spec}
    from airflow_dist_training.spec.pipeline import resolve_training_reference

    data = resolve_training_reference(data, REPO)
    with pytest.raises(SpecValidationError) as refused:
        validate_model(PipelineSpec, data, source="p.yaml", pipeline=True)
    assert refused.value.render() == "p.yaml: backend: unknown backend 'toy'; registered backends: local, sagemaker"
    register_backend(
        BackendRecord(
            name="toy",
            factory="airflow_dist_training.hooks.backends:LocalBackend",
            staging="directory",
            evaluation="process",
            default_registry="local",
            durable=False,
            on_aws=False,
        )
    )
    try:
        pipeline = validate_model(PipelineSpec, {**data, "registry": {"model_package_group": "g"}}, pipeline=True)
        assert pipeline.backend == "toy"
        assert pipeline.registry is not None and pipeline.registry.kind == "local"  # its default registry
        from airflow_dist_training.hooks.backends import get_backend

        assert get_backend("toy").record is backend_record("toy")
    finally:
        forget_backend("toy")
    with pytest.raises(SpecValidationError, match="unknown backend 'toy'"):
        backend_record("toy")


def test_unknown_backend_in_an_operator_names_the_registered_ones() -> None:
    from airflow_dist_training.operators.training import DistributedTrainingOperator

    with pytest.raises(SpecValidationError) as refused:
        DistributedTrainingOperator(task_id="t", spec={}, backend="hyperpod")
    assert refused.value.render() == "backend: unknown backend 'hyperpod'; registered backends: local, sagemaker"


def test_backend_names_of_the_built_in_backends() -> None:
    assert backend_names()[:2] == ("local", "sagemaker")
    assert backend_record("sagemaker").durable and not backend_record("local").durable


def test_a_third_party_backend_is_found_through_its_entry_point(tmp_path, monkeypatch) -> None:
    """An installed distribution declares ``[airflow_dist_training.backends] name = module:RECORD``."""
    import importlib
    import sys

    from airflow_dist_training.spec import backends

    (tmp_path / "hyperpod_backend.py").write_text(
        "from airflow_dist_training.spec.backends import BackendRecord\n"
        "RECORD = BackendRecord(name='hyperpod', factory='hyperpod_backend:make', staging='fsx',\n"
        "    evaluation='processing_job', default_registry='sagemaker', durable=True, on_aws=True)\n"
    )
    dist_info = tmp_path / "hyperpod_backend-1.0.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: hyperpod-backend\nVersion: 1.0\n")
    (dist_info / "entry_points.txt").write_text("[airflow_dist_training.backends]\nhyperpod = hyperpod_backend:RECORD\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    monkeypatch.setattr(backends.BACKENDS, "entry_points_loaded", False)
    try:
        assert backend_record("hyperpod").durable
        assert "hyperpod" in backend_names()
    finally:
        forget_backend("hyperpod")
        sys.modules.pop("hyperpod_backend", None)


def test_listing_the_backends_reads_no_entry_points_when_none_declares_the_group(monkeypatch) -> None:
    """The shipped DAG lists every backend at each parse: without a distribution declaring the
    group, that costs a look at each ``entry_points.txt``, not importlib.metadata's full scan."""
    import importlib.metadata

    from airflow_dist_training.spec import backends

    def full_scan(**_: object) -> None:
        raise AssertionError("entry points scanned although no distribution declares the group")

    monkeypatch.setattr(importlib.metadata, "entry_points", full_scan)
    monkeypatch.setattr(backends.BACKENDS, "entry_points_loaded", False)
    assert {"local", "sagemaker"} <= set(backend_names())
