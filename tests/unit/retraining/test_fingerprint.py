"""Fingerprints key on content, the skip decision says why, warm start is an explicit choice."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_dist_training.errors import SpecValidationError
from airflow_dist_training.retraining.fingerprint import (
    Lineage,
    data_fingerprint,
    decide_skip,
    listing_fingerprint,
    s3_listing_entries,
    spec_hash,
)
from airflow_dist_training.retraining.warm_start import parse_warm_start, warm_start_source
from tests.paths import REPO

LISTING = [
    {"Key": "data/train/part-0.csv", "ETag": '"aaa"', "Size": 10},
    {"Key": "data/train/part-1.csv", "ETag": '"bbb"', "Size": 20},
]


def _fp(contents: list[dict]) -> str:
    return listing_fingerprint(s3_listing_entries("data/train/", contents))["fingerprint"]


def test_listing_fingerprint_keys_on_keys_etags_and_sizes_not_on_order():
    base = _fp(LISTING)
    assert base.startswith("sha256:")
    assert _fp(list(reversed(LISTING))) == base
    assert _fp([LISTING[0], {**LISTING[1], "ETag": '"ccc"'}]) != base  # same key, new content
    assert _fp([LISTING[0], {**LISTING[1], "Size": 21}]) != base
    assert _fp([*LISTING, {"Key": "data/train/part-2.csv", "ETag": '"d"', "Size": 1}]) != base  # new object
    assert _fp(LISTING[:1]) != base  # an object left


def test_listing_fingerprint_is_relative_to_the_prefix_and_ignores_markers_and_the_staging_manifest():
    moved = [{**o, "Key": o["Key"].replace("data/train/", "other/prefix/")} for o in LISTING]
    assert listing_fingerprint(s3_listing_entries("other/prefix/", moved))["fingerprint"] == _fp(LISTING)
    noise = [
        *LISTING,
        {"Key": "data/train/", "ETag": '"x"', "Size": 0},
        {"Key": "data/train/.manifest.json", "ETag": '"m"', "Size": 5},
    ]
    result = listing_fingerprint(s3_listing_entries("data/train/", noise))
    assert result == {"fingerprint": _fp(LISTING), "objects": 2, "bytes": 30}


def test_data_fingerprint_covers_every_channel_by_name():
    a = {"fingerprint": "sha256:1"}
    b = {"fingerprint": "sha256:2"}
    assert data_fingerprint({"train": a, "val": b}) == data_fingerprint({"val": b, "train": a})
    assert data_fingerprint({"train": a, "val": b}) != data_fingerprint({"train": b, "val": a})


SPEC = {
    "name": "demo",
    "source": {"entry_point": "train.py", "source_dir": "/home/me/examples"},
    "hyperparameters": {"epochs": 2},
    "channels": {"train": {"type": "s3", "uri": "s3://b/data/train", "local_source": "/tmp/a"}},
    "checkpoint": {"s3_uri": "s3://b/ckpt/run-1"},
    "output": {"s3_path": "s3://b/models", "local_uri": "/tmp/models"},
}


def test_spec_hash_ignores_where_things_live_locally_but_not_what_is_trained():
    base = spec_hash(SPEC)
    elsewhere = {
        **SPEC,
        "source": {**SPEC["source"], "source_dir": "/other/checkout/examples"},
        "channels": {"train": {**SPEC["channels"]["train"], "local_source": "/elsewhere"}},
        "checkpoint": {"s3_uri": "s3://b/ckpt/run-2"},  # per run by design
        "output": {**SPEC["output"], "local_uri": "/x"},
    }
    assert spec_hash(elsewhere) == base
    assert spec_hash({**SPEC, "hyperparameters": {"epochs": 3}}) != base
    assert (
        spec_hash({**SPEC, "channels": {"train": {**SPEC["channels"]["train"], "uri": "s3://b/other"}}})
        != base
    )
    assert spec_hash(SPEC, {"warm_start": "champion"}) != spec_hash(SPEC, {"warm_start": "none"})


def _lineage(
    data: str | None = "sha256:" + "d" * 64, code: str = "sha256:c", spec: str = "sha256:s"
) -> Lineage:
    return Lineage(data_fingerprint=data, code_hash=code, spec_hash=spec, channels={})


CHAMPION = {"data_fingerprint": "sha256:" + "d" * 64, "code_hash": "sha256:c", "spec_hash": "sha256:s"}


def test_unchanged_data_code_and_spec_skip_with_the_reason():
    decision = decide_skip(_lineage(), "adt-demo/1", CHAMPION)
    assert decision.skip is True
    assert decision.reason == "no new data or code since champion adt-demo/1 (data fingerprint dddddddddddd)"


@pytest.mark.parametrize(
    ("lineage", "changed"),
    [
        (_lineage(data="sha256:" + "e" * 64), "data changed"),
        (_lineage(code="sha256:other"), "code changed"),
        (_lineage(spec="sha256:other"), "spec changed"),
        (_lineage(data="sha256:" + "e" * 64, code="sha256:other"), "data and code changed"),
    ],
)
def test_any_change_trains_and_says_what_changed(lineage, changed):
    decision = decide_skip(lineage, "adt-demo/1", CHAMPION)
    assert decision.skip is False
    assert decision.reason.startswith(f"{changed} since champion adt-demo/1: training")


def test_force_no_champion_unknown_lineage_and_unlistable_data_all_train():
    assert decide_skip(_lineage(), "adt-demo/1", CHAMPION, force=True).reason.startswith(
        "force=true: training anyway"
    )
    assert decide_skip(_lineage(), None, None).reason.startswith("no champion yet: training")
    assert "has no recorded lineage" in decide_skip(_lineage(), "adt-demo/1", {}).reason
    unknown = decide_skip(_lineage(data=None), "adt-demo/1", CHAMPION)
    assert unknown.skip is False and "could not be fingerprinted" in unknown.reason


def test_warm_start_is_one_of_three_choices_and_says_what_it_chose():
    assert parse_warm_start(None) == "none"
    assert parse_warm_start("Champion") == "champion"
    with pytest.raises(
        SpecValidationError, match="warm_start: must be one of none, champion, promoted; got 'latest'"
    ):
        parse_warm_start("latest")
    assert warm_start_source("none", champion_model_uri="s3://m", promoted_uri=None) == (
        None,
        "warm start: none (from scratch)",
    )
    assert (
        warm_start_source("champion", champion_model_uri="s3://b/m.tar.gz", promoted_uri=None)[0]
        == "s3://b/m.tar.gz"
    )
    uri, text = warm_start_source("promoted", champion_model_uri="s3://m", promoted_uri=None)
    assert uri is None and "nothing was promoted yet: from scratch" in text


def test_warm_start_is_an_input_channel_s3_on_sagemaker_local_source_locally():
    from airflow_dist_training.retraining.warm_start import CHANNEL, warm_start_channel
    from airflow_dist_training.spec.loading import load_spec

    spec = load_spec(REPO / "examples" / "specs" / "local_demo.yaml")

    def with_warm_start(uri: str) -> Any:  # as the run plan adds it (planning._with_channels)
        data = spec.model_dump(mode="json", exclude_unset=True)
        data["channels"] = {**data.get("channels", {}), CHANNEL: warm_start_channel(uri)}
        return load_spec(data)

    on_s3 = with_warm_start("s3://bucket/models/job-1/output/model.tar.gz")
    assert on_s3.channels["warm_start"].uri == "s3://bucket/models/job-1/output/model.tar.gz"
    assert on_s3.channels["train"] == spec.channels["train"]
    local = with_warm_start("file:///tmp/models/job-1/output/model.tar.gz")
    assert local.channels["warm_start"].local_source == "/tmp/models/job-1/output/model.tar.gz"
    assert "warm_start" not in spec.channels  # the spec itself is unchanged


def test_a_new_evaluation_set_or_script_is_a_change_when_the_champion_recorded_its_own():
    champion = {**CHAMPION, "evaluation_fingerprint": "sha256:old-hold-out"}
    new = Lineage(
        CHAMPION["data_fingerprint"], "sha256:c", "sha256:s", {}, evaluation_fingerprint="sha256:new"
    )
    decision = decide_skip(new, "adt-demo/1", champion)
    assert decision.skip is False
    assert decision.reason.startswith("evaluation changed since champion adt-demo/1: training")
    same = Lineage(
        CHAMPION["data_fingerprint"], "sha256:c", "sha256:s", {}, evaluation_fingerprint="sha256:old-hold-out"
    )
    assert decide_skip(same, "adt-demo/1", champion).skip is True
    # a champion from before evaluation fingerprints, or an unreadable evaluation: the rest decides
    assert decide_skip(new, "adt-demo/1", CHAMPION).skip is True
    assert decide_skip(_lineage(), "adt-demo/1", champion).skip is True
    both = Lineage("sha256:" + "e" * 64, "sha256:c", "sha256:s", {}, evaluation_fingerprint="sha256:new")
    assert decide_skip(both, "adt-demo/1", champion).reason.startswith("data and evaluation changed since")


def test_only_a_new_evaluation_set_re_evaluates_the_champion_while_its_model_is_there():
    champion = {**CHAMPION, "evaluation_fingerprint": "sha256:old-hold-out"}
    new = Lineage(
        CHAMPION["data_fingerprint"], "sha256:c", "sha256:s", {}, evaluation_fingerprint="sha256:new"
    )
    model = "s3://bucket/models/job-1/output/model.tar.gz"
    kept = decide_skip(new, "adt-demo/1", champion, champion_model_uri=model, champion_model_present=True)
    assert (kept.action, kept.skip, kept.reevaluate, kept.changed) == ("reevaluate", False, True, ("evaluation",))
    assert kept.reason == (
        "evaluation changed since champion adt-demo/1: re-evaluating adt-demo/1 without retraining "
        f"(its model {model} is still there)"
    )
    gone = decide_skip(new, "adt-demo/1", champion, champion_model_uri=model, champion_model_present=False)
    assert gone.action == "train"
    assert gone.reason.startswith(f"evaluation changed since champion adt-demo/1: its model {model} is gone: training")
    # another change besides the evaluation, or forced: training, whatever the model
    both = Lineage("sha256:" + "e" * 64, "sha256:c", "sha256:s", {}, evaluation_fingerprint="sha256:new")
    assert decide_skip(both, "adt-demo/1", champion, champion_model_uri=model, champion_model_present=True).action == "train"
    forced = decide_skip(new, "adt-demo/1", champion, force=True, champion_model_uri=model, champion_model_present=True)
    assert forced.action == "train"
    # nothing to re-evaluate with (no presence answer) or nothing changed: as before
    assert decide_skip(new, "adt-demo/1", champion).action == "train"
    same = Lineage(CHAMPION["data_fingerprint"], "sha256:c", "sha256:s", {}, evaluation_fingerprint="sha256:old-hold-out")
    assert decide_skip(same, "adt-demo/1", champion, champion_model_uri=model, champion_model_present=True).action == "skip"


def test_the_evaluation_fingerprint_covers_script_dependencies_held_out_data_and_arguments(tmp_path):
    from airflow_dist_training.hooks.fingerprint import FingerprintHook

    (tmp_path / "evaluate.py").write_text("print('score')\n")
    (tmp_path / "helpers.py").write_text("X = 1\n")
    (tmp_path / "test").mkdir()
    (tmp_path / "test" / "data.csv").write_text("x,y\n1,0\n")
    hook = FingerprintHook(aws_conn_id=None)

    def fingerprint(args=None, data="test", deps=("helpers.py",)):
        return hook.evaluation_fingerprint("evaluate.py", data, args or {"k": 1}, tmp_path, deps)

    first = fingerprint()
    assert first is not None and first.startswith("sha256:") and fingerprint() == first
    assert fingerprint(args={"k": 2}) != first
    (tmp_path / "test" / "data.csv").write_text("x,y\n1,0\n2,1\n")  # a new hold-out set
    second = fingerprint()
    assert second != first
    (tmp_path / "helpers.py").write_text("X = 2\n")
    assert fingerprint() != second
    (tmp_path / "evaluate.py").write_text("print('another score')\n")
    assert fingerprint(deps=()) not in (first, second)
    assert fingerprint(data="missing") is None  # unreadable: nothing is compared
    assert fingerprint(data=None) is not None  # a script that brings its own data
