"""CheckpointHook against the moto S3 server: latest, scan, retention, promotion, seeding, errors."""

from __future__ import annotations

import json

import pytest
from botocore.stub import Stubber

from airflow_dist_training.checkpoints.retention import RetentionRule
from airflow_dist_training.errors import AwsPermissionError, SpecValidationError
from airflow_dist_training.hooks.checkpoints import CheckpointHook

from .conftest import BUCKET, put_checkpoint

pytestmark = pytest.mark.integration
ROOT = f"s3://{BUCKET}/pipe/run1/"


def keys(s3, prefix=""):
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix)
    return sorted(o["Key"] for p in pages for o in p.get("Contents", []))


def test_latest_complete_skips_partial_uploads_and_reads_few_objects(s3, hook):
    for step in (100, 200, 300):
        put_checkpoint(s3, "pipe/run1/", step, metrics={"loss": 1 / step})
    put_checkpoint(s3, "pipe/run1/", 400, truncate=["model.pt"])  # manifest landed before model.pt finished
    put_checkpoint(s3, "pipe/run1/", 500, skip=["_MANIFEST.json"], hint=False)  # still uploading
    info = hook.latest_complete(ROOT)
    assert info.uri == f"{ROOT}step-000000000300/"
    assert info.to_xcom()["metrics"] == {"loss": 1 / 300}
    # hint GET (step 400) -> newer listing (500) -> 500 listed, no manifest; 400 listed + manifest GET,
    # short -> the root's directory listing -> 300 listed + manifest GET
    assert dict(hook.api_calls) == {"GetBucketLocation": 1, "GetObject": 3, "ListObjectsV2": 5}


def test_latest_lookup_cost_does_not_depend_on_files_per_checkpoint(s3, hook):
    few = {f"shard{i}.pt": b"x" for i in range(3)}
    many = {f"shard{i}.pt": b"x" for i in range(60)}
    for step in range(1, 6):
        put_checkpoint(s3, "few/", step, files=few, fast=True)
        put_checkpoint(s3, "many/", step, files=many, fast=True)
    costs = {}
    for root in ("few/", "many/"):
        for use_hint in (True, False):
            hook.api_calls.clear()
            assert hook.latest_complete(f"s3://{BUCKET}/{root}", use_hint=use_hint).step == 5
            hook.api_calls.pop("GetBucketLocation", None)  # once per bucket and hook
            costs[(root, use_hint)] = dict(hook.api_calls)
    # hint GET + manifest GET, newer-steps listing + file listing of the one candidate
    assert costs[("few/", True)] == costs[("many/", True)] == {"GetObject": 2, "ListObjectsV2": 2}
    assert costs[("few/", False)] == costs[("many/", False)] == {"GetObject": 1, "ListObjectsV2": 2}


def test_hint_pointing_at_a_deleted_checkpoint_falls_back_to_listing(s3, hook):
    put_checkpoint(s3, "pipe/run1/", 1)
    put_checkpoint(s3, "pipe/run1/", 2)
    for key in keys(s3, "pipe/run1/step-000000000002/"):
        s3.delete_object(Bucket=BUCKET, Key=key)
    assert hook.latest_complete(ROOT).step == 1
    s3.put_object(Bucket=BUCKET, Key="pipe/run1/_LATEST.json", Body=b"not json")
    assert hook.latest_complete(ROOT).step == 1


def test_no_checkpoints_gives_none(s3, hook):
    assert hook.latest_complete(ROOT) is None
    assert hook.scan(ROOT) == []


def test_retention_deletes_in_batches_and_keeps_protected(s3, hook):
    files = {f"f{i:04d}": b"x" for i in range(450)}
    for step, loss in [(1, 0.1), (2, 0.5), (3, 0.9), (4, 0.8)]:
        put_checkpoint(s3, "pipe/run1/", step, files=files, metrics={"loss": loss}, fast=True)
    put_checkpoint(s3, "pipe/run1/", 5, skip=["_MANIFEST.json"])  # in progress: kept
    plan = hook.apply_retention(ROOT, RetentionRule(keep_last=1, keep_best=1, metric="loss"))
    assert plan.delete == (3, 2)
    assert {p.split("/")[2] for p in keys(s3, "pipe/run1/step-")} == {
        "step-000000000001",
        "step-000000000004",
        "step-000000000005",
    }
    # 2 manifests in one call, then 900 files in one call (<= 1000 keys each)
    assert hook.api_calls["DeleteObjects"] == 2


def test_delete_objects_never_sends_more_than_1000_keys(s3, hook):
    put_checkpoint(s3, "pipe/run1/", 1, files={f"f{i:04d}": b"x" for i in range(2100)}, fast=True)
    sent = []
    hook.s3_client.meta.events.register(
        "before-parameter-build.s3.DeleteObjects",
        lambda params, **_: sent.append(len(params["Delete"]["Objects"])),
    )
    hook.delete_checkpoints(ROOT, [1])
    assert sent == [1, 1000, 1000, 100]
    assert keys(s3, "pipe/run1/step-") == []


def test_retention_rule_that_deletes_everything_is_refused_before_any_call(s3, hook):
    put_checkpoint(s3, "pipe/run1/", 1)
    hook.api_calls.clear()
    with pytest.raises(SpecValidationError) as info:
        hook.apply_retention(ROOT, RetentionRule(keep_last=0))
    assert str(info.value) == (
        f"retention: keep_last=0 and keep_best=0 would delete every checkpoint under {ROOT}; "
        "keep at least one (keep_last >= 1 or keep_best >= 1)"
    )
    assert sum(hook.api_calls.values()) == 0


def test_promote_best_copies_and_records_and_retention_protects_it(s3, hook):
    for step, loss in [(1, 0.3), (2, 0.1), (3, 0.2), (4, 0.4)]:
        put_checkpoint(s3, "pipe/run1/", step, metrics={"loss": loss})
    target = f"s3://{BUCKET}/models/champion/"
    entry = hook.promote(ROOT, "best", target, metric="loss", mode="min")
    assert (entry["step"], entry["source_uri"], entry["target_uri"], entry["which"]) == (
        2,
        f"{ROOT}step-000000000002/",
        target,
        "best",
    )
    assert keys(s3, "models/champion/") == [
        "models/champion/_MANIFEST.json",
        "models/champion/model.pt",
        "models/champion/optim/rank0.pt",
    ]
    record = json.loads(s3.get_object(Bucket=BUCKET, Key="pipe/run1/_PROMOTED.json")["Body"].read())
    assert record["current"]["step"] == 2 and len(record["history"]) == 1
    # keep_last=1 would delete 2, but it is promoted (and the best)
    plan = hook.apply_retention(ROOT, RetentionRule(keep_last=1))
    assert plan.delete == (3, 1)
    assert "promoted" in plan.keep[2]
    # promote a given step, replacing the stable copy (stale files removed)
    put_checkpoint(s3, "pipe/run1/", 9, files={"only.pt": b"1"})
    entry = hook.promote(ROOT, 9, target)
    assert keys(s3, "models/champion/") == ["models/champion/_MANIFEST.json", "models/champion/only.pt"]
    assert hook.read_promotions(ROOT)["current"]["step"] == 9
    assert hook.promote(ROOT, "latest", f"s3://{BUCKET}/models/latest/")["step"] == 9


def test_copy_refuses_incomplete_source(s3, hook):
    src = put_checkpoint(s3, "pipe/run1/", 7, skip=["model.pt"])
    with pytest.raises(SpecValidationError) as info:
        hook.copy_checkpoint(src, f"s3://{BUCKET}/pipe/run9/step-000000000007/")
    assert (
        str(info.value)
        == f"source_uri: {src}: not a complete checkpoint: {src}model.pt: missing (listed in the manifest)"
    )


def test_malformed_manifest_error_names_manifest_and_field(s3, hook):
    put_checkpoint(s3, "pipe/run1/", 1)
    key = "pipe/run1/step-000000000001/_MANIFEST.json"
    manifest = json.loads(s3.get_object(Bucket=BUCKET, Key=key)["Body"].read())
    manifest["files"] = "model.pt"
    manifest["metrics"] = {"loss": "low"}
    s3.put_object(Bucket=BUCKET, Key=key, Body=json.dumps(manifest).encode())
    with pytest.raises(SpecValidationError) as info:
        hook.latest_complete(ROOT)
    uri = f"s3://{BUCKET}/{key}"
    assert str(info.value) == (
        f"{uri}:metrics.loss: must be a finite number, got 'low'\n{uri}:files: must be a list, got str"
    )


def test_bucket_in_another_region_is_a_clear_error(s3, hook):
    s3.create_bucket(Bucket="eu-ckpts", CreateBucketConfiguration={"LocationConstraint": "eu-west-1"})
    with pytest.raises(SpecValidationError) as info:
        hook.latest_complete("s3://eu-ckpts/pipe/run1/")
    assert str(info.value) == (
        "uri: s3://eu-ckpts/pipe/run1/: bucket eu-ckpts is in region eu-west-1, but connection None uses "
        "region us-east-1; use a connection (or region_name) in eu-west-1, or a bucket in us-east-1"
    )


def test_access_denied_names_path_and_permission(moto_reset):
    hook = CheckpointHook(aws_conn_id=None, region_name="us-east-1", verify_region=False)
    with Stubber(hook.s3_client) as stub:
        stub.add_client_error("list_objects_v2", service_error_code="AccessDenied", http_status_code=403)
        with pytest.raises(AwsPermissionError) as info:
            hook.latest_complete("s3://locked/pipe/run1/", use_hint=False)
    assert str(info.value) == (
        "s3://locked/pipe/run1/: access denied (ListObjectsV2); grant s3:ListBucket on arn:aws:s3:::locked "
        "(and its keys) to the role of connection None"
    )
    with Stubber(hook.s3_client) as stub:
        stub.add_client_error("get_object", service_error_code="AccessDenied", http_status_code=403)
        with pytest.raises(
            AwsPermissionError,
            match=r"s3://locked/pipe/run1/_LATEST.json: access denied \(GetObject\); grant s3:GetObject",
        ):
            hook.latest_complete("s3://locked/pipe/run1/")


def test_missing_bucket(moto_reset):
    hook = CheckpointHook(aws_conn_id=None, region_name="us-east-1", verify_region=False)
    with pytest.raises(SpecValidationError, match="uri: s3://nope/x/: bucket nope does not exist"):
        hook.latest_complete("s3://nope/x/", use_hint=False)


def test_local_and_s3_cross_copy(s3, hook, tmp_path):
    from airflow_dist_training.checkpointing import CheckpointWriter, latest_complete_checkpoint

    with CheckpointWriter(tmp_path / "local", rank=0).checkpoint(step=8, metrics={"loss": 1.0}) as d:
        (d / "model.pt").write_bytes(b"abc")
    src = str(tmp_path / "local" / "step-000000000008")
    up = hook.copy_checkpoint(src, f"s3://{BUCKET}/up/step-000000000008/")
    assert up.uri == f"s3://{BUCKET}/up/step-000000000008/"
    back = hook.copy_checkpoint(up.uri, f"file://{tmp_path}/down/step-000000000008")
    assert back.step == 8
    assert latest_complete_checkpoint(tmp_path / "down").name == "step-000000000008"
