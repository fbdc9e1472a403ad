"""Checkpoint semantics over the storage protocol (S3, local paths, any registered store).

Decisions (complete / latest / best / retention) live in :mod:`airflow_dist_training.checkpoints`;
this module only fetches the facts and carries out the plan. The cost model (``docs/checkpoints.md``):
``latest_complete`` reads the ``_LATEST.json`` hint and lists only newer steps (usually 4 calls;
without a hint one ``Delimiter`` listing), never every object; ``scan`` lists everything once.
"""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

from airflow.sdk import BaseHook

from airflow_dist_training.checkpointing import (
    LATEST_HINT_NAME,
    MANIFEST_NAME,
    ManifestError,
    checkpoint_dir_name,
    parse_manifest,
    parse_step,
)
from airflow_dist_training.checkpoints.retention import RetentionPlan, RetentionRule, plan_retention
from airflow_dist_training.checkpoints.selection import (
    CheckpointInfo,
    Selector,
    completeness_problems,
    select_checkpoint,
)
from airflow_dist_training.errors import SpecValidationError
from airflow_dist_training.hooks.aws import AwsConnectionMixin
from airflow_dist_training.storage import StoreOptions, Stores, copy_between
from airflow_dist_training.storage.location import Location

PROMOTED_NAME = "_PROMOTED.json"


def _now_iso() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _unfinished(loc: Location, step: int) -> CheckpointInfo:
    """A checkpoint without a manifest (not finished, or still uploading)."""
    problems = completeness_problems(None, {}, loc.uri)
    return CheckpointInfo(step=step, uri=loc.uri, problems=tuple(problems), checked=True)


class CheckpointHook(AwsConnectionMixin, BaseHook):
    """Find, inspect, copy, promote and prune checkpoints in any store (:mod:`airflow_dist_training.storage`).

    :param aws_conn_id: Airflow AWS connection used for ``s3://`` locations (None: boto3 defaults).
    :param region_name: AWS region; defaults to the connection's region.
    :param verify_region: check once per bucket that the bucket is in the connection's region
        (``GetBucketLocation``), so a wrong region is a clear error naming the location.
    :param max_workers: parallel requests for manifest reads and copies.
    """

    conn_name_attr = "aws_conn_id"
    default_conn_name = "aws_default"
    conn_type = "aws"
    hook_name = "Checkpoint store (S3 / local)"

    def __init__(
        self,
        aws_conn_id: str | None = "aws_default",
        region_name: str | None = None,
        *,
        verify_region: bool = True,
        max_workers: int = 16,
        botocore_config: dict[str, Any] | None = None,
    ) -> None:
        super().__init__()
        self._set_aws_connection(aws_conn_id, region_name, botocore_config=botocore_config)
        self.max_workers = max_workers
        self.stores = Stores(StoreOptions(aws_conn_id, region_name, botocore_config, verify_region=verify_region))

    @property
    def _s3(self) -> Any:
        return self.stores(Location("s3", "", ""))

    @property
    def s3_client(self) -> Any:
        return self._s3.client

    @property
    def api_calls(self) -> Counter[str]:
        """S3 operation name -> calls made by this hook."""
        return self._s3.api_calls  # type: ignore[no-any-return]

    def _loc(self, uri: str, field: str = "uri") -> Location:
        return self.stores.parse(uri, field)[1]

    def _read(self, loc: Location, name: str) -> tuple[bytes, float] | None:
        return self.stores(loc).read(loc.join(name))

    def _list_tree(self, loc: Location) -> dict[str, tuple[int, float]]:
        return self.stores(loc).list_tree(loc)

    def _parallel(self, fn: Callable[[Any], Any], items: Iterable[Any]) -> list[Any]:
        items = list(items)
        if len(items) <= 1 or self.max_workers <= 1:
            return [fn(i) for i in items]
        with ThreadPoolExecutor(max_workers=min(self.max_workers, len(items))) as pool:
            return list(pool.map(fn, items))

    def _parse_manifest(self, raw: bytes, uri: str) -> dict[str, Any]:
        try:
            return parse_manifest(raw, uri)
        except ManifestError as exc:
            where = exc.manifest_path
            problems = [(f"{where}:{fld}" if fld else where, msg) for fld, msg in exc.problems]
            raise SpecValidationError(problems) from None

    @staticmethod
    def _steps(names: Iterable[str]) -> list[int]:
        return sorted({s for n in names if (s := parse_step(n)) is not None}, reverse=True)

    def inspect(self, checkpoint_uri: str) -> CheckpointInfo:
        """Read one checkpoint's manifest and list its files; say whether it is complete and why not."""
        loc = self._loc(checkpoint_uri)
        step = parse_step(loc.prefix.rstrip("/"))
        if step is None:
            raise SpecValidationError(
                [("uri", f"{checkpoint_uri}: not a checkpoint directory (expected .../step-<number>/)")]
            )
        return self._inspect(loc, step)

    def holds_checkpoint(self, uri: str) -> bool:
        """Whether ``uri`` (any directory, e.g. a promotion target) holds a checkpoint manifest.

        The manifest is copied last (``copy_checkpoint``), so its presence means a complete copy."""
        return self._read(self._loc(uri), MANIFEST_NAME) is not None

    def _inspect(self, loc: Location, step: int) -> CheckpointInfo:
        found = self._read(loc, MANIFEST_NAME)
        if found is None:
            return _unfinished(loc, step)
        return self._info(loc, step, found, {path: size for path, (size, _) in self._list_tree(loc).items()})

    def _info(
        self, loc: Location, step: int, found: tuple[bytes, float], present: dict[str, int]
    ) -> CheckpointInfo:
        """A checkpoint with a manifest (``found``: its bytes and modified time) and these files."""
        manifest = self._parse_manifest(found[0], loc.file_uri(MANIFEST_NAME))
        problems = completeness_problems(manifest, present, loc.uri.rstrip("/") + "/")
        if manifest.get("step") != step:
            problems.append(
                f"{loc.file_uri(MANIFEST_NAME)}: manifest step {manifest.get('step')} != directory step {step}"
            )
        return CheckpointInfo(
            step=step,
            uri=loc.uri,
            manifest=manifest,
            problems=tuple(problems),
            checked=True,
            manifest_modified=found[1],
        )

    def _read_hint(self, root: Location) -> int | None:
        found = self._read(root, LATEST_HINT_NAME)
        if found is None:
            return None
        try:
            step = json.loads(found[0]).get("step")
        except (ValueError, AttributeError):
            return None  # a broken hint is only a hint: fall back to listing
        return step if isinstance(step, int) and not isinstance(step, bool) and step >= 0 else None

    def latest_complete(self, root_uri: str, *, use_hint: bool = True) -> CheckpointInfo | None:
        """The newest complete checkpoint under ``root_uri``, or None.

        Reads manifests newest first and stops at the first complete checkpoint, so the cost grows
        with the number of checkpoints (one ``CommonPrefix`` each), not with the number of files.
        """
        root = self._loc(root_uri)
        checked: set[int] = set()
        if use_hint and (hint := self._read_hint(root)) is not None:
            # Only steps after the hint: StartAfter skips every key up to step-<hint>0 ("/" < "0").
            newer = self.stores(root).list_dirs(root, "step-", start_after=checkpoint_dir_name(hint) + "0")
            found = self._first_complete(root, [s for s in self._steps(newer) if s > hint] + [hint], checked)
            if found is not None:
                return found
        return self._first_complete(root, self._steps(self.stores(root).list_dirs(root, "step-")), checked)

    def _first_complete(self, root: Location, steps: list[int], checked: set[int]) -> CheckpointInfo | None:
        """The first complete checkpoint of ``steps``, skipping (and adding to) ``checked``."""
        for step in steps:
            if step not in checked:
                checked.add(step)
                if (info := self._inspect(root.child(checkpoint_dir_name(step)), step)).complete:
                    return info
        return None

    def scan(self, root_uri: str) -> list[CheckpointInfo]:
        """Every checkpoint under the root, checked (one full listing + one GET per manifest)."""
        root = self._loc(root_uri)
        per_step: dict[int, dict[str, int]] = {}
        names: dict[int, str] = {}
        for rel, (size, _) in self._list_tree(root).items():
            top, _, rest = rel.partition("/")
            step = parse_step(top)
            if step is None or not rest:
                continue
            names.setdefault(step, top)
            per_step.setdefault(step, {})[rest] = size

        def check(step: int) -> CheckpointInfo:
            loc = root.child(names[step])
            if MANIFEST_NAME not in per_step[step]:
                return _unfinished(loc, step)
            found = self._read(loc, MANIFEST_NAME)
            if found is None:  # deleted since the listing
                return CheckpointInfo(step=step, uri=loc.uri, problems=("manifest vanished",), checked=True)
            return self._info(loc, step, found, per_step[step])

        return sorted(self._parallel(check, per_step), key=lambda c: c.step, reverse=True)

    def delete_checkpoints(self, root_uri: str, steps: Iterable[int]) -> int:
        """Delete whole checkpoints (manifest first, so a half-deleted one is never complete)."""
        root = self._loc(root_uri)
        wanted = set(steps)
        if not wanted:
            return 0
        names: list[str] = []
        manifests: list[str] = []
        for rel in self._list_tree(root):
            top, _, rest = rel.partition("/")
            if rest and parse_step(top) in wanted:
                (manifests if rest == MANIFEST_NAME else names).append(rel)
        return self.stores(root).delete(root, manifests) + self.stores(root).delete(root, names)

    def read_promotions(self, root_uri: str) -> dict[str, Any]:
        """The ``_PROMOTED.json`` record at the root (``{"current": ..., "history": [...]}``)."""
        root = self._loc(root_uri)
        found = self._read(root, PROMOTED_NAME)
        if found is None:
            return {"format_version": 1, "current": None, "history": []}
        try:
            data = json.loads(found[0])
            assert isinstance(data, dict) and isinstance(data.get("history"), list)
        except (ValueError, AssertionError):
            raise SpecValidationError(
                [(root.file_uri(PROMOTED_NAME), "not a valid promotion record (expected {current, history})")]
            ) from None
        return data

    def promoted_steps(self, root_uri: str) -> set[int]:
        record = self.read_promotions(root_uri)
        return {int(e["step"]) for e in record["history"] if isinstance(e, dict) and "step" in e}

    def plan_retention(self, root_uri: str, rule: RetentionRule) -> RetentionPlan:
        rule.validate(root_uri)  # before any I/O
        return plan_retention(
            self.scan(root_uri), rule, root=root_uri, promoted_steps=self.promoted_steps(root_uri)
        )

    def apply_retention(self, root_uri: str, rule: RetentionRule, *, dry_run: bool = False) -> RetentionPlan:
        plan = self.plan_retention(root_uri, rule)
        if not dry_run and plan.delete:
            self.delete_checkpoints(root_uri, plan.delete)
        return plan

    def copy_checkpoint(self, source_uri: str, target_uri: str) -> CheckpointInfo:
        """Copy a complete checkpoint's files to ``target_uri`` (the manifest last); replace stale files.

        Idempotent: when the target already holds a complete copy of the same step, nothing is copied.
        """
        src = self._loc(source_uri, "source_uri")
        dst = self._loc(target_uri, "target_uri")
        info = self.inspect(source_uri)
        if not info.complete:
            raise SpecValidationError(
                [("source_uri", f"{source_uri}: not a complete checkpoint: {'; '.join(info.problems)}")]
            )
        assert info.manifest is not None
        existing = self._read(dst, MANIFEST_NAME)
        if existing is not None:
            try:
                same = json.loads(existing[0]) == info.manifest
            except ValueError:
                same = False
            if same and not completeness_problems(
                info.manifest, {p: s for p, (s, _) in self._list_tree(dst).items()}, dst.uri
            ):
                return replace(info, uri=dst.uri, manifest_modified=None)
            self.stores(dst).delete(dst, [MANIFEST_NAME])  # target is incomplete from here on
        files = {e["path"]: int(e["size"]) for e in info.manifest["files"]}
        src_store, dst_store = self.stores(src), self.stores(dst)

        def copy(name: str, size: int) -> None:
            copy_between(src_store, src.join(name), dst_store, dst.join(name), size)

        self._parallel(lambda item: copy(*item), files.items())
        if stale := [p for p in self._list_tree(dst) if p not in files and p != MANIFEST_NAME]:
            dst_store.delete(dst, stale)
        copy(MANIFEST_NAME, 0)
        return replace(info, uri=dst.uri, manifest_modified=None)  # the copy: complete, as its source

    def promote(
        self,
        root_uri: str,
        which: str | int = "best",
        target_uri: str = "",
        *,
        metric: str | None = None,
        mode: str = "min",
    ) -> dict[str, Any]:
        """Copy the chosen checkpoint (best, latest or a step) to ``target_uri`` and record it.

        The record is appended to ``<root>/_PROMOTED.json`` (``current`` + ``history``); retention never
        deletes a checkpoint listed there. Returns the promotion entry (a small JSON dict).
        """
        selector = Selector.parse(which, metric, mode)
        target = self._loc(target_uri, "target_uri")
        root = self._loc(root_uri)
        if selector.kind == "latest":
            newest = self.latest_complete(root_uri)
            candidates = [newest] if newest else []
        elif selector.kind == "step":
            assert selector.step is not None
            candidates = [self._inspect(root.child(checkpoint_dir_name(selector.step)), selector.step)]
        else:
            candidates = self.scan(root_uri)
        chosen = select_checkpoint(candidates, selector, root_uri)
        copied = self.copy_checkpoint(chosen.uri, target.uri)
        entry: dict[str, Any] = {
            "step": chosen.step,
            "source_uri": chosen.uri,
            "target_uri": copied.uri,
            "which": selector.kind,
            "metric": selector.metric,
            "mode": selector.mode if selector.kind == "best" else None,
            "metrics": chosen.metrics,
            "promoted_at": _now_iso(),
        }
        record = self.read_promotions(root_uri)
        record["current"] = entry
        record["history"] = [*record["history"], entry]
        self.stores(root).write(root.join(PROMOTED_NAME), json.dumps(record, indent=2, sort_keys=True).encode())
        return entry
