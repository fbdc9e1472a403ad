"""Where the local executor reads and writes the S3 URIs a ``CreateTrainingJob`` request names.

A mount is a URI prefix bound to a local directory or any registered store's location (the spec's
``local_source``/``local_uri``; FSx/EFS channels through mounts keyed ``fsx://<id>/<directory>``).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from airflow_dist_training.storage import ObjectStore, StoreOptions, Stores, get_tree
from airflow_dist_training.storage.location import Location, local_location, parse_location, split_uri


class RequestStore:
    """A request's S3 URIs on this machine: mounts, then real S3 (``s3``), then ``<root>/<bucket>/<key>``.

    :param root: the folder standing in for buckets (created on first write).
    :param s3: how to reach real S3 (the task's connection: ``StoreOptions``); ``None`` keeps
        everything local.
    :param mounts: ``{uri prefix: local directory or store URI}``; the longest matching prefix wins.
    """

    def __init__(
        self,
        root: str | Path,
        *,
        s3: StoreOptions | None = None,
        mounts: Mapping[str, str | Path | Location] | None = None,
        stores: Stores | None = None,
    ) -> None:
        self.root = Path(root).absolute()
        self.s3 = s3
        self.mounts = {k.rstrip("/"): _mount_target(v) for k, v in (mounts or {}).items()}
        # one open store per scheme, shared by the copies ``with_mounts`` makes
        self.stores = stores or Stores(s3 or StoreOptions(aws_conn_id=None))

    def with_mounts(self, mounts: Mapping[str, str | Path | Location]) -> RequestStore:
        return RequestStore(self.root, s3=self.s3, mounts={**self.mounts, **mounts}, stores=self.stores)

    def resolve(self, uri: str) -> Location:
        """Where ``uri`` is: a local path (a mount, ``file://``, the bucket folder) or an S3 key."""
        uri = uri.rstrip("/") if uri.endswith("/") and uri.count("/") > 3 else uri
        for prefix in sorted(self.mounts, key=len, reverse=True):
            if uri == prefix or uri.startswith(prefix + "/"):
                rest = uri[len(prefix) :].lstrip("/")
                return self.mounts[prefix].join(rest) if rest else self.mounts[prefix]
        scheme, bucket, key = split_uri(uri)
        if scheme == "file" and uri.startswith("file://"):
            return local_location(Path(key))
        if scheme != "s3":
            raise ValueError(f"{uri!r} is not an s3:// URI and matches no local mount")
        if self.s3 is not None:
            return Location("s3", bucket, key)
        return local_location(self.root / bucket / key if key else self.root / bucket)

    def _open(self, uri: str) -> tuple[ObjectStore, Location]:
        loc = self.resolve(uri)
        return self.stores(loc), loc

    def local_uri(self, uri: str) -> str:
        """What a user can open: ``file://`` for a local location, the S3 URI otherwise."""
        return self.resolve(uri).as_uri()

    # -- reads
    def get_prefix(self, uri: str, dest: Path) -> int:
        """Copy an S3Prefix (or a single object) into ``dest``; returns the number of files."""
        dest.mkdir(parents=True, exist_ok=True)
        store, loc = self._open(uri)
        count = get_tree(store, loc, dest)
        path = store.local_path(loc)
        if count == 0 and not (path is not None and path.is_dir()):  # an empty folder is an empty channel
            raise FileNotFoundError(f"{uri}: no such object or prefix" + (f" ({path})" if path else ""))
        return count

    def get_file(self, uri: str, dest: Path) -> None:
        store, loc = self._open(uri)
        store.get_file(loc, dest)

    # -- writes
    def put_file(self, path: Path, uri: str) -> str:
        store, loc = self._open(uri)
        store.put_file(path, loc)
        return self.local_uri(uri)

    def put_bytes(self, data: bytes, uri: str) -> str:
        store, loc = self._open(uri)
        store.write(loc, data)
        return self.local_uri(uri)


def _mount_target(target: str | Path | Location) -> Location:
    """A mount's target: a local directory (made absolute) or a directory in a registered store."""
    loc = target if isinstance(target, Location) else parse_location(str(target), "mount", directory=False)
    return local_location(loc.path.absolute()) if loc.is_local else loc.as_dir()
