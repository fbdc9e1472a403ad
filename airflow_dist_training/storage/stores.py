"""The storage protocol and its registry (imported through :mod:`airflow_dist_training.storage`,
whose docstring says how a store is added)."""

from __future__ import annotations

import contextlib
import importlib
import os
import posixpath
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from airflow_dist_training.errors import SpecValidationError
from airflow_dist_training.spec.records import Records
from airflow_dist_training.storage.location import Location, parse_location

# what a listing knows of one file: (size in bytes, modified as POSIX seconds)
FileStat = tuple[int, float]


class ObjectStore(Protocol):
    """Files under a :class:`Location`. Names passed and returned are relative to that location."""

    def list_dirs(self, loc: Location, name_prefix: str = "", start_after: str | None = None) -> list[str]:
        """Sub directories of ``loc`` named ``name_prefix...`` (one level, sorted; after ``start_after``)."""

    def list_tree(self, loc: Location) -> dict[str, FileStat]:
        """Every file under ``loc`` (relative path -> size, modified)."""

    def read(self, loc: Location) -> tuple[bytes, float] | None:
        """Bytes and modified time of the file at ``loc``, or None when there is none."""

    def write(self, loc: Location, body: bytes, content_type: str | None = None) -> None: ...

    def delete(self, loc: Location, names: Sequence[str]) -> int:
        """Delete files under ``loc`` (missing ones too); returns how many were asked for."""

    def copy(self, src: Location, dst: Location, size: int) -> None:
        """Copy one file within this store."""

    def put_file(self, path: Path, loc: Location) -> None: ...

    def get_file(self, loc: Location, path: Path) -> None: ...

    def local_path(self, loc: Location) -> Path | None:
        """The file system path of ``loc`` when the store is this machine's file system."""

    def check(self, loc: Location) -> None:
        """Refuse a location the store cannot serve as configured (e.g. a bucket in another region)."""


@dataclass(frozen=True)
class StoreOptions:
    """How to reach stores that need a connection (ignored by the others)."""

    aws_conn_id: str | None = "aws_default"
    region_name: str | None = None
    botocore_config: dict[str, Any] | None = None
    verify_region: bool = False  # S3: check once per bucket that it is in the connection's region
    s3_client: Any = None  # a boto3 S3 client to use instead of the connection's


@dataclass(frozen=True)
class StoreScheme:
    """A URI scheme (its ``name``) and how to open its store: the one place to add a store."""

    name: str
    open: Callable[[StoreOptions], ObjectStore]


@dataclass
class Stores:
    """One open store per scheme, for one connection (a hook or a run keeps one)."""

    options: StoreOptions = field(default_factory=StoreOptions)
    _open: dict[str, ObjectStore] = field(default_factory=dict)

    def __call__(self, loc: Location, field_name: str = "uri", uri: str | None = None) -> ObjectStore:
        if loc.scheme not in self._open:
            if (record := STORES.find(loc.scheme)) is None:
                schemes = ", ".join(f"{s}://" for s in sorted(STORES.names()) if s != "file")
                message = f"{uri or loc.uri}: unsupported scheme (use {schemes}, file:///dir or /dir)"
                raise SpecValidationError([(field_name, message)])
            self._open[loc.scheme] = record.open(self.options)
        return self._open[loc.scheme]

    def parse(self, uri: str, field_name: str = "uri", *, directory: bool = True) -> tuple[ObjectStore, Location]:
        loc = parse_location(uri, field_name, directory=directory)
        store = self(loc, field_name, uri.strip())
        store.check(loc)
        return store, loc


def copy_between(src_store: ObjectStore, src: Location, dst_store: ObjectStore, dst: Location, size: int) -> None:
    """Copy one file, within a store or across two (through a local file when neither is local)."""
    if src_store is dst_store:
        src_store.copy(src, dst, size)
    elif (path := src_store.local_path(src)) is not None:
        dst_store.put_file(path, dst)
    elif (path := dst_store.local_path(dst)) is not None:
        src_store.get_file(src, path)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            src_store.get_file(src, Path(tmp) / "object")
            dst_store.put_file(Path(tmp) / "object", dst)


def get_tree(store: ObjectStore, loc: Location, dest: Path) -> int:
    """Copy every file under ``loc`` into ``dest``; returns the number of files."""
    files = [
        rel
        for rel in store.list_tree(loc)
        if ".." not in rel.split("/") and not rel.endswith("/") and (rel or not loc.prefix.endswith("/"))
    ]
    for rel in files:  # "": ``loc`` is one file; "/...": ``loc`` is a key prefix without its slash
        store.get_file(loc.join(rel) if rel else loc, dest / (rel.lstrip("/") or posixpath.basename(loc.prefix)))
    return len(files)


def local_files(root: Path) -> list[tuple[Path, str]]:
    """The files under ``root`` with their names relative to it (sorted; no ``__pycache__``)."""
    return [
        (p, p.relative_to(root).as_posix()) for p in sorted(root.rglob("*")) if p.is_file() and "__pycache__" not in p.parts
    ]


def put_tree(store: ObjectStore, loc: Location, files: Sequence[tuple[Path, str]]) -> int:
    """Upload ``(local file, relative name)`` pairs under ``loc``; returns the count."""
    for path, rel in files:
        store.put_file(path, loc.join(rel))
    return len(files)


def atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class LocalStore:
    """This machine's file system (``file`` locations); writes are atomic (temp file + rename)."""

    def list_dirs(self, loc: Location, name_prefix: str = "", start_after: str | None = None) -> list[str]:
        if not loc.path.is_dir():
            return []
        with os.scandir(loc.path) as entries:
            names = [e.name for e in entries if e.is_dir() and e.name.startswith(name_prefix)]
        return sorted(n for n in names if start_after is None or n > start_after)

    def list_tree(self, loc: Location) -> dict[str, FileStat]:
        base = loc.path
        if base.is_file():
            st = base.stat()
            return {"": (st.st_size, st.st_mtime)}
        return {
            p.relative_to(base).as_posix(): (st.st_size, st.st_mtime)
            for p in (base.rglob("*") if base.is_dir() else ())
            if p.is_file() and (st := p.stat())
        }

    def read(self, loc: Location) -> tuple[bytes, float] | None:
        try:
            return loc.path.read_bytes(), loc.path.stat().st_mtime
        except FileNotFoundError:
            return None

    def write(self, loc: Location, body: bytes, content_type: str | None = None) -> None:
        atomic_write(loc.path, body)

    def delete(self, loc: Location, names: Sequence[str]) -> int:
        for name in names:
            path = Path(loc.key(name))
            path.unlink(missing_ok=True)
            # no empty folder is left behind (a deleted checkpoint's directory goes too)
            for parent in path.parents:
                if parent == loc.path or not parent.is_relative_to(loc.path) or not parent.is_dir() or any(parent.iterdir()):
                    break
                with contextlib.suppress(OSError):  # a writer just put a file there
                    parent.rmdir()
        return len(names)

    def copy(self, src: Location, dst: Location, size: int) -> None:
        self.put_file(src.path, dst)

    def put_file(self, path: Path, loc: Location) -> None:
        loc.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = loc.path.with_name(f".{loc.path.name}.tmp-{os.getpid()}")
        shutil.copy2(path, tmp)
        os.replace(tmp, loc.path)

    def get_file(self, loc: Location, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(loc.path, path)  # keeps the mode: a shell entry point stays executable

    def local_path(self, loc: Location) -> Path | None:
        return loc.path

    def check(self, loc: Location) -> None:
        pass


def _open_s3(options: StoreOptions) -> ObjectStore:
    # by name: storage.s3 builds on this module, and boto3 is loaded only when S3 is used
    return importlib.import_module("airflow_dist_training.storage.s3").S3Store(options)  # type: ignore[no-any-return]


STORES = Records(
    StoreScheme, "store", "stores", builtin=[StoreScheme("file", lambda _options: LocalStore()), StoreScheme("s3", _open_s3)]
)
register_store = STORES.register
unregister_store = STORES.forget
