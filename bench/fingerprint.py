"""Benchmark: the data fingerprint of an S3 channel, vs the raw paginated listing alone (the anchor).

The fingerprint (``FingerprintHook.channel_fingerprint``) is one paginated ``ListObjectsV2`` of the
channel prefix plus a sha256 over (relative key, ETag, size) of every object. The anchor is the
cheapest possible look at the same data: the same paginated listing, with nothing done to it. The
ratio shows what the fingerprint adds on top of the listing it cannot avoid (no GET or HEAD of any
object). Both run side by side against the same ThreadedMotoServer bucket (seeded in-process).

    .venv/bin/python bench/fingerprint.py                 # 100,000 objects
    .venv/bin/python bench/fingerprint.py --objects 10000 --repeats 3
"""

from __future__ import annotations

import argparse
import logging
import os
import socket
import statistics
import sys
import time
from collections import Counter
from typing import Any

BUCKET = "bench-fingerprint"
ACCOUNT = "123456789012"
PREFIX = "data/train/"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def seed(objects: int) -> float:
    from moto.backends import get_backend

    backend = get_backend("s3")[ACCOUNT]["global"]
    started = time.perf_counter()
    for i in range(objects):
        backend.put_object(BUCKET, f"{PREFIX}part-{i:07d}.csv", b"x" * (8 + i % 64))
    return time.perf_counter() - started


def raw_listing(client: Any) -> int:
    """The anchor: the paginated listing alone."""
    n = 0
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=PREFIX):
        n += len(page.get("Contents") or [])
    return n


def timed(fn: Any, repeats: int) -> tuple[Any, float]:
    times, result = [], None
    for _ in range(repeats):
        started = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - started)
    return result, statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--objects", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="tiny sizes, 1 round: the suite checks the bench still runs")
    args = parser.parse_args()
    if args.quick:
        args.objects, args.repeats = 300, 1
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
        import boto3

        from airflow_dist_training.hooks.fingerprint import FingerprintHook

        client = boto3.client("s3", region_name="us-east-1")
        client.create_bucket(Bucket=BUCKET)
        seeded = seed(args.objects)
        raw_listing(client)  # warm-up, not timed: the first listing of a fresh bucket is slower on moto
        calls: Counter[str] = Counter()
        client.meta.events.register("before-call.s3", lambda model, **_: calls.update([model.name]))
        listed, anchor_s = timed(lambda: raw_listing(client), args.repeats)
        anchor_calls = sum(calls.values()) // args.repeats

        hook = FingerprintHook(aws_conn_id=None, region_name="us-east-1")
        ours_calls: Counter[str] = Counter()
        hook.s3.meta.events.register("before-call.s3", lambda model, **_: ours_calls.update([model.name]))
        result, ours_s = timed(lambda: hook.channel_fingerprint(f"s3://{BUCKET}/{PREFIX}"), args.repeats)
        assert listed == args.objects and result["objects"] == args.objects, (listed, result)
        per_run = {k: v // args.repeats for k, v in ours_calls.items()}
        print(
            f"data fingerprint of one S3 channel: {args.objects:,} objects (seeded in {seeded:.1f}s), "
            f"moto server, median of {args.repeats} runs"
        )
        print(f"  {'method':<42}{'S3 calls':>9}{'wall s':>9}{'ratio to anchor':>17}")
        print(f"  {'raw paginated listing alone (anchor)':<42}{anchor_calls:>9}{anchor_s:>9.2f}{1.0:>16.2f}x")
        print(
            f"  {'fingerprint: listing + sha256 of entries':<42}{sum(per_run.values()):>9}{ours_s:>9.2f}"
            f"{ours_s / anchor_s:>16.2f}x   {per_run}"
        )
        print(f"  fingerprint {result['fingerprint']}, {result['bytes']:,} bytes listed, no object read")
        print(f"  ratio wall fingerprint/listing = {ours_s / anchor_s:.2f}x")
        # what the fingerprint adds to the listing it cannot avoid: hashing the entries (pure, in-process)
        from airflow_dist_training.retraining.fingerprint import Entry, listing_fingerprint

        entries = [Entry(f"part-{i:07d}.csv", f"etag-{i}", 8 + i % 64) for i in range(args.objects)]
        _, hashing_s = timed(lambda: listing_fingerprint(entries), max(args.repeats, 5))
        print(
            f"  hashing {args.objects:,} entries alone: {hashing_s * 1000:.0f} ms "
            f"= {hashing_s / anchor_s * 100:.2f}% of the listing's wall time"
        )
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
