"""Evaluation kinds by name: how an evaluation step runs, and where its runner lives.

Pure, like ``spec/backends.py``: a backend's record names its kind (``BackendRecord.evaluation``);
third parties register an ``EvaluationRecord`` with an entry point in the group
``airflow_dist_training.evaluations``. Callers decide by the record, never by the kind's name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from airflow_dist_training.spec.records import Factory, Records

ENTRY_POINT_GROUP = "airflow_dist_training.evaluations"


@dataclass(frozen=True)
class EvaluationRecord(Factory):
    """An evaluation kind: what it needs, and its runner."""

    name: str
    #: ``"module:attribute"`` (imported on first use) or a callable; called with the
    #: ``EvaluationOperator``, it returns the ``EvaluationRunner`` (``operators/evaluation.py``)
    factory: str | Callable[..., Any]
    #: runs as a job in an AWS account: it needs the training image, an execution role and an
    #: ``s3://`` output (``output.s3_path``), and the script may be an ``s3://`` URI. Otherwise it
    #: runs on this machine, over a local script.
    on_aws: bool
    description: str = ""


EVALUATIONS: Records[EvaluationRecord] = Records(EvaluationRecord, "evaluation kind", "kinds", ENTRY_POINT_GROUP)
register_evaluation = EVALUATIONS.register
forget_evaluation = EVALUATIONS.forget
evaluation_kinds = EVALUATIONS.names
#: the record of a kind; ``SpecValidationError`` naming ``field`` and the registered kinds
evaluation_record = partial(EVALUATIONS.get, field="evaluation")

register_evaluation(
    EvaluationRecord(
        name="process",
        factory="airflow_dist_training.operators.evaluation_runners:ProcessRunner",
        on_aws=False,
        description="a process on the worker, in a processing container (hooks/evaluation.py)",
    )
)
register_evaluation(
    EvaluationRecord(
        name="processing_job",
        factory="airflow_dist_training.operators.evaluation_runners:ProcessingJobRunner",
        on_aws=True,
        description="a SageMaker processing job",
    )
)
