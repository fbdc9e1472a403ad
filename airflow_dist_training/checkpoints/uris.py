"""Checkpoint locations: ``s3://bucket/prefix/`` or a local path (``file:///dir`` or ``/dir``). Pure."""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
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
