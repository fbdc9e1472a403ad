"""FSx for Lustre operators: associations, data repository tasks, file systems, staging, pre-flight.

Declarative at parse time: constructors store arguments only; the hook is a ``cached_property``;
every AWS call happens in ``execute``. Results pushed to XCom are small JSON dicts (``docs/fsx.md``).
"""

from __future__ import annotations

import hashlib
import math
import warnings
from collections.abc import Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Any, Literal

from airflow_dist_training.compat import BaseOperator
from airflow_dist_training.fsx import requests as req
from airflow_dist_training.fsx.progress import DataRepositoryTaskFailed, progress_from_event, task_progress
from airflow_dist_training.hooks.aws import AWS_TEMPLATE_FIELDS, AwsConnectionMixin
from airflow_dist_training.lineage import staging_lineage
from airflow_dist_training.operators import default_deferrable

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_dist_training.fsx import preflight as pf
    from airflow_dist_training.hooks.fsx import FSxHook

#: Seconds a data repository task may take when no limit is set (the synchronous wait's cap).
TASK_WAIT_DEFAULT_SECONDS = 7 * 86400


def wait_limit(
    max_wait_seconds: float | None, *, deprecated_name: str, deprecated_value: float | None, per_unit: float = 1
) -> float | None:
    """``max_wait_seconds``, the one public name of a wait limit, from an old parameter if given.

    ``per_unit``: seconds per unit of the old parameter (``poll_interval`` for ``max_attempts``).
    """
    if deprecated_value is None:
        return max_wait_seconds
    warnings.warn(
        f"{deprecated_name} is deprecated; use max_wait_seconds (seconds)", DeprecationWarning, stacklevel=3
    )
    return max_wait_seconds if max_wait_seconds is not None else float(deprecated_value) * per_unit


def polls_within(max_wait_seconds: float | None, poll_interval: float) -> int | None:
    """How many polls fit in ``max_wait_seconds`` (at least one); ``None``: no limit."""
    if max_wait_seconds is None:
        return None
    # the epsilon keeps 3 x 0.01 s from becoming 4 polls through float rounding
    return max(1, math.ceil(max_wait_seconds / max(poll_interval, 1e-3) - 1e-9))


def _token(context: Context, *parts: str) -> str:
    """A ClientRequestToken stable across retries of one task instance (idempotent creates)."""
    ti = context.get("ti")
    run = (getattr(ti, "dag_id", ""), getattr(ti, "task_id", ""), context.get("run_id", ""))
    ident = ":".join([*map(str, run), str(getattr(ti, "map_index", -1)), *parts])
    return "adt-" + hashlib.sha256(ident.encode()).hexdigest()[:40]


def _operator_preflight(op: Any) -> tuple[pf.PreflightFacts, list[Any]]:
    """``run_fsx_preflight`` with the arguments of a pre-flight or staging operator."""
    from airflow_dist_training.fsx.preflight import run_fsx_preflight  # the rules load when a task checks

    return run_fsx_preflight(
        op.hook,
        op.file_system_id,
        subnets=op.subnets,
        security_group_ids=op.security_group_ids,
        s3_uri=op.s3_uri,
        az_mismatch=op.az_mismatch,
        file_system_security_group_ids=op.file_system_security_group_ids,
        log=op.log,
    )


def fsx_hook(operator: Any) -> FSxHook:
    """The FSx hook on the operator's four AWS settings."""
    from airflow_dist_training.hooks.fsx import FSxHook

    return FSxHook(**operator.aws_settings)


class _FSxBaseOperator(AwsConnectionMixin, BaseOperator):
    """Shared AWS arguments.

    :param aws_conn_id: The Airflow AWS connection (``None``: default boto3 credentials).
    :param region_name: AWS region; default from the connection.
    :param verify: SSL certificate verification (bool or CA bundle path).
    :param botocore_config: Extra botocore client configuration.
    """

    ui_color = "#7ac5cd"
    # the waiting operators' arguments (``_wait_task``) and the data repository task ``on_kill`` cancels
    poll_interval: float
    max_wait_seconds: float | None
    deferrable: bool
    _fsx_task_id: str | None = None

    def __init__(
        self,
        *,
        aws_conn_id: str | None = "aws_default",
        region_name: str | None = None,
        verify: bool | str | None = None,
        botocore_config: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self._set_aws_connection(aws_conn_id, region_name, verify, botocore_config)

    hook = cached_property(fsx_hook)

    def on_kill(self) -> None:
        if self._fsx_task_id:
            self.log.info("Cancelling FSx task %s", self._fsx_task_id)
            self.hook.cancel_task(self._fsx_task_id)

    def _defer_wait(self, trigger_class: Any, resume_kwargs: dict[str, Any] | None, **ids: Any) -> None:
        """Wait in the triggerer (polls within ``max_wait_seconds``); the task resumes in ``execute_complete``."""
        trigger = trigger_class(
            poll_interval=self.poll_interval,
            max_attempts=polls_within(self.max_wait_seconds, self.poll_interval),
            **ids,
            **self.aws_settings,
        )
        self.defer(trigger=trigger, method_name="execute_complete", kwargs=resume_kwargs)

    def _wait_task(self, fsx_task_id: str, **resume_kwargs: Any) -> dict[str, Any]:
        """Wait for a data repository task to succeed: in the triggerer (``deferrable``; the task
        resumes in ``execute_complete``) or here. Its progress, or ``DataRepositoryTaskFailed``."""
        if self.deferrable:
            from airflow_dist_training.triggers.fsx import FSxDataRepositoryTaskTrigger

            self._defer_wait(FSxDataRepositoryTaskTrigger, resume_kwargs or None, fsx_task_id=fsx_task_id)
        limit = self.max_wait_seconds or TASK_WAIT_DEFAULT_SECONDS
        done = task_progress(self.hook.wait_task(fsx_task_id, self.poll_interval, limit))
        if done["lifecycle"] != "SUCCEEDED":
            raise DataRepositoryTaskFailed(done)
        return done


class FSxPreflightOperator(_FSxBaseOperator):
    """Check an FSx for Lustre channel before training: reads only, nothing is created.

    :param file_system_id: The file system (``fs-...``).
    :param subnets: The training job's VPC subnets.
    :param security_group_ids: The training job's security groups.
    :param s3_uri: Optional dataset prefix: must be non-empty and fit the storage capacity.
    :param az_mismatch: ``error`` (default) or ``warning`` when the AZs differ.
    :param file_system_security_group_ids: Override the file system's security groups (default:
        read from its network interfaces).
    """

    template_fields: Sequence[str] = (
        *AWS_TEMPLATE_FIELDS,
        "file_system_id",
        "subnets",
        "security_group_ids",
        "s3_uri",
        "file_system_security_group_ids",
    )

    def __init__(
        self,
        *,
        file_system_id: str,
        subnets: Sequence[str],
        security_group_ids: Sequence[str],
        s3_uri: str | None = None,
        az_mismatch: Literal["error", "warning"] = "error",
        file_system_security_group_ids: Sequence[str] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.file_system_id = file_system_id
        self.subnets = subnets
        self.security_group_ids = security_group_ids
        self.s3_uri = s3_uri
        self.az_mismatch = az_mismatch
        self.file_system_security_group_ids = file_system_security_group_ids

    def execute(self, context: Context) -> dict[str, Any]:
        facts, warnings = _operator_preflight(self)
        summary = req.file_system_summary(facts.file_system or {})
        summary["warnings"] = [str(w) for w in warnings]
        summary["dataset_bytes"] = facts.dataset_bytes
        return summary


class FSxDataRepositoryAssociationOperator(_FSxBaseOperator):
    """Ensure an S3 prefix is associated with a file-system path (idempotent).

    Reuses a matching association (same file system, path and prefix); fails naming both on a
    conflicting one (same path, another prefix, or overlapping paths/prefixes).

    :param file_system_id: The file system.
    :param file_system_path: The path on the file system, e.g. ``/datasets/train``.
    :param s3_uri: The S3 prefix, e.g. ``s3://bucket/datasets/train/``.
    :param auto_import_events: Auto-import policy: any of ``NEW``, ``CHANGED``, ``DELETED``.
    :param auto_export_events: Auto-export policy: any of ``NEW``, ``CHANGED``, ``DELETED``.
    :param batch_import_metadata_on_create: Import metadata when the association is created.
    :param imported_file_chunk_size_mib: Striping chunk size for imported files.
    :param wait_for_available: Wait until the association is AVAILABLE.
    :param poll_interval: Seconds between status checks.
    """

    template_fields: Sequence[str] = (*AWS_TEMPLATE_FIELDS, "file_system_id", "file_system_path", "s3_uri")

    def __init__(
        self,
        *,
        file_system_id: str,
        file_system_path: str,
        s3_uri: str,
        auto_import_events: list[str] | None = None,
        auto_export_events: list[str] | None = None,
        batch_import_metadata_on_create: bool = False,
        imported_file_chunk_size_mib: int | None = None,
        wait_for_available: bool = True,
        poll_interval: float = 15,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.file_system_id = file_system_id
        self.file_system_path = file_system_path
        self.s3_uri = s3_uri
        self.auto_import_events = auto_import_events
        self.auto_export_events = auto_export_events
        self.batch_import_metadata_on_create = batch_import_metadata_on_create
        self.imported_file_chunk_size_mib = imported_file_chunk_size_mib
        self.wait_for_available = wait_for_available
        self.poll_interval = poll_interval

    def execute(self, context: Context) -> dict[str, Any]:
        assoc, created = self.hook.ensure_association(
            self.file_system_id,
            self.file_system_path,
            self.s3_uri,
            wait=self.wait_for_available,
            poll_interval=self.poll_interval,
            auto_import_events=self.auto_import_events,
            auto_export_events=self.auto_export_events,
            batch_import_metadata_on_create=self.batch_import_metadata_on_create,
            imported_file_chunk_size_mib=self.imported_file_chunk_size_mib,
            client_request_token=_token(context, self.file_system_path),
        )
        return {
            "association_id": assoc.get("AssociationId"),
            "file_system_id": self.file_system_id,
            "file_system_path": assoc.get("FileSystemPath"),
            "data_repository_path": assoc.get("DataRepositoryPath"),
            "lifecycle": assoc.get("Lifecycle"),
            "created": created,
        }


class FSxDataRepositoryTaskOperator(_FSxBaseOperator):
    """Run a data repository task (import, export, release) and wait for it.

    Every path must lie inside a data repository association (checked before the task is
    created). On failure the error names the task's completion report in S3.

    :param file_system_id: The file system.
    :param fsx_task_type: ``import`` / ``export`` / ``release`` or the API names
        (``IMPORT_METADATA_FROM_REPOSITORY``, ``EXPORT_TO_REPOSITORY``, ``RELEASE_DATA_FROM_FILESYSTEM``).
    :param paths: File-system paths (``/datasets/train``); imports may also give S3 URIs. Default: all.
    :param report_path: S3 prefix for the completion report (default: the association's prefix).
    :param report: Request a completion report of failed files (default True).
    :param capacity_to_release_gib: Release tasks only: how much to release.
    :param release_after_days: Release tasks only: release files not accessed for this many days.
    :param wait_for_completion: Wait for the task to end.
    :param poll_interval: Seconds between status checks.
    :param max_wait_seconds: Give up waiting after this many seconds (None: never while deferred,
        7 days in a worker).
    :param max_attempts: Deprecated: ``max_wait_seconds = poll_interval * max_attempts``.
    :param deferrable: Wait in the triggerer (default ``[operators] default_deferrable``).
    """

    template_fields: Sequence[str] = (
        *AWS_TEMPLATE_FIELDS,
        "file_system_id",
        "paths",
        "report_path",
        "fsx_task_type",
    )

    def __init__(
        self,
        *,
        file_system_id: str,
        fsx_task_type: str,
        paths: list[str] | None = None,
        report_path: str | None = None,
        report: bool = True,
        capacity_to_release_gib: int | None = None,
        release_after_days: int | None = None,
        wait_for_completion: bool = True,
        poll_interval: float = 30,
        max_wait_seconds: float | None = None,
        max_attempts: int | None = None,
        deferrable: bool | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.file_system_id = file_system_id
        self.fsx_task_type = fsx_task_type
        self.paths = paths
        self.report_path = report_path
        self.report = report
        self.capacity_to_release_gib = capacity_to_release_gib
        self.release_after_days = release_after_days
        self.wait_for_completion = wait_for_completion
        self.poll_interval = poll_interval
        self.max_wait_seconds = wait_limit(
            max_wait_seconds, deprecated_name="max_attempts", deprecated_value=max_attempts, per_unit=poll_interval
        )
        self.deferrable = default_deferrable(deferrable)

    def execute(self, context: Context) -> dict[str, Any]:
        request = self.hook.prepare_task(
            self.file_system_id,
            self.fsx_task_type,
            self.paths,
            report_path=self.report_path,
            report=self.report,
            capacity_to_release_gib=self.capacity_to_release_gib,
            release_after_days=self.release_after_days,
            client_request_token=_token(context, self.fsx_task_type),
        )
        task = self.hook.create_task(request)
        self._fsx_task_id = task["TaskId"]
        if not self.wait_for_completion:
            return task_progress(task)
        return self._wait_task(task["TaskId"])

    def execute_complete(self, context: Context, event: dict[str, Any] | None = None) -> dict[str, Any]:
        progress = progress_from_event(event)
        self.log.info("FSx task %s succeeded", progress["task_id"])
        return progress


class FSxCreateFileSystemOperator(_FSxBaseOperator):
    """Create a scratch or persistent FSx for Lustre file system and wait until AVAILABLE.

    Returns (and pushes to XCom) ``file_system_id``, ``mount_name``, ``dns_name``. A retry of the
    same task instance reuses the file system (stable ``ClientRequestToken``). Pair it with
    ``FSxDeleteFileSystemOperator(...).as_teardown(setups=create)``.

    :param subnet_id: The subnet (its AZ is the file system's AZ; use the training subnet's).
    :param security_group_ids: Security groups allowing Lustre traffic (TCP 988, 1018-1023).
    :param storage_capacity_gib: 1200, 2400 or a multiple of 2400.
    :param deployment_type: ``SCRATCH_1``, ``SCRATCH_2`` (default), ``PERSISTENT_1``, ``PERSISTENT_2``.
    :param per_unit_storage_throughput: Persistent only (MB/s/TiB).
    :param data_compression: ``LZ4`` (default) or ``NONE``.
    :param file_system_type_version: Lustre version, e.g. ``2.15``.
    :param tags: Tags for the file system.
    :param wait_for_available: Wait until the file system is AVAILABLE.
    :param poll_interval: Seconds between status checks.
    :param max_wait_seconds: Seconds to wait for AVAILABLE.
    :param timeout: Deprecated name of ``max_wait_seconds``.
    :param deferrable: Wait in the triggerer (default ``[operators] default_deferrable``): creating a
        Lustre file system takes minutes, and no worker slot is held meanwhile.
    """

    template_fields: Sequence[str] = (*AWS_TEMPLATE_FIELDS, "subnet_id", "security_group_ids", "tags")
    max_wait_seconds: float

    def __init__(
        self,
        *,
        subnet_id: str,
        security_group_ids: list[str],
        storage_capacity_gib: int = 1200,
        deployment_type: str = "SCRATCH_2",
        per_unit_storage_throughput: int | None = None,
        data_compression: Literal["NONE", "LZ4"] = "LZ4",
        file_system_type_version: str | None = None,
        tags: dict[str, str] | None = None,
        wait_for_available: bool = True,
        poll_interval: float = 30,
        max_wait_seconds: float = 3600,
        timeout: float | None = None,
        deferrable: bool | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.deferrable = default_deferrable(deferrable)
        self.subnet_id = subnet_id
        self.security_group_ids = security_group_ids
        self.storage_capacity_gib = storage_capacity_gib
        self.deployment_type = deployment_type
        self.per_unit_storage_throughput = per_unit_storage_throughput
        self.data_compression = data_compression
        self.file_system_type_version = file_system_type_version
        self.tags = tags
        self.wait_for_available = wait_for_available
        self.poll_interval = poll_interval
        self.max_wait_seconds = float(
            wait_limit(None, deprecated_name="timeout", deprecated_value=timeout) or max_wait_seconds
        )

    def execute(self, context: Context) -> dict[str, Any]:
        request = req.build_lustre_file_system_request(
            subnet_id=self.subnet_id,
            security_group_ids=list(self.security_group_ids),
            storage_capacity_gib=int(self.storage_capacity_gib),
            deployment_type=self.deployment_type,
            per_unit_storage_throughput=self.per_unit_storage_throughput,
            data_compression=self.data_compression,
            file_system_type_version=self.file_system_type_version,
            tags=self.tags,
            client_request_token=_token(context, "create-file-system"),
        )
        fs = self.hook.create_file_system(request)
        self.log.info("Created FSx for Lustre file system %s (%s)", fs["FileSystemId"], fs.get("Lifecycle"))
        if self.wait_for_available and fs.get("Lifecycle") != "AVAILABLE":
            if self.deferrable:
                from airflow_dist_training.triggers.fsx import FSxFileSystemAvailableTrigger

                self._defer_wait(FSxFileSystemAvailableTrigger, None, file_system_id=fs["FileSystemId"])
            fs = self.hook.wait_file_system_available(
                fs["FileSystemId"], self.poll_interval, self.max_wait_seconds
            )
        return self._publish(context, fs)

    def execute_complete(self, context: Context, event: dict[str, Any] | None = None) -> dict[str, Any]:
        if not event or event.get("status") != "success":
            raise RuntimeError(
                (event or {}).get("message") or "the file-system trigger resumed the task without an event"
            )
        fs = self.hook.describe_file_system(event["file_system_id"])
        if fs is None:
            raise RuntimeError(f"file system {event['file_system_id']} disappeared after it became AVAILABLE")
        return self._publish(context, fs)

    def _publish(self, context: Context, fs: dict[str, Any]) -> dict[str, Any]:
        summary = req.file_system_summary(fs)
        ti = context.get("ti")
        if ti is not None:
            for key in ("file_system_id", "mount_name", "dns_name"):
                ti.xcom_push(key=key, value=summary[key])
        return summary


class FSxDeleteFileSystemOperator(_FSxBaseOperator):
    """Delete a file system; teardown-friendly and idempotent.

    Runs whatever happened upstream (``trigger_rule="all_done"`` by default; as a teardown,
    ``.as_teardown(setups=create_task)`` runs it after training even when training failed). A
    missing file system, or an empty id because the create task never produced one, is a no-op.

    :param file_system_id: The file system, usually ``"{{ ti.xcom_pull('create_fsx')['file_system_id'] }}"``
        or ``create.output["file_system_id"]``.
    """

    template_fields: Sequence[str] = (*AWS_TEMPLATE_FIELDS, "file_system_id")

    def __init__(self, *, file_system_id: str | None, trigger_rule: str = "all_done", **kwargs: Any) -> None:
        super().__init__(trigger_rule=trigger_rule, **kwargs)
        self.file_system_id = file_system_id

    def execute(self, context: Context) -> dict[str, Any]:
        fs_id = (self.file_system_id or "").strip()
        if not fs_id or fs_id == "None":
            self.log.info("No file system id given (was it ever created?); nothing to delete")
            return {"file_system_id": None, "lifecycle": None}
        lifecycle = self.hook.delete_file_system(fs_id)
        if lifecycle is None:
            self.log.info("File system %s does not exist; nothing to delete", fs_id)
        else:
            self.log.info("Deleting file system %s (%s)", fs_id, lifecycle)
        return {"file_system_id": fs_id, "lifecycle": lifecycle or "DELETED"}


class FSxStagePrefixOperator(_FSxBaseOperator):
    """Make an S3 prefix available on FSx for Lustre at a path, and return the training channel.

    Pre-flight (file system, AZ, Lustre ports, dataset size; nothing is created if it fails), then
    the data repository association (reused when it matches), then an import task and its wait.
    Returns ``{"type": "fsx", "file_system_id", "directory_path": "/<mount name>/<path>",
    "access_mode"}``, which ``TrainingJobSpec.channels`` accepts as an ``FSxChannel``.

    To stage into a local channel directory instead, use ``LocalStageOperator``.

    :param s3_uri: The dataset prefix.
    :param file_system_id: The file system.
    :param file_system_path: Where the prefix appears on the file system, e.g. ``/datasets/train``.
    :param subnets: The training job's subnets (AZ check).
    :param security_group_ids: The training job's security groups (Lustre port check).
    :param access_mode: ``ro`` (default) or ``rw`` for the channel.
    :param az_mismatch: ``error`` (default) or ``warning``.
    :param auto_import_events: Auto-import policy of a newly created association.
    :param report_path: Completion report prefix (default: the association's prefix).
    :param file_system_security_group_ids: Override the file system's security groups.
    :param poll_interval: Seconds between status checks.
    :param max_wait_seconds: Give up waiting for the import after this many seconds.
    :param max_attempts: Deprecated: ``max_wait_seconds = poll_interval * max_attempts``.
    :param deferrable: Wait for the import in the triggerer.
    """

    template_fields: Sequence[str] = (
        *AWS_TEMPLATE_FIELDS,
        "s3_uri",
        "file_system_id",
        "file_system_path",
        "subnets",
        "security_group_ids",
        "report_path",
    )

    def __init__(
        self,
        *,
        s3_uri: str,
        file_system_id: str,
        file_system_path: str,
        subnets: Sequence[str] = (),
        security_group_ids: Sequence[str] = (),
        access_mode: Literal["ro", "rw"] = "ro",
        az_mismatch: Literal["error", "warning"] = "error",
        auto_import_events: list[str] | None = None,
        report_path: str | None = None,
        file_system_security_group_ids: Sequence[str] | None = None,
        poll_interval: float = 30,
        max_wait_seconds: float | None = None,
        max_attempts: int | None = None,
        deferrable: bool | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.s3_uri = s3_uri
        self.file_system_id = file_system_id
        self.file_system_path = file_system_path
        self.subnets = subnets
        self.security_group_ids = security_group_ids
        self.access_mode = access_mode
        self.az_mismatch = az_mismatch
        self.auto_import_events = auto_import_events
        self.report_path = report_path
        self.file_system_security_group_ids = file_system_security_group_ids
        self.poll_interval = poll_interval
        self.max_wait_seconds = wait_limit(
            max_wait_seconds, deprecated_name="max_attempts", deprecated_value=max_attempts, per_unit=poll_interval
        )
        self.deferrable = default_deferrable(deferrable)

    def execute(self, context: Context) -> dict[str, Any]:
        facts, _ = _operator_preflight(self)
        channel = self._channel(facts.file_system)
        self._lineage_result = channel
        self.hook.ensure_association(
            self.file_system_id,
            self.file_system_path,
            self.s3_uri,
            poll_interval=min(self.poll_interval, 15),
            auto_import_events=self.auto_import_events,
            client_request_token=_token(context, "dra", self.file_system_path),
        )
        request = self.hook.prepare_task(
            self.file_system_id,
            "import",
            [self.file_system_path],
            report_path=self.report_path,
            client_request_token=_token(context, "import", self.file_system_path),
        )
        task = self.hook.create_task(request)
        self._fsx_task_id = task["TaskId"]
        self._wait_task(task["TaskId"], channel=channel)
        return channel

    def _channel(self, file_system: dict[str, Any] | None) -> dict[str, Any]:
        """The FSx input channel of the staged path (the file system's mount name read from AWS)."""
        mount_name = ((file_system or {}).get("LustreConfiguration") or {}).get("MountName")
        if not mount_name:
            from airflow_dist_training.errors import SpecValidationError

            why = f"file system {self.file_system_id} reports no LustreConfiguration.MountName"
            raise SpecValidationError([("file_system_id", why)])
        return req.fsx_channel(self.file_system_id, mount_name, self.file_system_path, self.access_mode)

    def execute_complete(
        self, context: Context, event: dict[str, Any] | None = None, channel: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        progress_from_event(event)
        # defer kwargs do not survive every resume (dag.test() resumes with the event only)
        channel = channel or self._channel(self.hook.describe_file_system(self.file_system_id))
        self._lineage_result = channel
        return channel

    get_openlineage_facets_on_complete = staging_lineage  # the source in, the staged directory out


class LocalStageOperator(AwsConnectionMixin, BaseOperator):
    """The local backend's staging: mirror a local path, ``file://`` or ``s3://`` prefix into a channel dir.

    Incremental (unchanged files are not copied again; removed files are deleted). Returns an
    ``FSxChannel``-compatible dict whose ``local_source`` is the staged directory; the manifest
    summary goes to XCom key ``stage_summary``.

    :param source: Local path, ``file://`` URI or ``s3://`` prefix.
    :param channel_dir: The job's channel directory.
    :param file_system_id: The file system id the channel names on AWS (kept for spec parity).
    :param file_system_path: The path the channel names on AWS.
    :param mount_name: Mount name used in ``directory_path``.
    :param access_mode: ``ro`` or ``rw``.
    :param aws_conn_id: the Airflow AWS connection an ``s3://`` source is read through
        (``None``: boto3's default chain).
    :param region_name: its region (default: the connection's).
    """

    template_fields: Sequence[str] = (*AWS_TEMPLATE_FIELDS, "source", "channel_dir", "file_system_id", "file_system_path")

    def __init__(
        self,
        *,
        source: str,
        channel_dir: str,
        file_system_id: str = "fs-00000000",
        file_system_path: str = "/",
        mount_name: str = "local",
        access_mode: Literal["ro", "rw"] = "ro",
        aws_conn_id: str | None = "aws_default",
        region_name: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self._set_aws_connection(aws_conn_id, region_name)
        self.source = source
        self.channel_dir = channel_dir
        self.file_system_id = file_system_id
        self.file_system_path = file_system_path
        self.mount_name = mount_name
        self.access_mode = access_mode

    def execute(self, context: Context) -> dict[str, Any]:
        from airflow_dist_training.local.staging import stage_local
        from airflow_dist_training.storage import StoreOptions, Stores

        stores = Stores(StoreOptions(self.aws_conn_id, self.region_name))
        summary = stage_local(self.source, self.channel_dir, stores=stores).summary()
        self.log.info("Staged %s into %s: %s", self.source, self.channel_dir, summary)
        channel = req.fsx_channel(
            self.file_system_id,
            self.mount_name,
            self.file_system_path,
            self.access_mode,
            local_source=str(self.channel_dir),
        )
        ti = context.get("ti")
        if ti is not None:
            ti.xcom_push(key="stage_summary", value=summary)
        self._lineage_result = channel
        return channel

    get_openlineage_facets_on_complete = staging_lineage  # the source in, the staged directory out
