"""Checkpoint operators: latest, retention, promotion. Declarative at parse time.

``__init__`` only stores arguments and checks pure rules (a retention rule that would delete
everything fails at DAG parse time); all I/O happens in ``execute`` through a cached
:class:`~airflow_dist_training.hooks.checkpoints.CheckpointHook`.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator

from airflow_dist_training.errors import SpecValidationError
from airflow_dist_training.hooks.aws import AwsConnectionMixin
from airflow_dist_training.lineage import promotion_lineage

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_dist_training.hooks.checkpoints import CheckpointHook


def checkpoint_store(
    operator: Any, *, layout: str | None = None, step_pattern: str | None = None
) -> CheckpointHook:
    """The checkpoint hook on the operator's connection (``s3://`` or a local path), for the
    layout given, else the operator's ``checkpoint_layout`` (default ``auto``)."""
    from airflow_dist_training.hooks.checkpoints import CheckpointHook

    return CheckpointHook(
        aws_conn_id=operator.aws_conn_id,
        region_name=operator.region_name,
        layout=str(layout or getattr(operator, "checkpoint_layout", "auto")),
        step_pattern=step_pattern or getattr(operator, "step_pattern", None),
    )


def check_layout(layout: str, step_pattern: str | None) -> None:
    """A layout or step pattern the registry does not know fails at DAG parse time (pure)."""
    from airflow_dist_training.checkpoints.layouts import layout_problem, step_pattern_problem

    problems = [("checkpoint_layout", p)] if (p := layout_problem(layout)) else []
    if step_pattern is not None and (p := step_pattern_problem(step_pattern)):
        problems.append(("step_pattern", p))
    if problems:
        raise SpecValidationError(problems)


class _CheckpointOperator(AwsConnectionMixin, BaseOperator):
    """Shared connection arguments and the cached hook.

    :param aws_conn_id: Airflow AWS connection for ``s3://`` locations.
    :param region_name: AWS region (default: the connection's).
    :param checkpoint_layout: the checkpoint layout (``auto``, ``manifest``, ``dcp``, ``hf-trainer``,
        ``single-file`` or a registered one; ``docs/checkpoints.md``).
    :param step_pattern: the ``single-file`` layout's file name, e.g. ``epoch={epoch}-step={step}.ckpt``.
    """

    template_fields: Sequence[str] = ("checkpoint_uri", "aws_conn_id", "region_name")

    def __init__(
        self,
        *,
        checkpoint_uri: str,
        aws_conn_id: str | None = "aws_default",
        region_name: str | None = None,
        checkpoint_layout: str = "auto",
        step_pattern: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        check_layout(checkpoint_layout, step_pattern)
        self.checkpoint_uri = checkpoint_uri
        self.checkpoint_layout = checkpoint_layout
        self.step_pattern = step_pattern
        self._set_aws_connection(aws_conn_id, region_name)

    hook = cached_property(checkpoint_store)


class LatestCheckpointOperator(_CheckpointOperator):
    """Push the newest complete checkpoint under ``checkpoint_uri`` to XCom.

    The XCom value is ``{"uri", "step", "epoch", "metrics", "world_size", "created_at",
    "manifest_modified", "num_files", "total_bytes", "complete"}``, or None when there is none.

    :param checkpoint_uri: checkpoint root (``s3://bucket/prefix/`` or a local path). Templated.
    :param fail_if_none: fail when there is no complete checkpoint (default: push None).
    """

    def __init__(self, *, checkpoint_uri: str, fail_if_none: bool = False, **kwargs: Any) -> None:
        super().__init__(checkpoint_uri=checkpoint_uri, **kwargs)
        self.fail_if_none = fail_if_none

    def execute(self, context: Context) -> dict[str, Any] | None:
        info = self.hook.latest_complete(self.checkpoint_uri)
        if info is None:
            if self.fail_if_none:
                raise SpecValidationError(
                    [("checkpoint_uri", f"no complete checkpoint under {self.checkpoint_uri}")]
                )
            self.log.info("No complete checkpoint under %s", self.checkpoint_uri)
            return None
        self.log.info("Latest complete checkpoint: step %s at %s", info.step, info.uri)
        return info.to_xcom()


class CheckpointRetentionOperator(_CheckpointOperator):
    """Keep the last N and the best K checkpoints by a metric; delete the rest (batched).

    Never deletes the newest complete checkpoint, the best one, a promoted one, or an incomplete one
    newer than the newest complete (it may still be uploading). Pushes the plan
    ``{"root", "kept": {step: [reasons]}, "deleted": [steps]}``.

    :param checkpoint_uri: checkpoint root. Templated.
    :param keep_last: newest complete checkpoints to keep.
    :param keep_best: best complete checkpoints by ``metric`` to keep.
    :param metric: manifest metric to rank by (needed when ``keep_best`` > 0).
    :param mode: ``"min"`` or ``"max"``.
    :param delete_incomplete: delete incomplete checkpoints older than the newest complete one.
    :param dry_run: only compute and push the plan.
    """

    def __init__(
        self,
        *,
        checkpoint_uri: str,
        keep_last: int = 1,
        keep_best: int = 0,
        metric: str | None = None,
        mode: str = "min",
        delete_incomplete: bool = True,
        dry_run: bool = False,
        **kwargs: Any,
    ) -> None:
        from airflow_dist_training.checkpoints.retention import RetentionRule

        super().__init__(checkpoint_uri=checkpoint_uri, **kwargs)
        self.rule = RetentionRule(keep_last, keep_best, metric, mode, delete_incomplete)
        self.rule.validate(checkpoint_uri)  # pure: a rule that keeps nothing fails at parse time
        self.retention_dry_run = dry_run  # BaseOperator.dry_run is a method

    def execute(self, context: Context) -> dict[str, Any]:
        plan = self.hook.apply_retention(self.checkpoint_uri, self.rule, dry_run=self.retention_dry_run)
        verb = "Would delete" if self.retention_dry_run else "Deleted"
        self.log.info(
            "%s %d checkpoints under %s: %s", verb, len(plan.delete), self.checkpoint_uri, list(plan.delete)
        )
        return {**plan.to_xcom(), "dry_run": self.retention_dry_run}


class PromoteCheckpointOperator(_CheckpointOperator):
    """Copy the best, latest or a given checkpoint to a stable location and record it.

    The record goes to ``<checkpoint_uri>/_PROMOTED.json`` (``current`` + ``history``); retention never
    deletes a promoted checkpoint. Pushes the promotion entry (``step``, ``source_uri``,
    ``target_uri``, ``which``, ``metric``, ``metrics``, ``promoted_at``).

    :param checkpoint_uri: checkpoint root. Templated.
    :param target_uri: stable location to copy to (replaced on each promotion). Templated.
    :param which: ``"best"``, ``"latest"`` or a step number. Templated.
    :param metric: metric for ``which="best"``.
    :param mode: ``"min"`` or ``"max"`` for ``which="best"``.
    """

    template_fields: Sequence[str] = ("checkpoint_uri", "target_uri", "which", "aws_conn_id", "region_name")

    def __init__(
        self,
        *,
        checkpoint_uri: str,
        target_uri: str,
        which: str | int = "best",
        metric: str | None = None,
        mode: str = "min",
        **kwargs: Any,
    ) -> None:
        super().__init__(checkpoint_uri=checkpoint_uri, **kwargs)
        self.target_uri = target_uri
        self.which = which
        self.metric = metric
        self.mode = mode
        if not (isinstance(which, str) and "{{" in which):
            from airflow_dist_training.checkpoints.selection import Selector

            Selector.parse(which, metric, mode)  # pure check at parse time

    def execute(self, context: Context) -> dict[str, Any]:
        entry = self.hook.promote(
            self.checkpoint_uri, self.which, self.target_uri, metric=self.metric, mode=self.mode
        )
        self.log.info(
            "Promoted step %s from %s to %s", entry["step"], entry["source_uri"], entry["target_uri"]
        )
        self._lineage_result = entry
        return entry

    get_openlineage_facets_on_complete = promotion_lineage  # the checkpoint in, the promoted copy out
