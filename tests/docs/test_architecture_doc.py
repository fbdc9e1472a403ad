"""docs/architecture.md names real files and real names: a rename that forgets the page fails here."""

from __future__ import annotations

import importlib
import re

from tests.paths import REPO

DOC = (REPO / "docs" / "architecture.md").read_text()


def test_every_path_on_the_page_exists() -> None:
    paths = set(re.findall(r"`((?:airflow_dist_training|tests|dags)/[^`\s]*)`", DOC))
    assert len(paths) > 20
    missing = sorted(p for p in paths if not (REPO / p).exists())
    assert not missing, missing


def test_every_named_entry_point_exists_where_the_page_says() -> None:
    named = {
        "airflow_dist_training.sagemaker.request": "plan_training_job",
        "airflow_dist_training.planning": "plan_run",
        "airflow_dist_training.hooks.backends": "get_backend",
        "airflow_dist_training.hooks.aws": "task_region",
        "airflow_dist_training.triggers.base": "AwsWaitTrigger",
        "airflow_dist_training.hooks.registry": "get_registry",
        "airflow_dist_training.storage": "register_store",
        "airflow_dist_training.task_groups": "stage_train_evaluate",
        "airflow_dist_training.operators.training": "DistributedTrainingOperator",
    }
    for module, name in named.items():
        assert name in DOC, name
        assert hasattr(importlib.import_module(module), name), f"{module}.{name}"


def _where_to_add() -> dict[str, str]:
    """The page's "Where to add" answers: {what: its text}."""
    section = DOC.split("## Where to add", 1)[1].split("\n## ", 1)[0]
    answers = re.findall(r"^- \*\*(.+?)\*\*(.*?)(?=^- \*\*|\Z)", section, re.S | re.M)
    return {what: text for what, text in answers}


def test_each_where_to_add_answer_is_at_most_three_package_files_and_a_test_that_registers_a_toy() -> None:
    answers = _where_to_add()
    seams = ("distribution strategy", "training backend", "job kind", "store", "model registry")
    for seam in seams:
        what, text = next((w, t) for w, t in answers.items() if seam in w)
        files = set(re.findall(r"`(airflow_dist_training/[^`\s]+\.py)`", text))
        assert 1 <= len(files) <= 3, (what, sorted(files))
        register = re.findall(r"`(register_\w+)", text) or ["register"]
        tests = [REPO / t for t in re.findall(r"`(tests/[^`\s]+\.py)`", text)]
        if "strategy" in seam:  # its walkthrough lives in contributing.md, executed by the strategy tests
            tests = [REPO / "docs/contributing.md", REPO / "tests/unit/sagemaker/test_strategies.py"]
        assert tests and all(t.exists() for t in tests), (what, tests)
        source = "\n".join(t.read_text() for t in tests)
        assert "toy" in source.lower() and any(f"{r}(" in source or f"{r}," in source for r in register), (
            f"{what}: no test registers a toy one with {register}"
        )
