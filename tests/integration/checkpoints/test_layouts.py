"""Every layout (DCP, Hugging Face Trainer, single file, the provider's manifest) is found, ranked,
resumed from, retained, promoted, watched and moved aside, on a local path and on S3 (moto).

The checkpoints are written by the real writers (``tests/checkpoint_layouts.py``) and uploaded as
they are; the hook reads them without torch and never unpickles a byte.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from airflow_dist_training.checkpoints.retention import RetentionRule
from airflow_dist_training.errors import SpecValidationError
from airflow_dist_training.hooks.checkpoints import CheckpointHook
from airflow_dist_training.storage import local_files, put_tree
from tests import checkpoint_layouts as w

from .conftest import BUCKET, backend_put

pytestmark = pytest.mark.integration

# layout -> (writer of the root, newest complete step, the incomplete step and its reason)
ROOTS: dict[str, Callable[[Path], None]] = {}


def _dcp(root: Path) -> None:
    for step, loss in [(100, 0.5), (200, 0.1), (250, 0.9), (300, 0.3)]:
        w.write_dcp(root, step, loss=loss)
    w.write_dcp(root, 400, complete=False)


def _hf(root: Path) -> None:
    w.write_hf(root, 500, loss=0.4)
    w.write_hf(root, 1000, loss=0.2, sharded=True)
    w.write_hf(root, 1250, loss=0.9)
    w.write_hf(root, 1500, loss=0.3)
    w.write_hf(root, 2000, drop=("optimizer.pt",))


def _single(root: Path) -> None:
    for step in (10, 20, 25, 30):
        w.write_single(root, step, epoch=step // 10)
    w.write_single(root, 40, epoch=4, complete=False)


def _manifest(root: Path) -> None:
    for step, loss in [(1, 0.5), (2, 0.1), (3, 0.9), (4, 0.3)]:
        w.write_manifest(root, step, loss=loss)
    w.write_manifest(root, 5, complete=False)


WRITERS = {"dcp": _dcp, "hf-trainer": _hf, "single-file": _single, "manifest": _manifest}
# newest complete, incomplete (name, reason), the metric to rank by
EXPECTED = {
    "dcp": (300, "step-000000000400", "__0_0.distcp: 100 bytes, .metadata references", "loss"),
    "hf-trainer": (1500, "checkpoint-2000", "no optimizer state", "eval_loss"),
    "single-file": (30, "epoch=4-step=40.ckpt", "empty file", None),
    "manifest": (4, "step-000000000005", "no _MANIFEST.json", "loss"),
}


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each layout's root, written once (the tests copy it)."""
    base = tmp_path_factory.mktemp("layouts")
    for layout, write in WRITERS.items():
        write(base / layout)
    return base


@pytest.fixture(params=["file", "s3"])
def place(request: pytest.FixtureRequest, tmp_path: Path, written: Path) -> Callable[[str], str]:
    """``place(layout)``: a fresh copy of that layout's root in the store; returns its URI."""

    def put(layout: str) -> str:
        if request.param == "file":
            shutil.copytree(written / layout, tmp_path / layout)
            return str(tmp_path / layout)
        request.getfixturevalue("s3")
        for path, rel in local_files(written / layout):  # straight into moto's backend: fast
            backend_put(BUCKET, f"{layout}/{rel}", path.read_bytes())
        return f"s3://{BUCKET}/{layout}/"

    return put


def test_a_single_file_checkpoint_is_promoted_into_a_directory(place: Callable[[str], str]) -> None:
    root = place("single-file")
    hook = CheckpointHook(aws_conn_id=None, region_name="us-east-1", layout="single-file")
    target = root.rstrip("/") + "-promoted/"
    entry = hook.promote(root, "latest", target)
    assert (entry["step"], entry["layout"], entry["source_uri"].rsplit("/", 1)[-1]) == (
        30,
        "single-file",
        "epoch=3-step=30.ckpt",
    )
    assert hook.holds_checkpoint(target)
    assert hook.promote(root, 20, target)["step"] == 20  # replaces it: the stale file goes
    store, loc = hook.stores.parse(target)
    assert list(store.list_tree(loc)) == ["epoch=2-step=20.ckpt"]


@pytest.mark.parametrize("layout", list(WRITERS))
def test_latest_listing_and_move_aside_for_each_layout(place: Callable[[str], str], layout: str) -> None:
    root = place(layout)
    newest, bad, reason, _metric = EXPECTED[layout]
    for name in ("auto", layout):
        hook = CheckpointHook(aws_conn_id=None, region_name="us-east-1", layout=name)
        latest = hook.latest_complete(root)
        assert latest is not None and (latest.step, latest.layout) == (newest, layout)
    before = {info.name: info for info in hook.scan(root)}
    assert all(info.layout == layout for info in before.values())
    assert [n for n, info in before.items() if not info.complete] == [bad]
    assert reason in "; ".join(before[bad].reasons)
    # before a relaunch: only the incomplete one is moved aside, every complete one stays as it was
    moved = hook.move_aside_incomplete(root)
    assert [(m["name"], m["moved"]) for m in moved] == [(bad, True)]
    assert moved[0]["to"].rstrip("/").endswith(f"_incomplete/{bad}")
    after = {info.name: info for info in hook.scan(root)}
    assert set(after) == set(before) - {bad} and all(info.complete for info in after.values())
    assert [(i.step, i.size) for i in after.values()] == [
        (i.step, i.size) for n, i in before.items() if n != bad
    ]
    assert hook.move_aside_incomplete(root) == []


@pytest.mark.parametrize("layout", ["dcp", "hf-trainer"])
def test_retention_keeps_latest_best_and_promoted_twice_in_a_row(
    place: Callable[[str], str], layout: str
) -> None:
    root = place(layout)
    hook = CheckpointHook(aws_conn_id=None, region_name="us-east-1", layout=layout)
    metric = EXPECTED[layout][3]
    oldest = min(info.step for info in hook.scan(root))
    target = root.rstrip("/") + "-promoted/champion/"
    entry = hook.promote(root, oldest, target)
    assert (entry["step"], entry["layout"]) == (oldest, layout)
    assert hook.holds_checkpoint(target)  # what warm start checks
    plan = hook.apply_retention(root, RetentionRule(keep_last=1, keep_best=1, metric=metric))
    steps = sorted(info.step for info in hook.scan(root))
    # the worst (250 / 1250) goes; the promoted oldest, the best, the newest and the newer partial stay
    assert plan.delete == ((250,) if layout == "dcp" else (1250,))
    assert steps == ([100, 200, 300, 400] if layout == "dcp" else [500, 1000, 1500, 2000])
    assert "promoted" in plan.keep[oldest] and "best" in plan.keep[200 if layout == "dcp" else 1000]
    assert hook.apply_retention(root, RetentionRule(keep_last=1, keep_best=1, metric=metric)).delete == ()


def test_unparseable_files_are_named_and_never_moved_or_deleted(
    place: Callable[[str], str], written: Path
) -> None:
    root = place("dcp")
    hook = CheckpointHook(aws_conn_id=None, region_name="us-east-1", layout="dcp")
    store, loc = hook.stores.parse(root)
    metadata = loc.child("step-000000000300").join(".metadata")
    raw = (written / "dcp" / "step-000000000300" / ".metadata").read_bytes()
    store.write(metadata, raw[: len(raw) // 2])  # a truncated .metadata
    with pytest.raises(SpecValidationError) as error:
        hook.latest_complete(root)
    assert str(error.value).startswith(f"{metadata.uri}: not readable DCP metadata: ")
    assert "(corrupt or truncated)" in str(error.value)
    with pytest.raises(SpecValidationError, match="not readable DCP metadata"):
        hook.apply_retention(root, RetentionRule(keep_last=1))
    moved = {m["name"]: m["moved"] for m in hook.move_aside_incomplete(root)}
    assert moved == {"step-000000000300": False, "step-000000000400": True}
    assert store.read(metadata) is not None  # left in place


def test_mixed_layouts_under_auto_are_a_clear_error(place: Callable[[str], str], tmp_path: Path) -> None:
    root = place("dcp")
    hook = CheckpointHook(aws_conn_id=None, region_name="us-east-1")
    store, loc = hook.stores.parse(root)
    w.write_hf(tmp_path / "hf", 5000)
    put_tree(store, loc.child("checkpoint-5000"), local_files(tmp_path / "hf" / "checkpoint-5000"))
    with pytest.raises(SpecValidationError) as error:
        hook.apply_retention(root, RetentionRule(keep_last=1))
    assert str(error.value) == (
        f"checkpoint.layout: {loc.uri} holds checkpoints of 2 layouts under 'auto' (dcp: step-000000000100, "
        "step-000000000200, step-000000000250; hf-trainer: checkpoint-5000); set checkpoint.layout (or --layout) "
        "to the one the training script writes"
    )
    assert {i.layout for i in hook.scan(root)} == {"dcp", "hf-trainer"}  # a listing still shows both
    dcp = CheckpointHook(aws_conn_id=None, region_name="us-east-1", layout="dcp")
    assert dcp.latest_complete(root).step == 300  # type: ignore[union-attr]


def test_freshness_reads_the_newest_complete_checkpoint_of_any_layout(place: Callable[[str], str]) -> None:
    from airflow_dist_training.sensors.checkpoints import CheckpointFreshnessSensor

    root = place("hf-trainer")
    sensor = CheckpointFreshnessSensor(
        task_id="watch", checkpoint_uri=root, max_age=3600, aws_conn_id=None, region_name="us-east-1"
    )
    freshness, latest = sensor.check({})
    assert not freshness.stale and freshness.step == 1500 and latest is not None
    assert latest["layout"] == "hf-trainer" and latest["metrics"]["eval_loss"] == 0.3
    stale, _ = sensor.check({}, now=latest["manifest_modified"] + 7200)
    assert stale.stale and "step 1500" in stale.message


def test_the_relaunch_step_moves_partial_checkpoints_aside_and_logs_them(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the training operator runs before a retry or a spot replacement starts the run's next job."""
    from airflow_dist_training.operators.training import DistributedTrainingOperator
    from airflow_dist_training.planning import RunPlan

    run = tmp_path / "run"
    w.write_hf(run, 500)
    w.write_hf(run, 1000, drop=("scheduler.pt",))  # killed mid-save: the newest folder is partial
    op = DistributedTrainingOperator(
        task_id="train", spec="examples/specs/local_demo.yaml", backend="local", checkpoint_resume="latest"
    )
    op._plan = RunPlan(
        spec={"checkpoint": {"s3_uri": "s3://b/ck/", "layout": "hf-trainer"}},
        backend="local",
        remote=False,
        region="us-east-1",
        identity="run-1",
        checkpoint_resume="latest",
        run_checkpoint_uri=str(run),
    )
    import logging

    # the task log, as a stdlib logger caplog sees (Airflow's own goes to the task's log file)
    monkeypatch.setattr(type(op), "log", property(lambda _: logging.getLogger("relaunch")))
    with caplog.at_level("INFO"):
        op._prepare_run_checkpoints()
    assert sorted(p.name for p in run.iterdir()) == ["_incomplete", "checkpoint-500"]
    assert (run / "_incomplete" / "checkpoint-1000" / "trainer_state.json").is_file()
    assert (
        f"Moved the incomplete checkpoint {run}/checkpoint-1000 aside to {run}/_incomplete/checkpoint-1000 ("
        in caplog.text
    )
    assert "no scheduler.pt" in caplog.text
    assert (
        f"Resuming from this run's own checkpoint {run}/checkpoint-500 (hf-trainer, step 500)" in caplog.text
    )
