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
