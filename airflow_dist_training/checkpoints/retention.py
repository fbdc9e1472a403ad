"""Retention planning: which checkpoints to keep and which to delete. Pure.

Ray Train's ``CheckpointConfig`` rules plus protections Ray does not need because it owns the
training loop: the newest complete, the best and any promoted checkpoint are never deleted, and
incomplete ones newer than the newest complete one may still be uploading (``docs/checkpoints.md``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from airflow_dist_training.checkpoints.selection import (
    CheckpointInfo,
    latest_complete,
    rank_by_metric,
    sort_newest_first,
)
from airflow_dist_training.errors import SpecValidationError


@dataclass(frozen=True)
class RetentionRule:
    """What to keep.

    :param keep_last: number of newest complete checkpoints to keep (>= 0).
    :param keep_best: number of best complete checkpoints by ``metric`` to keep (>= 0).
    :param metric: manifest metric used for "best" (required when ``keep_best`` > 0).
    :param mode: ``"min"`` (lower is better, e.g. loss) or ``"max"`` (e.g. accuracy).
    :param delete_incomplete: delete incomplete checkpoints older than the newest complete one.
    """

    keep_last: int = 1
    keep_best: int = 0
    metric: str | None = None
    mode: str = "min"
    delete_incomplete: bool = True

    def validate(self, root: str) -> None:
        problems: list[tuple[str, str]] = []
        for name in ("keep_last", "keep_best"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                problems.append((f"retention.{name}", f"must be an integer >= 0, got {value!r}"))
        if self.mode not in ("min", "max"):
            problems.append(("retention.mode", f"must be 'min' or 'max', got {self.mode!r}"))
        if self.keep_best and not self.metric:
            problems.append(("retention.metric", f"keep_best={self.keep_best} needs a metric to rank by"))
        if not problems and self.keep_last == 0 and self.keep_best == 0:
            problems.append(
                (
                    "retention",
                    f"keep_last=0 and keep_best=0 would delete every checkpoint under {root}; "
                    "keep at least one (keep_last >= 1 or keep_best >= 1)",
                )
            )
        if problems:
            raise SpecValidationError(problems)


@dataclass(frozen=True)
class RetentionPlan:
    """The outcome of :func:`plan_retention`: kept steps with reasons, and steps to delete."""

    root: str
    keep: dict[int, tuple[str, ...]] = field(default_factory=dict)
    delete: tuple[int, ...] = ()

    def to_xcom(self) -> dict[str, Any]:
        return {
            "root": self.root,
            "kept": {str(step): list(reasons) for step, reasons in sorted(self.keep.items(), reverse=True)},
            "deleted": list(self.delete),
        }


def plan_retention(
    checkpoints: Sequence[CheckpointInfo],
    rule: RetentionRule,
    *,
    root: str,
    promoted_steps: Iterable[int] = (),
) -> RetentionPlan:
    """Decide what to keep. Every checkpoint must have been checked (manifest + files)."""
    rule.validate(root)
    reasons: dict[int, list[str]] = {c.step: [] for c in checkpoints}
    complete = [c for c in sort_newest_first(checkpoints) if c.complete]
    newest = latest_complete(checkpoints)

    for info in complete[: rule.keep_last]:
        reasons[info.step].append(f"last-{rule.keep_last}")
    if newest is not None:
        reasons[newest.step].append("newest-complete")
    if rule.metric:
        _keep_best(reasons, complete, rule, root)
    _keep_promoted_and_incomplete(reasons, checkpoints, set(promoted_steps), newest, rule)

    keep = {step: tuple(dict.fromkeys(r)) for step, r in reasons.items() if r}
    delete = tuple(sorted((step for step, r in reasons.items() if not r), reverse=True))
    if checkpoints and len(delete) == len(reasons):
        raise SpecValidationError(
            [("retention", f"the rule would delete every checkpoint under {root}; nothing was deleted")]
        )
    return RetentionPlan(root=root, keep=keep, delete=delete)


def _keep_best(
    reasons: dict[int, list[str]], complete: Sequence[CheckpointInfo], rule: RetentionRule, root: str
) -> None:
    """The ``keep_best`` checkpoints by the rule's metric, and the single best."""
    assert rule.metric is not None
    ranked = rank_by_metric(complete, rule.metric, rule.mode)
    if rule.keep_best and complete and not ranked:
        raise SpecValidationError(
            [("retention.metric", f"no complete checkpoint under {root} reports metric {rule.metric!r}")]
        )
    for info in ranked[: rule.keep_best]:
        reasons[info.step].append(f"best-{rule.keep_best}-{rule.metric}-{rule.mode}")
    if ranked:
        reasons[ranked[0].step].append("best")


def _keep_promoted_and_incomplete(
    reasons: dict[int, list[str]],
    checkpoints: Sequence[CheckpointInfo],
    promoted: set[int],
    newest: CheckpointInfo | None,
    rule: RetentionRule,
) -> None:
    """Promoted steps, and incomplete ones that may still be uploading (or that the rule keeps)."""
    for info in checkpoints:
        if info.step in promoted:
            reasons[info.step].append("promoted")
        if not info.complete:
            if newest is None or info.step > newest.step:
                reasons[info.step].append("incomplete-newer-than-latest (may still be uploading)")
            elif not rule.delete_incomplete:
                reasons[info.step].append("incomplete-kept")
