"""Which checkpoint is complete, latest, best, or selected. Pure: no I/O, no Airflow, no boto3.

The hook (``airflow_dist_training.hooks.checkpoints``) gathers :class:`CheckpointInfo` values from
S3 or a local directory; every decision is made here so it can be tested exhaustively.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from airflow_dist_training.errors import SpecValidationError


@dataclass(frozen=True)
class CheckpointInfo:
    """What is known about one checkpoint, in any layout (:mod:`airflow_dist_training.checkpoints.layouts`).

    :param step: step number (from the checkpoint's name).
    :param uri: the checkpoint's location (``s3://b/root/step-000000000120/``, a local path, or the
        file of a single-file checkpoint).
    :param manifest: the decoded manifest (``manifest`` layout), or None.
    :param problems: why the checkpoint is not complete (empty when complete). Only meaningful
        when ``checked`` is True.
    :param checked: whether completeness was checked (files listed, the layout's files read).
    :param manifest_modified: when the checkpoint was finished/uploaded (epoch seconds), if known:
        the manifest's time, or the newest file's for layouts without one.
    :param layout: the layout's name.
    :param found_metrics: metrics the layout found (None: the manifest's).
    :param epoch: the epoch, where the layout records it.
    :param size: bytes of every file listed; ``num_files`` their count.
    :param unreadable: ``(file, reason)`` pairs of files that could not be parsed: such a
        checkpoint is not complete and is never moved or deleted.
    :param name: its name under the root.
    """

    step: int
    uri: str
    manifest: Mapping[str, Any] | None = None
    problems: tuple[str, ...] = ()
    checked: bool = False
    manifest_modified: float | None = None
    layout: str = "manifest"
    found_metrics: Mapping[str, float] | None = None
    epoch: float | None = None
    size: int | None = None
    num_files: int | None = None
    unreadable: tuple[tuple[str, str], ...] = ()
    name: str = ""

    @property
    def complete(self) -> bool:
        has_marker = self.manifest is not None or self.layout != "manifest"
        return self.checked and has_marker and not self.problems and not self.unreadable

    @property
    def reasons(self) -> list[str]:
        """Why not complete: the problems, and each unreadable file with its reason."""
        return [*self.problems, *(f"{where}: {why}" for where, why in self.unreadable)]

    @property
    def metrics(self) -> dict[str, float]:
        if self.found_metrics is not None:
            return dict(self.found_metrics)
        return dict((self.manifest or {}).get("metrics") or {})

    def metric(self, name: str) -> float | None:
        value = self.metrics.get(name)
        if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
            return float(value)
        return None

    def to_xcom(self) -> dict[str, Any]:
        """A small JSON dict: uri, layout, step, epoch, metrics, world_size, created_at, file count/bytes."""
        manifest = self.manifest or {}
        files = manifest.get("files") or []
        epoch = manifest.get("epoch", self.epoch)
        return {
            "uri": self.uri,
            "layout": self.layout,
            "step": self.step,
            "epoch": int(epoch) if isinstance(epoch, float) and epoch.is_integer() else epoch,
            "metrics": self.metrics,
            "world_size": manifest.get("world_size"),
            "created_at": manifest.get("created_at"),
            "manifest_modified": self.manifest_modified,
            "num_files": len(files) if self.num_files is None else self.num_files,
            "total_bytes": sum(int(f.get("size", 0)) for f in files) if self.size is None else self.size,
            "complete": self.complete,
            "reasons": self.reasons,
        }


def completeness_problems(
    manifest: Mapping[str, Any] | None, present: Mapping[str, int], uri: str
) -> list[str]:
    """Why a checkpoint is incomplete, given its manifest and the files present (path -> size).

    ``present`` maps paths relative to the checkpoint directory to their sizes. An empty list means
    complete: the manifest exists and every listed file is present with its listed size.
    """
    if manifest is None:
        return [f"{uri}: no _MANIFEST.json (checkpoint not finished or still uploading)"]
    problems = []
    for entry in manifest.get("files") or []:
        path, size = entry["path"], entry["size"]
        if path not in present:
            problems.append(f"{uri}{path}: missing (listed in the manifest)")
        elif present[path] != size:
            problems.append(f"{uri}{path}: size {present[path]}, manifest says {size}")
    return problems


def sort_newest_first(checkpoints: Iterable[CheckpointInfo]) -> list[CheckpointInfo]:
    return sorted(checkpoints, key=lambda c: c.step, reverse=True)


def latest_complete(checkpoints: Iterable[CheckpointInfo]) -> CheckpointInfo | None:
    """The complete checkpoint with the highest step, or None."""
    return next((info for info in sort_newest_first(checkpoints) if info.complete), None)


def _check_mode(mode: str, field_path: str) -> None:
    if mode not in ("min", "max"):
        raise SpecValidationError([(field_path, f"must be 'min' or 'max', got {mode!r}")])


def rank_by_metric(checkpoints: Iterable[CheckpointInfo], metric: str, mode: str) -> list[CheckpointInfo]:
    """Complete checkpoints that report ``metric``, best first (ties: the newer step first)."""
    _check_mode(mode, "mode")
    scored = [(c.metric(metric), c) for c in checkpoints if c.complete and c.metric(metric) is not None]
    sign = 1.0 if mode == "min" else -1.0
    scored.sort(key=lambda item: (sign * (item[0] or 0.0), -item[1].step))
    return [c for _, c in scored]


def best_by_metric(checkpoints: Iterable[CheckpointInfo], metric: str, mode: str) -> CheckpointInfo | None:
    ranked = rank_by_metric(checkpoints, metric, mode)
    return ranked[0] if ranked else None


@dataclass(frozen=True)
class Selector:
    """Which checkpoint to pick: ``latest``, ``best`` (by ``metric``/``mode``) or a given ``step``."""

    kind: Literal["latest", "best", "step"]
    step: int | None = None
    metric: str | None = None
    mode: str = "min"

    @classmethod
    def parse(cls, which: str | int, metric: str | None = None, mode: str = "min") -> Selector:
        """``"latest"``, ``"best"``, an int step, or ``"step:120"`` / ``"120"``."""
        if isinstance(which, int) and not isinstance(which, bool):  # a bool is refused below
            return cls("step", step=which)
        text = str(which).strip().lower()
        if text == "latest":
            return cls("latest")
        if text == "best":
            if not metric:
                raise SpecValidationError(
                    [("metric", "which='best' needs a metric name (e.g. metric='loss')")]
                )
            _check_mode(mode, "mode")
            return cls("best", metric=metric, mode=mode)
        number = text.removeprefix("step:").removeprefix("step-")
        if number.isdigit():
            return cls("step", step=int(number))
        raise SpecValidationError([("which", f"must be 'latest', 'best' or a step number, got {which!r}")])


def select_checkpoint(checkpoints: Sequence[CheckpointInfo], selector: Selector, root: str) -> CheckpointInfo:
    """Apply ``selector``; a clear error naming ``root`` when nothing matches."""
    if selector.kind == "latest":
        if (found := latest_complete(checkpoints)) is None:
            raise SpecValidationError([("which", f"no complete checkpoint under {root}")])
        return found
    if selector.kind == "best":
        assert selector.metric is not None
        if (found := best_by_metric(checkpoints, selector.metric, selector.mode)) is None:
            raise SpecValidationError(
                [("metric", f"no complete checkpoint under {root} reports metric {selector.metric!r}")]
            )
        return found
    for info in checkpoints:
        if info.step == selector.step:
            if not info.complete:
                detail = "; ".join(info.problems) or "not checked"
                raise SpecValidationError(
                    [("which", f"checkpoint step {selector.step} under {root} is not complete: {detail}")]
                )
            return info
    raise SpecValidationError([("which", f"no checkpoint for step {selector.step} under {root}")])
