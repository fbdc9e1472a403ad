"""The hyperparameter tuning section: ranges, strategy, objective and limits of a SageMaker tuning job.

Pure: the standard library and pydantic. Strict like ``spec/training.py``. ``tuning_problems``
checks the section against the training spec it tunes; every problem names its field (YAML:
docs/tuning.md).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, field_validator, model_validator

from airflow_dist_training.errors import Problem
from airflow_dist_training.spec.training import TrainingJobSpec, _Model

# the API's limits (CreateHyperParameterTuningJob)
MAX_RANGES = 30  # hyperparameters searched, all kinds together
MAX_CATEGORICAL_VALUES = 30
RESERVED_PREFIX = "sagemaker_"  # the SDK's and toolkit's own hyperparameters

Number = int | float  # kept as written: the request carries str(value), as the SDK's to_string does


class ContinuousRange(_Model):
    """A real-valued hyperparameter between ``min_value`` and ``max_value``."""

    type: Literal["continuous"] = "continuous"
    min_value: Number
    max_value: Number
    scaling_type: Literal["Auto", "Linear", "Logarithmic", "ReverseLogarithmic"] = "Auto"

    @model_validator(mode="after")
    def _bounds(self) -> ContinuousRange:
        _check_bounds(self.min_value, self.max_value, self.scaling_type)
        if self.scaling_type == "ReverseLogarithmic" and self.max_value >= 1:
            raise ValueError("scaling_type ReverseLogarithmic needs 0 <= min_value < max_value < 1")
        return self


class IntegerRange(_Model):
    """An integer hyperparameter between ``min_value`` and ``max_value`` (both included)."""

    type: Literal["integer"] = "integer"
    min_value: int
    max_value: int
    scaling_type: Literal["Auto", "Linear", "Logarithmic"] = "Auto"

    @model_validator(mode="after")
    def _bounds(self) -> IntegerRange:
        _check_bounds(self.min_value, self.max_value, self.scaling_type)
        return self


class CategoricalRange(_Model):
    """A hyperparameter taking one of ``values``."""

    type: Literal["categorical"] = "categorical"
    values: list[str | int | float | bool] = Field(min_length=1, max_length=MAX_CATEGORICAL_VALUES)

    @field_validator("values")
    @classmethod
    def _distinct(cls, values: list[Any]) -> list[Any]:
        as_text = [str(v) for v in values]
        if len(set(as_text)) != len(as_text):
            raise ValueError("values must be distinct")
        return values


HyperparameterRange = Annotated[
    ContinuousRange | IntegerRange | CategoricalRange, Field(discriminator="type")
]


def _check_bounds(low: float, high: float, scaling: str) -> None:
    if not (math.isfinite(low) and math.isfinite(high)):
        raise ValueError("min_value and max_value must be finite numbers")
    if low >= high:
        raise ValueError(f"min_value ({low}) must be less than max_value ({high})")
    if scaling == "Logarithmic" and low <= 0:
        raise ValueError(f"scaling_type Logarithmic needs min_value > 0 (got {low})")
    if scaling == "ReverseLogarithmic" and low < 0:
        raise ValueError(f"scaling_type ReverseLogarithmic needs min_value >= 0 (got {low})")


class TuningObjective(_Model):
    """What the tuning job optimises: one of the training spec's metric definitions."""

    metric: str = Field(
        min_length=1, max_length=255, description="A metric_definitions name of the training spec."
    )
    type: Literal["Maximize", "Minimize"]


def checked_range_names(ranges: dict[str, Any]) -> dict[str, Any]:
    """``ranges`` when every hyperparameter name is one SageMaker accepts (tuning and sweeps alike)."""
    for name in ranges:
        if not name.strip() or len(name) > 256:
            raise ValueError(f"hyperparameter name {name!r} must be 1 to 256 characters")
        if name.startswith(RESERVED_PREFIX):
            raise ValueError(f"{name!r}: hyperparameters starting with {RESERVED_PREFIX!r} are SageMaker's own")
    return ranges


# the searched hyperparameters, by name (tuning and sweeps alike)
Ranges = Annotated[
    dict[str, HyperparameterRange],
    Field(min_length=1, max_length=MAX_RANGES),
    AfterValidator(checked_range_names),
]


class TuningSpec(_Model):
    """A SageMaker hyperparameter tuning job over a training spec."""

    ranges: Ranges
    objective: TuningObjective
    strategy: Literal["Bayesian", "Random", "Grid", "Hyperband"] = "Bayesian"
    max_jobs: int | None = Field(
        default=None, ge=1, le=10000, description="MaxNumberOfTrainingJobs; Grid: default every combination."
    )
    max_parallel_jobs: int = Field(default=1, ge=1, le=100, description="MaxParallelTrainingJobs.")
    early_stopping: Literal["Off", "Auto"] = Field(default="Off", description="TrainingJobEarlyStoppingType.")
    max_runtime_seconds: int | None = Field(
        default=None,
        ge=120,
        le=15768000,
        description="ResourceLimits.MaxRuntimeInSeconds of the whole tuning job.",
    )
    random_seed: int | None = Field(
        default=None, ge=0, description="RandomSeed: reproducible configurations."
    )
    name: str | None = Field(
        default=None, min_length=1, description="Tuning job name base (default: the training spec's name)."
    )

    @model_validator(mode="after")
    def _strategy_rules(self) -> TuningSpec:
        if self.strategy == "Grid":
            numeric = [n for n, r in self.ranges.items() if not isinstance(r, CategoricalRange)]
            if numeric:
                raise ValueError(
                    f"strategy Grid searches categorical ranges only; {', '.join(numeric)} "
                    "must be type: categorical (list the values to try)"
                )
            combinations = self.grid_size
            if self.max_jobs is not None and self.max_jobs > combinations:
                raise ValueError(f"max_jobs ({self.max_jobs}) exceeds the grid's {combinations} combinations")
        elif self.max_jobs is None:
            raise ValueError(f"max_jobs is required with strategy {self.strategy} (only Grid derives it)")
        if self.strategy == "Hyperband" and self.early_stopping != "Off":
            raise ValueError("strategy Hyperband stops jobs itself: early_stopping must be Off")
        if self.max_parallel_jobs > self.total_jobs:
            raise ValueError(
                f"max_parallel_jobs ({self.max_parallel_jobs}) exceeds max_jobs ({self.total_jobs})"
            )
        return self

    @property
    def grid_size(self) -> int:
        """Combinations of the categorical ranges (what Grid tries)."""
        return math.prod(len(r.values) for r in self.ranges.values() if isinstance(r, CategoricalRange))

    @property
    def total_jobs(self) -> int:
        """The training jobs the tuning job starts at most."""
        return self.max_jobs if self.max_jobs is not None else self.grid_size


def tuning_problems(training: TrainingJobSpec, tuning: TuningSpec, prefix: str = "tuning") -> list[Problem]:
    """What is wrong with tuning ``training`` this way (empty when nothing), each naming its field."""
    problems: list[Problem] = []
    metrics = [m.name for m in training.metric_definitions]
    if tuning.objective.metric not in metrics:
        known = ", ".join(repr(m) for m in metrics) or "none: add metric_definitions to the training spec"
        problems.append(
            Problem(
                f"{prefix}.objective.metric",
                f"{tuning.objective.metric!r} is not one of the training spec's metric_definitions ({known})",
            )
        )
    if training.compute.instance_groups:
        why = (
            "a tuning job runs every training job on one instance type: use instance_type and instance_count"
        )
        problems.append(Problem("compute.instance_groups", why))
    if training.image.container_entry_point:
        why = (
            "a tuning job's training jobs run the image's own entry point "
            "(its algorithm specification has no ContainerEntrypoint)"
        )
        problems.append(Problem("image.container_entry_point", why))
    return problems


def tuning_step_problems(
    training: TrainingJobSpec,
    tuning: TuningSpec,
    *,
    members: bool = False,
    staged_channel: bool = False,
    freshness: bool = False,
    warm_start: str = "none",
) -> list[Problem]:
    """``tuning_problems`` plus the pipeline steps a tuning step cannot be combined with."""
    clashes = (
        ("for_each", members, "a tuning job searches one model's hyperparameters"),
        (
            "staging",
            staged_channel,
            "a tuning job's training jobs read their channels as the spec gives them, not a staged FSx channel",
        ),
        ("checkpoints.freshness", freshness, "the stall watch follows one training job; a tuning job runs many"),
        ("warm_start", warm_start != "none", "a tuning job's training jobs get no warm_start channel"),
    )
    return tuning_problems(training, tuning) + [
        Problem(field, f"cannot be combined with tuning: {why}") for field, clash, why in clashes if clash
    ]


def load_tuning_spec(source: TuningSpec | Mapping[str, Any] | str | Path) -> TuningSpec:
    """A tuning section from an object, a dict, a ``.yaml``/``.yml`` path or YAML text;
    ``SpecValidationError`` names each field (and the file)."""
    from airflow_dist_training.spec.loading import parse_yaml, read_yaml_file, validate_model

    if isinstance(source, TuningSpec):
        return source
    if isinstance(source, Path) or (
        isinstance(source, str) and "\n" not in source and source.strip().endswith((".yaml", ".yml"))
    ):
        return validate_model(TuningSpec, read_yaml_file(source, kind="tuning"), source=str(source), prefix="tuning")
    if isinstance(source, str):
        source = parse_yaml(source, source="<tuning yaml>")
    return validate_model(TuningSpec, source, prefix="tuning")
