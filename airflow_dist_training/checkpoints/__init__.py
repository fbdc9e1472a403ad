"""Checkpoint logic: selection, retention, resume policy, interruption budget. Pure (no I/O).

The in-container writer is :mod:`airflow_dist_training.checkpointing`; S3/local I/O is
:class:`airflow_dist_training.hooks.checkpoints.CheckpointHook`.

Names are loaded on first use (PEP 562), so importing one submodule at DAG parse time does not
import the others.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow_dist_training.checkpoints.resume import (
        AttemptOutcome,
        FailureBudget,
        RetryDecision,
        classify_outcome,
        decide_retry,
        resolve_resume_checkpoint,
        seed_checkpoint,
    )
    from airflow_dist_training.checkpoints.retention import RetentionPlan, RetentionRule, plan_retention
    from airflow_dist_training.checkpoints.selection import (
        CheckpointInfo,
        Selector,
        best_by_metric,
        completeness_problems,
        latest_complete,
        select_checkpoint,
    )

_HOMES = {
    "resume": (
        "AttemptOutcome",
        "FailureBudget",
        "RetryDecision",
        "classify_outcome",
        "decide_retry",
        "resolve_resume_checkpoint",
        "seed_checkpoint",
    ),
    "retention": ("RetentionPlan", "RetentionRule", "plan_retention"),
    "selection": (
        "CheckpointInfo",
        "Selector",
        "best_by_metric",
        "completeness_problems",
        "latest_complete",
        "select_checkpoint",
    ),
}
_MODULE_OF = {name: module for module, names in _HOMES.items() for name in names}

__all__ = sorted(_MODULE_OF)


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
