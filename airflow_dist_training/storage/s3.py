"""The ``s3`` store: S3 through the Amazon provider's hook (or a given boto3 client).

Every call goes through :meth:`S3Store._call`: throttling backoff (``retry.call_throttled``) and one
translation of AWS errors into messages naming the URI (``aws_errors``). boto3 is imported only
when a client is built.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Sequence
from functools import cached_property
from pathlib import Path
from typing import Any, TypeVar

from airflow_dist_training.aws_errors import error_code, http_status, is_access_denied, s3_permission_error
from airflow_dist_training.errors import SpecValidationError
from airflow_dist_training.hooks.aws import AwsConnectionMixin
from airflow_dist_training.retry import call_throttled
from airflow_dist_training.storage.location import Location
from airflow_dist_training.storage.stores import FileStat, StoreOptions

T = TypeVar("T")
DELETE_BATCH = 1000
THROTTLE_RETRIES = 5
_MULTIPART_COPY_THRESHOLD = 5 * 1024**3
_WRONG_REGION = ("PermanentRedirect", "AuthorizationHeaderMalformed", "IllegalLocationConstraintException")


class S3Store(AwsConnectionMixin):
    """S3 objects under ``s3://bucket/key`` locations.

    ``api_calls`` counts the S3 calls made (the cost tests read it); a transfer (``upload_file``,
    ``download_file``) counts as one."""

    def __init__(self, options: StoreOptions) -> None:
        self._set_aws_connection(options.aws_conn_id, options.region_name, botocore_config=options.botocore_config)
        self.verify_region = options.verify_region
        self._given_client = options.s3_client
        self.api_calls: Counter[str] = Counter()
        self._checked_buckets: set[str] = set()
        self._lock = threading.Lock()

    @cached_property
    def client(self) -> Any:
        return self._given_client or self.aws_client("s3")

    # ------------------------------------------------------------------ calls and errors
    def _call(self, operation: str, loc: Location, fn: Callable[[], T], calls: int = 1) -> T:
        """``fn()`` with throttling backoff; AWS errors become messages naming ``loc``."""
        from botocore.exceptions import ClientError

        with self._lock:
            self.api_calls[operation] += calls
        try:
            return call_throttled(fn, what=f"S3 {operation} {loc.uri}", retries=THROTTLE_RETRIES)
        except ClientError as exc:
            code = error_code(exc)
            if is_access_denied(exc) or (http_status(exc) == 403 and code != "SignatureDoesNotMatch"):
                raise s3_permission_error(exc, operation=operation, uri=loc.uri, conn_id=self.aws_conn_id) from None
            if code == "NoSuchBucket":
                raise SpecValidationError([("uri", f"{loc.uri}: bucket {loc.bucket} does not exist")]) from None
            if code in _WRONG_REGION:
                region = exc.response.get("Error", {}).get("Region") or "another region"
                raise SpecValidationError([("uri", self._region_message(loc, str(region)))]) from None
            raise

    def _region_message(self, loc: Location, bucket_region: str) -> str:
        return (
            f"{loc.uri}: bucket {loc.bucket} is in region {bucket_region}, but connection {self.aws_conn_id!r} "
            f"uses region {self._client_region}; use a connection (or region_name) in {bucket_region}, "
            f"or a bucket in {self._client_region}"
        )

    @property
    def _client_region(self) -> str:
        return str(self.client.meta.region_name or "us-east-1")

    def check(self, loc: Location) -> None:
        """Once per bucket (``verify_region``): a bucket in another region is a clear error."""
        if not self.verify_region or loc.bucket in self._checked_buckets:
            return
        response = self._call(
            "GetBucketLocation", loc, lambda: self.client.get_bucket_location(Bucket=loc.bucket)
        )
        region = response.get("LocationConstraint") or "us-east-1"
        region = {"EU": "eu-west-1"}.get(region, region)
        if region != self._client_region:
            raise SpecValidationError([("uri", self._region_message(loc, region))])
        self._checked_buckets.add(loc.bucket)

    def _pages(self, loc: Location, name_prefix: str = "", **kwargs: Any) -> list[dict[str, Any]]:
        paginator = self.client.get_paginator("list_objects_v2")
        prefix = loc.prefix + name_prefix
        pages = self._call(
            "ListObjectsV2", loc, lambda: list(paginator.paginate(Bucket=loc.bucket, Prefix=prefix, **kwargs)), 0
        )
        with self._lock:
            self.api_calls["ListObjectsV2"] += len(pages)  # one call per page
        return pages

    # ------------------------------------------------------------------ the protocol
    def list_dirs(self, loc: Location, name_prefix: str = "", start_after: str | None = None) -> list[str]:
        extra = {"StartAfter": loc.prefix + start_after} if start_after is not None else {}
        pages = self._pages(loc, name_prefix, Delimiter="/", **extra)
        return [cp["Prefix"][len(loc.prefix) :].rstrip("/") for page in pages for cp in page.get("CommonPrefixes", [])]

    def list_tree(self, loc: Location) -> dict[str, FileStat]:
        return {
            obj["Key"][len(loc.prefix) :]: (int(obj["Size"]), obj["LastModified"].timestamp())
            for page in self._pages(loc)
            for obj in page.get("Contents", [])
        }

    def read(self, loc: Location) -> tuple[bytes, float] | None:
        from botocore.exceptions import ClientError

        try:
            response = self._call("GetObject", loc, lambda: self.client.get_object(Bucket=loc.bucket, Key=loc.prefix))
        except ClientError as exc:
            if error_code(exc) in ("NoSuchKey", "404", "NotFound"):
                return None
            raise
        return response["Body"].read(), response["LastModified"].timestamp()

    def write(self, loc: Location, body: bytes, content_type: str | None = None) -> None:
        extra = {"ContentType": content_type} if content_type else {}
        self._call("PutObject", loc, lambda: self.client.put_object(Bucket=loc.bucket, Key=loc.prefix, Body=body, **extra))

    def delete(self, loc: Location, names: Sequence[str]) -> int:
        """``DeleteObjects`` in batches of 1000 keys."""
        keys = [loc.key(n) for n in names]
        for start in range(0, len(keys), DELETE_BATCH):
            batch = keys[start : start + DELETE_BATCH]
            response = self._call(
                "DeleteObjects",
                loc,
                lambda batch=batch: self.client.delete_objects(  # type: ignore[misc]
                    Bucket=loc.bucket, Delete={"Objects": [{"Key": k} for k in batch], "Quiet": True}
                ),
            )
            if errors := response.get("Errors"):
                first = errors[0]
                uri = Location(loc.scheme, loc.bucket, str(first.get("Key"))).uri
                if first.get("Code") == "AccessDenied":
                    raise s3_permission_error(
                        RuntimeError(first.get("Message")), operation="DeleteObjects", uri=uri, conn_id=self.aws_conn_id
                    )
                raise RuntimeError(f"{len(errors)} objects not deleted, first {uri}: {first.get('Message')}")
        return len(keys)

    def copy(self, src: Location, dst: Location, size: int) -> None:
        source = {"Bucket": src.bucket, "Key": src.prefix}
        if size >= _MULTIPART_COPY_THRESHOLD:
            self._call("CopyObject", src, lambda: self.client.copy(source, dst.bucket, dst.prefix))
        else:
            self._call(
                "CopyObject", src, lambda: self.client.copy_object(CopySource=source, Bucket=dst.bucket, Key=dst.prefix)
            )

    def put_file(self, path: Path, loc: Location) -> None:
        self._call("PutObject", loc, lambda: self.client.upload_file(str(path), loc.bucket, loc.prefix))

    def get_file(self, loc: Location, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._call("GetObject", loc, lambda: self.client.download_file(loc.bucket, loc.prefix, str(path)))

    def local_path(self, loc: Location) -> Path | None:
        return None
