"""Where something is stored: :class:`Location`, the one value type, and :func:`split_uri`, the one
function that splits a URI. Pure.

A location is a local path (scheme ``file``: ``/dir``, ``file:///dir``) or a key in a bucket of an
object store (``s3://bucket/key``, or any scheme registered in :mod:`airflow_dist_training.storage`).
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

from airflow_dist_training.errors import SpecValidationError


def split_uri(uri: str) -> tuple[str, str, str]:
    """``scheme://bucket/key`` -> ``(scheme, bucket, key)``; a plain path or ``file://`` URI ->
    ``("file", "", path)``. The only place a URI is taken apart."""
    if uri.startswith("file://"):
        parsed = urlparse(uri)
        return "file", "", unquote(parsed.netloc + parsed.path)
    if "://" not in uri:
        return "file", "", uri
    parsed = urlparse(uri)
    return parsed.scheme, parsed.netloc, uri.split("://", 1)[1].partition("/")[2]


def uri_scheme(uri: str | None) -> str | None:
    """The scheme a location names (``s3`` for ``s3://...``, ``file`` for a plain path or
    ``file://``), None for no location: the one way to ask "is this on S3?"."""
    if not uri:
        return None
    head, sep, _ = uri.partition("://")
    return head if sep else "file"


def uri_name(uri: str) -> str:
    """The last part of a URI or path (a file's name)."""
    return uri.rsplit("/", 1)[-1]


@dataclass(frozen=True)
class Location:
    """A parsed location. For object stores ``prefix`` is the key (a directory's ends with ``/`` or
    is empty); for ``file`` it is the local path (``bucket`` is empty)."""

    scheme: str
    bucket: str
    prefix: str

    @property
    def is_local(self) -> bool:
        return self.scheme == "file"

    @property
    def uri(self) -> str:
        return self.prefix if self.is_local else f"{self.scheme}://{self.bucket}/{self.prefix}"

    def as_uri(self) -> str:
        """A full URI (``file://`` for a local path): what a user can open."""
        return Path(self.prefix).as_uri() if self.is_local else self.uri

    @property
    def path(self) -> Path:
        """The local path (``file`` locations only)."""
        return Path(self.prefix)

    def as_dir(self) -> Location:
        """This location as a directory (an object-store key prefix ends with ``/``)."""
        if self.is_local or not self.prefix or self.prefix.endswith("/"):
            return self
        return Location(self.scheme, self.bucket, self.prefix + "/")

    def child(self, name: str) -> Location:
        """The location of a sub directory ``name`` (no leading/trailing slash needed)."""
        return self.join(name.strip("/")).as_dir()

    def key(self, name: str) -> str:
        """Key (or local path) of a file ``name`` under this directory."""
        return posixpath.join(self.prefix, name) if self.is_local else f"{self.prefix}{name}"

    def join(self, name: str) -> Location:
        """The location of the file ``name`` under this directory."""
        return Location(self.scheme, self.bucket, self.key(name))

    def file_uri(self, name: str) -> str:
        return self.join(name).uri


def local_location(path: Path | str) -> Location:
    return Location("file", "", str(path))


def parse_location(uri: str, field: str = "uri", *, directory: bool = True) -> Location:
    """Parse ``scheme://bucket/key``, ``file:///dir`` or ``/dir``; errors name ``field`` and the URI.

    ``directory``: a directory (an object-store key gets its trailing ``/``; a local one must be
    absolute), else one file (a relative local path is kept)."""
    if not isinstance(uri, str) or not uri.strip():
        raise SpecValidationError([(field, f"a checkpoint location is required, got {uri!r}")])
    uri = uri.strip()
    scheme, bucket, key = split_uri(uri)
    if scheme != "file":
        if not bucket:
            raise SpecValidationError([(field, f"{uri}: no bucket name (expected {scheme}://bucket/prefix/)")])
        if directory and key and not key.endswith("/"):
            key += "/"
        return Location(scheme, bucket, key)
    if directory and not key.startswith("/"):
        raise SpecValidationError([(field, f"{uri}: a local checkpoint location must be an absolute path")])
    return Location("file", "", posixpath.normpath(key))


def join_uri(base: str, name: str) -> str:
    return base.rstrip("/") + "/" + name


def parent_uri(uri: str) -> str:
    return uri.rstrip("/").rsplit("/", 1)[0]


def file_uri_path(uri: str) -> Path:
    """The path of a ``file://`` URI or a plain path (no resolution)."""
    return Path(split_uri(uri)[2])


def local_path(uri_or_path: str, base_dir: Path) -> Path | None:
    """A local path for a plain path or ``file://`` URI (relative to ``base_dir``); None for others."""
    scheme, _, path = split_uri(uri_or_path)
    if scheme != "file":
        return None
    resolved = Path(path) if uri_or_path.startswith("file://") else Path(path).expanduser()
    return resolved if resolved.is_absolute() else (base_dir / resolved)
