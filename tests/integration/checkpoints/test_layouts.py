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


def _single_metric(root: Path) -> None:
    """Lightning's ``ModelCheckpoint(filename="{epoch}-{step}-{val_loss}")`` names."""
    for step, loss in [(10, "0.50"), (20, "0.10"), (25, "0.90"), (30, "0.30")]:
        w.write_single(root, step, epoch=step // 10).rename(
            root / f"epoch={step // 10}-step={step}-val_loss={loss}.ckpt"
        )
    (root / "epoch=4-step=40-val_loss=0.01.ckpt").write_bytes(b"")  # killed mid-write


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
    _single_metric(base / "single-file-metric")
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


# layout -> what keep_last 1 + keep_best 1 (+ the promoted oldest) deletes, leaves, and the best
RETAINED = {
    "dcp": ((250,), [100, 200, 300, 400], 200),
    "hf-trainer": ((1250,), [500, 1000, 1500, 2000], 1000),
    "manifest": ((3,), [1, 2, 4, 5], 2),
}


@pytest.mark.parametrize("layout", list(RETAINED))
def test_retention_keeps_latest_best_and_promoted_twice_in_a_row(
    place: Callable[[str], str], layout: str
) -> None:
    root = place(layout)
    hook = CheckpointHook(aws_conn_id=None, region_name="us-east-1", layout=layout)
    metric = EXPECTED[layout][3]
    deleted, left, best = RETAINED[layout]
    oldest = min(info.step for info in hook.scan(root))
    target = root.rstrip("/") + "-promoted/champion/"
    entry = hook.promote(root, oldest, target)
    assert (entry["step"], entry["layout"]) == (oldest, layout)
    assert hook.holds_checkpoint(target)  # what warm start checks
    plan = hook.apply_retention(root, RetentionRule(keep_last=1, keep_best=1, metric=metric))
    steps = sorted(info.step for info in hook.scan(root))
    # the worst goes; the promoted oldest, the best, the newest and the newer partial stay
    assert (plan.delete, steps) == (deleted, left)
    assert "promoted" in plan.keep[oldest] and "best" in plan.keep[best]
    assert hook.apply_retention(root, RetentionRule(keep_last=1, keep_best=1, metric=metric)).delete == ()


LIGHTNING_NAME = "epoch={epoch}-step={step}-val_loss={val_loss}.ckpt"  # ModelCheckpoint(filename=...)


def test_single_file_checkpoints_are_ranked_by_the_metric_in_their_name_retained_and_promoted(
    place: Callable[[str], str],
) -> None:
    """Lightning's ``ModelCheckpoint(filename="{epoch}-{step}-{val_loss}")``: the metric is in the
    name (checkpoint.step_pattern). The best complete file is promoted, never the empty newer one,
    and retention keeps the newest, the best and the promoted one, twice in a row."""
    root = place("single-file-metric")
    hook = CheckpointHook(
        aws_conn_id=None, region_name="us-east-1", layout="single-file", step_pattern=LIGHTNING_NAME
    )
    scanned = {i.step: i for i in hook.scan(root)}
    assert {s: (i.complete, i.metrics.get("val_loss")) for s, i in scanned.items()} == {
        10: (True, 0.5),
        20: (True, 0.1),
        25: (True, 0.9),
        30: (True, 0.3),
        40: (False, 0.01),
    }
    target = root.rstrip("/") + "-promoted/"
    entry = hook.promote(root, "best", target, metric="val_loss")
    assert (entry["step"], entry["layout"], entry["metrics"]) == (20, "single-file", {"val_loss": 0.1})
    for deleted in ((25, 10), ()):  # the second pass finds nothing more to delete
        plan = hook.apply_retention(root, RetentionRule(keep_last=1, keep_best=1, metric="val_loss"))
        assert plan.delete == deleted
    assert sorted(i.step for i in hook.scan(root)) == [20, 30, 40]
    store, loc = hook.stores.parse(target)
    assert list(store.list_tree(loc)) == ["epoch=2-step=20-val_loss=0.10.ckpt"]


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


@pytest.mark.parametrize("layout", list(WRITERS))
def test_freshness_reads_the_newest_complete_checkpoint_of_any_layout(
    place: Callable[[str], str], layout: str
) -> None:
    from airflow_dist_training.sensors.checkpoints import CheckpointFreshnessSensor

    root = place(layout)
    newest = EXPECTED[layout][0]
    sensor = CheckpointFreshnessSensor(
        task_id="watch", checkpoint_uri=root, max_age=3600, aws_conn_id=None, region_name="us-east-1"
    )
    freshness, latest = sensor.check({})  # layout auto: the newer partial one is never "fresh"
    assert not freshness.stale and freshness.step == newest and latest is not None
    assert latest["layout"] == layout
    if layout == "hf-trainer":
        assert latest["metrics"]["eval_loss"] == 0.3
    stale, _ = sensor.check({}, now=latest["manifest_modified"] + 7200)
    assert stale.stale and f"step {newest}" in stale.message


# what a promotion killed mid-copy leaves out of the copy
CUT = {
    "dcp": ".metadata",
    "hf-trainer": "optimizer.pt",
    "manifest": "_MANIFEST.json",
    "single-file": "epoch=3-step=30.ckpt",
}


@pytest.mark.parametrize("layout", list(WRITERS))
def test_warm_start_gets_the_previous_runs_newest_complete_checkpoint(
    place: Callable[[str], str], layout: str
) -> None:
    """The retraining pipeline's warm start (``warm_start: promoted``): the previous run's
    ``promote_checkpoint`` (``which="latest"``, layout auto as the spec's default) copies its newest
    complete checkpoint, never the newer partial one; the next run's ``check_changes`` hands the copy
    to the script, and refuses a half copy."""
    from airflow_dist_training.operators.checkpoints import PromoteCheckpointOperator
    from airflow_dist_training.operators.retraining import _promoted_checkpoint
    from airflow_dist_training.retraining.warm_start import warm_start_source

    root = place(layout)  # the previous run's checkpoints: the newest folder is partial
    newest, bad, _reason, _metric = EXPECTED[layout]
    target = root.rstrip("/") + "-promoted/"
    promote = PromoteCheckpointOperator(
        task_id="promote_checkpoint",
        checkpoint_uri=root,
        target_uri=target,
        which="latest",
        aws_conn_id=None,
        region_name="us-east-1",
    )
    entry = promote.execute({})
    source = entry["source_uri"].rstrip("/").rsplit("/", 1)[-1]
    assert (entry["step"], entry["layout"]) == (newest, layout) and source != bad
    hook = CheckpointHook(aws_conn_id=None, region_name="us-east-1")
    store, src = hook.stores.parse(entry["source_uri"])
    _, dst = hook.stores.parse(target)
    if layout == "single-file":
        assert list(store.list_tree(dst)) == [source]
    else:
        assert sorted(store.list_tree(dst)) == sorted(store.list_tree(src))  # the whole checkpoint
    promoted = _promoted_checkpoint(target, None, "us-east-1")
    assert warm_start_source("promoted", champion_model_uri=None, promoted_uri=promoted) == (
        target,
        f"warm start: the promoted checkpoint {target}",
    )
    # a copy cut short (the promotion killed mid-copy) is never handed to a script
    store.delete(dst, [CUT[layout]])
    assert _promoted_checkpoint(target, None, "us-east-1") is None


@pytest.mark.parametrize(
    ("policy", "relaunch"),
    [("latest", True), (None, True), (None, False)],
    ids=["run-scoped", "default-policy-relaunch", "default-policy-first-job"],
)
def test_the_relaunch_step_moves_partial_checkpoints_aside_and_logs_them(
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    policy: str | None,
    relaunch: bool,
) -> None:
    """What the training operator runs before a retry or a spot replacement starts the run's next
    job. Without a resume policy (the operator's default) the job restores the spec's own location,
    shared by every run: a relaunch must not resume a partial checkpoint there either."""
    import logging

    import yaml

    from airflow_dist_training.operators.training import DistributedTrainingOperator
    from airflow_dist_training.planning import RunState, apply_run_state, plan_spec
    from airflow_dist_training.spec.loading import load_spec

    data = yaml.safe_load(Path("examples/specs/local_demo.yaml").read_text())
    data["checkpoint"] = {"s3_uri": "s3://ckpt-bucket/ck/", "local_uri": "ck", "layout": "hf-trainer"}
    spec = load_spec(data)
    op = DistributedTrainingOperator(task_id="train", spec=data, backend="local", checkpoint_resume=policy)
    op._plan = plan_spec(
        spec,
        backend=op.training_backend,
        region="us-east-1",
        identity="run-1",
        checkpoint_resume=policy,
        base_dir=str(tmp_path),  # the relative local_uri is against it
        plan_request=False,
    )
    # the job's checkpoint location: the run's own prefix with a policy, else the spec's own
    run = tmp_path / "ck" / op._plan.job_name_base if policy else tmp_path / "ck"
    w.write_hf(run, 500)
    w.write_hf(run, 1000, drop=("scheduler.pt",))  # killed mid-save: the newest folder is partial
    job = apply_run_state(op._plan, RunState(), state_spec=spec)
    # the task log, as a stdlib logger caplog sees (Airflow's own goes to the task's log file)
    monkeypatch.setattr(type(op), "log", property(lambda _: logging.getLogger("relaunch")))
    with caplog.at_level("INFO"):
        op._prepare_run_checkpoints({}, job, "a spot interruption", relaunch=relaunch)
    if not relaunch:  # a first job: the shared location may be another run's, being written
        assert sorted(p.name for p in run.iterdir()) == ["checkpoint-1000", "checkpoint-500"]
        assert caplog.text == "" and op._resumed_from is None
        return
    assert sorted(p.name for p in run.iterdir()) == ["_incomplete", "checkpoint-500"]
    assert (run / "_incomplete" / "checkpoint-1000" / "trainer_state.json").is_file()
    assert (
        f"Moved the incomplete checkpoint {run}/checkpoint-1000 aside to {run}/_incomplete/checkpoint-1000 ("
        in caplog.text
    )
    assert "no scheduler.pt" in caplog.text
    if policy:
        assert (
            f"Resuming from this run's own checkpoint {run}/checkpoint-500 (hf-trainer, step 500)"
            in caplog.text
        )
    else:
        assert "this run's own" not in caplog.text
        assert (
            f"Resuming from the checkpoint {run}/checkpoint-500 (hf-trainer, step 500) in the spec's "
            "checkpoint location, which every run of the spec shares (checkpoint_resume is not set)"
        ) in caplog.text
    assert op._resumed_from == {
        "job_name": job.name,
        "step": 500,
        "checkpoint_uri": f"{run}/checkpoint-500",
        "after": "a spot interruption",
    }


@pytest.mark.parametrize("layout", ["dcp", "single-file", "manifest"])
def test_the_relaunch_step_resumes_the_newest_complete_checkpoint_of_every_layout(
    tmp_path: Path,
    written: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    layout: str,
) -> None:
    """The relaunch step (above, on Hugging Face checkpoints) on the other layouts: the run's newest
    checkpoint is partial; it is moved aside and the next job resumes from the newest complete one."""
    import logging

    import yaml

    from airflow_dist_training.operators.training import DistributedTrainingOperator
    from airflow_dist_training.planning import RunState, apply_run_state, plan_spec
    from airflow_dist_training.spec.loading import load_spec

    data = yaml.safe_load(Path("examples/specs/local_demo.yaml").read_text())
    data["checkpoint"] = {"s3_uri": "s3://ckpt-bucket/ck/", "local_uri": "ck", "layout": layout}
    spec = load_spec(data)
    op = DistributedTrainingOperator(task_id="train", spec=data, backend="local", checkpoint_resume="latest")
    op._plan = plan_spec(
        spec,
        backend=op.training_backend,
        region="us-east-1",
        identity="run-1",
        checkpoint_resume="latest",
        base_dir=str(tmp_path),
        plan_request=False,
    )
    run = tmp_path / "ck" / op._plan.job_name_base
    shutil.copytree(written / layout, run)
    newest, bad, _reason, _metric = EXPECTED[layout]
    job = apply_run_state(op._plan, RunState(), state_spec=spec)
    monkeypatch.setattr(type(op), "log", property(lambda _: logging.getLogger("relaunch")))
    with caplog.at_level("INFO"):
        op._prepare_run_checkpoints({}, job, "a failure", relaunch=True)
    assert f"Moved the incomplete checkpoint {run}/{bad} aside to {run}/_incomplete/{bad} (" in caplog.text
    assert (run / "_incomplete" / bad).exists() and not (run / bad).exists()
    assert op._resumed_from is not None and op._resumed_from["step"] == newest
    assert f"Resuming from this run's own checkpoint {run}/" in caplog.text
    assert f"({layout}, step {newest})" in caplog.text
