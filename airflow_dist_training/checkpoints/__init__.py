"""Checkpoint logic: selection, retention, resume policy, interruption budget. Pure (no I/O).

The in-container writer is :mod:`airflow_dist_training.checkpointing`; S3/local I/O is
:class:`airflow_dist_training.hooks.checkpoints.CheckpointHook`.
"""

from __future__ import annotations

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

__all__ = [
    "AttemptOutcome",
    "CheckpointInfo",
    "FailureBudget",
    "RetentionPlan",
    "RetentionRule",
    "RetryDecision",
    "Selector",
    "best_by_metric",
    "classify_outcome",
    "completeness_problems",
    "decide_retry",
    "latest_complete",
    "plan_retention",
    "resolve_resume_checkpoint",
    "seed_checkpoint",
    "select_checkpoint",
]
