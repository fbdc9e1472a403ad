"""Fingerprints of what a training run reads, and the skip decision. Pure: listings in, hashes out.

A run is keyed on **content** (data, code, spec, and the evaluation's script, held-out data and
arguments), not on the request's arguments as SageMaker Pipelines' step caching is; what each
fingerprint covers: docs/retraining.md. The hook
(``hooks/fingerprint.py``) produces the listings.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

PREFIX = "sha256:"
# Listing entries the job does not read as data: the local staging manifest (mtimes change when
# nothing else does) and S3 "directory" markers.
IGNORED_NAMES = frozenset({".manifest.json"})


@dataclass(frozen=True)
class Entry:
    """One object or file: key relative to the channel root, content tag (ETag/sha256), size."""

    key: str
    tag: str
    size: int


def _digest(lines: Iterable[str]) -> str:
    h = hashlib.sha256()
    for line in lines:
        h.update(line.encode("utf-8"))
        h.update(b"\n")
    return PREFIX + h.hexdigest()


def _tag(tag: str) -> str:
    return tag.strip('"')  # S3 quotes ETags


def listing_fingerprint(entries: Iterable[Entry]) -> dict[str, Any]:
    """``{"fingerprint", "objects", "bytes"}`` of one channel's listing (order does not matter)."""
    kept = sorted(
        (
            e
            for e in entries
            if e.key and not e.key.endswith("/") and e.key.rsplit("/", 1)[-1] not in IGNORED_NAMES
        ),
        key=lambda e: e.key,
    )
    return {
        "fingerprint": _digest(f"{e.key}\t{_tag(e.tag)}\t{e.size}" for e in kept),
        "objects": len(kept),
        "bytes": sum(e.size for e in kept),
    }


def s3_listing_entries(prefix_key: str, contents: Iterable[Mapping[str, Any]]) -> list[Entry]:
    """``ListObjectsV2`` ``Contents`` items -> entries keyed relative to ``prefix_key``."""
    out = []
    for obj in contents:
        key = str(obj["Key"])
        rel = key[len(prefix_key) :].lstrip("/") if key.startswith(prefix_key) else key
        out.append(Entry(rel or key.rsplit("/", 1)[-1], str(obj.get("ETag", "")), int(obj.get("Size", 0))))
    return out


def data_fingerprint(channels: Mapping[str, Mapping[str, Any]]) -> str:
    """One fingerprint over every channel's (``{channel: listing_fingerprint(...)}``)."""
    return _digest(f"{name}\t{channels[name]['fingerprint']}" for name in sorted(channels))


def code_hash(files: Iterable[tuple[str, str]]) -> str:
    """``(relative path, sha256)`` pairs of the source directory -> one hash."""
    return _digest(f"{path}\t{sha}" for path, sha in sorted(files))


def evaluation_fingerprint(code: str, data: str | None, arguments: Mapping[str, Any]) -> str:
    """One fingerprint over what judges the model: the evaluation's code hash, its held-out data's
    fingerprint (None: the script brings its own) and its arguments."""
    return _digest(
        [
            f"code\t{code}",
            f"data\t{data}",
            "arguments\t" + json.dumps(dict(arguments), sort_keys=True, default=str),
        ]
    )


# Spec fields that do not change what is learned: the checkpoint location is per run by design,
# and the source directory and dependencies are covered by the code hash (their paths may differ
# between machines).
_VOLATILE_SPEC_FIELDS = ("checkpoint", "name")


def _without(fields: Mapping[str, Any] | None, *keys: str) -> dict[str, Any]:
    return {k: v for k, v in (fields or {}).items() if k not in keys}


def spec_hash(spec: Mapping[str, Any], settings: Mapping[str, Any] | None = None) -> str:
    """Hash of the effective spec (a ``model_dump(mode="json")`` dict) and the run's settings."""
    data = _without(spec, *_VOLATILE_SPEC_FIELDS)
    # paths differ between machines; their files are in the code hash
    data["source"] = _without(data.get("source"), "source_dir", "dependencies")
    # where the local backend reads a channel is not what it reads: the data fingerprint is
    data["channels"] = {name: _without(c, "local_source") for name, c in (data.get("channels") or {}).items()}
    data["output"] = _without(data.get("output"), "local_uri")
    payload = json.dumps({"spec": data, "settings": dict(settings or {})}, sort_keys=True, default=str)
    return PREFIX + hashlib.sha256(payload.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Lineage:
    """What a run trains on. ``data_fingerprint`` is None when some channel cannot be fingerprinted."""

    data_fingerprint: str | None
    code_hash: str | None
    spec_hash: str
    channels: Mapping[str, Mapping[str, Any]]
    # what judges the model (None: no evaluation step, or its inputs cannot be read)
    evaluation_fingerprint: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "data_fingerprint": self.data_fingerprint,
            "code_hash": self.code_hash,
            "spec_hash": self.spec_hash,
            "evaluation_fingerprint": self.evaluation_fingerprint,
            "channels": {k: dict(v) for k, v in self.channels.items()},
        }


@dataclass(frozen=True)
class SkipDecision:
    """What the run does: ``skip`` (nothing changed), ``reevaluate`` (only the evaluation changed
    and the champion's model is still there: evaluate it, train nothing), or neither (train)."""

    skip: bool
    reason: str
    reevaluate: bool = False
    # what differs from the champion ("data", "code", "spec", "evaluation")
    changed: tuple[str, ...] = ()

    @property
    def action(self) -> str:
        return "reevaluate" if self.reevaluate else "skip" if self.skip else "train"


def short(fingerprint: str | None) -> str:
    return "unknown" if not fingerprint else fingerprint.removeprefix(PREFIX)[:12]


def decide_skip(
    current: Lineage,
    champion_id: str | None,
    champion_lineage: Mapping[str, Any] | None,
    *,
    force: bool = False,
    champion_model_uri: str | None = None,
    champion_model_present: bool | None = None,
) -> SkipDecision:
    """Skip the run when data, code, spec and evaluation all equal the champion's; say why either way.

    The evaluation is compared when both sides know it: a champion registered before evaluation
    fingerprints were recorded, or a run whose evaluation inputs cannot be read, compares the rest.
    When only the evaluation changed, the champion is re-evaluated without training if its model
    is still there (``champion_model_present``, checked by the caller: None means re-evaluation is
    not possible here, e.g. no gate or registry to record it in), and trained otherwise.
    """
    fp = short(current.data_fingerprint)
    if force:
        return SkipDecision(False, f"force=true: training anyway (data fingerprint {fp})")
    if champion_id is None:
        return SkipDecision(False, f"no champion yet: training (data fingerprint {fp})")
    if not champion_lineage or not champion_lineage.get("data_fingerprint"):
        return SkipDecision(
            False, f"champion {champion_id} has no recorded lineage: training (data fingerprint {fp})"
        )
    if current.data_fingerprint is None:
        return SkipDecision(False, "the training data could not be fingerprinted: training")
    changed = [
        what
        for what, key, mine in (
            ("data", "data_fingerprint", current.data_fingerprint),
            ("code", "code_hash", current.code_hash),
            ("spec", "spec_hash", current.spec_hash),
        )
        if mine is None or champion_lineage.get(key) != mine
    ]
    recorded = champion_lineage.get("evaluation_fingerprint")
    if current.evaluation_fingerprint and recorded and recorded != current.evaluation_fingerprint:
        changed.append("evaluation")
    if changed == ["evaluation"] and champion_model_present is not None:
        model = champion_model_uri or "(no model URI recorded)"
        if champion_model_present and champion_model_uri:
            return SkipDecision(
                False,
                f"evaluation changed since champion {champion_id}: re-evaluating {champion_id} without "
                f"retraining (its model {model} is still there)",
                reevaluate=True,
                changed=tuple(changed),
            )
        return SkipDecision(
            False,
            f"evaluation changed since champion {champion_id}: its model {model} is gone: training "
            f"(data fingerprint {fp})",
            changed=tuple(changed),
        )
    if changed:
        return SkipDecision(
            False,
            f"{' and '.join(changed)} changed since champion {champion_id}: training (data fingerprint {fp})",
            changed=tuple(changed),
        )
    return SkipDecision(True, f"no new data or code since champion {champion_id} (data fingerprint {fp})")
