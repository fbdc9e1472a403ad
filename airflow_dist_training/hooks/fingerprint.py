"""The I/O behind the fingerprints: list S3 prefixes, hash local files and source code, digest models.

The hashes themselves are pure (``airflow_dist_training.retraining.fingerprint``). An S3 or
FSx-staged channel costs one paginated ``ListObjectsV2`` (no GETs); a local channel and the code
are read once (sha256), which is what "unchanged" has to mean there.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tarfile
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from functools import cached_property
from pathlib import Path
from typing import IO, Any

from airflow_dist_training.hooks.aws import AwsConnectionMixin
from airflow_dist_training.retraining.fingerprint import (
    IGNORED_NAMES,
    Entry,
    Lineage,
    code_hash,
    data_fingerprint,
    evaluation_fingerprint,
    listing_fingerprint,
    s3_listing_entries,
    spec_hash,
)
from airflow_dist_training.storage import StoreOptions, Stores
from airflow_dist_training.storage.location import split_uri, uri_scheme

_CHUNK = 1 << 20
_SKIP_DIRS = {"__pycache__", ".git", ".pytest_cache", ".mypy_cache"}


def _sha256(fh: IO[bytes]) -> Any:
    """The sha256 of a binary file's remaining bytes, read in chunks."""
    digest = hashlib.sha256()
    while block := fh.read(_CHUNK):
        digest.update(block)
    return digest


def _sha256_file(path: Path) -> str:
    with path.open("rb") as fh:
        return str(_sha256(fh).hexdigest())


def _walk(root: Path) -> Iterator[Path]:
    if root.is_file():
        yield root
        return
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS)
        for name in sorted(filenames):
            if not name.endswith(".pyc"):
                yield Path(dirpath) / name


def _local(uri: str, base_dir: Path) -> Path:
    path = Path(split_uri(uri)[2]).expanduser()
    return path if path.is_absolute() else base_dir / path


class FingerprintHook(AwsConnectionMixin):
    """Fingerprint a run's inputs (data channels, code, spec) and compare model artifacts.

    :param aws_conn_id: Airflow AWS connection for ``s3://`` locations.
    :param region_name: AWS region (default: the connection's).
    """

    def __init__(self, aws_conn_id: str | None = "aws_default", region_name: str | None = None) -> None:
        self._set_aws_connection(aws_conn_id, region_name)
        self.list_calls = 0

    @cached_property
    def s3(self) -> Any:
        return self.aws_client("s3")

    def s3_entries(self, uri: str) -> list[Entry]:
        """Every object under an ``s3://bucket/prefix`` (one paginated listing)."""
        _, bucket, prefix = split_uri(uri)
        entries: list[Entry] = []
        for page in self.s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            self.list_calls += 1
            entries.extend(s3_listing_entries(prefix, page.get("Contents") or []))
        return entries

    @staticmethod
    def local_entries(path: Path) -> list[Entry]:
        """Every file under a local directory (or the file itself): size and sha256."""
        if not path.exists():
            raise FileNotFoundError(f"{path} does not exist")
        root = path if path.is_dir() else path.parent
        return [
            Entry(p.relative_to(root).as_posix(), _sha256_file(p), p.stat().st_size)
            for p in _walk(path)
            if p.name not in IGNORED_NAMES
        ]

    def channel_fingerprint(self, uri: str, base_dir: str | Path = ".") -> dict[str, Any]:
        """``{"fingerprint", "objects", "bytes", "source"}`` of one channel location."""
        if uri_scheme(uri) == "s3":
            result = listing_fingerprint(self.s3_entries(uri))
        else:
            result = listing_fingerprint(self.local_entries(_local(uri, Path(base_dir))))
        return {**result, "source": uri}

    def code_hash(
        self,
        source_dir: str | None,
        entry_point: str,
        base_dir: str | Path = ".",
        dependencies: Sequence[str] = (),
    ) -> str | None:
        """Hash of the code the job runs: every file of the source directory (or the S3 tarball's
        ETag) and of its ``dependencies``, by the path each has in the code archive."""
        if source_dir and uri_scheme(source_dir) == "s3":
            return code_hash((e.key, e.tag) for e in self.s3_entries(source_dir))
        root = _local(source_dir, Path(base_dir)) if source_dir else Path(base_dir)
        if not root.exists():
            return None
        files = [(p.relative_to(root).as_posix(), _sha256_file(p)) for p in _walk(root)]
        for dependency in dependencies:  # a file as its name, a directory's files under its name
            dep = _local(dependency, Path(base_dir))
            if not (dep.is_file() or dep.is_dir()):
                return None
            files += [(p.relative_to(dep.parent).as_posix(), _sha256_file(p)) for p in _walk(dep)]
        return code_hash(files)

    def evaluation_fingerprint(
        self,
        script: str,
        data_uri: str | None,
        arguments: Mapping[str, Any],
        base_dir: str | Path = ".",
        dependencies: Sequence[str] = (),
    ) -> str | None:
        """The evaluation's inputs: its script and shipped dependencies, its held-out data, its
        arguments. None when one of them cannot be read (nothing is compared then)."""
        base = Path(base_dir)
        if uri_scheme(script) == "s3":
            files = [(e.key, e.tag) for e in self.s3_entries(script)]
        else:
            path = _local(script, base)
            if not path.is_file():
                return None
            files = [(path.name, _sha256_file(path))]
        for dependency in dependencies:
            dep = _local(dependency, base)
            if not (dep.is_file() or dep.is_dir()):
                return None
            files += [(p.relative_to(dep.parent).as_posix(), _sha256_file(p)) for p in _walk(dep)]
        try:
            data = self.channel_fingerprint(data_uri, base)["fingerprint"] if data_uri else None
        except FileNotFoundError:
            return None
        return evaluation_fingerprint(code_hash(files), data, arguments)

    def lineage(
        self,
        spec: Any,
        *,
        backend: str,
        base_dir: str | Path = ".",
        staged_sources: Mapping[str, str] | None = None,
        settings: Mapping[str, Any] | None = None,
    ) -> Lineage:
        """Fingerprint ``spec``'s channels as the job reads them, its code, and its effective spec.

        :param staged_sources: channel -> the S3 prefix staged into its FSx path (SageMaker).
        """
        from airflow_dist_training.spec.backends import backend_record
        from airflow_dist_training.spec.training import S3Channel

        on_aws = backend_record(backend).on_aws  # else the job reads the channels' local sources
        channels: dict[str, dict[str, Any]] = {}
        unknown = False
        for name, channel in spec.channels.items():
            source: str | None = None
            if not on_aws and channel.local_source:
                source = channel.local_source
            elif staged_sources and name in staged_sources:
                source = staged_sources[name]
            elif isinstance(channel, S3Channel):
                source = channel.uri
            if source is None or (on_aws and uri_scheme(source) != "s3"):
                unknown = True  # an FSx/EFS channel we did not stage: its content is not listable here
                channels[name] = {"fingerprint": None, "source": getattr(channel, "directory_path", None)}
                continue
            channels[name] = self.channel_fingerprint(source, base_dir)
        return Lineage(
            data_fingerprint=None if unknown else data_fingerprint(channels),
            code_hash=self.code_hash(
                spec.source.source_dir, spec.source.entry_point, base_dir, spec.source.dependencies
            ),
            spec_hash=spec_hash(spec.model_dump(mode="json", exclude_unset=True), settings),
            channels=channels,
        )

    @cached_property
    def stores(self) -> Stores:
        """The stores of this hook's connection (model artifacts in any registered scheme)."""
        return Stores(StoreOptions(self.aws_conn_id, self.region_name, self.botocore_config))

    def model_exists(self, uri: str) -> bool:
        """Whether a model artifact is still there: the file (``model.tar.gz``) in its folder's
        listing, or a model folder with files in it; through the store of its scheme, read nothing."""
        from airflow_dist_training.storage.location import parent_uri

        name = uri.rstrip("/").rsplit("/", 1)[-1]
        store, parent = self.stores.parse(parent_uri(uri), "model_uri")
        listing = store.list_tree(parent)
        if name in listing:
            return True
        store, folder = self.stores.parse(uri, "model_uri")
        return bool(store.list_tree(folder))

    @contextlib.contextmanager
    def _open(self, uri: str) -> Iterator[IO[bytes]]:
        """A readable binary file of the artifact (a remote one is downloaded to a temporary file,
        never held in memory)."""
        store, loc = self.stores.parse(uri, "model_uri", directory=False)
        path = store.local_path(loc)
        with tempfile.TemporaryDirectory() as tmp:
            if path is None:
                path = Path(tmp) / "artifact"
                store.get_file(loc, path)
            with path.open("rb") as fh:
                yield fh

    def model_digest(self, uri: str) -> str:
        """sha256 of a model's bytes; for a ``.tar.gz``/``.tar`` of the members' names and bytes
        (an archive's timestamps differ between two packings of the same files)."""
        with self._open(uri) as fh:
            try:
                with tarfile.open(fileobj=fh, mode="r:*") as tar:
                    digest = hashlib.sha256()
                    members = sorted((m for m in tar.getmembers() if m.isfile()), key=lambda m: m.name)
                    for member in members:
                        data = tar.extractfile(member)
                        assert data is not None
                        digest.update(member.name.encode() + b"\0" + _sha256(data).digest())
                    return "tar-sha256:" + digest.hexdigest()
            except tarfile.TarError:
                fh.seek(0)
                return "sha256:" + _sha256(fh).hexdigest()

    def same_model(self, challenger_uri: str, champion_uri: str) -> bool:
        """Whether two model artifacts hold byte-identical model files."""
        return challenger_uri == champion_uri or self.model_digest(challenger_uri) == self.model_digest(champion_uri)
