"""FSx for Lustre I/O: file systems, data repository associations and tasks, pre-flight reads.

``FSxHook`` holds one Amazon-provider ``AwsBaseHook`` per AWS service it talks to (``fsx``,
``ec2``, ``s3``), all from the same ``aws_conn_id``, built on first use: importing this module
imports neither boto3 nor the Amazon provider. What to send is decided by the pure helpers in
``airflow_dist_training.fsx``; this module only talks to AWS and translates its errors.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from airflow.sdk import BaseHook

from airflow_dist_training.aws_errors import error_code, is_access_denied, service_permission_error
from airflow_dist_training.errors import SpecValidationError
from airflow_dist_training.fsx import requests as req
from airflow_dist_training.fsx.preflight import PreflightFacts
from airflow_dist_training.fsx.progress import FILE_SYSTEM_FAILED, NON_TERMINAL
from airflow_dist_training.hooks.aws import AwsConnectionMixin
from airflow_dist_training.retry import poll_until


def _clean(value: Any) -> Any:
    """Drop ResponseMetadata and turn datetimes into ISO strings (results stay JSON-friendly)."""
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items() if k != "ResponseMetadata"}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return value


def _raise_if_failed(resource: dict[str, Any], what: str) -> None:
    lifecycle = resource.get("Lifecycle")
    if lifecycle in FILE_SYSTEM_FAILED:
        message = (resource.get("FailureDetails") or {}).get("Message", "")
        raise RuntimeError(f"{what} is {lifecycle}: {message}".rstrip(": "))


class FSxHook(AwsConnectionMixin, BaseHook):
    """Talk to Amazon FSx for Lustre (and the EC2/S3 reads its pre-flight needs).

    :param aws_conn_id: The Airflow AWS connection; ``None`` uses the default boto3 credential chain.
    :param region_name: AWS region; default from the connection.
    :param verify: Whether to verify SSL certificates (or a CA bundle path).
    :param botocore_config: Extra botocore client configuration (a dict).
    """

    conn_name_attr = "aws_conn_id"
    default_conn_name = "aws_default"
    conn_type = "aws"
    hook_name = "Amazon FSx for Lustre"
    client_type = "fsx"

    def __init__(
        self,
        aws_conn_id: str | None = "aws_default",
        region_name: str | None = None,
        verify: bool | str | None = None,
        botocore_config: dict[str, Any] | None = None,
    ) -> None:
        super().__init__()
        self._set_aws_connection(aws_conn_id, region_name, verify, botocore_config)
        self.sleep: Callable[[float], None] = time.sleep

    def get_conn(self) -> Any:
        return self.aws_client("fsx")

    async def get_async_conn(self) -> Any:
        """An aiobotocore FSx client context manager: ``async with await hook.get_async_conn() as c``."""
        return await self.aws_hook("fsx").get_async_conn()

    def _call(self, client_type: str, operation: str, **kwargs: Any) -> dict[str, Any]:
        try:
            return getattr(self.aws_client(client_type), operation)(**kwargs)
        except Exception as exc:
            if is_access_denied(exc):
                raise service_permission_error(
                    exc, service=client_type, operation=operation, conn_id=self.aws_conn_id
                ) from exc
            raise

    def _unless_missing(self, operation: str, **kwargs: Any) -> dict[str, Any] | None:
        """An FSx call; ``None`` when the file system does not exist."""
        try:
            return self._call("fsx", operation, **kwargs)
        except Exception as exc:
            if error_code(exc) == "FileSystemNotFound":
                return None
            raise

    def describe_file_system(self, file_system_id: str) -> dict[str, Any] | None:
        """The file system, or ``None`` if it does not exist."""
        response = self._unless_missing("describe_file_systems", FileSystemIds=[file_system_id])
        found = response["FileSystems"] if response is not None else []
        return _clean(found[0]) if found else None

    def create_file_system(self, request: dict[str, Any]) -> dict[str, Any]:
        return _clean(self._call("fsx", "create_file_system", **request)["FileSystem"])

    def wait_file_system_available(
        self, file_system_id: str, poll_interval: float = 30, timeout: float = 3600
    ) -> dict[str, Any]:
        def read() -> dict[str, Any]:
            fs = self.describe_file_system(file_system_id)
            if fs is None:
                raise RuntimeError(f"file system {file_system_id} disappeared while being created")
            _raise_if_failed(fs, f"file system {file_system_id}")
            if fs.get("Lifecycle") != "AVAILABLE":
                self.log.info("File system %s is %s; waiting", file_system_id, fs.get("Lifecycle"))
            return fs

        return self._wait_available(read, f"file system {file_system_id}", poll_interval, timeout)

    def delete_file_system(self, file_system_id: str) -> str | None:
        """Delete; returns the new lifecycle, or ``None`` if it was already gone (idempotent)."""
        response = self._unless_missing("delete_file_system", FileSystemId=file_system_id)
        return None if response is None else response.get("Lifecycle")

    def describe_associations(self, file_system_id: str) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        kwargs: dict[str, Any] = {"Filters": [{"Name": "file-system-id", "Values": [file_system_id]}]}
        while True:
            page = self._call("fsx", "describe_data_repository_associations", **kwargs)
            out.extend(_clean(page.get("Associations") or []))
            if not page.get("NextToken"):
                return out
            kwargs["NextToken"] = page["NextToken"]

    def describe_association(self, association_id: str) -> dict[str, Any]:
        page = self._call("fsx", "describe_data_repository_associations", AssociationIds=[association_id])
        return _clean(page["Associations"][0])

    def ensure_association(
        self,
        file_system_id: str,
        file_system_path: str,
        s3_prefix: str,
        *,
        wait: bool = True,
        poll_interval: float = 15,
        timeout: float = 1800,
        **options: Any,
    ) -> tuple[dict[str, Any], bool]:
        """Reuse the matching association or create it; ``(association, created)``.

        Raises ``SpecValidationError`` naming both paths on a conflicting association.
        """
        match = req.match_association(
            self.describe_associations(file_system_id), file_system_id, file_system_path, s3_prefix
        )
        created = match.action != "reuse"
        if created:
            request = req.build_association_request(file_system_id, file_system_path, s3_prefix, **options)
            assoc = _clean(self._call("fsx", "create_data_repository_association", **request)["Association"])
        else:
            assoc = request = dict(match.association or {})
        self.log.info(
            "%s association %s (%s -> %s)",
            "Created" if created else "Reusing",
            assoc.get("AssociationId"),
            request.get("FileSystemPath"),
            request.get("DataRepositoryPath"),
        )
        if wait:
            assoc = self.wait_association_available(assoc["AssociationId"], poll_interval, timeout, assoc)
        return assoc, created

    def wait_association_available(
        self, association_id: str, poll_interval: float, timeout: float, current: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        def read() -> dict[str, Any]:
            nonlocal current  # the first poll reads the association the caller already has
            assoc, current = current or self.describe_association(association_id), None
            _raise_if_failed(assoc, f"data repository association {association_id}")
            return assoc

        return self._wait_available(read, f"association {association_id}", poll_interval, timeout)

    def _wait_available(
        self, read: Callable[[], dict[str, Any]], what: str, poll_interval: float, timeout: float
    ) -> dict[str, Any]:
        """Poll ``read`` until its resource's ``Lifecycle`` is ``AVAILABLE`` (``read`` raises on FAILED)."""
        return poll_until(
            read,
            lambda resource: resource.get("Lifecycle") == "AVAILABLE",
            interval=poll_interval,
            timeout=timeout,
            timeout_message=lambda last: f"{what} not AVAILABLE after {timeout:.0f}s ({last.get('Lifecycle')})",
            sleep=self.sleep,
        )

    def prepare_task(
        self,
        file_system_id: str,
        task_type: str,
        paths: list[str] | None = None,
        *,
        report_path: str | None = None,
        report: bool = True,
        **options: Any,
    ) -> dict[str, Any]:
        """The ``CreateDataRepositoryTask`` request, after checking each path is inside an association."""
        kind = req.task_type(task_type)
        api_paths, covering = req.resolve_task_paths(kind, paths, self.describe_associations(file_system_id))
        if report and report_path is None:
            if covering is None:
                why = f"give report_path: no single association of {file_system_id} to put it in"
                raise SpecValidationError([("report_path", why)])
            report_path = covering["DataRepositoryPath"]
        return req.build_task_request(
            file_system_id, kind, api_paths, report_path=report_path if report else None, **options
        )

    def create_task(self, request: dict[str, Any]) -> dict[str, Any]:
        task = _clean(self._call("fsx", "create_data_repository_task", **request)["DataRepositoryTask"])
        self.log.info("Started FSx %s task %s on %s", task["Type"], task["TaskId"], task.get("FileSystemId"))
        return task

    def describe_task(self, task_id: str) -> dict[str, Any]:
        tasks = self._call("fsx", "describe_data_repository_tasks", TaskIds=[task_id])["DataRepositoryTasks"]
        return _clean(tasks[0])

    def cancel_task(self, task_id: str) -> str:
        return str(self._call("fsx", "cancel_data_repository_task", TaskId=task_id).get("Lifecycle"))

    def wait_task(self, task_id: str, poll_interval: float = 30, timeout: float = 86400) -> dict[str, Any]:
        """Poll until the task is terminal, logging progress when it changes; returns the task."""
        from airflow_dist_training.fsx.progress import format_progress, task_progress

        last: list[str | None] = [None]

        def read() -> dict[str, Any]:
            task = self.describe_task(task_id)
            line = format_progress(task_progress(task))
            if line != last[0]:
                self.log.info("%s", line)
                last[0] = line
            return task

        return poll_until(
            read,
            lambda task: task["Lifecycle"] not in NON_TERMINAL,
            interval=poll_interval,
            timeout=timeout,
            timeout_message=lambda task: f"FSx task {task_id} still {task['Lifecycle']} after {timeout:.0f}s",
            sleep=self.sleep,
        )

    def describe_subnets(self, subnet_ids: list[str]) -> list[dict[str, Any]]:
        return self._describe_ec2("describe_subnets", "SubnetIds", "Subnets", subnet_ids)

    def describe_security_groups(self, group_ids: list[str]) -> list[dict[str, Any]]:
        return self._describe_ec2("describe_security_groups", "GroupIds", "SecurityGroups", group_ids)

    def _describe_ec2(self, operation: str, ids_key: str, items_key: str, ids: list[str]) -> list[dict[str, Any]]:
        """EC2 resources by id, leaving out the missing ones."""
        if not ids:
            return []
        try:
            return _clean(self._call("ec2", operation, **{ids_key: list(ids)})[items_key])
        except Exception as exc:
            if "NotFound" not in error_code(exc):
                raise
            if len(ids) == 1:
                return []
        # one of several is missing: find out which
        return [r for one in ids for r in self._describe_ec2(operation, ids_key, items_key, [one])]

    def file_system_security_group_ids(self, file_system: dict[str, Any]) -> list[str]:
        """The file system's security groups, read from its network interfaces."""
        eni_ids = file_system.get("NetworkInterfaceIds") or []
        if not eni_ids:
            return []
        enis = self._call("ec2", "describe_network_interfaces", NetworkInterfaceIds=list(eni_ids))
        groups = (g["GroupId"] for eni in enis.get("NetworkInterfaces") or [] for g in eni.get("Groups") or [])
        return list(dict.fromkeys(groups))  # unique, in first-seen order

    def s3_prefix_size(self, s3_uri: str) -> tuple[int, int]:
        """``(object count, total bytes)`` under an S3 prefix (folder markers not counted)."""
        bucket, key = req.parse_s3_uri(s3_uri)
        prefix = key.strip("/") + "/" if key.strip("/") else ""
        paginator = self.aws_client("s3").get_paginator("list_objects_v2")
        try:
            sizes = [
                int(obj.get("Size") or 0)
                for page in paginator.paginate(Bucket=bucket, Prefix=prefix)
                for obj in page.get("Contents") or []
                if obj.get("Size") or not obj["Key"].endswith("/")  # a folder marker is no object
            ]
        except Exception as exc:
            if error_code(exc) == "NoSuchBucket":
                raise SpecValidationError(
                    [("s3_uri", f"bucket {bucket} of {s3_uri} does not exist")]
                ) from exc
            raise
        return len(sizes), sum(sizes)

    def gather_preflight_facts(
        self,
        file_system_id: str,
        *,
        subnet_ids: list[str],
        security_group_ids: list[str],
        s3_uri: str | None = None,
        file_system_security_group_ids: list[str] | None = None,
    ) -> PreflightFacts:
        """Every AWS read the pre-flight rules need (reads only; nothing is created)."""
        fs = self.describe_file_system(file_system_id)
        fs_subnets: list[dict[str, Any]] = []
        fs_sgs: list[dict[str, Any]] = []
        if fs is not None:
            fs_subnets = self.describe_subnets(list(fs.get("SubnetIds") or []))
            sg_ids = file_system_security_group_ids or self.file_system_security_group_ids(fs)
            fs_sgs = self.describe_security_groups(sg_ids)
        count, size = self.s3_prefix_size(s3_uri) if s3_uri is not None else (None, None)
        return PreflightFacts(
            file_system_id=file_system_id,
            file_system=fs,
            file_system_subnets=fs_subnets,
            training_subnet_ids=list(subnet_ids),
            training_subnets=self.describe_subnets(list(subnet_ids)),
            training_security_group_ids=list(security_group_ids),
            file_system_security_groups=fs_sgs,
            s3_uri=s3_uri,
            dataset_objects=count,
            dataset_bytes=size,
        )
