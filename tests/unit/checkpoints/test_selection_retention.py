"""Pure checkpoint logic: completeness, latest, best, selection, retention (with hypothesis)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_dist_training.checkpoints.retention import RetentionRule, plan_retention
from airflow_dist_training.checkpoints.selection import (
    CheckpointInfo,
    Selector,
    best_by_metric,
    completeness_problems,
    latest_complete,
    select_checkpoint,
)
from airflow_dist_training.errors import SpecValidationError
from airflow_dist_training.storage import Stores
from airflow_dist_training.storage.location import parse_location

ROOT = "s3://b/runs/r1/"

# One uploaded checkpoint's state: complete, or one of the ways an upload/delete can leave it.
STATES = ("complete", "no_manifest", "missing_file", "short_file", "deleted")


def make(step: int, state: str = "complete", loss: float | None = 1.0) -> CheckpointInfo:
    uri = f"{ROOT}step-{step:012d}/"
    manifest = {
        "step": step,
        "metrics": {} if loss is None else {"loss": loss},
        "files": [{"path": "model.pt", "size": 10}, {"path": "optim.pt", "size": 4}],
    }
    present = {"model.pt": 10, "optim.pt": 4}
    if state == "missing_file":
        del present["optim.pt"]
    if state == "short_file":
        present["model.pt"] = 3
    has_manifest = state != "no_manifest"
    problems = completeness_problems(manifest if has_manifest else None, present, uri)
    return CheckpointInfo(
        step=step,
        uri=uri,
        manifest=manifest if has_manifest else None,
        problems=tuple(problems),
        checked=True,
    )


histories = st.lists(
    st.tuples(
        st.integers(min_value=0, max_value=10_000),
        st.sampled_from(STATES),
        st.one_of(st.none(), st.floats(min_value=-5, max_value=5, allow_nan=False)),
    ),
    max_size=25,
    unique_by=lambda t: t[0],
)


def build(history) -> list[CheckpointInfo]:
    return [make(step, state, loss) for step, state, loss in history if state != "deleted"]


def test_completeness_problems_name_the_file():
    assert completeness_problems(None, {}, ROOT) == [
        f"{ROOT}: no _MANIFEST.json (checkpoint not finished or still uploading)"
    ]
    assert make(3, "short_file").problems == (f"{ROOT}step-000000000003/model.pt: size 3, manifest says 10",)
    assert make(3, "missing_file").problems == (
        f"{ROOT}step-000000000003/optim.pt: missing (listed in the manifest)",
    )


def test_latest_skips_partial_newer_uploads():
    cps = [make(1), make(2), make(3, "short_file"), make(4, "no_manifest")]
    assert latest_complete(cps).step == 2


def test_best_by_metric_min_and_max_ties_prefer_newer():
    cps = [make(1, loss=0.5), make(2, loss=0.2), make(3, loss=0.2), make(4, "missing_file", loss=0.0)]
    assert best_by_metric(cps, "loss", "min").step == 3
    assert best_by_metric(cps, "loss", "max").step == 1
    assert best_by_metric(cps, "accuracy", "max") is None


def test_selector_parsing_and_errors():
    assert Selector.parse("latest").kind == "latest"
    assert Selector.parse(120).step == 120
    assert Selector.parse("step:7").step == 7
    with pytest.raises(SpecValidationError, match="which='best' needs a metric name"):
        Selector.parse("best")
    with pytest.raises(
        SpecValidationError, match="which: must be 'latest', 'best' or a step number, got 'newest'"
    ):
        Selector.parse("newest")
    cps = [make(1), make(2, "no_manifest")]
    with pytest.raises(SpecValidationError) as info:
        select_checkpoint(cps, Selector.parse(2), ROOT)
    assert str(info.value) == (
        f"which: checkpoint step 2 under {ROOT} is not complete: "
        f"{ROOT}step-000000000002/: no _MANIFEST.json (checkpoint not finished or still uploading)"
    )
    with pytest.raises(SpecValidationError, match=f"which: no checkpoint for step 9 under {ROOT}"):
        select_checkpoint(cps, Selector.parse(9), ROOT)
    with pytest.raises(SpecValidationError, match=f"which: no complete checkpoint under {ROOT}"):
        select_checkpoint([make(2, "no_manifest")], Selector.parse("latest"), ROOT)


def test_rule_that_keeps_nothing_is_an_error_naming_the_path():
    with pytest.raises(SpecValidationError) as info:
        plan_retention([make(1)], RetentionRule(keep_last=0, keep_best=0), root=ROOT)
    assert str(info.value) == (
        f"retention: keep_last=0 and keep_best=0 would delete every checkpoint under {ROOT}; "
        "keep at least one (keep_last >= 1 or keep_best >= 1)"
    )


def test_rule_validation_messages():
    with pytest.raises(SpecValidationError) as info:
        RetentionRule(keep_last=-1, keep_best=2, mode="median").validate(ROOT)
    assert str(info.value).splitlines() == [
        "retention.keep_last: must be an integer >= 0, got -1",
        "retention.mode: must be 'min' or 'max', got 'median'",
        "retention.metric: keep_best=2 needs a metric to rank by",
    ]
    with pytest.raises(
        SpecValidationError,
        match=f"retention.metric: no complete checkpoint under {ROOT} reports metric 'acc'",
    ):
        plan_retention([make(1)], RetentionRule(keep_best=1, metric="acc"), root=ROOT)


def test_retention_example():
    cps = [make(s, loss=v) for s, v in [(1, 0.1), (2, 0.9), (3, 0.5), (4, 0.8), (5, 0.7)]]
    cps += [make(6, "no_manifest"), make(0, "missing_file")]
    plan = plan_retention(
        cps, RetentionRule(keep_last=2, keep_best=1, metric="loss"), root=ROOT, promoted_steps=[2]
    )
    assert plan.delete == (3, 0)
    assert plan.to_xcom() == {
        "root": ROOT,
        "kept": {
            "6": ["incomplete-newer-than-latest (may still be uploading)"],
            "5": ["last-2", "newest-complete"],
            "4": ["last-2"],
            "2": ["promoted"],
            "1": ["best-1-loss-min", "best"],
        },
        "deleted": [3, 0],
    }


@settings(max_examples=300, deadline=None)
@given(history=histories)
def test_latest_complete_is_the_highest_complete_step(history):
    cps = build(history)
    complete_steps = [s for s, state, _ in history if state == "complete"]
    found = latest_complete(cps)
    if not complete_steps:
        assert found is None
    else:
        assert found is not None and found.complete and found.step == max(complete_steps)


@settings(max_examples=300, deadline=None)
@given(
    history=histories,
    keep_last=st.integers(min_value=0, max_value=5),
    keep_best=st.integers(min_value=0, max_value=5),
    mode=st.sampled_from(["min", "max"]),
    delete_incomplete=st.booleans(),
    promoted=st.sets(st.integers(min_value=0, max_value=10_000), max_size=3),
)
def test_retention_invariants(history, keep_last, keep_best, mode, delete_incomplete, promoted):
    cps = build(history)
    rule = RetentionRule(keep_last, keep_best, "loss", mode, delete_incomplete)
    complete = sorted((c for c in cps if c.complete), key=lambda c: c.step, reverse=True)
    with_metric = [c for c in complete if c.metric("loss") is not None]
    if keep_last == 0 and keep_best == 0:
        with pytest.raises(SpecValidationError, match="would delete every checkpoint under"):
            plan_retention(cps, rule, root=ROOT, promoted_steps=promoted)
        return
    if keep_best and complete and not with_metric:
        with pytest.raises(SpecValidationError, match="reports metric 'loss'"):
            plan_retention(cps, rule, root=ROOT, promoted_steps=promoted)
        return
    plan = plan_retention(cps, rule, root=ROOT, promoted_steps=promoted)
    deleted, kept = set(plan.delete), set(plan.keep)
    all_steps = {c.step for c in cps}
    assert deleted | kept == all_steps and not (deleted & kept)
    if cps:
        assert kept, "never deletes everything"
    if complete:
        assert complete[0].step in kept  # newest complete
        assert {c.step for c in complete[:keep_last]} <= kept
    best = best_by_metric(cps, "loss", mode)
    if best is not None:
        assert best.step in kept
        sign = 1 if mode == "min" else -1
        top = sorted(with_metric, key=lambda c: (sign * c.metric("loss"), -c.step))[:keep_best]
        assert {c.step for c in top} <= kept
    assert (promoted & all_steps) <= kept
    newest = complete[0].step if complete else None
    for c in cps:
        if not c.complete and (newest is None or c.step > newest):
            assert c.step in kept  # may still be uploading
        if not c.complete and not delete_incomplete:
            assert c.step in kept
    # only complete checkpoints that no rule protects, or stale incomplete ones, are deleted
    for step in deleted:
        info = next(c for c in cps if c.step == step)
        assert info.complete or (delete_incomplete and newest is not None and step < newest)


def test_parse_location_variants_and_errors():
    assert parse_location("s3://b/a/b").uri == "s3://b/a/b/"
    assert parse_location("s3://b").prefix == ""
    assert parse_location("file:///tmp/x/").uri == "/tmp/x"
    assert parse_location("/tmp/x").child("step-1").uri == "/tmp/x/step-1"
    with pytest.raises(
        SpecValidationError, match=r"uri: gs://b/x: unsupported scheme \(use s3://, file:///dir"
    ):
        Stores().parse("gs://b/x")
    with pytest.raises(
        SpecValidationError, match="uri: relative/x: a local checkpoint location must be an absolute path"
    ):
        parse_location("relative/x")
    with pytest.raises(SpecValidationError, match=r"uri: s3:///x: no bucket name"):
        parse_location("s3:///x")
