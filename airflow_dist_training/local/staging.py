"""The local backend's FSx staging: copy a dataset into a job's channel directory, incrementally,
by a manifest (docs/fsx.md). boto3 is imported only for ``s3://``.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from airflow_dist_training.storage.location import split_uri

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
    fingerprint: str  # mtime_ns for local files, ETag for S3 objects
    handle: Any  # local Path or (bucket, key)


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def _iter_local(root: Path) -> Iterator[_SourceFile]:
    if root.is_file():
        stat = root.stat()
        yield _SourceFile(root.name, stat.st_size, str(stat.st_mtime_ns), root)
        return
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames):
            path = Path(dirpath) / name
            stat = path.stat()
            yield _SourceFile(path.relative_to(root).as_posix(), stat.st_size, str(stat.st_mtime_ns), path)


def _iter_s3(source: str, client: Any) -> Iterator[_SourceFile]:
    _, bucket, prefix = split_uri(source)
    if prefix and not prefix.endswith("/"):
        prefix += "/"
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for obj in page.get("Contents") or []:
            key = obj["Key"]
            if key.endswith("/"):
                continue
            yield _SourceFile(
                key[len(prefix) :], int(obj["Size"]), str(obj.get("ETag", "")).strip('"'), (bucket, key)
            )


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


def _source_files(source: str, dest: Path, s3_client: Any) -> list[_SourceFile]:
    """The files of an ``s3://`` prefix or a local directory/file (never one containing ``dest``)."""
    if source.startswith("s3://"):
        return list(_iter_s3(source, s3_client))
    root = Path(split_uri(source)[2])
    if not root.exists():
        raise FileNotFoundError(f"staging source {source} does not exist")
    if root.resolve() == dest.resolve() or dest.resolve().is_relative_to(root.resolve()):
        raise ValueError(f"channel_dir {dest} must not be inside the source {source}")
    return list(_iter_local(root))


def _unchanged_entry(old: dict[str, Any] | None, src: _SourceFile, target: Path) -> dict[str, Any] | None:
    """The manifest entry to keep when the staged copy is still current, else None (copy again)."""
    if old is None or old.get("size") != src.size or not target.is_file():
        return None
    if old.get("fingerprint") == src.fingerprint and target.stat().st_size == src.size:
        return old
    if isinstance(src.handle, Path) and sha256_file(src.handle) == old.get("sha256") == sha256_file(target):
        # touched but unchanged: keep the copy, remember the new mtime
        return {**old, "fingerprint": src.fingerprint}
    return None


def stage_local(source: str, channel_dir: str | Path, *, s3_client: Any = None) -> StageResult:
    """Mirror ``source`` (a local directory or file, ``file://`` or ``s3://bucket/prefix``) into
    ``channel_dir``; returns what was copied, skipped and deleted."""
    dest = Path(channel_dir)
    dest.mkdir(parents=True, exist_ok=True)
    previous = read_manifest(dest)
    if source.startswith("s3://") and s3_client is None:
        import boto3

        s3_client = boto3.client("s3")
    files = _source_files(source, dest, s3_client)

    result = StageResult(channel_dir=str(dest), manifest={})
    for src in files:
        rel = _safe_rel(src.rel)
        target = dest / rel
        kept = _unchanged_entry(previous.get(rel), src, target)
        if kept is not None:
            result.manifest[rel] = kept
            result.skipped.append(rel)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.staging")
        if isinstance(src.handle, Path):
            shutil.copyfile(src.handle, tmp)
        else:
            bucket, key = src.handle
            s3_client.download_file(bucket, key, str(tmp))
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
