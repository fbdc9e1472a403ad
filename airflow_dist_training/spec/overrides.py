"""Per-run overrides of a training spec: what a UI trigger form or a DAG run conf may change.

Pure. The retraining DAGs expose these as Params; ``apply_overrides`` turns them into a new,
re-validated spec (so a bad combination fails with a field-path error before any launch).
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from airflow_dist_training.spec.loading import validate_model
from airflow_dist_training.spec.training import Strategy, TrainingJobSpec, _Model

# Spot needs a MaxWait >= MaxRuntime; when the form turns spot on we allow twice the runtime.
SPOT_WAIT_FACTOR = 2


class RunOverrides(_Model):  # strict: no `instance_count: true` from a run's conf either
    """The knobs of one run. ``None`` keeps the spec's value."""

    instance_type: str | None = None
    instance_count: int | None = Field(default=None, ge=1)
    strategy: Strategy | None = None
    processes_per_host: int | None = Field(default=None, ge=1)
    epochs: int | None = Field(default=None, ge=1)
    learning_rate: float | None = Field(default=None, gt=0)
    spot: bool | None = None
    # the run's spot budget (spot.max_interruptions, spot.on_demand_after_interruptions)
    spot_max_interruptions: int | None = Field(default=None, ge=0)
    spot_on_demand_after: int | None = Field(default=None, ge=1)
    hyperparameter_names: dict[str, str] = Field(
        default_factory=lambda: {"epochs": "epochs", "learning_rate": "lr"},
        description="Which hyperparameter each override sets (e.g. learning_rate -> lr).",
    )


def apply_overrides(spec: TrainingJobSpec, overrides: RunOverrides | dict[str, Any]) -> TrainingJobSpec:
    """``spec`` with the run's overrides, re-validated; ``spec`` itself when nothing is overridden
    (it is validated already: the plan path validates a spec once)."""
    if isinstance(overrides, dict):
        overrides = validate_model(RunOverrides, overrides, source="run overrides")
    # the knobs given (hyperparameter_names only says where epochs/learning_rate go)
    knobs = overrides.model_dump(mode="json", exclude_none=True, exclude={"hyperparameter_names"})
    if not knobs:
        return spec
    data = spec.model_dump(mode="json", exclude_unset=True)
    compute = data.setdefault("compute", {})
    if not compute.get("instance_groups"):
        compute.update({k: v for k, v in knobs.items() if k in ("instance_type", "instance_count")})
    distribution = data.setdefault("distribution", {})
    distribution.update({k: v for k, v in knobs.items() if k in ("strategy", "processes_per_host")})
    hyperparameters = data.setdefault("hyperparameters", {})
    for knob, default_name in (("epochs", "epochs"), ("learning_rate", "lr")):
        if knob in knobs:
            hyperparameters[overrides.hyperparameter_names.get(knob, default_name)] = knobs[knob]
    if overrides.spot is not None:
        _override_spot(data, overrides.spot)
    # after the switch: a budget without spot is refused by the plan check, never dropped silently
    for knob, field in (
        ("spot_max_interruptions", "max_interruptions"),
        ("spot_on_demand_after", "on_demand_after_interruptions"),
    ):
        if knob in knobs:
            data.setdefault("spot", {})[field] = knobs[knob]
    return validate_model(TrainingJobSpec, data, source="spec with run overrides")


def _override_spot(data: dict[str, Any], enabled: bool) -> None:
    spot = data.setdefault("spot", {})
    spot["enabled"] = enabled
    if enabled and not spot.get("max_wait_seconds"):
        runtime = data.get("stopping", {}).get("max_runtime_seconds", 86400)
        spot["max_wait_seconds"] = runtime * SPOT_WAIT_FACTOR
    if not enabled:  # on-demand: the spot-only settings would be refused
        for field in ("max_wait_seconds", "max_interruptions", "on_demand_after_interruptions"):
            spot.pop(field, None)
