"""Checkpoint semantics over the storage protocol (S3, local paths, any registered store).

Decisions (complete / latest / best / retention) live in :mod:`airflow_dist_training.checkpoints`;
what a layout means (complete, step, metrics) lives in its record
(:mod:`airflow_dist_training.checkpoints.layouts`); this module only fetches the facts and carries
out the plan. The cost model (``docs/checkpoints.md``): ``latest_complete`` lists the root's
checkpoint directories once (``Delimiter``; the ``manifest`` layout's ``_LATEST.json`` hint narrows
it), then lists and reads only the newest candidates until one is complete, never every object;
``scan`` lists everything once.
"""

from __future__ import annotations

import datetime as dt
import json
import posixpath
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any, Literal

from airflow.sdk import BaseHook

from airflow_dist_training.checkpointing import LATEST_HINT_NAME, checkpoint_dir_name
from airflow_dist_training.checkpoints.layouts import (
    AUTO,
    INCOMPLETE_DIR,
    LAYOUTS,
    CheckpointLayout,
    Evidence,
    LayoutOptions,
    detect,
    layout_problem,
    layouts_for,
    step_pattern_problem,
)
from airflow_dist_training.checkpoints.retention import RetentionPlan, RetentionRule, plan_retention
from airflow_dist_training.checkpoints.selection import CheckpointInfo, Selector, select_checkpoint
from airflow_dist_training.errors import SpecValidationError
from airflow_dist_training.hooks.aws import AwsConnectionMixin
from airflow_dist_training.storage import StoreOptions, Stores, copy_between
from airflow_dist_training.storage.location import Location

PROMOTED_NAME = "_PROMOTED.json"


def _now_iso() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class _Entry:
    """A checkpoint candidate under a root: its name, step, and whether it is one file."""

    name: str
    step: int
    is_file: bool = False


def mixed_layouts(found: Iterable[tuple[str, str]], root_uri: str) -> SpecValidationError | None:
    """The error for a root whose checkpoints (``(layout, name)`` pairs, under ``auto``) are of more
    than one layout: which one a script resumes from would be a guess."""
    by_layout: dict[str, list[str]] = {}
    for layout, name in found:
        by_layout.setdefault(layout, []).append(name)
    if len(by_layout) < 2:
        return None
    listing = "; ".join(f"{layout}: {', '.join(sorted(names)[:3])}" for layout, names in sorted(by_layout.items()))
    return SpecValidationError(
        [
            (
                "checkpoint.layout",
                f"{root_uri} holds checkpoints of {len(by_layout)} layouts under 'auto' ({listing}); set "
                "checkpoint.layout (or --layout) to the one the training script writes",
            )
        ]
    )


def _pairs(infos: Iterable[CheckpointInfo]) -> list[tuple[str, str]]:
    return [(info.layout, info.name or info.uri) for info in infos]


class CheckpointHook(AwsConnectionMixin, BaseHook):
    """Find, inspect, copy, promote, move aside and prune checkpoints of any layout in any store.

    :param aws_conn_id: Airflow AWS connection used for ``s3://`` locations (None: boto3 defaults).
    :param region_name: AWS region; defaults to the connection's region.
    :param verify_region: check once per bucket that the bucket is in the connection's region
        (``GetBucketLocation``), so a wrong region is a clear error naming the location.
    :param max_workers: parallel requests for manifest reads and copies.
    :param layout: the checkpoint layout (``auto``: detected per checkpoint; see
        :mod:`airflow_dist_training.checkpoints.layouts`).
    :param step_pattern: the ``single-file`` layout's file name pattern.
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
        layout: str = AUTO,
        step_pattern: str | None = None,
    ) -> None:
        super().__init__()
        if (problem := layout_problem(layout)) is not None:
            raise SpecValidationError([("layout", problem)])
        if step_pattern is not None and (problem := step_pattern_problem(step_pattern)) is not None:
            raise SpecValidationError([("step_pattern", problem)])
        self._set_aws_connection(aws_conn_id, region_name, botocore_config=botocore_config)
        self.max_workers = max_workers
        self.layout = layout
        self.options = LayoutOptions(step_pattern)
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

    @property
    def _layouts(self) -> list[CheckpointLayout]:
        return layouts_for(self.layout)

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

    # ------------------------------------------------------------------ what a root holds
    def _entry(self, name: str, is_file: bool) -> _Entry | None:
        """The candidate a root entry is, for this hook's layout(s); None when it is none."""
        if name.startswith(("_", ".")):  # _incomplete/, _LATEST.json, _PROMOTED.json, temp files
            return None
        for layout in self._layouts:
            if layout.single_file == is_file and (step := layout.step_of(name, self.options)) is not None:
                return _Entry(name, step, is_file)
        return None

    def _entries(self, names: Iterable[str], is_file: bool) -> list[_Entry]:
        found = [e for n in names if (e := self._entry(n, is_file)) is not None]
        return sorted(found, key=lambda e: (e.step, e.name), reverse=True)

    def _dir_prefix(self) -> str:
        prefixes = {layout.dir_prefix for layout in self._layouts if not layout.single_file}
        return prefixes.pop() if len(prefixes) == 1 else ""

    def _candidates(self, root: Location) -> list[_Entry]:
        """Checkpoints under ``root``, newest first: one ``Delimiter`` listing for directories;
        the root's files only for single-file layouts (and under ``auto`` when there is no directory)."""
        found: list[_Entry] = []
        if any(not layout.single_file for layout in self._layouts):
            found = self._entries(self.stores(root).list_dirs(root, self._dir_prefix()), False)
        if not found and any(layout.single_file for layout in self._layouts):
            top = [rel for rel in self._list_tree(root) if "/" not in rel]
            found = self._entries(top, True)
        return found

    def _judge(
        self,
        loc: Location,
        entry: _Entry | None,
        listing: dict[str, tuple[int, float]],
        reader: Location | None = None,
    ) -> CheckpointInfo:
        """Judge one checkpoint from its listing, reading the files its layout asks for."""
        name = entry.name if entry is not None else loc.prefix.rstrip("/").rsplit("/", 1)[-1]
        sizes = {rel: size for rel, (size, _) in listing.items()}
        layout = detect(sizes, name, self._layouts, self.options)
        contents: dict[str, bytes] = {}
        modified = max((m for _, m in listing.values()), default=None)
        for rel in layout.reads(sizes):
            if rel in sizes and (found := self._read(loc, rel)) is not None:
                contents[rel] = found[0]
                if rel in layout.written_last:
                    modified = found[1]
        step = entry.step if entry is not None else None
        verdict = layout.judge(Evidence(loc.uri, name, step, sizes, contents, self.options))
        return CheckpointInfo(
            step=step if step is not None else (verdict.step or 0),
            uri=loc.uri,
            manifest=verdict.details,
            problems=verdict.problems,
            checked=True,
            manifest_modified=modified,
            layout=layout.name,
            found_metrics=None if verdict.details is not None else verdict.metrics,
            epoch=verdict.epoch,
            size=None if verdict.details is not None else sum(sizes.values()),
            num_files=None if verdict.details is not None else len(sizes),
            unreadable=verdict.unreadable,
            name=name,
        )

    def _examine(self, root: Location, entry: _Entry) -> CheckpointInfo:
        """List one candidate and judge it (one listing, and one GET per file its layout reads)."""
        loc = root.join(entry.name) if entry.is_file else root.child(entry.name)
        return self._judge(loc, entry, self._list_tree(loc))

    def inspect(self, checkpoint_uri: str) -> CheckpointInfo:
        """One checkpoint (a directory or, single-file, a file): complete or not, and why not."""
        store, loc = self.stores.parse(checkpoint_uri, "uri", directory=False)
        name = loc.prefix.rstrip("/").rsplit("/", 1)[-1]
        listing = store.list_tree(loc.as_dir())  # a local file lists as itself: {"": ...}
        is_file = set(listing) == {""} or (not listing and bool(store.list_tree(loc)))
        entry = self._entry(name, is_file)
        if entry is None:
            wanted = " or ".join(sorted({lay.name for lay in self._layouts}))
            raise SpecValidationError(
                [("uri", f"{checkpoint_uri}: not a checkpoint of layout {wanted} (its name has no step)")]
            )
        return self._examine(self._parent(loc), entry)

    @staticmethod
    def _parent(loc: Location) -> Location:
        parent = posixpath.dirname(loc.prefix.rstrip("/"))
        return Location(loc.scheme, loc.bucket, parent if loc.is_local else (parent + "/" if parent else ""))

    def holds_checkpoint(self, uri: str) -> bool:
        """Whether ``uri`` (any directory, e.g. a promotion target) holds a complete checkpoint.

        The layout's finishing file is copied last (``copy_checkpoint``), so a half copy never counts."""
        loc = self._loc(uri)
        listing = self._list_tree(loc)
        if not listing:
            return False
        if len(listing) == 1 and "/" not in (only := next(iter(listing))) and self._entry(only, True):
            return self._judge(loc.join(only), self._entry(only, True), {"": listing[only]}).complete
        return self._judge(loc, None, listing).complete

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

        Examines candidates newest first and stops at the first complete one: one listing per
        candidate and one GET per file its layout reads, whatever the number of checkpoints or shards.
        An unreadable checkpoint newer than it is an error naming the file (never skipped silently).
        """
        root = self._loc(root_uri)
        examined: dict[str, CheckpointInfo] = {}
        if (
            use_hint
            and any(layout.hint for layout in self._layouts)
            and (hint := self._read_hint(root)) is not None
        ):
            # Only steps after the hint: StartAfter skips every key up to step-<hint>0 ("/" < "0").
            newer = self.stores(root).list_dirs(root, "step-", start_after=checkpoint_dir_name(hint) + "0")
            entries = [e for e in self._entries(newer, False) if e.step > hint]
            entries.append(_Entry(checkpoint_dir_name(hint), hint))
            found = self._first_complete(root, entries, examined, root_uri)
            # the hint is the manifest writer's: under auto, another layout beside it is checked below
            if found is not None and (self.layout != AUTO or all(i.layout == "manifest" for i in examined.values())):
                return found
        candidates = self._candidates(root)
        if self.layout == AUTO and (mixed := mixed_layouts(self._name_layouts(candidates), root_uri)) is not None:
            raise mixed
        return self._first_complete(root, candidates, examined, root_uri)

    def _name_layouts(self, entries: list[_Entry]) -> list[tuple[str, str]]:
        """``(layout, name)`` by names alone, when no one layout can hold every name (``step-…`` may be
        ``manifest`` or ``dcp``, ``checkpoint-…`` is ``hf-trainer``): found before reading a file."""
        fits = {
            e.name: [lay.name for lay in self._layouts if lay.single_file == e.is_file and lay.step_of(e.name, self.options) is not None]
            for e in entries
        }
        if not fits or set.intersection(*(set(f) for f in fits.values())):
            return []
        return [(layouts[0], name) for name, layouts in fits.items()]

    def _first_complete(
        self, root: Location, entries: list[_Entry], examined: dict[str, CheckpointInfo], root_uri: str
    ) -> CheckpointInfo | None:
        """The first complete checkpoint of ``entries``, skipping (and adding to) ``examined``."""
        for entry in entries:
            if entry.name in examined:
                continue
            info = examined[entry.name] = self._examine(root, entry)
            if info.unreadable:
                raise SpecValidationError(list(info.unreadable))
            if self.layout == AUTO and (mixed := mixed_layouts(_pairs(examined.values()), root_uri)) is not None:
                raise mixed
            if info.complete:
                return info
        return None

    def scan(self, root_uri: str) -> list[CheckpointInfo]:
        """Every checkpoint under the root, checked (one full listing + the GETs each layout needs)."""
        root = self._loc(root_uri)
        tree = self._list_tree(root)
        per_entry: dict[str, dict[str, tuple[int, float]]] = {}
        for rel, stat in tree.items():
            top, _, rest = rel.partition("/")
            per_entry.setdefault(top, {})[rest] = stat
        entries = [*self._entries([n for n, f in per_entry.items() if "" not in f], False)]
        entries += self._entries([n for n, f in per_entry.items() if set(f) == {""}], True)

        def check(entry: _Entry) -> CheckpointInfo:
            loc = root.join(entry.name) if entry.is_file else root.child(entry.name)
            return self._judge(loc, entry, per_entry[entry.name])

        return sorted(self._parallel(check, entries), key=lambda c: (c.step, c.name), reverse=True)

    def _decisive_scan(self, root_uri: str) -> list[CheckpointInfo]:
        """``scan`` for a decision (retention, promotion): refuses unreadable files and mixed layouts."""
        infos = self.scan(root_uri)
        if unreadable := [pair for info in infos for pair in info.unreadable]:
            raise SpecValidationError(unreadable)
        if self.layout == AUTO and (mixed := mixed_layouts(_pairs(infos), root_uri)) is not None:
            raise mixed
        return infos

    def delete_checkpoints(self, root_uri: str, steps: Iterable[int]) -> int:
        """Delete whole checkpoints (the finishing files first, so a half-deleted one is never complete)."""
        root = self._loc(root_uri)
        wanted = set(steps)
        if not wanted:
            return 0
        last = {name for layout in self._layouts for name in layout.written_last}
        names: list[str] = []
        markers: list[str] = []
        for rel in self._list_tree(root):
            top, _, rest = rel.partition("/")
            entry = self._entry(top, not rest)
            if entry is not None and entry.step in wanted:
                (markers if rest in last else names).append(rel)
        return self.stores(root).delete(root, markers) + self.stores(root).delete(root, names)

    def move_aside_incomplete(self, root_uri: str) -> list[dict[str, Any]]:
        """Move every incomplete checkpoint under ``root_uri`` to ``<root>/_incomplete/<name>/``.

        Called before a retry or a spot replacement relaunches a job, so a script that resumes from
        "the newest folder" finds the newest complete one. Nothing complete is moved, nor anything
        with a file that could not be parsed (it stays, and is named in the result). Returns one
        ``{"name", "from", "to", "reasons", "moved"}`` per incomplete checkpoint.
        """
        root = self._loc(root_uri)
        done: list[dict[str, Any]] = []
        for info in self.scan(root_uri):
            if info.complete:
                continue
            record = {
                "name": info.name,
                "from": info.uri,
                "to": None,
                "reasons": info.reasons,
                "moved": False,
            }
            if not info.unreadable:
                record["to"] = self._move(root, info)
                record["moved"] = True
            done.append(record)
        return done

    def _move(self, root: Location, info: CheckpointInfo) -> str:
        aside = root.child(INCOMPLETE_DIR)
        taken = set(self.stores(root).list_dirs(aside)) | {
            rel for rel in self._list_tree(aside) if "/" not in rel
        }
        name, n = info.name, 1
        while name in taken:
            n += 1
            name = f"{info.name}.{n}"
        store = self.stores(root)
        if LAYOUTS.get(info.layout, field="layout").single_file:
            copy_between(store, root.join(info.name), store, aside.join(name), info.size or 0)
            store.delete(root, [info.name])
            return aside.join(name).uri
        src, dst = root.child(info.name), aside.child(name)
        files = store.list_tree(src)
        for rel, (size, _) in files.items():
            copy_between(store, src.join(rel), store, dst.join(rel), size)
        store.delete(root, sorted(f"{info.name}/{rel}" for rel in files))  # from the root: the folder goes too
        return dst.uri

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
            self._decisive_scan(root_uri), rule, root=root_uri, promoted_steps=self.promoted_steps(root_uri)
        )

    def apply_retention(self, root_uri: str, rule: RetentionRule, *, dry_run: bool = False) -> RetentionPlan:
        plan = self.plan_retention(root_uri, rule)
        if not dry_run and plan.delete:
            self.delete_checkpoints(root_uri, plan.delete)
        return plan

    def copy_checkpoint(self, source_uri: str, target_uri: str) -> CheckpointInfo:
        """Copy a complete checkpoint's files into the directory ``target_uri``, its layout's finishing
        files last; stale files there are removed.

        Idempotent: when the target already holds a complete copy with the same files, nothing is copied.
        """
        src_store, src = self.stores.parse(source_uri, "source_uri", directory=False)
        dst_store, dst = self.stores.parse(target_uri, "target_uri")
        info = self.inspect(source_uri)
        if not info.complete:
            raise SpecValidationError(
                [("source_uri", f"{source_uri}: not a complete checkpoint: {'; '.join(info.reasons)}")]
            )
        layout = LAYOUTS.get(info.layout, field="layout")
        if layout.single_file:  # the file goes into the target directory under its own name
            files = {info.name: info.size or 0}
            src = self._parent(src)
        else:
            src = src.as_dir()
            files = {rel: size for rel, (size, _) in src_store.list_tree(src).items()}
        last = [name for name in files if name in layout.written_last]
        present = {rel: size for rel, (size, _) in dst_store.list_tree(dst).items()}
        if present == files and self.holds_checkpoint(dst.uri):
            return replace(info, uri=dst.uri, manifest_modified=None)
        if stale_markers := [p for p in present if p in layout.written_last]:
            dst_store.delete(dst, stale_markers)  # target is incomplete from here on

        def copy(name: str, size: int) -> None:
            copy_between(src_store, src.join(name), dst_store, dst.join(name), size)

        self._parallel(lambda item: copy(*item), [(n, z) for n, z in files.items() if n not in last])
        if stale := [p for p in present if p not in files]:
            dst_store.delete(dst, stale)
        for name in last:
            copy(name, files[name])
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
        else:
            candidates = self._decisive_scan(root_uri)
        chosen = select_checkpoint(candidates, selector, root_uri)
        copied = self.copy_checkpoint(chosen.uri, target.uri)
        entry: dict[str, Any] = {
            "step": chosen.step,
            "layout": chosen.layout,
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


# Whose checkpoints a job restores, by the training task's resume policy, as the task log says it
# (without a policy the location is the spec's own, which every run of the spec shares):
# scope -> ("Resuming from ..." with a checkpoint, the line without one)
ResumeScope = Literal["run", "spec", "job"]
RESUME_SCOPES: dict[ResumeScope, tuple[str, str]] = {
    "run": (
        "Resuming from this run's own checkpoint {uri} ({layout}, step {step})",
        "No checkpoint of this run under {root} yet: the job starts from scratch "
        "(a new run never resumes another run's checkpoint)",
    ),
    "spec": (
        "Resuming from the checkpoint {uri} ({layout}, step {step}) in the spec's checkpoint location, "
        "which every run of the spec shares (checkpoint_resume is not set)",
        "No complete checkpoint in the spec's checkpoint location {root}, which every run of the spec "
        "shares (checkpoint_resume is not set): the job starts from scratch",
    ),
    "job": (
        "Resuming from this job's own checkpoint {uri} ({layout}, step {step})",
        "No checkpoint under this job's own location {root}: the job starts from scratch "
        "(checkpoint_resume='none')",
    ),
}


def prepare_run_checkpoints(
    hook: CheckpointHook, uri: str, log: Any, *, scope: ResumeScope = "run"
) -> CheckpointInfo | None:
    """Before a job of a run starts (a retry or a spot replacement relaunch included): move the
    incomplete checkpoints at ``uri`` (where the job's checkpoints are restored from) aside under
    ``_incomplete/`` and log each one, then log where the job resumes. Returns the newest complete
    checkpoint (None: the job starts from scratch).

    A script that resumes from "the newest folder" (Transformers' ``resume_from_checkpoint=True``)
    then finds the newest *complete* one. Nothing complete is moved, nor a checkpoint with a file
    that could not be parsed (it is named in the log and left in place).

    :param hook: a hook with the run's layout (``checkpoint_hook_for``).
    :param scope: whose location ``uri`` is (``RESUME_SCOPES``): the run's own (a resume policy),
        the spec's shared one (no policy) or the job's own (``none``).
    """
    resuming, scratch = RESUME_SCOPES[scope]
    for moved in hook.move_aside_incomplete(uri):
        why = "; ".join(moved["reasons"])
        if moved["moved"]:
            log.warning(
                "Moved the incomplete checkpoint %s aside to %s (%s)", moved["from"], moved["to"], why
            )
        else:
            log.warning(
                "Left %s in place: a file could not be parsed, so it is neither resumed from nor moved (%s)",
                moved["from"],
                why,
            )
    newest = hook.latest_complete(uri)
    if newest is not None:
        log.info(resuming.format(uri=newest.uri, layout=newest.layout, step=newest.step))
        log.info("The job resumes from step %s", newest.step)
    else:
        log.info(scratch.format(root=uri))
    return newest
