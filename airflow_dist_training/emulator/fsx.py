"""FSx for Lustre on the emulator: each file system is a folder; associations and tasks move real data.

moto keeps the file system records but has no lifecycle, no ``MountName``, no network interfaces
and no data repository associations or tasks. Here a file system gets those (its network interface
in moto's EC2, so the pre-flight's Lustre-port check reads it as on AWS), its contents are the
folder ``<root>/fsx/<file system id>/``, associations and import/export/release tasks move real
data between it and S3, and a training job's FSx channel reads the folder
(:meth:`FileSystems.channel_mounts`). Real FSx lazy-loads file contents on first read; the import
copies them, which a job cannot tell apart.
"""

from __future__ import annotations

import contextlib
import json
import logging
import secrets
import shutil
import threading
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from airflow_dist_training.fsx.requests import is_under
from airflow_dist_training.storage import ObjectStore, StoreOptions, Stores
from airflow_dist_training.storage.location import Location, split_uri

log = logging.getLogger(__name__)
ACCOUNT = "123456789012"
# the create answer of a task is sent once the copy is done or after this long (tiny data: done)
TASK_ANSWER_WAIT_SECONDS = 5.0


def _hex_id(prefix: str) -> str:
    return f"{prefix}-{secrets.token_hex(9)[:17]}"


def _now() -> float:
    return time.time()


class FSxError(Exception):
    """An FSx error answer: ``code`` is the AWS error type."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _prefix(uri: str) -> str:
    """An S3 prefix URI with one trailing slash."""
    return uri.rstrip("/") + "/"


def _select(table: dict[str, dict[str, Any]], what: str, ids: list[str] | None) -> list[dict[str, Any]]:
    """A Describe call's records: the ids asked for (each must exist), or every one."""
    missing = [i for i in ids or [] if i not in table]
    if missing:
        raise FSxError(
            f"DataRepository{what.title()}NotFound", f"Data repository {what} {missing[0]} does not exist."
        )
    return [table[i] for i in ids] if ids else list(table.values())


class FileSystems:
    """The emulator's FSx state beside moto's file system records (thread-safe)."""

    def __init__(self, root: Path, clients: Any, region: str, account: str = ACCOUNT) -> None:
        self.root = root / "fsx"
        self.clients = clients
        self.region = region
        self.account = account
        self.extra: dict[str, dict[str, Any]] = {}  # file system id -> what moto does not keep
        self.associations: dict[str, dict[str, Any]] = {}
        self.tasks: dict[str, dict[str, Any]] = {}
        self.tokens: dict[tuple[str, str], str] = {}  # (kind, ClientRequestToken) -> id
        self._lock = threading.RLock()
        self._fs_locks: dict[str, threading.Lock] = {}
        self._threads: list[threading.Thread] = []

    def folder(self, file_system_id: str) -> Path:
        return self.root / file_system_id

    # -- file systems (moto's records, completed here)
    def created(self, fs: dict[str, Any], request: dict[str, Any]) -> None:
        """After moto's CreateFileSystem: the folder, the network interface, the extra fields."""
        fs_id = str(fs["FileSystemId"])
        self.folder(fs_id).mkdir(parents=True, exist_ok=True)
        extra: dict[str, Any] = {
            "OwnerId": self.account,
            "CreationTime": _now(),
            "MountName": secrets.token_hex(4) if fs.get("FileSystemType") == "LUSTRE" else None,
            "NetworkInterfaceIds": [],
            "first_answer": True,
        }
        subnets = list(request.get("SubnetIds") or [])
        if subnets:
            ec2 = self.clients("ec2")
            with contextlib.suppress(Exception):
                subnet = ec2.describe_subnets(SubnetIds=[subnets[0]])["Subnets"][0]
                extra["VpcId"] = subnet.get("VpcId")
            try:
                eni = ec2.create_network_interface(
                    SubnetId=subnets[0],
                    Groups=list(request.get("SecurityGroupIds") or []),
                    Description=f"ENI for Amazon FSx file system {fs_id}",
                )["NetworkInterface"]
                extra["NetworkInterfaceIds"] = [eni["NetworkInterfaceId"]]
            except Exception as exc:  # an unknown subnet/group: FSx would fail the file system
                extra["failure"] = f"could not create the network interface: {exc}"
        lustre = dict(request.get("LustreConfiguration") or {})
        if lustre.get("ImportPath"):  # the legacy, file-system-wide data repository
            extra["import_path"] = _prefix(str(lustre["ImportPath"]))
            extra["export_path"] = _prefix(
                str(lustre.get("ExportPath") or extra["import_path"].rstrip("/") + "/FSxLustre")
            )
        with self._lock:
            self.extra[fs_id] = extra
        if extra.get("import_path") and "failure" not in extra:
            with contextlib.suppress(Exception):
                self._import(fs_id, [(extra["import_path"], "/")], counts={})

    def complete(self, fs: dict[str, Any]) -> dict[str, Any]:
        """moto's file system dict with what AWS also answers."""
        fs_id = str(fs.get("FileSystemId"))
        with self._lock:
            extra = self.extra.get(fs_id)
            if extra is None:
                return fs
            first = extra.pop("first_answer", False)
        out = dict(fs)
        out.pop("SecurityGroupIds", None)  # not in AWS's FileSystem shape
        if "failure" in extra:
            out["Lifecycle"] = "FAILED"
            out["FailureDetails"] = {"Message": extra["failure"]}
        else:
            out["Lifecycle"] = "CREATING" if first else "AVAILABLE"
        out["OwnerId"] = extra["OwnerId"]
        out["CreationTime"] = extra["CreationTime"]
        out["NetworkInterfaceIds"] = list(extra["NetworkInterfaceIds"])
        if extra.get("VpcId"):
            out["VpcId"] = extra["VpcId"]
        if out.get("FileSystemType") == "LUSTRE":
            lustre = dict(out.get("LustreConfiguration") or {})
            for key in ("ImportPath", "ExportPath", "ImportedFileChunkSize", "AutoImportPolicy"):
                lustre.pop(key, None)  # request-only fields; answered in DataRepositoryConfiguration
            lustre["MountName"] = extra["MountName"]
            lustre.setdefault("DeploymentType", "SCRATCH_1")
            if extra.get("import_path"):
                lustre["DataRepositoryConfiguration"] = {
                    "Lifecycle": "AVAILABLE",
                    "ImportPath": extra["import_path"].rstrip("/"),
                    "ExportPath": extra["export_path"].rstrip("/"),
                    "ImportedFileChunkSize": 1024,
                }
            out["LustreConfiguration"] = lustre
        return out

    def deleted(self, fs_id: str) -> None:
        with self._lock:
            self.extra.pop(fs_id, None)
            for assoc_id in [a for a, v in self.associations.items() if v["FileSystemId"] == fs_id]:
                del self.associations[assoc_id]
        shutil.rmtree(self.folder(fs_id), ignore_errors=True)

    def _require(self, fs_id: str) -> dict[str, Any]:
        with self._lock:
            extra = self.extra.get(fs_id)
        if extra is None:
            raise FSxError("FileSystemNotFound", f"File system '{fs_id}' does not exist.")
        return extra

    # -- data repository associations
    def create_association(self, request: dict[str, Any]) -> dict[str, Any]:
        fs_id = str(request.get("FileSystemId") or "")
        token = str(request.get("ClientRequestToken") or "")
        with self._lock:
            if token and ("dra", token) in self.tokens:
                return self._association_answer(self.associations[self.tokens[("dra", token)]])
        self._require(fs_id)
        path = str(request.get("FileSystemPath") or "/")
        repo = self._checked_repository(path, str(request.get("DataRepositoryPath") or ""))
        repo = _prefix(repo)
        with self._lock:
            self._refuse_overlap(fs_id, path, repo)
            assoc_id = _hex_id("dra")
            assoc: dict[str, Any] = {
                "AssociationId": assoc_id,
                "ResourceARN": f"arn:aws:fsx:{self.region}:{self.account}:association/{fs_id}/{assoc_id}",
                "FileSystemId": fs_id,
                "Lifecycle": "CREATING",
                "FileSystemPath": path,
                "DataRepositoryPath": repo,
                "BatchImportMetaDataOnCreate": bool(request.get("BatchImportMetaDataOnCreate", False)),
                "ImportedFileChunkSize": int(request.get("ImportedFileChunkSize") or 1024),
                "CreationTime": _now(),
                "Tags": list(request.get("Tags") or []),
            }
            if request.get("S3"):
                assoc["S3"] = request["S3"]
            self.associations[assoc_id] = assoc
            if token:
                self.tokens[("dra", token)] = assoc_id
        answer = self._association_answer(assoc)  # CREATING, as AWS answers a create
        if assoc["BatchImportMetaDataOnCreate"]:
            with contextlib.suppress(Exception):
                self._import(fs_id, [(repo, path)], counts={})
        with self._lock:
            assoc["Lifecycle"] = "AVAILABLE"
        return answer

    def _checked_repository(self, path: str, repo: str) -> str:
        """The association's paths, checked as AWS checks them (the bucket must exist)."""
        if not path.startswith("/"):
            raise FSxError("BadRequest", f"FileSystemPath {path!r} must be an absolute path")
        if not repo.startswith("s3://"):
            raise FSxError(
                "BadRequest", f"DataRepositoryPath {repo!r} must be an S3 URI (s3://bucket/prefix/)"
            )
        bucket = split_uri(repo)[1]
        try:
            self.clients("s3").head_bucket(Bucket=bucket)
        except Exception:
            raise FSxError(
                "BadRequest", f"Unable to access the data repository {repo}: bucket {bucket} does not exist"
            ) from None
        return repo

    def _refuse_overlap(self, fs_id: str, path: str, repo: str) -> None:
        """No two associations of one file system share a path or a repository prefix (hold the lock)."""
        for other in self.associations.values():
            if other["FileSystemId"] != fs_id:
                continue
            if is_under(path, other["FileSystemPath"]) or is_under(other["FileSystemPath"], path):
                raise FSxError(
                    "BadRequest",
                    f"FileSystemPath {path} overlaps {other['FileSystemPath']} of association "
                    f"{other['AssociationId']}",
                )
            if repo.startswith(other["DataRepositoryPath"]) or other["DataRepositoryPath"].startswith(repo):
                raise FSxError(
                    "BadRequest",
                    f"DataRepositoryPath {repo} overlaps {other['DataRepositoryPath']} of association "
                    f"{other['AssociationId']}",
                )

    @staticmethod
    def _association_answer(assoc: dict[str, Any]) -> dict[str, Any]:
        return json.loads(json.dumps(assoc))

    def describe_associations(self, request: dict[str, Any]) -> list[dict[str, Any]]:
        with self._lock:
            found = _select(self.associations, "association", request.get("AssociationIds"))
            for flt in request.get("Filters") or []:
                values = set(flt.get("Values") or [])
                if flt.get("Name") == "file-system-id":
                    found = [a for a in found if a["FileSystemId"] in values]
                elif flt.get("Name") == "data-repository-type":
                    found = [a for a in found if "S3" in values]
            return [self._association_answer(a) for a in found]

    def delete_association(self, request: dict[str, Any]) -> dict[str, Any]:
        assoc_id = str(request.get("AssociationId") or "")
        with self._lock:
            assoc = self.associations.pop(assoc_id, None)
        if assoc is None:
            raise FSxError(
                "DataRepositoryAssociationNotFound", f"Data repository association {assoc_id} does not exist."
            )
        if request.get("DeleteDataInFileSystem"):
            shutil.rmtree(self._local(assoc["FileSystemId"], assoc["FileSystemPath"]), ignore_errors=True)
        return {"AssociationId": assoc_id, "Lifecycle": "DELETING"}

    # -- data repository tasks
    def create_task(self, request: dict[str, Any]) -> dict[str, Any]:
        fs_id = str(request.get("FileSystemId") or "")
        token = str(request.get("ClientRequestToken") or "")
        with self._lock:
            if token and ("task", token) in self.tokens:
                return self._task_answer(self.tasks[self.tokens[("task", token)]])
        extra = self._require(fs_id)
        kind = str(request.get("Type") or "")
        if kind not in (
            "IMPORT_METADATA_FROM_REPOSITORY",
            "EXPORT_TO_REPOSITORY",
            "RELEASE_DATA_FROM_FILESYSTEM",
        ):
            raise FSxError("BadRequest", f"Type {kind!r} is not supported")
        report = dict(request.get("Report") or {})
        if report.get("Enabled") and not str(report.get("Path") or "").startswith("s3://"):
            raise FSxError("BadRequest", "Report.Path must be an S3 URI when the report is enabled")
        work = self._task_work(fs_id, kind, list(request.get("Paths") or []), extra)
        task_id = _hex_id("task")
        task: dict[str, Any] = {
            "TaskId": task_id,
            "Lifecycle": "PENDING",
            "Type": kind,
            "CreationTime": _now(),
            "ResourceARN": f"arn:aws:fsx:{self.region}:{self.account}:task/{task_id}",
            "FileSystemId": fs_id,
            "Paths": list(request.get("Paths") or []),
            "Report": report,
            "Status": {"TotalCount": 0, "SucceededCount": 0, "FailedCount": 0, "LastUpdatedTime": _now()},
            "Tags": list(request.get("Tags") or []),
            "cancel": False,
        }
        with self._lock:
            self.tasks[task_id] = task
            if token:
                self.tokens[("task", token)] = task_id
            answer = self._task_answer(task)
            lock = self._fs_locks.setdefault(fs_id, threading.Lock())
        thread = threading.Thread(
            target=self._run_task, args=(task, kind, work, lock), name=f"emulator-fsx-{task_id}", daemon=True
        )
        self._threads.append(thread)
        thread.start()
        thread.join(TASK_ANSWER_WAIT_SECONDS)
        return answer

    def _task_work(
        self, fs_id: str, kind: str, paths: list[str], extra: dict[str, Any]
    ) -> list[tuple[str, str]]:
        """``(S3 prefix, file system path)`` pairs the task covers; refuses paths outside every association."""
        with self._lock:
            assocs = [a for a in self.associations.values() if a["FileSystemId"] == fs_id]
        pairs = [(a["DataRepositoryPath"], a["FileSystemPath"]) for a in assocs]
        if extra.get("import_path"):
            pairs.append(
                (extra["import_path"] if kind != "EXPORT_TO_REPOSITORY" else extra["export_path"], "/")
            )
        if not pairs:
            raise FSxError(
                "BadRequest", f"File system {fs_id} has no data repository to run a {kind} task on"
            )
        if not paths:
            return pairs
        work = []
        for raw in paths:
            if kind == "IMPORT_METADATA_FROM_REPOSITORY":
                if not raw.startswith("s3://"):
                    raise FSxError(
                        "BadRequest", f"import task path {raw!r} must be an S3 URI inside a data repository"
                    )
                hit = max(
                    (p for p in pairs if _prefix(raw).startswith(p[0])), key=lambda p: len(p[0]), default=None
                )
                if hit is None:
                    raise FSxError("BadRequest", f"{raw} is not inside a data repository of {fs_id}")
                rel = _prefix(raw)[len(hit[0]) :].strip("/")
                work.append((_prefix(raw), f"{hit[1].rstrip('/')}/{rel}" if rel else hit[1]))
            else:
                fs_path = "/" + raw.strip("/") if raw != "/" else "/"
                hit = max(
                    (p for p in pairs if is_under(fs_path, p[1])), key=lambda p: len(p[1]), default=None
                )
                if hit is None:
                    raise FSxError(
                        "BadRequest", f"{raw} is not inside a data repository association of {fs_id}"
                    )
                rel = fs_path[len(hit[1].rstrip("/")) :].strip("/")
                work.append((f"{hit[0]}{rel}/" if rel else hit[0], fs_path))
        return work

    def _run_task(
        self, task: dict[str, Any], kind: str, work: list[tuple[str, str]], lock: threading.Lock
    ) -> None:
        with lock:  # FSx runs one task at a time per file system; the others stay PENDING
            with self._lock:
                if task["cancel"]:
                    self._finish(task, "CANCELED")
                    return
                task["Lifecycle"] = "EXECUTING"
                task["StartTime"] = _now()
            counts = task["Status"]
            try:
                if kind == "IMPORT_METADATA_FROM_REPOSITORY":
                    self._import(task["FileSystemId"], work, counts, task)
                elif kind == "EXPORT_TO_REPOSITORY":
                    self._export(task["FileSystemId"], work, counts, task)
                else:
                    with self._lock:
                        counts["ReleasedCapacity"] = 0
                lifecycle = (
                    "CANCELED" if task["cancel"] else ("FAILED" if counts["FailedCount"] else "SUCCEEDED")
                )
                if lifecycle == "FAILED":
                    task["FailureDetails"] = {"Message": f"{counts['FailedCount']} file(s) failed"}
            except Exception as exc:
                lifecycle = "FAILED"
                task["FailureDetails"] = {"Message": f"{type(exc).__name__}: {exc}"[:1000]}
            self._write_report(task)
            self._finish(task, lifecycle)

    def _finish(self, task: dict[str, Any], lifecycle: str) -> None:
        with self._lock:
            task["Lifecycle"] = lifecycle
            task["EndTime"] = _now()
            task["Status"]["LastUpdatedTime"] = _now()

    def _local(self, fs_id: str, fs_path: str) -> Path:
        rel = fs_path.strip("/")
        return self.folder(fs_id) / rel if rel else self.folder(fs_id)

    def _s3(self, uri: str) -> tuple[ObjectStore, Location]:
        return Stores(StoreOptions(aws_conn_id=None, s3_client=self.clients("s3"))).parse(
            uri, directory=False
        )

    def _import(
        self,
        fs_id: str,
        work: list[tuple[str, str]],
        counts: dict[str, Any],
        task: dict[str, Any] | None = None,
    ) -> None:
        for prefix, fs_path in work:
            store, loc = self._s3(prefix)
            target = self._local(fs_id, fs_path)
            seen: set[Path] = set()
            for name in store.list_tree(loc):
                if task is not None and task["cancel"]:
                    return
                rel = name.lstrip("/")
                if not rel or name.endswith("/"):
                    continue
                seen.add(target / rel)
                source = loc.join(name)
                self._copy(partial(store.get_file, source, target / rel), "import", source.uri, counts, task)
            _remove_unseen(target, seen)

    def _copy(
        self,
        copy: Callable[[], Any],
        kind: str,
        name: str,
        counts: dict[str, Any],
        task: dict[str, Any] | None,
    ) -> None:
        """Copy one file, counting it as AWS's task report does."""
        with self._lock:
            counts["TotalCount"] = counts.get("TotalCount", 0) + 1
        try:
            copy()
            with self._lock:
                counts["SucceededCount"] = counts.get("SucceededCount", 0) + 1
        except Exception as exc:
            log.warning("emulator fsx: %s of %s failed: %s", kind, name, exc)
            with self._lock:
                counts["FailedCount"] = counts.get("FailedCount", 0) + 1
                if task is not None:
                    task.setdefault("failed_files", []).append((name, str(exc)))

    def _export(
        self, fs_id: str, work: list[tuple[str, str]], counts: dict[str, Any], task: dict[str, Any]
    ) -> None:
        for prefix, fs_path in work:
            store, loc = self._s3(prefix)
            source = self._local(fs_id, fs_path)
            for path in sorted(source.rglob("*")) if source.is_dir() else []:
                if task["cancel"]:
                    return
                if path.is_file():
                    dest = loc.join(path.relative_to(source).as_posix())
                    self._copy(partial(store.put_file, path, dest), "export", str(path), counts, task)

    def _write_report(self, task: dict[str, Any]) -> None:
        """The completion report (failed files only, as the project requests it) under ``<Path>/<TaskId>/``."""
        report = task.get("Report") or {}
        failed = task.get("failed_files") or []
        if not report.get("Enabled") or not failed:
            return
        store, loc = self._s3(_prefix(str(report["Path"])) + f"{task['TaskId']}/failures.csv")
        body = "".join(f"{path},FAILED,{reason.replace(',', ';')}\n" for path, reason in failed)
        with contextlib.suppress(Exception):
            store.write(loc, body.encode())

    @staticmethod
    def _task_answer(task: dict[str, Any]) -> dict[str, Any]:
        return json.loads(json.dumps({k: v for k, v in task.items() if k not in ("cancel", "failed_files")}))

    def describe_tasks(self, request: dict[str, Any]) -> list[dict[str, Any]]:
        with self._lock:
            found = _select(self.tasks, "task", request.get("TaskIds"))
            for flt in request.get("Filters") or []:
                values = set(flt.get("Values") or [])
                if flt.get("Name") == "file-system-id":
                    found = [t for t in found if t["FileSystemId"] in values]
                elif flt.get("Name") == "task-lifecycle":
                    found = [t for t in found if t["Lifecycle"] in values]
            return [self._task_answer(t) for t in found]

    def cancel_task(self, request: dict[str, Any]) -> dict[str, Any]:
        task_id = str(request.get("TaskId") or "")
        with self._lock:
            task = self.tasks.get(task_id)
            if task is None:
                raise FSxError(
                    "DataRepositoryTaskNotFound", f"Data repository task {task_id} does not exist."
                )
            if task["Lifecycle"] not in ("PENDING", "EXECUTING"):
                raise FSxError(
                    "DataRepositoryTaskEnded",
                    f"Data repository task {task_id} has already ended ({task['Lifecycle']}).",
                )
            task["cancel"] = True
            task["Lifecycle"] = "CANCELING"
        return {"TaskId": task_id, "Lifecycle": "CANCELING"}

    # -- training jobs
    def channel_mounts(self, request: dict[str, Any]) -> dict[str, Path]:
        """``{fsx://<id>/<MountName>: folder}`` for the request's FSx channels; ``FSxError`` if one cannot be read."""
        mounts: dict[str, Path] = {}
        for channel in request.get("InputDataConfig") or []:
            fs = (channel.get("DataSource") or {}).get("FileSystemDataSource")
            if not fs:
                continue
            name = channel.get("ChannelName")
            fs_id = str(fs.get("FileSystemId") or "")
            if fs.get("FileSystemType") != "FSxLustre":
                raise FSxError(
                    "ValidationException",
                    f"channel {name}: FileSystemType {fs.get('FileSystemType')} is not emulated (FSxLustre is)",
                )
            with self._lock:
                extra = self.extra.get(fs_id)
            if extra is None:
                raise FSxError("ValidationException", f"channel {name}: file system {fs_id} does not exist")
            if "failure" in extra:
                raise FSxError("ValidationException", f"channel {name}: file system {fs_id} is FAILED")
            if not (request.get("VpcConfig") or {}).get("Subnets"):
                raise FSxError(
                    "ValidationException",
                    f"channel {name}: a FileSystemDataSource needs VpcConfig (the job reaches {fs_id} "
                    "through its VPC)",
                )
            mount = str(extra["MountName"])
            path = str(fs.get("DirectoryPath") or "")
            if not is_under(path, f"/{mount}"):
                raise FSxError(
                    "ValidationException",
                    f"channel {name}: DirectoryPath {path!r} must start with /{mount}, the MountName of {fs_id}",
                )
            mounts[f"fsx://{fs_id}/{mount}"] = self.folder(fs_id)
        return mounts

    def shutdown(self, timeout: float = 10.0) -> None:
        with self._lock:
            for task in self.tasks.values():
                task["cancel"] = True
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))


def _remove_unseen(target: Path, seen: set[Path]) -> None:
    """An import also brings deletions: a file whose object is gone leaves the file system."""
    if target.is_dir():
        for path in sorted(target.rglob("*"), reverse=True):
            if path.is_file() and path not in seen:
                path.unlink()
