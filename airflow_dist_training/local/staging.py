"""The local backend's FSx staging: copy a dataset into a job's channel directory, incrementally,
by a manifest (docs/fsx.md). The source is read through its store (``storage``).
"""

from __future__ import annotations

import hashlib
import json
import os
import posixpath
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from airflow_dist_training.storage import ObjectStore, StoreOptions, Stores
from airflow_dist_training.storage.location import Location, parse_location

MANIFEST_NAME = ".manifest.json"
MANIFEST_VERSION = 1


@dataclass
class StageResult:
    """What one staging run did; ``manifest`` is ``{relative path: {size, sha256, fingerprint}}``."""

    channel_dir: str
    manifest: dict[str, dict[str, Any]]
    copied: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        """Small JSON for XCom."""
        return {
            "channel_dir": self.channel_dir,
            "files": len(self.manifest),
            "bytes": sum(int(e["size"]) for e in self.manifest.values()),
            "copied": len(self.copied),
            "skipped": len(self.skipped),
            "deleted": len(self.deleted),
        }


@dataclass(frozen=True)
class _SourceFile:
    rel: str
    size: int
    fingerprint: str  # the modified time the store lists
    loc: Location


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def _safe_rel(rel: str) -> str:
    parts = Path(rel).parts
    if not rel or Path(rel).is_absolute() or ".." in parts:
        raise ValueError(f"refusing to stage {rel!r}: it would land outside the channel directory")
    return Path(rel).as_posix()


def read_manifest(channel_dir: str | Path) -> dict[str, dict[str, Any]]:
    path = Path(channel_dir) / MANIFEST_NAME
    if not path.exists():
        return {}
    data = json.loads(path.read_text())
    return dict(data.get("files") or {})


def _source_files(store: ObjectStore, source: Location, uri: str, dest: Path) -> list[_SourceFile]:
    """The files under ``source`` (a directory, a key prefix or one file), never ones containing ``dest``."""
    if (root := store.local_path(source)) is not None:
        if not root.exists():
            raise FileNotFoundError(f"staging source {uri} does not exist")
        if root.resolve() == dest.resolve() or dest.resolve().is_relative_to(root.resolve()):
            raise ValueError(f"channel_dir {dest} must not be inside the source {uri}")
    files = []
    for rel, (size, modified) in sorted(store.list_tree(source).items()):
        if rel.endswith("/"):  # an S3 "folder" marker
            continue
        # "": the source is one file, staged under its own name
        name = rel or posixpath.basename(source.prefix.rstrip("/"))
        files.append(_SourceFile(name, size, repr(modified), source.join(rel) if rel else source))
    return files


def _unchanged_entry(
    store: ObjectStore, old: dict[str, Any] | None, src: _SourceFile, target: Path
) -> dict[str, Any] | None:
    """The manifest entry to keep when the staged copy is still current, else None (copy again)."""
    if old is None or old.get("size") != src.size or not target.is_file():
        return None
    if old.get("fingerprint") == src.fingerprint and target.stat().st_size == src.size:
        return old
    path = store.local_path(src.loc)
    if path is not None and sha256_file(path) == old.get("sha256") == sha256_file(target):
        # touched but unchanged: keep the copy, remember the new mtime
        return {**old, "fingerprint": src.fingerprint}
    return None


def stage_local(source: str, channel_dir: str | Path, *, stores: Stores | None = None) -> StageResult:
    """Mirror ``source`` (a local directory or file, ``file://`` or a store's prefix such as
    ``s3://bucket/prefix``) into ``channel_dir``; returns what was copied, skipped and deleted.
    ``stores``: the task's stores (its connection); default: boto3's default chain."""
    dest = Path(channel_dir)
    dest.mkdir(parents=True, exist_ok=True)
    previous = read_manifest(dest)
    stores = stores or Stores(StoreOptions(aws_conn_id=None))
    loc = parse_location(source, "source", directory=False)
    store = stores(loc, "source", source)
    files = _source_files(store, loc if loc.is_local else loc.as_dir(), source, dest)

    result = StageResult(channel_dir=str(dest), manifest={})
    for src in files:
        rel = _safe_rel(src.rel)
        target = dest / rel
        kept = _unchanged_entry(store, previous.get(rel), src, target)
        if kept is not None:
            result.manifest[rel] = kept
            result.skipped.append(rel)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.staging")
        store.get_file(src.loc, tmp)
        os.replace(tmp, target)
        result.manifest[rel] = {
            "size": src.size,
            "sha256": sha256_file(target),
            "fingerprint": src.fingerprint,
        }
        result.copied.append(rel)

    for rel in sorted(set(previous) - set(result.manifest)):
        stale = dest / rel
        if stale.is_file():
            stale.unlink()
        result.deleted.append(rel)
        parent = stale.parent
        while parent != dest and parent.is_dir() and not any(parent.iterdir()):
            parent.rmdir()
            parent = parent.parent

    manifest = {"version": MANIFEST_VERSION, "source": source, "files": dict(sorted(result.manifest.items()))}
    (dest / MANIFEST_NAME).write_text(json.dumps(manifest, indent=1, sort_keys=True))
    return result
