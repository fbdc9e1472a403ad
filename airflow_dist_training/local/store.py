"""Where the local executor reads and writes the S3 URIs a ``CreateTrainingJob`` request names.

:class:`ObjectStore` resolves every ``s3://bucket/key`` URI, in this order:

1. a **mount**: a URI prefix bound to a local directory (the spec's ``local_source``,
   ``local_uri`` conveniences), so ``s3://demo/data/train/x.csv`` is ``<mount>/x.csv``;
2. **real S3** through a boto3 client, when one is given (e.g. from the Airflow AWS connection;
   local compute on cloud data);
3. otherwise a **folder standing in for buckets**: ``<root>/<bucket>/<key>``. This is the default
   and needs no AWS.

FSx/EFS channels (``FileSystemDataSource``) resolve through mounts keyed
``fsx://<file system id>/<directory path>`` (``efs://`` likewise).
No boto3 import unless a client is used. Thread-safe: no mutable state besides what callers pass.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from airflow_dist_training.storage.location import Store, split_s3_uri


@dataclass(frozen=True)
class Resolved:
    """A URI resolved to a local path or an S3 location."""

    local: Path | None = None
    bucket: str = ""
    key: str = ""

    @property
    def uri(self) -> str:
        """``file://`` URI of a local location, else ``s3://bucket/key``."""
        return self.local.as_uri() if self.local is not None else f"s3://{self.bucket}/{self.key}"

    def as_store(self) -> Store:
        if self.local is not None:
            return Store("local", str(self.local))
        return Store("s3", f"s3://{self.bucket}/{self.key}".rstrip("/"))


class ObjectStore:
    """S3 URIs on this machine: mounts, then real S3 (``s3_client``), then ``<root>/<bucket>/<key>``.

    :param root: the folder standing in for buckets (created on first write).
    :param s3_client: a boto3 S3 client; ``None`` keeps everything local.
    :param mounts: ``{uri prefix: local directory}``; the longest matching prefix wins.
    """

    def __init__(
        self,
        root: str | Path,
        *,
        s3_client: Any = None,
        mounts: Mapping[str, str | Path] | None = None,
    ) -> None:
        self.root = Path(root).absolute()
        self.s3_client = s3_client
        self.mounts = {k.rstrip("/"): Path(v).absolute() for k, v in (mounts or {}).items()}

    def with_mounts(self, mounts: Mapping[str, str | Path]) -> ObjectStore:
        return ObjectStore(self.root, s3_client=self.s3_client, mounts={**self.mounts, **mounts})

    def resolve(self, uri: str) -> Resolved:
        uri = uri.rstrip("/") if uri.endswith("/") and uri.count("/") > 3 else uri
        for prefix in sorted(self.mounts, key=len, reverse=True):
            if uri == prefix or uri.startswith(prefix + "/"):
                rest = uri[len(prefix) :].lstrip("/")
                return Resolved(local=self.mounts[prefix] / rest if rest else self.mounts[prefix])
        if uri.startswith("file://"):
            return Resolved(local=Path(uri[len("file://") :]))
        if not uri.startswith("s3://"):
            raise ValueError(f"{uri!r} is not an s3:// URI and matches no local mount")
        bucket, key = split_s3_uri(uri)
        if self.s3_client is not None:
            return Resolved(bucket=bucket, key=key)
        return Resolved(local=self.root / bucket / key if key else self.root / bucket)

    def local_uri(self, uri: str) -> str:
        """What a user can open: ``file://`` for a local location, the S3 URI otherwise."""
        return self.resolve(uri).uri

    # -- reads
    def get_prefix(self, uri: str, dest: Path) -> int:
        """Copy an S3Prefix (or a single object) into ``dest``; returns the number of files."""
        dest.mkdir(parents=True, exist_ok=True)
        where = self.resolve(uri)
        if where.local is not None:
            if where.local.is_file():
                shutil.copy2(where.local, dest / where.local.name)
                return 1
            if not where.local.is_dir():
                raise FileNotFoundError(f"{uri}: no such object or prefix ({where.local})")
            count = 0
            for path in sorted(where.local.rglob("*")):
                if path.is_file():
                    target = dest / path.relative_to(where.local)
                    target.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(path, target)
                    count += 1
            return count
        client = self.s3_client
        prefix = where.key
        count = 0
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=where.bucket, Prefix=prefix):
            for obj in page.get("Contents", []):
                key = obj["Key"]
                rel = key[len(prefix) :].lstrip("/") or key.rsplit("/", 1)[-1]
                if not rel or ".." in rel.split("/") or key.endswith("/"):
                    continue
                target = dest / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                client.download_file(where.bucket, key, str(target))
                count += 1
        if count == 0:
            raise FileNotFoundError(f"{uri}: no such object or prefix")
        return count

    def get_file(self, uri: str, dest: Path) -> None:
        where = self.resolve(uri)
        dest.parent.mkdir(parents=True, exist_ok=True)
        if where.local is not None:
            shutil.copyfile(where.local, dest)
        else:
            self.s3_client.download_file(where.bucket, where.key, str(dest))

    # -- writes
    def put_file(self, path: Path, uri: str) -> str:
        where = self.resolve(uri)
        if where.local is not None:
            where.local.parent.mkdir(parents=True, exist_ok=True)
            tmp = where.local.with_name(f".{where.local.name}.tmp")
            shutil.copyfile(path, tmp)
            os.replace(tmp, where.local)
        else:
            self.s3_client.upload_file(str(path), where.bucket, where.key)
        return where.uri

    def put_bytes(self, data: bytes, uri: str) -> str:
        where = self.resolve(uri)
        if where.local is not None:
            where.local.parent.mkdir(parents=True, exist_ok=True)
            tmp = where.local.with_name(f".{where.local.name}.tmp")
            tmp.write_bytes(data)
            os.replace(tmp, where.local)
        else:
            self.s3_client.put_object(Bucket=where.bucket, Key=where.key, Body=data)
        return where.uri
