"""Every YAML and Python example in ``docs/`` (and the README) is parsed by this test, so the docs
cannot drift from the schema or the API again.

- YAML: a whole pipeline (``dag_id``) is validated as a ``PipelineSpec``; a whole training spec
  (``name`` + ``image``) as a ``TrainingJobSpec``; a tuning section (``ranges`` + ``objective``) as a
  ``TuningSpec``; a fragment (top-level keys of one of them) is
  merged into a valid base and validated, so an unknown or misspelt field fails here.
- Python: every block compiles, and every ``from airflow_dist_training... import X`` names
  something that exists.
"""

from __future__ import annotations

import ast
import importlib
import re
from typing import Any

import pytest
import yaml

from airflow_dist_training.spec.loading import validate_model
from airflow_dist_training.spec.pipeline import PipelineSpec
from airflow_dist_training.spec.training import TrainingJobSpec
from airflow_dist_training.spec.tuning import TuningSpec
from tests.paths import REPO

ROOT = REPO
FENCE = re.compile(r"^```(yaml|python)\s*\n(.*?)^```", re.M | re.S)
BASE_TRAINING: dict[str, Any] = {
    "name": "docs-example",
    "image": {"uri": "123456789012.dkr.ecr.us-east-1.amazonaws.com/train:1"},
    "source": {"entry_point": "train.py"},
    "role_arn": "arn:aws:iam::123456789012:role/SageMakerTrainingRole",
    "compute": {"instance_type": "ml.m5.xlarge", "instance_count": 1},
}
BASE_PIPELINE: dict[str, Any] = {"dag_id": "docs_example", "training": BASE_TRAINING}


def _blocks(kind: str) -> list[Any]:
    params = []
    for path in sorted([*ROOT.joinpath("docs").rglob("*.md"), ROOT / "README.md"]):
        text = path.read_text(encoding="utf-8")
        for m in FENCE.finditer(text):
            if m.group(1) == kind:
                line = text[: m.start()].count("\n") + 1
                params.append(pytest.param(m.group(2), id=f"{path.relative_to(ROOT)}:{line}"))
    return params


@pytest.mark.parametrize("text", _blocks("yaml"))
def test_docs_yaml_example_is_accepted_by_the_schema(text: str) -> None:
    data = yaml.safe_load(text)
    assert isinstance(data, dict), "a docs YAML example is a mapping"
    if "dag_id" in data:
        if isinstance(data.get("training"), str):
            data = {**data, "training": BASE_TRAINING}
        validate_model(PipelineSpec, data, source="docs")
        return
    if "name" in data and "image" in data:
        validate_model(TrainingJobSpec, data, source="docs")
        return
    if "ranges" in data and "objective" in data:  # a tuning section (docs/tuning.md)
        validate_model(TuningSpec, data, source="docs", prefix="tuning")
        return
    pipeline_only = set(PipelineSpec.model_fields) - {"training"}
    if set(data) <= set(TrainingJobSpec.model_fields):
        validate_model(TrainingJobSpec, {**BASE_TRAINING, **data}, source="docs")
    elif set(data) <= pipeline_only:
        validate_model(PipelineSpec, {**BASE_PIPELINE, **data}, source="docs")
    else:
        unknown = set(data) - set(TrainingJobSpec.model_fields) - pipeline_only
        pytest.fail(f"keys {sorted(unknown or data)} belong to no schema (training spec or pipeline)")


@pytest.mark.parametrize("text", _blocks("python"))
def test_docs_python_example_compiles_and_imports_exist(text: str) -> None:
    tree = ast.parse(text)
    compile(tree, "<docs>", "exec")
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("airflow_dist_training"):
            module = importlib.import_module(str(node.module))
            for alias in node.names:
                assert hasattr(module, alias.name), f"{node.module} has no {alias.name}"
