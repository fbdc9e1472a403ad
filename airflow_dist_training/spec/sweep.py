"""A hyperparameter sweep run as mapped members, and the pick of its best member.

Pure: the standard library and pydantic. The self-managed alternative to a SageMaker tuning job
(``spec/tuning.py``): the same range types and objective, expanded into a ``MemberList``
(``spec/members.py``) that the DAG trains side by side; only the member with the best final
objective metric goes on to the gate and the registry (YAML: docs/mapped.md).

Members are named ``<name_prefix>-<NN>`` in expansion order (the map index), so a member's job
name and registry entry stay the same from one run to the next when the sweep does not change.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from airflow_dist_training.spec.members import MAX_MEMBERS, Member, MemberList
from airflow_dist_training.spec.training import _Model
from airflow_dist_training.spec.tuning import (
    CategoricalRange,
    ContinuousRange,
    IntegerRange,
    Ranges,
    TuningObjective,
)


class SweepSpec(_Model):
    """Hyperparameter sets to train as members of one run, and how to pick the best one."""

    strategy: Literal["grid", "random"] = "grid"
    ranges: Ranges
    objective: TuningObjective = Field(
        description="The final metric (evaluation.json's, else the training job's) that ranks the members."
    )
    count: int | None = Field(
        default=None,
        ge=1,
        le=MAX_MEMBERS,
        description="random: how many sets (required); grid: not allowed",
    )
    seed: int = Field(default=0, ge=0, description="random: the same seed draws the same sets")
    name_prefix: str = Field(
        default="trial",
        pattern=r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,15}$",
        description="Members are named <name_prefix>-00, <name_prefix>-01, ...",
    )

    @field_validator("ranges", mode="before")
    @classmethod
    def _lists_are_categorical(cls, value: Any) -> Any:
        if isinstance(value, Mapping):
            return {
                k: {"type": "categorical", "values": v} if isinstance(v, list) else v
                for k, v in value.items()
            }
        return value

    @model_validator(mode="after")
    def _strategy_rules(self) -> SweepSpec:
        if self.strategy == "grid":
            numeric = [n for n, r in self.ranges.items() if not isinstance(r, CategoricalRange)]
            if numeric:
                raise ValueError(
                    f"strategy grid tries listed values only; give {', '.join(numeric)} as a list of values "
                    "(or use strategy: random to draw from a range)"
                )
            if self.count is not None:
                raise ValueError("count is for strategy random; a grid trains every combination")
            if self.grid_size > MAX_MEMBERS:
                raise ValueError(f"the grid has {self.grid_size} combinations; at most {MAX_MEMBERS} members")
        elif self.count is None:
            raise ValueError("strategy random needs count (how many hyperparameter sets to draw)")
        return self

    @property
    def grid_size(self) -> int:
        return math.prod(len(r.values) for r in self.ranges.values() if isinstance(r, CategoricalRange))

    @property
    def size(self) -> int:
        """How many members the sweep expands to."""
        return self.grid_size if self.strategy == "grid" else int(self.count or 0)


def load_sweep(source: SweepSpec | Mapping[str, Any], *, field: str = "sweep") -> SweepSpec:
    """A sweep from an object or a dict; ``SpecValidationError`` names each field (``sweep.ranges.lr``)."""
    from airflow_dist_training.spec.loading import validate_model

    if isinstance(source, SweepSpec):
        return source
    return validate_model(SweepSpec, source, prefix=field)


def _draw(rng: random.Random, spec: ContinuousRange | IntegerRange | CategoricalRange) -> Any:
    if isinstance(spec, CategoricalRange):
        return rng.choice(spec.values)
    low, high = float(spec.min_value), float(spec.max_value)
    value = sample_in_range(rng, low, high, spec.scaling_type)
    if isinstance(spec, IntegerRange):
        return min(max(round(value), spec.min_value), spec.max_value)
    return value


def sample_in_range(rng: random.Random, low: float, high: float, scaling: str) -> float:
    """A number in ``[low, high]`` drawn on the range's scale (``Auto`` and ``Linear``: uniform)."""
    if scaling == "Logarithmic":
        value = math.exp(rng.uniform(math.log(low), math.log(high)))
    elif scaling == "ReverseLogarithmic":
        value = 1 - math.exp(rng.uniform(math.log(1 - high), math.log(1 - low)))
    else:
        value = rng.uniform(low, high)
    return min(max(value, low), high)


def sweep_hyperparameter_sets(sweep: SweepSpec) -> list[dict[str, Any]]:
    """The sweep's hyperparameter sets in member order (grid: the product, last range fastest)."""
    if sweep.strategy == "grid":
        names = list(sweep.ranges)
        values = [r.values for r in sweep.ranges.values() if isinstance(r, CategoricalRange)]
        return [dict(zip(names, combo, strict=True)) for combo in itertools.product(*values)]
    rng = random.Random(sweep.seed)
    return [{name: _draw(rng, r) for name, r in sweep.ranges.items()} for _ in range(int(sweep.count or 0))]


def expand_sweep(sweep: SweepSpec) -> MemberList:
    """The sweep as members ``<name_prefix>-NN``, each setting one hyperparameter set."""
    sets = sweep_hyperparameter_sets(sweep)
    width = max(2, len(str(len(sets) - 1)))
    return MemberList(
        members=[
            Member(name=f"{sweep.name_prefix}-{i:0{width}d}", hyperparameters=hyperparameters)
            for i, hyperparameters in enumerate(sets)
        ]
    )


# ---- the best of the sweep ----------------------------------------------------------------------


class SweepSelectionError(ValueError):
    """No member can be picked: none finished, or a finished member lacks the objective metric."""


@dataclass(frozen=True)
class MemberOutcome:
    """How one member ended (``succeeded``, ``failed``, ``skipped``: unchanged, not retrained, or
    ``rejected``): its final metrics (evaluation.json's, else the training job's) when it finished."""

    member: str
    status: str
    metrics: Mapping[str, float] = field(default_factory=dict)
    reason: str | None = None


@dataclass(frozen=True)
class SweepSelection:
    """The winner of a sweep and every member's standing (a small JSON dict via ``to_json``)."""

    winner: str
    metric: str
    objective_type: str
    value: float
    ranking: list[dict[str, Any]]  # the candidates, best first: {"member", "value"}
    excluded: list[dict[str, Any]]  # {"member", "status", "reason"}
    tied_with: list[str]

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "summary": self.summary()}

    def summary(self) -> str:
        better = "highest" if self.objective_type == "Maximize" else "lowest"
        lines = [f"best of the sweep: {self.winner} ({self.metric} = {self.value:g}, {better} wins)"]
        if self.tied_with:
            lines.append(f"  tied with {', '.join(self.tied_with)}: the first member in list order wins")
        lines += [f"  {r['member']:<24} {self.metric} = {r['value']:g}" for r in self.ranking]
        lines += [f"  {e['member']:<24} {e['status']}: {e['reason']}" for e in self.excluded]
        return "\n".join(lines)


def pick_best_member(outcomes: Sequence[MemberOutcome], objective: TuningObjective) -> SweepSelection:
    """The member whose final ``objective.metric`` is best (``Maximize``: highest, ``Minimize``: lowest).

    Members that did not finish (failed, skipped, ...) are not candidates and are listed with their
    reason. A tie goes to the first member in list order (the lowest map index) and is reported.
    Raises ``SweepSelectionError`` when no member finished, and when a finished member has no finite
    value of the metric (a misspelt objective would otherwise pick among the others silently).
    """
    metric = objective.metric
    names = [o.member for o in outcomes]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise SweepSelectionError(f"members {', '.join(duplicates)} are listed twice in the sweep's outcomes")
    finished = [o for o in outcomes if o.status == "succeeded"]
    excluded = [
        {"member": o.member, "status": o.status, "reason": o.reason or o.status}
        for o in outcomes
        if o.status != "succeeded"
    ]
    if not finished:
        detail = (
            "; ".join(f"{e['member']}: {e['status']} ({e['reason']})" for e in excluded)
            or "the sweep is empty"
        )
        raise SweepSelectionError(f"no member of the sweep finished, so none can be picked: {detail}")
    lacking = []
    for o in finished:
        value = o.metrics.get(metric)
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
            has = ", ".join(sorted(o.metrics)) or "no metrics"
            got = "no value" if value is None else f"{value!r}, not a finite number"
            lacking.append(f"{o.member} has {got} (its metrics: {has})")
    if lacking:
        raise SweepSelectionError(
            f"the sweep's objective metric {metric!r} is missing from finished members: {'; '.join(lacking)}"
        )
    sign = 1.0 if objective.type == "Maximize" else -1.0
    # sorted() is stable: equal values keep list order, so the first member wins a tie
    ranked = sorted(finished, key=lambda o: -sign * float(o.metrics[metric]))
    best = float(ranked[0].metrics[metric])
    tied = [o.member for o in ranked[1:] if float(o.metrics[metric]) == best]
    return SweepSelection(
        winner=ranked[0].member,
        metric=metric,
        objective_type=objective.type,
        value=best,
        ranking=[{"member": o.member, "value": float(o.metrics[metric])} for o in ranked],
        excluded=excluded,
        tied_with=tied,
    )
