"""Checkpoint layouts: how a root holds checkpoints, what "complete" means, and why not. Pure.

One :class:`CheckpointLayout` record per layout, registered by name (as strategies are): the
provider's ``manifest``, PyTorch Distributed Checkpoint (``dcp``), Hugging Face Trainer
(``hf-trainer``) and ``single-file``. ``auto`` detects the layout per checkpoint. Resume,
retention, promotion, freshness, warm start, the move-aside before a relaunch and the
``checkpoints`` CLI read only these records; the hook gathers the facts (a listing and the few
files a record asks for) and never decides.

A record is judged from bytes the bucket holds, so nothing here runs them: a DCP ``.metadata``
is a pickle, read opcode by opcode with :mod:`pickletools`
(:mod:`~airflow_dist_training.checkpoints.dcp_metadata`), never unpickled; JSON is only decoded.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_dist_training.checkpoints.dcp_metadata import dcp_references
from airflow_dist_training.spec.records import Records

AUTO = "auto"
MANIFEST_NAME = "_MANIFEST.json"  # the provider's writer (``checkpointing.MANIFEST_NAME``)
INCOMPLETE_DIR = "_incomplete"  # where incomplete checkpoints are moved aside before a relaunch


@dataclass(frozen=True)
class LayoutOptions:
    """What the spec says about a layout beyond its name.

    :param step_pattern: ``single-file`` names, e.g. ``epoch={epoch}-step={step}.ckpt``: ``{step}``
        and ``{epoch}`` are integers, any other ``{name}`` a metric, ``*`` anything.
    """

    step_pattern: str | None = None


@dataclass(frozen=True)
class Evidence:
    """What is known of one checkpoint: its listing and the files its layout asked to read.

    :param uri: the checkpoint (a directory, or the file of a single-file checkpoint).
    :param name: its name under the root.
    :param step: the step its name gives (None for a promotion target such as ``models/champion/``).
    :param files: relative path -> size (``{"": size}`` for a single file).
    :param contents: the bytes of the files :attr:`CheckpointLayout.reads` named, where present.
    """

    uri: str
    name: str
    step: int | None
    files: Mapping[str, int]
    contents: Mapping[str, bytes] = field(default_factory=dict)
    options: LayoutOptions = field(default_factory=LayoutOptions)

    def at(self, rel: str) -> str:
        return self.uri if not rel else self.uri.rstrip("/") + "/" + rel


@dataclass(frozen=True)
class Verdict:
    """A layout's judgement of one checkpoint.

    ``problems``: why it is not complete. ``unreadable``: ``(file, reason)`` of a file that could
    not be parsed; such a checkpoint is neither complete nor ever moved or deleted.
    """

    problems: tuple[str, ...] = ()
    unreadable: tuple[tuple[str, str], ...] = ()
    step: int | None = None  # as the checkpoint's own files say it, where they do
    epoch: float | None = None
    metrics: Mapping[str, float] = field(default_factory=dict)
    details: Mapping[str, Any] | None = None  # the decoded manifest (``manifest`` layout)


@dataclass(frozen=True)
class CheckpointLayout:
    """One checkpoint layout.

    :param name: the name ``checkpoint.layout`` and ``--layout`` take.
    :param description: one line for listings and docs.
    :param step_of: the step of a root entry's name, None when the entry is not one of this layout's.
    :param looks_like: whether a checkpoint's listing is this layout's (``auto`` detection).
    :param reads: the files to read to judge a checkpoint, given its listing.
    :param judge: complete or not and why, step, epoch, metrics.
    :param single_file: a checkpoint is one file at the root, not a directory.
    :param written_last: files that say "finished": copied last and deleted first, so a half-copied
        or half-deleted checkpoint never looks complete.
    :param dir_prefix: name prefix of every checkpoint directory (narrows the root's listing).
    :param hint: the root's ``_LATEST.json`` hint is written for this layout.
    """

    name: str
    description: str
    step_of: Callable[[str, LayoutOptions], int | None]
    looks_like: Callable[[Mapping[str, int]], bool]
    reads: Callable[[Mapping[str, int]], tuple[str, ...]]
    judge: Callable[[Evidence], Verdict]
    single_file: bool = False
    written_last: tuple[str, ...] = ()
    dir_prefix: str = ""
    hint: bool = False


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _numbers(data: Any) -> dict[str, float]:
    if not isinstance(data, Mapping):
        return {}
    return {str(k): float(v) for k, v in data.items() if _is_number(v)}


def _json(evidence: Evidence, rel: str) -> tuple[Any, tuple[str, str] | None]:
    """The decoded JSON file ``rel``, or the ``(file, reason)`` it cannot be parsed for."""
    try:
        return json.loads(evidence.contents[rel]), None
    except (ValueError, UnicodeDecodeError) as exc:
        return None, (evidence.at(rel), f"not valid JSON ({exc})")


def _name_step(pattern: str) -> Callable[[str, LayoutOptions], int | None]:
    regex = re.compile(pattern)

    def step_of(name: str, _options: LayoutOptions) -> int | None:
        match = regex.fullmatch(name)
        return int(match.group(1)) if match else None

    return step_of


# ------------------------------------------------------------------ manifest (the provider's writer)
def _judge_manifest(evidence: Evidence) -> Verdict:
    from airflow_dist_training.checkpointing import ManifestError, parse_manifest
    from airflow_dist_training.checkpoints.selection import completeness_problems

    if MANIFEST_NAME not in evidence.contents:
        return Verdict(problems=tuple(completeness_problems(None, evidence.files, evidence.uri)))
    where = evidence.at(MANIFEST_NAME)
    try:
        manifest = parse_manifest(evidence.contents[MANIFEST_NAME], where)
    except ManifestError as exc:
        return Verdict(unreadable=tuple((f"{where}:{f}" if f else where, m) for f, m in exc.problems))
    problems = completeness_problems(manifest, evidence.files, evidence.uri.rstrip("/") + "/")
    if evidence.step is not None and manifest["step"] != evidence.step:
        problems.append(f"{where}: manifest step {manifest['step']} != directory step {evidence.step}")
    return Verdict(
        problems=tuple(problems),
        step=manifest["step"],
        epoch=manifest.get("epoch"),
        metrics=_numbers(manifest.get("metrics")),
        details=manifest,
    )


MANIFEST = CheckpointLayout(
    name="manifest",
    description="the provider's CheckpointWriter: step-<n>/ with _MANIFEST.json written last (every file, its size)",
    step_of=_name_step(r"step-(\d{1,20})"),
    looks_like=lambda files: MANIFEST_NAME in files,
    reads=lambda files: (MANIFEST_NAME,),
    judge=_judge_manifest,
    written_last=(MANIFEST_NAME,),
    dir_prefix="step-",
    hint=True,
)


# ------------------------------------------------------------------ PyTorch Distributed Checkpoint
DCP_METADATA = ".metadata"
DCP_METRICS = "metrics.json"  # optional, written by the script beside .metadata


def _judge_dcp(evidence: Evidence) -> Verdict:
    if DCP_METADATA not in evidence.contents:
        return Verdict(
            problems=(
                f"{evidence.uri}: no {DCP_METADATA} (the save did not finish, or it is still uploading)",
            )
        )
    where = evidence.at(DCP_METADATA)
    try:
        needed = dcp_references(evidence.contents[DCP_METADATA])
    except ValueError as exc:
        return Verdict(unreadable=((where, f"not readable DCP metadata: {exc} (corrupt or truncated)"),))
    problems = []
    for path, end in sorted(needed.items()):
        if path not in evidence.files:
            problems.append(f"{evidence.at(path)}: missing (referenced by {DCP_METADATA})")
        elif evidence.files[path] < end:
            problems.append(
                f"{evidence.at(path)}: {evidence.files[path]} bytes, {DCP_METADATA} references {end}"
            )
    metrics: dict[str, float] = {}
    if DCP_METRICS in evidence.contents:
        data, error = _json(evidence, DCP_METRICS)
        if error is not None:
            return Verdict(unreadable=(error,))
        metrics = _numbers(data)
    return Verdict(problems=tuple(problems), step=evidence.step, metrics=metrics)


DCP = CheckpointLayout(
    name="dcp",
    description="PyTorch Distributed Checkpoint (FSDP, FSDP2, SMP v2, torchtitan): .metadata + *.distcp shards",
    step_of=_name_step(r"[A-Za-z_\-]*?(\d{1,20})"),
    looks_like=lambda files: DCP_METADATA in files or any(p.endswith(".distcp") for p in files),
    reads=lambda files: (DCP_METADATA, *((DCP_METRICS,) if DCP_METRICS in files else ())),
    judge=_judge_dcp,
    written_last=(DCP_METADATA,),
)


# ------------------------------------------------------------------ Hugging Face Trainer / Accelerate
HF_STATE = "trainer_state.json"
HF_WEIGHTS = ("model.safetensors", "pytorch_model.bin", "adapter_model.safetensors", "adapter_model.bin")
HF_INDEXES = ("model.safetensors.index.json", "pytorch_model.bin.index.json")
HF_OPTIMIZER = ("optimizer.pt", "optimizer.bin")
HF_SCHEDULER = "scheduler.pt"
_HF_IGNORED_LOGS = frozenset({"step", "epoch", "total_flos"})


def _hf_dirs(files: Mapping[str, int]) -> set[str]:
    return {p.split("/", 1)[0] for p in files if "/" in p}


def _hf_weights_problems(evidence: Evidence) -> tuple[list[str], tuple[str, str] | None]:
    files, dirs = evidence.files, _hf_dirs(evidence.files)
    index = next((i for i in HF_INDEXES if i in files), None)
    if index is not None:
        data, error = _json(evidence, index)
        if error is not None:
            return [], error
        weight_map = data.get("weight_map") if isinstance(data, dict) else None
        if not isinstance(weight_map, dict):
            return [], (evidence.at(index), "no weight_map object")
        missing = sorted({str(s) for s in weight_map.values()} - set(files))
        return [f"{evidence.at(s)}: missing (listed in {index})" for s in missing], None
    if any(w in files for w in HF_WEIGHTS) or any(d.startswith("pytorch_model_fsdp_") for d in dirs):
        return [], None
    return [f"{evidence.uri}: no weights ({', '.join(HF_WEIGHTS)} or a shard index)"], None


def _hf_optimizer_problems(evidence: Evidence) -> list[str]:
    """The optimizer and scheduler state, where the Trainer writes them (DeepSpeed: its own folder)."""
    dirs = _hf_dirs(evidence.files)
    if any(d.startswith("global_step") for d in dirs):
        return []
    problems = []
    if not any(o in evidence.files for o in HF_OPTIMIZER) and not any(
        d.startswith("optimizer_") for d in dirs
    ):
        problems.append(f"{evidence.uri}: no optimizer state (optimizer.pt; saved with save_only_model?)")
    if HF_SCHEDULER not in evidence.files:
        problems.append(f"{evidence.uri}: no {HF_SCHEDULER}")
    return problems


def _judge_hf(evidence: Evidence) -> Verdict:
    if HF_STATE not in evidence.contents:
        return Verdict(
            problems=(f"{evidence.uri}: no {HF_STATE} (the save did not finish, or it is still uploading)",)
        )
    state, error = _json(evidence, HF_STATE)
    if error is None and not isinstance(state, dict):
        error = (evidence.at(HF_STATE), f"must be a JSON object, got {type(state).__name__}")
    if error is not None:
        return Verdict(unreadable=(error,))
    problems, index_error = _hf_weights_problems(evidence)
    if index_error is not None:
        return Verdict(unreadable=(index_error,))
    problems += _hf_optimizer_problems(evidence)
    step = state.get("global_step")
    step = step if isinstance(step, int) and not isinstance(step, bool) else None
    if step is not None and evidence.step is not None and step != evidence.step:
        problems.append(f"{evidence.at(HF_STATE)}: global_step {step} != directory step {evidence.step}")
    metrics: dict[str, float] = {}
    for entry in state.get("log_history") or []:  # the last value of each logged number
        if isinstance(entry, dict):
            metrics.update({k: v for k, v in _numbers(entry).items() if k not in _HF_IGNORED_LOGS})
    if _is_number(state.get("best_metric")):
        metrics["best_metric"] = float(state["best_metric"])
    epoch = state.get("epoch")
    return Verdict(
        problems=tuple(problems),
        step=step,
        epoch=float(epoch) if _is_number(epoch) else None,
        metrics=metrics,
    )


HF_TRAINER = CheckpointLayout(
    name="hf-trainer",
    description="Hugging Face Trainer / Accelerate: checkpoint-<step>/ with trainer_state.json, weights, optimizer, scheduler",
    step_of=_name_step(r"checkpoint-(\d{1,20})"),
    looks_like=lambda files: HF_STATE in files or any(i in files for i in HF_INDEXES),
    reads=lambda files: (HF_STATE, *(i for i in HF_INDEXES if i in files)),
    judge=_judge_hf,
    written_last=(HF_STATE,),
    dir_prefix="checkpoint-",
)


# ------------------------------------------------------------------ single file (Lightning, torch.save)
DEFAULT_STEP_PATTERN = "epoch={epoch}-step={step}.ckpt"  # Lightning ModelCheckpoint's default name
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}|\*")


def step_pattern_regex(pattern: str) -> re.Pattern[str]:
    """``epoch={epoch}-step={step}-{val_loss}.ckpt`` as a regular expression with named groups."""
    parts, last = [], 0
    for match in _PLACEHOLDER.finditer(pattern):
        parts.append(re.escape(pattern[last : match.start()]))
        name = match.group(1)
        if name is None:
            parts.append(".*")
        elif name in ("step", "epoch"):
            parts.append(f"(?P<{name}>\\d{{1,20}})")
        else:
            parts.append(f"(?P<{name}>-?\\d+(?:\\.\\d*)?(?:[eE][-+]?\\d+)?)")
        last = match.end()
    parts.append(re.escape(pattern[last:]))
    return re.compile("".join(parts))


def step_pattern_problem(pattern: str) -> str | None:
    """Why ``pattern`` cannot name single-file checkpoints, or None."""
    if "/" in pattern:
        return f"{pattern!r}: a file name, without '/'"
    names = [m.group(1) for m in _PLACEHOLDER.finditer(pattern) if m.group(1)]
    if "step" not in names:
        return f"{pattern!r} has no {{step}} placeholder (e.g. {DEFAULT_STEP_PATTERN})"
    if len(names) != len(set(names)):
        return f"{pattern!r} repeats a placeholder"
    return None


def _single_match(name: str, options: LayoutOptions) -> re.Match[str] | None:
    return step_pattern_regex(options.step_pattern or DEFAULT_STEP_PATTERN).fullmatch(name)


def _single_step(name: str, options: LayoutOptions) -> int | None:
    match = _single_match(name, options)
    return int(match.group("step")) if match else None


def _judge_single(evidence: Evidence) -> Verdict:
    size = evidence.files.get("", 0)
    match = _single_match(evidence.name, evidence.options)
    groups = match.groupdict() if match else {}
    metrics = {k: float(v) for k, v in groups.items() if k not in ("step", "epoch") and v is not None}
    epoch = groups.get("epoch")
    problems = () if size > 0 else (f"{evidence.uri}: empty file",)
    return Verdict(
        problems=problems, step=evidence.step, epoch=float(epoch) if epoch else None, metrics=metrics
    )


SINGLE_FILE = CheckpointLayout(
    name="single-file",
    description="one file per checkpoint (Lightning ModelCheckpoint, torch.save); step from checkpoint.step_pattern",
    step_of=_single_step,
    looks_like=lambda files: set(files) == {""},
    reads=lambda files: (),
    judge=_judge_single,
    single_file=True,
)


LAYOUTS = Records(
    CheckpointLayout,
    "checkpoint layout",
    "checkpoint layouts",
    builtin=[MANIFEST, DCP, HF_TRAINER, SINGLE_FILE],
)
register_layout = LAYOUTS.register
unregister_layout = LAYOUTS.forget


def layout_names() -> tuple[str, ...]:
    """``auto`` and every registered layout."""
    return (AUTO, *LAYOUTS.names())


def layout_problem(name: object) -> str | None:
    """Why ``name`` is not a layout ``checkpoint.layout`` takes, or None."""
    if name == AUTO or LAYOUTS.find(name) is not None:
        return None
    return f"unknown checkpoint layout {name!r}; registered checkpoint layouts: {', '.join(layout_names())}"


def layouts_for(name: str) -> list[CheckpointLayout]:
    """The records a root is read with: the named one, or (``auto``) every one, in detection order."""
    return LAYOUTS.records() if name == AUTO else [LAYOUTS.get(name, field="layout")]


def detect(
    files: Mapping[str, int], name: str, candidates: list[CheckpointLayout], options: LayoutOptions
) -> CheckpointLayout:
    """The layout of one checkpoint: the first whose files it has, else the first whose name it has.

    A directory whose marker file has not arrived yet (``step-…/`` holding only shards) is judged
    by its name's layout, and so is incomplete for the right reason."""
    for layout in candidates:
        if not layout.single_file and layout.looks_like(files):
            return layout
    for layout in candidates:
        if layout.single_file == (set(files) == {""}) and layout.step_of(name, options) is not None:
            return layout
    return candidates[0]
