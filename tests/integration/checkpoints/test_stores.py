"""Checkpoint semantics are the same in every store: local paths, S3 (moto) and a toy in-memory store.

The toy store (``tests/toy_store.py``) is defined only in the tests and registered for ``mem://``
without editing any other module: what a third-party store needs is the protocol and one
``register_store`` call.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from airflow_dist_training.checkpointing import CheckpointWriter, latest_complete_checkpoint
from airflow_dist_training.checkpoints.retention import RetentionRule
from airflow_dist_training.errors import SpecValidationError
from airflow_dist_training.hooks.checkpoints import CheckpointHook
from airflow_dist_training.storage import put_tree
from tests.toy_store import MemoryStore, memory_store_registered

from .conftest import BUCKET

pytestmark = pytest.mark.integration


@pytest.fixture
def memory_store() -> Iterator[MemoryStore]:
    with memory_store_registered() as store:
        yield store


Put = Callable[..., str]


@pytest.fixture(params=["file", "s3", "mem"])
def store_root(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[CheckpointHook, str, Put]:
    """A hook, a checkpoint root in the store, and ``put(step, ...)`` writing a checkpoint there."""
    if request.param == "s3":
        request.getfixturevalue("s3")
        base = f"s3://{BUCKET}/"
    elif request.param == "mem":
        request.getfixturevalue("memory_store")
        base = "mem://bucket/"
    else:
        base = f"{tmp_path}/store/"
    hook = CheckpointHook(aws_conn_id=None, region_name="us-east-1")
    root = base + "pipe/run1/"

    def put(
        step: int,
        *,
        files: dict[str, bytes] | None = None,
        metrics: dict[str, float] | None = None,
        skip: Sequence[str] = (),
        truncate: Sequence[str] = (),
        where: str = root,
    ) -> str:
        files = files if files is not None else {"model.pt": b"m" * 10, "optim/rank0.pt": b"o" * 5}
        store, loc = hook.stores.parse(where)
        with tempfile.TemporaryDirectory() as tmp:
            with CheckpointWriter(Path(tmp), rank=0, checksums=False, fsync=False).checkpoint(
                step=step, epoch=1, metrics=metrics or {}, world_size=1
            ) as directory:
                for rel, body in files.items():
                    (directory / rel).parent.mkdir(parents=True, exist_ok=True)
                    (directory / rel).write_bytes(body)
            written = []
            for path in sorted(Path(tmp).rglob("*")):
                rel = path.relative_to(tmp).as_posix()
                if path.is_file() and rel.partition("/")[2] not in skip:
                    if rel.partition("/")[2] in truncate:
                        path.write_bytes(path.read_bytes()[:2])
                    written.append((path, rel))
            put_tree(store, loc, written)
        return hook.stores.parse(where)[1].child(f"step-{step:012d}").uri

    return hook, root, put


def test_latest_complete_skips_partial_checkpoints(store_root: tuple[CheckpointHook, str, Put]) -> None:
    hook, root, put = store_root
    assert hook.latest_complete(root) is None and hook.scan(root) == []
    for step in (100, 200, 300):
        put(step, metrics={"loss": 1 / step})
    put(400, truncate=["model.pt"])  # the manifest landed before model.pt finished
    put(500, skip=["_MANIFEST.json"])  # still uploading
    for use_hint in (True, False):
        info = hook.latest_complete(root, use_hint=use_hint)
        assert info is not None and info.step == 300 and info.metrics == {"loss": 1 / 300}
    assert [(c.step, c.complete) for c in hook.scan(root)] == [
        (500, False),
        (400, False),
        (300, True),
        (200, True),
        (100, True),
    ]


def test_retention_and_promotion(store_root: tuple[CheckpointHook, str, Put]) -> None:
    hook, root, put = store_root
    target = root.replace("pipe/run1/", "models/champion/")
    for step, loss in [(1, 0.3), (2, 0.1), (3, 0.2), (4, 0.4)]:
        put(step, metrics={"loss": loss})
    entry = hook.promote(root, "best", target, metric="loss", mode="min")
    assert (entry["step"], entry["which"]) == (2, "best")
    assert hook.holds_checkpoint(target)
    assert hook.read_promotions(root)["current"]["step"] == 2
    plan = hook.apply_retention(root, RetentionRule(keep_last=1))
    assert plan.delete == (3, 1) and "promoted" in plan.keep[2]
    assert [c.step for c in hook.scan(root)] == [4, 2]
    # a new promotion replaces the stable copy: stale files go
    put(9, files={"only.pt": b"1"})
    hook.promote(root, 9, target)
    store, loc = hook.stores.parse(target)
    assert sorted(store.list_tree(loc)) == ["_MANIFEST.json", "only.pt"]
    assert hook.promote(root, "latest", target)["step"] == 9


def test_copy_refuses_incomplete_and_manifest_errors_name_the_file(
    store_root: tuple[CheckpointHook, str, Put],
) -> None:
    hook, root, put = store_root
    src = put(7, skip=["model.pt"])
    with pytest.raises(SpecValidationError, match=r"not a complete checkpoint: .*model.pt: missing"):
        hook.copy_checkpoint(src, root + "copy/step-000000000007/")
    good = put(8)
    store, loc = hook.stores.parse(good)
    manifest = json.loads(store.read(loc.join("_MANIFEST.json"))[0])  # type: ignore[index]
    manifest["files"] = "model.pt"
    store.write(loc.join("_MANIFEST.json"), json.dumps(manifest).encode())
    info = hook.inspect(good)  # reported, not raised: the CLI lists it with its reason
    assert not info.complete and info.reasons == [
        f"{good.rstrip('/')}/_MANIFEST.json:files: must be a list, got str"
    ]
    with pytest.raises(SpecValidationError, match=r"_MANIFEST.json:files: must be a list, got str"):
        hook.copy_checkpoint(good, root + "copy/step-000000000008/")


def test_a_checkpoint_crosses_stores(memory_store: MemoryStore, tmp_path: Path) -> None:
    hook = CheckpointHook(aws_conn_id=None, region_name="us-east-1")
    with CheckpointWriter(tmp_path / "local", rank=0).checkpoint(step=8, metrics={"loss": 1.0}) as d:
        (d / "model.pt").write_bytes(b"abc")
    up = hook.copy_checkpoint(str(tmp_path / "local" / "step-000000000008"), "mem://b/up/step-000000000008/")
    assert up.uri == "mem://b/up/step-000000000008/" and hook.latest_complete("mem://b/up/").step == 8  # type: ignore[union-attr]
    back = hook.copy_checkpoint(up.uri, f"file://{tmp_path}/down/step-000000000008")
    assert back.step == 8
    assert latest_complete_checkpoint(tmp_path / "down").name == "step-000000000008"  # type: ignore[union-attr]


def test_an_unknown_scheme_is_a_clear_error() -> None:
    with pytest.raises(SpecValidationError) as info:
        CheckpointHook(aws_conn_id=None).latest_complete("gs://bucket/run/")
    assert str(info.value) == "uri: gs://bucket/run/: unsupported scheme (use s3://, file:///dir or /dir)"


def test_the_local_checkpoint_sync_works_with_any_store(memory_store: MemoryStore, tmp_path: Path) -> None:
    from airflow_dist_training.local.launcher import sync_dir
    from airflow_dist_training.storage import Stores
    from airflow_dist_training.storage.location import local_location, parse_location

    local, remote, stores = local_location(tmp_path / "ckpt"), parse_location("mem://bucket/sync"), Stores()
    synced: dict[str, tuple[int, float]] = {}
    state = tmp_path / "ckpt" / "last.pt"
    state.parent.mkdir()
    state.write_bytes(b"epoch-1")
    assert sync_dir(local, remote, synced, stores) == 1
    assert sync_dir(local, remote, synced, stores) == 0  # unchanged: not copied again
    state.write_bytes(b"epoch-2")  # same size, rewritten
    assert sync_dir(local, remote, synced, stores) == 1
    assert memory_store.objects[("bucket", "sync/last.pt")][0] == b"epoch-2"
    restored, memory = local_location(tmp_path / "restored"), {}
    assert sync_dir(remote, restored, memory, stores) == 1
    assert sync_dir(restored, remote, memory, stores) == 0  # restored: not pushed back
    assert (tmp_path / "restored" / "last.pt").read_bytes() == b"epoch-2"
