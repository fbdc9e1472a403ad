"""The quality gate's spec: per-metric thresholds (``GateSpec``), as a pipeline or an operator gives them.

Pure: pydantic only. The gate itself (``evaluation/gate.py``) checks these thresholds against a
challenger and a champion.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from airflow_dist_training.errors import Problem, SpecValidationError
from airflow_dist_training.spec.loading import validate_model

Direction = Literal["higher_is_better", "lower_is_better"]


class MetricThreshold(BaseModel):
    """The checks for one metric (``accuracy``, or ``accuracy@<slice>`` for a slice metric)."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    direction: Direction = "higher_is_better"
    min: float | None = Field(default=None, description="Absolute floor: value >= min.")
    max: float | None = Field(default=None, description="Absolute ceiling: value <= max.")
    no_regression: bool = Field(default=False, description="No worse than the champion.")
    min_improvement: float | None = Field(
        default=None, ge=0, description="Better than the champion by at least this (absolute)."
    )
    min_relative_improvement: float | None = Field(
        default=None, ge=0, description="Better than the champion by at least this fraction (0.01 = 1%)."
    )

    @model_validator(mode="after")
    def _at_least_one_check(self) -> MetricThreshold:
        if self.min is None and self.max is None and not self.needs_champion:
            raise ValueError(
                "has no check: give min, max, no_regression, min_improvement or min_relative_improvement"
            )
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"min ({self.min}) is greater than max ({self.max})")
        return self

    @property
    def needs_champion(self) -> bool:
        return (
            self.no_regression
            or self.min_improvement is not None
            or self.min_relative_improvement is not None
        )


class GateSpec(BaseModel):
    """Every threshold of one gate."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    thresholds: dict[str, MetricThreshold] = Field(min_length=1)
    require_same_evaluation_set: bool = Field(
        default=False,
        description="Reject when the champion was evaluated on a different evaluation set (hash differs).",
    )


def parse_gate_spec(
    thresholds: Mapping[str, Any] | GateSpec, *, require_same_evaluation_set: bool = False
) -> GateSpec:
    """Validate thresholds given as a dict (Python kwargs or YAML); errors name ``thresholds.<metric>``."""
    if isinstance(thresholds, GateSpec):
        return thresholds
    if not isinstance(thresholds, Mapping):
        raise SpecValidationError(
            [Problem("thresholds", f"must be a mapping of metric -> checks, got {type(thresholds).__name__}")]
        )
    return validate_model(
        GateSpec,
        {"thresholds": dict(thresholds), "require_same_evaluation_set": require_same_evaluation_set},
    )
