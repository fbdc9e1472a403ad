"""Every code example of docs/local-backend.md parses; the `local:` settings example validates."""

from __future__ import annotations

import ast
import re

import yaml

from airflow_dist_training.spec.training import LocalSettings
from tests.paths import REPO

DOC = REPO / "docs" / "local-backend.md"


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", DOC.read_text(), flags=re.S)


def test_python_examples_parse() -> None:
    found = blocks("python")
    assert len(found) >= 4
    for code in found:
        ast.parse(code)


def test_yaml_examples_parse_and_the_local_settings_validate() -> None:
    documents = [yaml.safe_load(text) for text in blocks("yaml")]
    local = [d["local"] for d in documents if isinstance(d, dict) and "local" in d]
    assert len(local) == 2  # the hook's settings, an interpreter for PyTorch images
    settings = LocalSettings.model_validate(local[0])
    assert (settings.runner, settings.isolation, settings.hang_seconds) == ("auto", "auto", 60)
    vision = LocalSettings.model_validate(local[1])
    assert vision.python == {"pytorch": "/opt/venvs/vision/bin/python"}
