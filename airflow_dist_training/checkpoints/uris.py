"""An S3 or local location: the one home of the concept. Pure.

- :class:`Location` (``parse_location``): a checkpoint location, ``s3://bucket/prefix/`` or a local
  path (``file:///dir`` or ``/dir``), as the checkpoint hooks list, read and copy it;
- :class:`Store`: where the local backend keeps checkpoints or model artifacts (a local directory or
  an S3 prefix), as its launcher syncs them;
- the URI helpers every layer uses: :func:`split_s3_uri`, :func:`s3_bucket`, :func:`join_uri`,
  :func:`parent_uri`, :func:`file_uri_path` and :func:`local_path`.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import unquote, urlparse

from airflow_dist_training.errors import SpecValidationError


@dataclass(frozen=True)
class Location:
    """A parsed checkpoint location. ``prefix`` ends with ``/`` (or is empty) for S3."""

    scheme: str  # "s3" or "file"
    bucket: str  # "" for local
    prefix: str  # S3 key prefix, or the absolute local directory

    @property
    def is_s3(self) -> bool:
        return self.scheme == "s3"

    @property
    def uri(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}" if self.is_s3 else self.prefix

    def child(self, name: str) -> Location:
        """The location of a sub directory ``name`` (no leading/trailing slash needed)."""
        name = name.strip("/")
        if self.is_s3:
            return Location("s3", self.bucket, f"{self.prefix}{name}/")
        return Location("file", "", posixpath.join(self.prefix, name))

    def key(self, name: str) -> str:
        """S3 key (or local path) of a file ``name`` directly under this location."""
        return f"{self.prefix}{name}" if self.is_s3 else posixpath.join(self.prefix, name)

    def file_uri(self, name: str) -> str:
        return f"s3://{self.bucket}/{self.key(name)}" if self.is_s3 else self.key(name)


def parse_location(uri: str, field: str = "uri") -> Location:
    """Parse ``s3://bucket/prefix``, ``file:///dir`` or ``/dir``; errors name ``field`` and the URI."""
    if not isinstance(uri, str) or not uri.strip():
        raise SpecValidationError([(field, f"a checkpoint location is required, got {uri!r}")])
    uri = uri.strip()
    if uri.startswith("s3://"):
        parsed = urlparse(uri)
        bucket = parsed.netloc
        if not bucket:
            raise SpecValidationError([(field, f"{uri}: no bucket name (expected s3://bucket/prefix/)")])
        prefix = parsed.path.lstrip("/")
        if prefix and not prefix.endswith("/"):
            prefix += "/"
        return Location("s3", bucket, prefix)
    if uri.startswith("file://"):
        path = unquote(urlparse(uri).path)
    elif "://" in uri:
        raise SpecValidationError(
            [(field, f"{uri}: unsupported scheme (use s3://bucket/prefix/, file:///dir or /dir)")]
        )
    else:
        path = uri
    if not path.startswith("/"):
        raise SpecValidationError([(field, f"{uri}: a local checkpoint location must be an absolute path")])
    return Location("file", "", posixpath.normpath(path))


@dataclass(frozen=True)
class Store:
    """Where checkpoints or model artifacts live: a local directory or an S3 prefix."""

    kind: Literal["local", "s3"]
    location: str  # absolute local path, or s3://bucket/prefix (no trailing slash)

    @property
    def uri(self) -> str:
        return Path(self.location).as_uri() if self.kind == "local" else self.location

    def child(self, *parts: str) -> Store:
        if self.kind == "local":
            return Store("local", str(Path(self.location, *parts)))
        return Store("s3", "/".join([self.location.rstrip("/"), *parts]))


def split_s3_uri(uri: str) -> tuple[str, str]:
    """``s3://bucket/key`` -> ``(bucket, key)``; ValueError for anything else."""
    if not uri.startswith("s3://"):
        raise ValueError(f"not an s3:// URI: {uri!r}")
    bucket, _, key = uri[len("s3://") :].partition("/")
    return bucket, key


def s3_bucket(uri: str) -> str:
    """The bucket of an ``s3://bucket/key`` URI."""
    return split_s3_uri(uri)[0]


def join_uri(base: str, name: str) -> str:
    return base.rstrip("/") + "/" + name


def parent_uri(uri: str) -> str:
    return uri.rstrip("/").rsplit("/", 1)[0]


def file_uri_path(uri: str) -> Path:
    """The path of a ``file://`` URI or a plain path (no resolution)."""
    return Path(uri[len("file://") :] if uri.startswith("file://") else uri)


def local_path(uri_or_path: str, base_dir: Path) -> Path | None:
    """A local path for a plain path or ``file://`` URI (relative to ``base_dir``); None for s3://."""
    if uri_or_path.startswith("s3://"):
        return None
    if uri_or_path.startswith("file://"):
        return Path(uri_or_path[len("file://") :])
    path = Path(uri_or_path).expanduser()
    return path if path.is_absolute() else (base_dir / path)
