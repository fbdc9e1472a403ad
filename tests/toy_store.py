"""A toy object store defined only in the tests: objects in a dict, registered for ``mem://``.

What a third-party store needs is the storage protocol and one ``register_store`` call; no other
module is edited. The checkpoint tests run their semantics on it, the DAG test runs the shipped DAG
with its checkpoints and models in it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from airflow_dist_training.storage import FileStat, StoreScheme, register_store, unregister_store
from airflow_dist_training.storage.location import Location


class MemoryStore:
    """Objects in a dict: ``(bucket, key) -> (bytes, modified)``. The whole store is this class."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str], tuple[bytes, float]] = {}

    def list_dirs(self, loc: Location, name_prefix: str = "", start_after: str | None = None) -> list[str]:
        names = {
            key[len(loc.prefix) :].split("/", 1)[0]
            for bucket, key in self.objects
            if bucket == loc.bucket
            and key.startswith(loc.prefix + name_prefix)
            and "/" in key[len(loc.prefix) :]
        }
        return sorted(n for n in names if start_after is None or n > start_after)

    def list_tree(self, loc: Location) -> dict[str, FileStat]:
        return {
            key[len(loc.prefix) :]: (len(body), modified)
            for (bucket, key), (body, modified) in self.objects.items()
            if bucket == loc.bucket and key.startswith(loc.prefix)
        }

    def read(self, loc: Location) -> tuple[bytes, float] | None:
        return self.objects.get((loc.bucket, loc.prefix))

    def write(self, loc: Location, body: bytes, content_type: str | None = None) -> None:
        self.objects[(loc.bucket, loc.prefix)] = (body, time.time())

    def delete(self, loc: Location, names: Sequence[str]) -> int:
        for name in names:
            self.objects.pop((loc.bucket, loc.key(name)), None)
        return len(names)

    def copy(self, src: Location, dst: Location, size: int) -> None:
        self.write(dst, self.objects[(src.bucket, src.prefix)][0])

    def put_file(self, path: Path, loc: Location) -> None:
        self.write(loc, path.read_bytes())

    def get_file(self, loc: Location, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(self.objects[(loc.bucket, loc.prefix)][0])

    def local_path(self, loc: Location) -> Path | None:
        return None

    def check(self, loc: Location) -> None:
        pass


@contextmanager
def memory_store_registered() -> Iterator[MemoryStore]:
    """A fresh :class:`MemoryStore` registered for ``mem://`` while the block runs."""
    store = MemoryStore()
    register_store(StoreScheme("mem", lambda _options: store))
    try:
        yield store
    finally:
        unregister_store("mem")
