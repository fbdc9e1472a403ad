"""Benchmark: find the latest complete checkpoint among many, vs a naive full listing.

Anchor (issue 6): a naive lookup lists every object under the checkpoint root (ListObjectsV2 over
N*F keys), groups them by step and picks the newest step whose manifest exists and whose files match
the manifest's sizes. Ours is ``CheckpointHook.latest_complete``: the ``_LATEST.json`` hint + a
``StartAfter`` listing of newer steps + per-candidate manifest/file checks, or (``use_hint=False``) a
``Delimiter='/'`` listing of step prefixes + the same checks.

Both run side by side against the same ThreadedMotoServer bucket (seeded in-process through moto's
backend). The newest checkpoint is left partial (no manifest, as during an upload) so both must skip it.

DCP case (issue 33): 1,000 PyTorch Distributed Checkpoints of 64 shards each, with torch's own
``Metadata`` pickled as ``.metadata``. Anchor: list everything and GET every ``.metadata``. Ours:
``CheckpointHook(layout="dcp"|"auto").latest_complete``: one ``Delimiter`` listing, then per
candidate, newest first, one listing of its files and at most one GET (its ``.metadata``).

    .venv/bin/python bench/checkpoints_latest.py --dcp-only       # the DCP case alone

    .venv/bin/python bench/checkpoints_latest.py                  # 10,000 x 20 files, + scaling runs
    .venv/bin/python bench/checkpoints_latest.py --checkpoints 2000 --files 20 --no-scaling
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import socket
import statistics
import sys
import time
from collections import Counter
from typing import Any

BUCKET = "bench-ckpts"
ACCOUNT = "123456789012"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def seed(prefix: str, checkpoints: int, files: int) -> float:
    """Seed ``checkpoints`` x ``files`` objects (+ manifests) straight into moto's backend."""
    from moto.backends import get_backend

    from airflow_dist_training.checkpointing import FORMAT, FORMAT_VERSION

    backend = get_backend("s3")[ACCOUNT]["global"]
    started = time.perf_counter()
    for step in range(1, checkpoints + 1):
        base = f"{prefix}step-{step:012d}/"
        entries = []
        for i in range(files):
            body = b"x" * (16 + i)
            backend.put_object(BUCKET, f"{base}shard-{i:04d}.pt", body)
            entries.append({"path": f"shard-{i:04d}.pt", "size": len(body)})
        if step == checkpoints:
            continue  # newest one still uploading: no manifest yet
        manifest = {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "step": step,
            "epoch": step // 100,
            "metrics": {"loss": 1.0 / step},
            "world_size": 8,
            "created_at": "2025-01-01T00:00:00.000000Z",
            "files": entries,
            "metadata": {},
        }
        backend.put_object(BUCKET, f"{base}_MANIFEST.json", json.dumps(manifest).encode())
    hint = {"step": checkpoints - 1, "path": f"step-{checkpoints - 1:012d}/"}
    backend.put_object(BUCKET, f"{prefix}_LATEST.json", json.dumps(hint).encode())
    return time.perf_counter() - started


def counted_client() -> tuple[Any, Counter[str]]:
    import boto3

    calls: Counter[str] = Counter()
    client = boto3.client("s3", region_name="us-east-1")
    client.meta.events.register("before-call.s3", lambda model, **_: calls.update([model.name]))
    return client, calls


def naive_latest(client: Any, prefix: str) -> int | None:
    """List everything, group by step, check newest-first with the listing's sizes."""
    from airflow_dist_training.checkpointing import parse_manifest, parse_step

    per_step: dict[int, dict[str, int]] = {}
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix):
        for obj in page.get("Contents", []):
            top, _, rest = obj["Key"][len(prefix) :].partition("/")
            step = parse_step(top)
            if step is not None and rest:
                per_step.setdefault(step, {})[rest] = obj["Size"]
    for step in sorted(per_step, reverse=True):
        present = per_step[step]
        if "_MANIFEST.json" not in present:
            continue
        key = f"{prefix}step-{step:012d}/_MANIFEST.json"
        manifest = parse_manifest(client.get_object(Bucket=BUCKET, Key=key)["Body"].read(), key)
        if all(present.get(f["path"]) == f["size"] for f in manifest["files"]):
            return step
    return None


def measure(
    fn: Any, calls: Counter[str], repeats: int, setup: Any = None
) -> tuple[Any, int, dict[str, int], float]:
    """Median wall time of ``fn(setup())`` over ``repeats``; ``setup`` (not timed) builds clients."""
    times = []
    result = None
    for _ in range(repeats):
        arg = setup() if setup else None
        calls.clear()
        started = time.perf_counter()
        result = fn(arg) if setup else fn()
        times.append(time.perf_counter() - started)
    return result, sum(calls.values()), dict(calls), statistics.median(times)


def run_case(checkpoints: int, files: int, repeats: int) -> dict[str, Any]:
    from airflow_dist_training.hooks.checkpoints import CheckpointHook

    global BUCKET
    BUCKET = (
        f"bench-n{checkpoints}-f{files}"  # one bucket per case: moto's listing cost grows with bucket size
    )
    boto3_client = __import__("boto3").client("s3", region_name="us-east-1")
    boto3_client.create_bucket(Bucket=BUCKET)
    prefix = "pipeline/run-1/"
    seed_seconds = seed(prefix, checkpoints, files)
    root = f"s3://{BUCKET}/{prefix}"
    client, naive_calls = counted_client()
    naive = measure(lambda: naive_latest(client, prefix), naive_calls, repeats)
    out: dict[str, Any] = {
        "checkpoints": checkpoints,
        "files": files,
        "objects": checkpoints * (files + 1),
        "seed_s": seed_seconds,
    }
    out["naive"] = naive
    for label, use_hint in (("ours_hint", True), ("ours_nohint", False)):
        calls: Counter[str] = Counter()

        def make_hook(calls: Counter[str] = calls) -> CheckpointHook:
            # A fresh hook per run (as in a task): its one GetBucketLocation check is counted and timed.
            hook = CheckpointHook(aws_conn_id=None, region_name="us-east-1", verify_region=True)
            hook.s3_client.meta.events.register(
                "before-call.s3", lambda model, **_: calls.update([model.name])
            )
            return hook

        def lookup(hook: CheckpointHook, use_hint: bool = use_hint) -> int | None:
            info = hook.latest_complete(root, use_hint=use_hint)
            return info.step if info else None

        out[label] = measure(lookup, calls, repeats, setup=make_hook)
    expected = checkpoints - 1
    for label in ("naive", "ours_hint", "ours_nohint"):
        assert out[label][0] == expected, (label, out[label][0], expected)
    return out


def report(case: dict[str, Any]) -> None:
    n_calls, n_time = case["naive"][1], case["naive"][3]
    print(
        f"\n{case['checkpoints']:,} checkpoints x {case['files']} files "
        f"({case['objects']:,} objects, seeded in {case['seed_s']:.1f}s); newest complete = step {case['naive'][0]}"
    )
    print(
        f"  {'method':<34}{'S3 calls':>9}{'wall s':>10}{'calls ratio':>13}{'time ratio':>12}   calls by operation"
    )
    rows = [
        ("naive full listing (anchor)", case["naive"]),
        ("ours: _LATEST.json hint", case["ours_hint"]),
        ("ours: Delimiter='/' (no hint)", case["ours_nohint"]),
    ]
    for name, (_, calls, by_op, seconds) in rows:
        print(
            f"  {name:<34}{calls:>9}{seconds:>10.3f}{n_calls / calls:>12.1f}x{n_time / seconds:>11.1f}x   {by_op}"
        )


# ------------------------------------------------------------------ DCP: 1,000 checkpoints x 64 shards
def dcp_metadata(shards: int, shard_bytes: int) -> bytes:
    """A real DCP ``.metadata``: torch's own ``Metadata`` pickled, as ``dcp.save`` writes it."""
    import pickle

    from torch.distributed.checkpoint.filesystem import _StorageInfo
    from torch.distributed.checkpoint.metadata import BytesStorageMetadata, Metadata, MetadataIndex

    return pickle.dumps(
        Metadata(
            state_dict_metadata={f"layer{i}.weight": BytesStorageMetadata() for i in range(shards)},
            storage_data={
                MetadataIndex(f"layer{i}.weight"): _StorageInfo(f"__{i}_0.distcp", 0, shard_bytes)
                for i in range(shards)
            },
        )
    )


def seed_dcp(prefix: str, checkpoints: int, shards: int) -> float:
    """``checkpoints`` DCP directories of ``shards`` shards; the newest has no .metadata yet (uploading),
    the one before has a short shard (its upload cut): the answer is the third newest."""
    from moto.backends import get_backend

    backend = get_backend("s3")[ACCOUNT]["global"]
    shard_bytes = 64
    metadata = dcp_metadata(shards, shard_bytes)
    started = time.perf_counter()
    for step in range(1, checkpoints + 1):
        base = f"{prefix}step-{step:012d}/"
        for i in range(shards):
            short = step == checkpoints - 1 and i == shards - 1
            backend.put_object(
                BUCKET, f"{base}__{i}_0.distcp", b"x" * (shard_bytes // 2 if short else shard_bytes)
            )
        if step != checkpoints:
            backend.put_object(BUCKET, f"{base}.metadata", metadata)
    return time.perf_counter() - started


def naive_dcp_latest(client: Any, prefix: str) -> int | None:
    """List everything, read every .metadata, pick the newest whose shards are all there and long enough."""
    from airflow_dist_training.checkpoints.dcp_metadata import dcp_references

    per_step: dict[int, dict[str, int]] = {}
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix):
        for obj in page.get("Contents", []):
            top, _, rest = obj["Key"][len(prefix) :].partition("/")
            if top.startswith("step-") and rest:
                per_step.setdefault(int(top[5:]), {})[rest] = obj["Size"]
    complete = []
    for step, present in per_step.items():
        if ".metadata" in present:
            raw = client.get_object(Bucket=BUCKET, Key=f"{prefix}step-{step:012d}/.metadata")["Body"].read()
            if all(present.get(path, -1) >= end for path, end in dcp_references(raw).items()):
                complete.append(step)
    return max(complete, default=None)


def run_dcp_case(checkpoints: int, shards: int, repeats: int) -> dict[str, Any]:
    from airflow_dist_training.hooks.checkpoints import CheckpointHook

    global BUCKET
    BUCKET = f"bench-dcp-n{checkpoints}-s{shards}"
    __import__("boto3").client("s3", region_name="us-east-1").create_bucket(Bucket=BUCKET)
    prefix = "pipeline/run-1/"
    out: dict[str, Any] = {
        "checkpoints": checkpoints,
        "files": shards,
        "objects": checkpoints * (shards + 1) - 1,
    }
    out["seed_s"] = seed_dcp(prefix, checkpoints, shards)
    client, naive_calls = counted_client()
    out["naive"] = measure(lambda: naive_dcp_latest(client, prefix), naive_calls, repeats)
    for label, layout in (("ours_dcp", "dcp"), ("ours_auto", "auto")):
        calls: Counter[str] = Counter()

        def make_hook(calls: Counter[str] = calls, layout: str = layout) -> CheckpointHook:
            hook = CheckpointHook(
                aws_conn_id=None, region_name="us-east-1", verify_region=False, layout=layout
            )
            hook.s3_client.meta.events.register(
                "before-call.s3", lambda model, **_: calls.update([model.name])
            )
            return hook

        def lookup(hook: CheckpointHook) -> int | None:
            info = hook.latest_complete(f"s3://{BUCKET}/{prefix}")
            return info.step if info else None

        out[label] = measure(lookup, calls, repeats, setup=make_hook)
    for label in ("naive", "ours_dcp", "ours_auto"):
        assert out[label][0] == checkpoints - 2, (label, out[label][0])
    return out


def report_dcp(case: dict[str, Any]) -> None:
    n_calls, n_time = case["naive"][1], case["naive"][3]
    print(
        f"\nDCP: {case['checkpoints']:,} checkpoints x {case['files']} shards ({case['objects']:,} objects, seeded in "
        f"{case['seed_s']:.1f}s); newest has no .metadata, the next a short shard; latest complete = step {case['naive'][0]}"
    )
    print(
        f"  {'method':<42}{'S3 calls':>9}{'wall s':>10}{'calls ratio':>13}{'time ratio':>12}   calls by operation"
    )
    rows = [
        ("list everything + GET every .metadata (anchor)", case["naive"]),
        ("ours: layout=dcp", case["ours_dcp"]),
        ("ours: layout=auto", case["ours_auto"]),
    ]
    for name, (_, calls, by_op, seconds) in rows:
        print(
            f"  {name:<42}{calls:>9}{seconds:>10.3f}{n_calls / calls:>12.1f}x{n_time / seconds:>11.1f}x   {by_op}"
        )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--checkpoints", type=int, default=10_000)
    parser.add_argument("--files", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--no-scaling", action="store_true", help="skip the 20 vs 200 files-per-checkpoint runs"
    )
    parser.add_argument(
        "--quick", action="store_true", help="tiny sizes, 1 round: the suite checks the bench still runs"
    )
    parser.add_argument(
        "--dcp-only", action="store_true", help="only the DCP case (1,000 checkpoints x 64 shards)"
    )
    parser.add_argument("--dcp-checkpoints", type=int, default=1_000)
    parser.add_argument("--dcp-shards", type=int, default=64)
    args = parser.parse_args()
    if args.quick:
        args.checkpoints, args.files, args.repeats, args.no_scaling = 50, 3, 1, True
        args.dcp_checkpoints, args.dcp_shards = 20, 4

    logging.disable(logging.INFO)
    os.environ.update(
        AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_DEFAULT_REGION="us-east-1"
    )
    os.environ.pop("AWS_PROFILE", None)
    from moto.server import ThreadedMotoServer

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    os.environ["AWS_ENDPOINT_URL"] = f"http://127.0.0.1:{port}"
    try:
        print(
            "latest complete checkpoint lookup: ours vs naive full listing (moto server, same bucket, median of",
            args.repeats,
            "runs)",
        )
        dcp_case = run_dcp_case(args.dcp_checkpoints, args.dcp_shards, args.repeats)
        report_dcp(dcp_case)
        dcp_ratio = dcp_case["naive"][1] / dcp_case["ours_dcp"][1]
        print(f"\nDCP: S3 calls anchor/ours = {dcp_ratio:.1f}x; ours examined the newest candidates only")
        if args.dcp_only:
            return 0
        main_case = run_case(args.checkpoints, args.files, args.repeats)
        report(main_case)
        if not args.no_scaling:
            print("\nscaling: cost vs files per checkpoint (N=1,000)")
            for files in (20, 200):
                report(run_case(1_000, files, args.repeats))
            print("\nscaling: cost vs number of checkpoints (20 files each)")
            for n in (3_000,):  # 1,000 x 20 is the first scaling row above
                report(run_case(n, 20, args.repeats))
        ratio = main_case["naive"][1] / main_case["ours_hint"][1]
        print(f"\nratio S3 calls naive/ours = {ratio:.1f}x")
        print(
            f"\ngoal >= 20x fewer S3 calls at {args.checkpoints:,} x {args.files}: {ratio:.1f}x -> {'met' if ratio >= 20 else 'NOT met'}"
        )
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
