"""Pure builders for FSx for Lustre requests and the association reuse rule.

Everything here takes plain values or already-fetched FSx dicts and returns request dicts (in the
botocore ``fsx`` service model's shapes) or raises ``SpecValidationError`` naming the field.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from typing import Any, Literal

from airflow_dist_training.errors import SpecValidationError
from airflow_dist_training.storage.location import split_uri, uri_scheme

TASK_TYPES = ("IMPORT_METADATA_FROM_REPOSITORY", "EXPORT_TO_REPOSITORY", "RELEASE_DATA_FROM_FILESYSTEM")
TASK_TYPE_ALIASES = {
    "import": "IMPORT_METADATA_FROM_REPOSITORY",
    "export": "EXPORT_TO_REPOSITORY",
    "release": "RELEASE_DATA_FROM_FILESYSTEM",
}
AUTO_EVENTS = ("NEW", "CHANGED", "DELETED")
REPORT_FORMAT = "REPORT_CSV_20191124"
DEPLOYMENT_TYPES = ("SCRATCH_1", "SCRATCH_2", "PERSISTENT_1", "PERSISTENT_2")
_THROUGHPUT = {"PERSISTENT_1": (50, 100, 200), "PERSISTENT_2": (125, 250, 500, 1000)}
_S3 = re.compile(r"^s3://[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9](/.*)?$")


def _error(field: str, message: str) -> SpecValidationError:
    return SpecValidationError([(field, message)])


def parse_s3_uri(uri: str, field: str = "s3_uri") -> tuple[str, str]:
    """``s3://bucket/a/b`` -> ``("bucket", "a/b")``; a clear error for anything else."""
    if not _S3.match(uri or ""):
        raise _error(field, f"{uri!r} is not an S3 URI like s3://bucket/prefix/")
    _, bucket, key = split_uri(uri)
    return bucket, key.lstrip("/")


def normalize_s3_prefix(uri: str, field: str = "s3_uri") -> str:
    """An S3 prefix URI with exactly one trailing slash (``s3://bucket/`` for a whole bucket)."""
    bucket, key = parse_s3_uri(uri, field)
    key = key.strip("/")
    return f"s3://{bucket}/{key}/" if key else f"s3://{bucket}/"


def normalize_fs_path(path: str, field: str = "file_system_path") -> str:
    """An absolute file-system path without a trailing slash (``/`` stays ``/``)."""
    if not path or not path.startswith("/"):
        raise _error(field, f"{path!r} must be an absolute file system path such as /data/train")
    norm = posixpath.normpath(path)
    if norm.startswith("//"):
        norm = "/" + norm.lstrip("/")
    if ".." in norm.split("/"):
        raise _error(field, f"{path!r} must not contain '..'")
    return norm


def is_under(child: str, parent: str) -> bool:
    """Whether file-system path ``child`` is ``parent`` or inside it."""
    parent = parent.rstrip("/")
    return not parent or child == parent or child.startswith(parent + "/")


@dataclass(frozen=True)
class AssociationMatch:
    """What to do for a requested (file system path, S3 prefix) pair."""

    action: Literal["reuse", "create"]
    association: dict[str, Any] | None = None


def match_association(
    associations: list[dict[str, Any]], file_system_id: str, file_system_path: str, s3_prefix: str
) -> AssociationMatch:
    """Reuse a matching association, or say to create one; raise on a conflicting one.

    A match is the same file system, the same path and the same S3 prefix, or a parent
    association whose prefix maps the requested path onto the requested prefix. A conflict is the
    same path with another prefix, a path that overlaps another association, or the same prefix
    linked at another path (FSx forbids overlapping associations on one file system).
    """
    fs_path = normalize_fs_path(file_system_path)
    prefix = normalize_s3_prefix(s3_prefix)
    for assoc in associations:
        if assoc.get("FileSystemId") not in (None, file_system_id):
            continue
        if assoc.get("Lifecycle") in ("DELETING", "FAILED"):
            continue
        a_path = _fs_path(assoc)
        a_prefix = normalize_s3_prefix(assoc["DataRepositoryPath"])
        a_id = assoc.get("AssociationId", "?")
        if a_path == fs_path:
            if a_prefix == prefix:
                return AssociationMatch("reuse", assoc)
            raise _error(
                "file_system_path",
                f"{fs_path} on {file_system_id} is already associated with {a_prefix} "
                f"(association {a_id}), not with the requested {prefix}. Use another "
                "file_system_path, or delete that association first.",
            )
        if is_under(fs_path, a_path):
            expected = f"{a_prefix}{fs_path[len(a_path) :].strip('/')}/"
            if expected == prefix:
                return AssociationMatch("reuse", assoc)
            raise _error(
                "file_system_path",
                f"{fs_path} lies inside association {a_id} ({a_path} -> {a_prefix}), which maps it "
                f"to {expected}, not to the requested {prefix}.",
            )
        if is_under(a_path, fs_path):
            raise _error(
                "file_system_path",
                f"{fs_path} on {file_system_id} would contain association {a_id} ({a_path} -> "
                f"{a_prefix}); FSx does not allow overlapping association paths.",
            )
        if prefix.startswith(a_prefix) or a_prefix.startswith(prefix):
            raise _error(
                "s3_uri",
                f"{prefix} overlaps {a_prefix}, already associated with {a_path} on {file_system_id} "
                f"(association {a_id}); use file_system_path {a_path} or a disjoint prefix.",
            )
    return AssociationMatch("create")


def build_association_request(
    file_system_id: str,
    file_system_path: str,
    s3_prefix: str,
    *,
    auto_import_events: list[str] | None = None,
    auto_export_events: list[str] | None = None,
    batch_import_metadata_on_create: bool = False,
    imported_file_chunk_size_mib: int | None = None,
    client_request_token: str | None = None,
    tags: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The ``CreateDataRepositoryAssociation`` request."""
    problems: list[tuple[str, str]] = []
    s3: dict[str, Any] = {}
    for field, events, key in (
        ("auto_import_events", auto_import_events, "AutoImportPolicy"),
        ("auto_export_events", auto_export_events, "AutoExportPolicy"),
    ):
        if events is None:
            continue
        bad = [e for e in events if e not in AUTO_EVENTS]
        if bad:
            problems.append((field, f"unknown event(s) {bad}; choose from {list(AUTO_EVENTS)}"))
        s3[key] = {"Events": list(dict.fromkeys(events))}
    if imported_file_chunk_size_mib is not None and not 1 <= imported_file_chunk_size_mib <= 512000:
        problems.append(("imported_file_chunk_size_mib", "must be between 1 and 512000 MiB"))
    if problems:
        raise SpecValidationError(problems)
    request: dict[str, Any] = {
        "FileSystemId": file_system_id,
        "FileSystemPath": normalize_fs_path(file_system_path),
        "DataRepositoryPath": normalize_s3_prefix(s3_prefix),
        "BatchImportMetaDataOnCreate": batch_import_metadata_on_create,
    }
    if imported_file_chunk_size_mib is not None:
        request["ImportedFileChunkSize"] = imported_file_chunk_size_mib
    if s3:
        request["S3"] = s3
    if client_request_token:
        request["ClientRequestToken"] = client_request_token[:63]
    if tags:
        request["Tags"] = [{"Key": k, "Value": v} for k, v in sorted(tags.items())]
    return request


def task_type(value: str) -> str:
    """``import``/``export``/``release`` or the API name -> the API name."""
    resolved = TASK_TYPE_ALIASES.get(value.lower(), value.upper()) if value else ""
    if resolved not in TASK_TYPES:
        raise _error(
            "task_type", f"{value!r} is not a task type; use one of {[*TASK_TYPE_ALIASES, *TASK_TYPES]}"
        )
    return resolved


def _fs_path(association: dict[str, Any]) -> str:
    return normalize_fs_path(association.get("FileSystemPath") or "/")


def _covering(fs_path: str, associations: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The innermost association whose path holds ``fs_path``."""
    covering = [a for a in associations if is_under(fs_path, _fs_path(a))]
    return max(covering, key=lambda a: len(_fs_path(a)), default=None)


def _describe_associations(associations: list[dict[str, Any]]) -> str:
    if not associations:
        return "the file system has no data repository associations"
    pairs = ", ".join(
        f"{a.get('FileSystemPath')} -> {a.get('DataRepositoryPath')}"
        for a in sorted(associations, key=lambda a: a.get("FileSystemPath") or "")
    )
    return f"its associations are: {pairs}"


def resolve_task_paths(
    kind: str, paths: list[str] | None, associations: list[dict[str, Any]]
) -> tuple[list[str], dict[str, Any] | None]:
    """Turn user paths into the task's ``Paths`` and find the association they live in.

    Users give file-system paths (``/data/train``) for every task type; import tasks may also give
    S3 URIs. The API wants S3 URIs for imports and paths relative to the mount point for exports
    and releases. Every path must lie inside an association, else nothing is created.
    Returns the API paths and the association covering the first path (for the default report).
    """
    if not paths:
        return [], (associations[0] if len(associations) == 1 else None)
    out: list[str] = []
    first: dict[str, Any] | None = None
    problems: list[tuple[str, str]] = []
    outside = "is outside every data repository association; " + _describe_associations(associations)
    for i, raw in enumerate(paths):
        field = f"paths[{i}]"
        if uri_scheme(raw) == "s3":
            prefix = normalize_s3_prefix(raw, field)
            hit = next(
                (a for a in associations if prefix.startswith(normalize_s3_prefix(a["DataRepositoryPath"]))),
                None,
            )
            if kind != "IMPORT_METADATA_FROM_REPOSITORY":
                problems.append((field, f"{raw} is an S3 URI; {kind} takes file system paths such as /data"))
            elif hit is None:
                problems.append((field, f"{raw} {outside}"))
            else:
                out.append(raw)
                first = first or hit
            continue
        fs_path = normalize_fs_path(raw, field)
        hit = _covering(fs_path, associations)
        if hit is None:
            problems.append((field, f"{fs_path} {outside}"))
            continue
        if kind == "IMPORT_METADATA_FROM_REPOSITORY":
            rel = fs_path[len(_fs_path(hit)) :].strip("/")
            base = normalize_s3_prefix(hit["DataRepositoryPath"])
            out.append(f"{base}{rel}" if rel else base)
        else:
            out.append(fs_path.strip("/") or "/")
        first = first or hit
    if problems:
        raise SpecValidationError(problems)
    return out, first


def build_task_request(
    file_system_id: str,
    kind: str,
    paths: list[str],
    *,
    report_path: str | None,
    capacity_to_release_gib: int | None = None,
    release_after_days: int | None = None,
    client_request_token: str | None = None,
) -> dict[str, Any]:
    """The ``CreateDataRepositoryTask`` request, with a failed-files completion report."""
    resolved = task_type(kind)
    report: dict[str, Any] = {"Enabled": False}
    if report_path:
        report = {
            "Enabled": True,
            "Path": normalize_s3_prefix(report_path, "report_path").rstrip("/"),
            "Format": REPORT_FORMAT,
            "Scope": "FAILED_FILES_ONLY",
        }
    request: dict[str, Any] = {"Type": resolved, "FileSystemId": file_system_id, "Report": report}
    if paths:
        request["Paths"] = list(paths)
    if resolved == "RELEASE_DATA_FROM_FILESYSTEM":
        if capacity_to_release_gib is not None:
            request["CapacityToRelease"] = capacity_to_release_gib
        if release_after_days is not None:
            request["ReleaseConfiguration"] = {
                "DurationSinceLastAccess": {"Unit": "DAYS", "Value": release_after_days}
            }
    elif capacity_to_release_gib is not None or release_after_days is not None:
        raise _error("capacity_to_release_gib", f"only release tasks take a release setting, not {resolved}")
    if client_request_token:
        request["ClientRequestToken"] = client_request_token[:63]
    return request


def build_lustre_file_system_request(
    *,
    subnet_id: str,
    security_group_ids: list[str],
    storage_capacity_gib: int,
    deployment_type: str = "SCRATCH_2",
    per_unit_storage_throughput: int | None = None,
    data_compression: Literal["NONE", "LZ4"] = "LZ4",
    file_system_type_version: str | None = None,
    tags: dict[str, str] | None = None,
    client_request_token: str | None = None,
) -> dict[str, Any]:
    """The ``CreateFileSystem`` request for a scratch or persistent Lustre file system."""
    problems = _lustre_problems(
        deployment_type, storage_capacity_gib, per_unit_storage_throughput, security_group_ids
    )
    if problems:
        raise SpecValidationError(problems)
    lustre: dict[str, Any] = {"DeploymentType": deployment_type, "DataCompressionType": data_compression}
    if per_unit_storage_throughput is not None:
        lustre["PerUnitStorageThroughput"] = per_unit_storage_throughput
    request: dict[str, Any] = {
        "FileSystemType": "LUSTRE",
        "StorageCapacity": storage_capacity_gib,
        "StorageType": "SSD",
        "SubnetIds": [subnet_id],
        "SecurityGroupIds": list(security_group_ids),
        "LustreConfiguration": lustre,
    }
    if file_system_type_version:
        request["FileSystemTypeVersion"] = file_system_type_version
    if tags:
        request["Tags"] = [{"Key": k, "Value": v} for k, v in sorted(tags.items())]
    if client_request_token:
        request["ClientRequestToken"] = client_request_token[:63]
    return request


def _lustre_problems(
    deployment_type: str,
    storage_capacity_gib: int,
    per_unit_storage_throughput: int | None,
    security_group_ids: list[str],
) -> list[tuple[str, str]]:
    problems: list[tuple[str, str]] = []
    if deployment_type not in DEPLOYMENT_TYPES:
        problems.append(("deployment_type", f"{deployment_type!r} is not one of {list(DEPLOYMENT_TYPES)}"))
    if storage_capacity_gib not in (1200, 2400) and storage_capacity_gib % 2400:
        why = f"{storage_capacity_gib} GiB: SSD Lustre takes 1200, 2400 or a multiple of 2400"
        problems.append(("storage_capacity_gib", why))
    allowed = _THROUGHPUT.get(deployment_type)
    if allowed and per_unit_storage_throughput not in allowed:
        problems.append(
            ("per_unit_storage_throughput", f"{deployment_type} needs one of {list(allowed)} MB/s/TiB")
        )
    if not allowed and per_unit_storage_throughput is not None:
        problems.append(("per_unit_storage_throughput", f"{deployment_type} takes no throughput setting"))
    if not security_group_ids:
        problems.append(("security_group_ids", "give at least one security group allowing Lustre traffic"))
    return problems


def fsx_channel(
    file_system_id: str,
    mount_name: str,
    file_system_path: str,
    access_mode: Literal["ro", "rw"] = "ro",
    local_source: str | None = None,
) -> dict[str, Any]:
    """The training spec's ``FSxChannel`` as a dict: DirectoryPath = ``/<mount name>/<path>``."""
    path = normalize_fs_path(file_system_path).strip("/")
    channel: dict[str, Any] = {
        "type": "fsx",
        "file_system_id": file_system_id,
        "directory_path": f"/{mount_name}/{path}" if path else f"/{mount_name}",
        "access_mode": access_mode,
    }
    if local_source is not None:
        channel["local_source"] = local_source
    return channel


def file_system_summary(file_system: dict[str, Any]) -> dict[str, Any]:
    """The small XCom dict for a file system (no datetimes, no boto response)."""
    lustre = file_system.get("LustreConfiguration") or {}
    return {
        "file_system_id": file_system.get("FileSystemId"),
        "lifecycle": file_system.get("Lifecycle"),
        "dns_name": file_system.get("DNSName"),
        "mount_name": lustre.get("MountName"),
        "deployment_type": lustre.get("DeploymentType"),
        "storage_capacity_gib": file_system.get("StorageCapacity"),
        "subnet_ids": list(file_system.get("SubnetIds") or []),
    }
