"""The ``tuning`` step of ``stage_train_evaluate``: a hyperparameter tuning job in place of ``train``.

The task keeps the id ``train`` and returns the best training job's ``TrainingResult`` (plus
``tuning``), so checkpoint retention, evaluation, the gate and the registry read it as they read a
training job's. Constructed at DAG-parse time: no I/O, nothing parsed but the section itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from airflow_dist_training.spec.training import TrainingJobSpec
    from airflow_dist_training.spec.tuning import TuningSpec


class GroupSettings(Protocol):
    """What the step reads of its ``stage_train_evaluate`` group (``task_groups._Group``), named
    here so that this module and ``task_groups`` do not import each other."""

    @property
    def spec(self) -> TrainingJobSpec: ...

    @property
    def members(self) -> Any: ...

    @property
    def base(self) -> Path: ...

    @property
    def backend(self) -> str: ...

    @property
    def aws(self) -> dict[str, Any]: ...

    @property
    def defer(self) -> bool: ...


def tuning_train_task(
    g: GroupSettings,
    plan_task: Any,
    check_task: Any,
    tuning: TuningSpec | Mapping[str, Any],
    *,
    staged_channels: Mapping[str, Any] | None,
    freshness: Any,
    warm_start: str,
    training_kwargs: Mapping[str, Any] | None,
    tracking: Mapping[str, Any],
) -> Any:
    """The ``train`` task as a ``DistributedTuningOperator`` over the plan task's spec (the run's
    overrides applied); what a tuning job cannot do is refused here, each problem naming its field."""
    from airflow.sdk import XComArg

    from airflow_dist_training.errors import SpecValidationError
    from airflow_dist_training.operators.tuning import DistributedTuningOperator
    from airflow_dist_training.retraining.warm_start import parse_warm_start
    from airflow_dist_training.spec.tuning import load_tuning_spec, tuning_step_problems

    section = load_tuning_spec(tuning)
    problems = tuning_step_problems(
        g.spec,
        section,
        members=g.members is not None,
        staged_channel=bool(staged_channels),
        freshness=freshness is not None,
        warm_start=parse_warm_start(warm_start),
    )
    if problems:
        raise SpecValidationError(problems, source=g.spec.source_file)
    train = DistributedTuningOperator(
        task_id="train",  # the id the later steps read the result from, as for a training job
        spec=XComArg(plan_task, key="spec"),  # type: ignore[arg-type]
        tuning=section.model_dump(mode="json", exclude_unset=True),
        backend=g.backend,
        local_hook_kwargs={"base_dir": str(g.base)},
        **g.aws,
        **{"deferrable": g.defer, **tracking, **dict(training_kwargs or {})},
    )
    check_task >> train
    return train
