"""Operators and the freshness sensor over a local checkpoint root (no AWS)."""

from __future__ import annotations

import json
import os
import time
from types import SimpleNamespace

import pytest
from airflow.sdk import PokeReturnValue

from airflow_dist_training.checkpointing import CheckpointWriter
from airflow_dist_training.checkpoints.freshness import assess_freshness
from airflow_dist_training.compat import AirflowFailException
from airflow_dist_training.errors import SpecValidationError
from airflow_dist_training.operators.checkpoints import (
    CheckpointRetentionOperator,
    LatestCheckpointOperator,
    PromoteCheckpointOperator,
)
from airflow_dist_training.sensors.checkpoints import CheckpointFreshnessSensor


def write(root, step, loss, files=None):
    with CheckpointWriter(root, rank=0, fsync=False).checkpoint(step=step, metrics={"loss": loss}) as d:
        for name, body in (files or {"model.pt": b"w" * step}).items():
            (d / name).write_bytes(body)
    return d


@pytest.fixture
def root(tmp_path):
    r = tmp_path / "ckpts"
    for step, loss in [(10, 0.5), (20, 0.2), (30, 0.4), (40, 0.6)]:
        write(r, step, loss)
    (r / "step-000000000050").mkdir()  # in progress
    (r / "step-000000000050" / "model.pt").write_bytes(b"partial")
    return r


def test_constructors_do_no_io_and_template_uris():
    op = LatestCheckpointOperator(task_id="latest", checkpoint_uri="s3://no-such-bucket/{{ run_id }}/")
    assert "hook" not in op.__dict__
    assert set(op.template_fields) >= {"checkpoint_uri"}
    promote = PromoteCheckpointOperator(
        task_id="p", checkpoint_uri="s3://b/x/", target_uri="s3://b/{{ ds }}/", which="{{ params.which }}"
    )
    assert set(promote.template_fields) >= {"checkpoint_uri", "target_uri", "which"}
    assert "hook" not in promote.__dict__


def test_retention_rule_that_keeps_nothing_fails_at_parse_time():
    with pytest.raises(SpecValidationError) as info:
        CheckpointRetentionOperator(task_id="r", checkpoint_uri="s3://b/run/", keep_last=0)
    assert str(info.value) == (
        "retention: keep_last=0 and keep_best=0 would delete every checkpoint under s3://b/run/; "
        "keep at least one (keep_last >= 1 or keep_best >= 1)"
    )
    with pytest.raises(SpecValidationError, match="which='best' needs a metric name"):
        PromoteCheckpointOperator(task_id="p", checkpoint_uri="s3://b/x/", target_uri="s3://b/y/")


def test_latest_operator_pushes_small_json(root):
    xcom = LatestCheckpointOperator(task_id="latest", checkpoint_uri=str(root)).execute({})
    assert xcom["uri"] == str(root / "step-000000000040") and xcom["step"] == 40
    assert xcom["metrics"] == {"loss": 0.6} and xcom["num_files"] == 1 and xcom["complete"] is True
    json.dumps(xcom)


def test_latest_operator_none_or_fail(tmp_path):
    assert LatestCheckpointOperator(task_id="l", checkpoint_uri=str(tmp_path)).execute({}) is None
    with pytest.raises(SpecValidationError, match=f"checkpoint_uri: no complete checkpoint under {tmp_path}"):
        LatestCheckpointOperator(task_id="l", checkpoint_uri=str(tmp_path), fail_if_none=True).execute({})


def test_retention_operator_dry_run_then_delete(root):
    op = CheckpointRetentionOperator(
        task_id="r", checkpoint_uri=str(root), keep_last=1, keep_best=1, metric="loss", dry_run=True
    )
    plan = op.execute({})
    assert plan["deleted"] == [30, 10] and plan["dry_run"] is True
    assert len(list(root.glob("step-*"))) == 5
    op = CheckpointRetentionOperator(
        task_id="r", checkpoint_uri=str(root), keep_last=1, keep_best=1, metric="loss"
    )
    assert op.execute({})["deleted"] == [30, 10]
    assert sorted(p.name for p in root.glob("step-*")) == [
        "step-000000000020",
        "step-000000000040",
        "step-000000000050",
    ]


def test_promote_operator_records_and_protects(root, tmp_path):
    target = tmp_path / "champion"
    entry = PromoteCheckpointOperator(
        task_id="p", checkpoint_uri=str(root), target_uri=str(target), which="best", metric="loss"
    ).execute({})
    assert entry["step"] == 20 and entry["target_uri"] == str(target)
    assert (target / "model.pt").read_bytes() == b"w" * 20 and (target / "_MANIFEST.json").exists()
    record = json.loads((root / "_PROMOTED.json").read_text())
    assert record["current"]["step"] == 20
    entry = PromoteCheckpointOperator(
        task_id="p", checkpoint_uri=str(root), target_uri=str(target), which=10
    ).execute({})
    assert entry["step"] == 10
    plan = CheckpointRetentionOperator(task_id="r", checkpoint_uri=str(root), keep_last=1).execute({})
    assert plan["deleted"] == [30]  # 20 and 10 were promoted
    assert plan["kept"]["10"] == ["promoted"]


def test_freshness_pure():
    f = assess_freshness(
        root="s3://b/r/",
        now=1000,
        max_age_seconds=300,
        started_at=0,
        latest_modified=600,
        latest_uri="u",
        latest_step=5,
    )
    assert f.age_seconds == 400 and f.stale
    assert f.message == (
        "newest complete checkpoint under s3://b/r/ is step 5 (u), written 400s ago; exceeds max_age=300s"
    )
    f = assess_freshness(
        root="s3://b/r/", now=1000, max_age_seconds=300, started_at=900, latest_modified=None
    )
    assert (
        not f.stale
        and f.message
        == "no complete checkpoint under s3://b/r/ for 100s (since the run started); within max_age=300s"
    )
    # a seed checkpoint older than the watch does not make the sensor stale right away
    assert not assess_freshness(
        root="r", now=1000, max_age_seconds=300, started_at=900, latest_modified=10
    ).stale


def context(started_at: float):
    from datetime import UTC, datetime

    return {"dag_run": SimpleNamespace(start_date=datetime.fromtimestamp(started_at, UTC))}


def test_sensor_fresh_stale_fail_warn_and_done(root):
    newest = root / "step-000000000040" / "_MANIFEST.json"
    os.utime(newest, (time.time() - 3600, time.time() - 3600))
    ctx = context(time.time() - 7200)
    sensor = CheckpointFreshnessSensor(
        task_id="fresh", checkpoint_uri=str(root), max_age=600, mode="reschedule"
    )
    with pytest.raises(AirflowFailException) as info:
        sensor.poke(ctx)
    assert str(info.value).startswith(
        f"Checkpoints stale: newest complete checkpoint under {root} is step 40 ("
    )
    assert str(info.value).endswith("exceeds max_age=600s")
    alerts = []
    warn = CheckpointFreshnessSensor(
        task_id="w",
        checkpoint_uri=str(root),
        max_age=600,
        on_stale="warn",
        stale_callback=lambda c, d: alerts.append(d),
    )
    assert warn.poke(ctx) is False
    assert alerts[0]["stale"] is True and alerts[0]["step"] == 40
    fresh = CheckpointFreshnessSensor(task_id="f", checkpoint_uri=str(root), max_age=7200)
    assert fresh.poke(ctx) is False
    done = CheckpointFreshnessSensor(task_id="d", checkpoint_uri=str(root), max_age=600, until_step=40)
    result = done.poke(ctx)
    assert isinstance(result, PokeReturnValue) and result.is_done and result.xcom_value["step"] == 40


def test_sensor_bad_arguments():
    with pytest.raises(SpecValidationError) as info:
        CheckpointFreshnessSensor(task_id="s", checkpoint_uri="s3://b/", max_age=0, on_stale="page")
    assert str(info.value).splitlines() == [
        "max_age: must be positive, got 0",
        "on_stale: must be one of fail, warn; got 'page'",
    ]


@pytest.mark.parametrize(("status", "done"), [("InProgress", False), ("Stopping", False), ("Stopped", True)])
def test_sensor_watches_a_stopping_job_until_it_has_stopped(root, monkeypatch, status, done):
    """A Stopping job still uploads its last checkpoint: only a terminal state ends the watch."""
    from airflow_dist_training.hooks import aws

    client = SimpleNamespace(describe_training_job=lambda TrainingJobName: {"TrainingJobStatus": status})
    monkeypatch.setattr(aws, "aws_hook", lambda *a, **kw: SimpleNamespace(get_conn=lambda: client))
    sensor = CheckpointFreshnessSensor(
        task_id="f", checkpoint_uri=str(root), max_age=7200, training_job_name="job-1", aws_conn_id=None
    )
    result = sensor.poke(context(time.time() - 60))
    assert (isinstance(result, PokeReturnValue) and result.is_done) is done


def test_a_jobs_freshness_clock_starts_when_it_trains_and_the_alarm_says_why():
    import datetime as dt

    from airflow_dist_training.checkpoints.freshness import job_freshness

    kwargs = {"root": "s3://b/ckpt/run-1/", "now": 1000.0, "max_age_seconds": 300}
    # provisioning and downloading (no TrainingStartTime) are no stall, however long
    assert job_freshness({"TrainingJobStatus": "InProgress"}, latest_modified=None, **kwargs) is None
    started = {"TrainingStartTime": dt.datetime.fromtimestamp(600, tz=dt.UTC)}
    waiting = job_freshness(started, latest_modified=None, **kwargs)
    assert waiting is not None and waiting.stale and waiting.age_seconds == 400
    assert waiting.stall_alarm("job-1", "alarm") == (
        "Checkpoint stall: training job job-1 has written no new complete checkpoint for 400s, over "
        "checkpoint freshness max_age_seconds=300: no complete checkpoint under s3://b/ckpt/run-1/ since "
        "it started training 400s ago. on_stall=alarm: the job is left running."
    )
    fresh = job_freshness(started, latest_modified=800, latest_uri="s3://b/ckpt/run-1/step-7/", latest_step=7, **kwargs)
    assert fresh is not None and not fresh.stale
    late = job_freshness(started, latest_modified=650, latest_uri="s3://b/ckpt/run-1/step-7/", latest_step=7, **kwargs)
    assert late is not None and late.stale
    assert late.stall_alarm("job-1", "stop").endswith(
        "its newest complete checkpoint is step 7 (s3://b/ckpt/run-1/step-7/), written 350s ago. "
        "on_stall=stop: the job is being stopped."
    )


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_age_seconds": 0}, "max_age_seconds: Input should be greater than 0"),
        ({"max_age_seconds": 60, "on_stall": "kill"}, "on_stall: Input should be 'alarm' or 'stop'"),
    ],
)
def test_the_stall_alarm_refuses_bad_settings_at_parse_time_naming_the_field(kwargs, message):
    from airflow_dist_training.operators.checkpoints import CheckpointStallAlarmOperator

    with pytest.raises(SpecValidationError, match=message):
        CheckpointStallAlarmOperator(task_id="w", plan_task_id="plan", training_task_id="train", **kwargs)
