"""S3 pre-flight reads: every bucket a run uses exists, every input prefix holds objects.

Reads only (``HeadBucket``, ``ListObjectsV2`` with ``MaxKeys=1``). A missing bucket or an empty
input prefix is a ``Problem`` naming the spec field and the URI, so the ``plan`` task fails with
one clear message instead of a later task retrying a ``NoSuchBucket`` as if it were transient.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from airflow_dist_training.aws_errors import error_code
from airflow_dist_training.errors import Problem
from airflow_dist_training.step_checks import S3Location
from airflow_dist_training.storage.location import split_uri


def check_s3_locations(
    s3: Any, locations: Iterable[S3Location], *, conn_id: str | None = None
) -> list[Problem]:
    """Problems (errors, and warnings where a permission hides the answer) for ``locations``."""
    problems: list[Problem] = []
    buckets: dict[str, str | None] = {}  # bucket -> None (exists) or the problem text
    for loc in locations:
        _, bucket, key = split_uri(loc.uri)
        if bucket not in buckets:
            buckets[bucket] = _head_bucket(s3, bucket, conn_id)
            if buckets[bucket] is not None:
                severity = "warning" if "access denied" in str(buckets[bucket]) else "error"
                problems.append(Problem(loc.field, f"{loc.uri}: {buckets[bucket]}", severity))
        if buckets[bucket] is not None or not loc.is_input:
            continue
        try:
            page = s3.list_objects_v2(Bucket=bucket, Prefix=key, MaxKeys=1)
        except Exception as exc:
            if error_code(exc) in {"AccessDenied", "403"}:
                problems.append(
                    Problem(loc.field, f"{loc.uri}: not checked (s3:ListBucket is denied)", "warning")
                )
                continue
            raise
        if not page.get("KeyCount") and not page.get("Contents"):
            problems.append(Problem(loc.field, f"{loc.uri}: no objects under this prefix"))
    return problems


def _head_bucket(s3: Any, bucket: str, conn_id: str | None) -> str | None:
    try:
        s3.head_bucket(Bucket=bucket)
    except Exception as exc:
        code = error_code(exc)
        if code in {"404", "NoSuchBucket", "NotFound"}:
            return f"bucket {bucket} does not exist"
        if code in {"403", "AccessDenied", "Forbidden"}:
            return f"access denied to bucket {bucket} (s3:ListBucket) for connection {conn_id!r}; not checked"
        raise
    return None
