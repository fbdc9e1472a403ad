"""A small, faithful FSx fake on top of moto, for what moto lacks.

moto 5.2 implements FSx file systems but not data repository associations or tasks, and returns
no ``Lifecycle``, ``MountName`` or network interfaces. ``FakeFSx.install`` adds request handlers
to moto's ``FSxResponse`` (so both ``mock_aws`` and the in-process ``ThreadedMotoServer`` serve
them, and aiobotocore works against the server):

- CreateDataRepositoryAssociation / DescribeDataRepositoryAssociations (CREATING -> AVAILABLE on
  the next describe; overlapping paths are a BadRequest, as on AWS);
- CreateDataRepositoryTask / DescribeDataRepositoryTasks / CancelDataRepositoryTask with the
  state machine PENDING -> EXECUTING -> SUCCEEDED | FAILED | CANCELED (one step per describe),
  counts, released capacity and a completion report ``<Report.Path>/<TaskId>/failures.csv``;
- file systems gain ``Lifecycle: AVAILABLE``, ``LustreConfiguration.MountName``, ``VpcId`` and
  real moto EC2 network interfaces carrying the security groups.

Every request is validated against botocore's fsx service model (``ParamValidator``) before it is
handled, and every fake response against the output shape, so a request shape the real service
would reject fails here too. ``requests`` records ``(operation, params)`` for exact assertions.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, field
from typing import Any

import botocore.session
from botocore.validate import ParamValidator
from moto.core.exceptions import JsonRESTError

ACCOUNT = "123456789012"
_MODEL = botocore.session.get_session().get_service_model("fsx")


def validate_request(operation: str, params: dict[str, Any]) -> None:
    shape = _MODEL.operation_model(operation).input_shape
    report = ParamValidator().validate(params, shape)
    if report.has_errors():
        raise JsonRESTError("ValidationException", report.generate_report())


def validate_response(operation: str, body: dict[str, Any]) -> None:
    shape = _MODEL.operation_model(operation).output_shape
    report = ParamValidator().validate(body, shape)
    assert not report.has_errors(), (
        f"fake {operation} response breaks the service model: {report.generate_report()}"
    )


@dataclass
class TaskPlan:
    """How the next created task ends."""

    outcome: str = "SUCCEEDED"  # SUCCEEDED | FAILED | CANCELED
    total: int | None = None  # None: count S3 objects (imports) or 3
    failed: int = 0
    released_bytes: int | None = None
    failure_message: str | None = None
    executing_polls: int = 1  # describes spent in EXECUTING before the terminal state


@dataclass
class FakeFSx:
    associations: dict[str, dict[str, Any]] = field(default_factory=dict)
    tasks: dict[str, dict[str, Any]] = field(default_factory=dict)
    requests: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    plans: list[TaskPlan] = field(default_factory=list)
    file_systems: dict[str, dict[str, Any]] = field(default_factory=dict)  # extras per fs id
    # new file systems are CREATING (as on AWS) for this many describes, then AVAILABLE
    creating_describes: int = 0
    _creating: dict[str, int] = field(default_factory=dict)
    _task_state: dict[str, dict[str, Any]] = field(default_factory=dict)

    # ---- test controls --------------------------------------------------------------------------
    def plan_next_task(self, **kwargs: Any) -> None:
        self.plans.append(TaskPlan(**kwargs))

    def set_file_system(self, file_system_id: str, **extras: Any) -> None:
        """Override what describe returns, e.g. ``Lifecycle="CREATING"`` or ``FileSystemType="WINDOWS"``."""
        self.file_systems.setdefault(file_system_id, {}).update(extras)

    def calls(self, operation: str) -> list[dict[str, Any]]:
        return [p for op, p in self.requests if op == operation]

    # ---- installation -------------------------------------------------------------------------
    def install(self, monkeypatch: Any) -> FakeFSx:
        from moto.fsx import responses

        fake = self

        def handler(operation: str, func: Any) -> Any:
            def method(resp: Any) -> str:
                params = json.loads(resp.body or "{}")
                validate_request(operation, params)
                fake.requests.append((operation, params))
                body = func(resp, params)
                validate_response(operation, body)
                return json.dumps(body)

            return method

        original_create = responses.FSxResponse.create_file_system
        original_describe = responses.FSxResponse.describe_file_systems

        def create_file_system(resp: Any, params: dict[str, Any]) -> dict[str, Any]:
            body = json.loads(original_create(resp))
            fs = body["FileSystem"]
            fake._new_file_system(resp, fs, params)
            if fake.creating_describes:
                fake._creating[fs["FileSystemId"]] = fake.creating_describes
                fake.set_file_system(fs["FileSystemId"], Lifecycle="CREATING")
            return {"FileSystem": fake._decorate(fs)}

        def describe_file_systems(resp: Any, params: dict[str, Any]) -> dict[str, Any]:
            body = json.loads(original_describe(resp))
            for fs in body["FileSystems"]:
                fake._advance_creation(fs["FileSystemId"])
            body["FileSystems"] = [fake._decorate(fs) for fs in body["FileSystems"]]
            if params.get("FileSystemIds") and not body["FileSystems"]:
                raise JsonRESTError("FileSystemNotFound", "File system not found")  # as AWS, unlike moto
            if not body.get("NextToken"):
                body.pop("NextToken", None)
            return body

        ops = {
            "CreateFileSystem": create_file_system,
            "DescribeFileSystems": describe_file_systems,
            "CreateDataRepositoryAssociation": self._create_association,
            "DescribeDataRepositoryAssociations": self._describe_associations,
            "CreateDataRepositoryTask": self._create_task,
            "DescribeDataRepositoryTasks": self._describe_tasks,
            "CancelDataRepositoryTask": self._cancel_task,
        }
        for op, func in ops.items():
            snake = "".join("_" + c.lower() if c.isupper() else c for c in op).lstrip("_")
            monkeypatch.setattr(responses.FSxResponse, snake, handler(op, func), raising=False)
        return self

    # ---- file systems -------------------------------------------------------------------------
    def _new_file_system(self, resp: Any, fs: dict[str, Any], params: dict[str, Any]) -> None:
        from moto.ec2.models import ec2_backends

        ec2 = ec2_backends[resp.current_account][resp.region]
        subnet = ec2.get_subnet(fs["SubnetIds"][0])
        eni = ec2.create_network_interface(
            subnet, None, group_ids=list(params.get("SecurityGroupIds") or []), description="fsx eni"
        )
        extras = self.file_systems.setdefault(fs["FileSystemId"], {})
        extras.setdefault("NetworkInterfaceIds", [eni.id])
        extras.setdefault("VpcId", subnet.vpc_id)

    def _advance_creation(self, file_system_id: str) -> None:
        left = self._creating.get(file_system_id)
        if left is None:
            return
        if left <= 1:
            del self._creating[file_system_id]
            self.set_file_system(file_system_id, Lifecycle="AVAILABLE")
        else:
            self._creating[file_system_id] = left - 1

    def _decorate(self, fs: dict[str, Any]) -> dict[str, Any]:
        extras = dict(self.file_systems.get(fs["FileSystemId"], {}))
        fs.pop("SecurityGroupIds", None)  # not part of the FileSystem output shape
        lustre = dict(fs.get("LustreConfiguration") or {})
        if fs.get("FileSystemType") == "LUSTRE":
            lustre.setdefault("MountName", hashlib.sha1(fs["FileSystemId"].encode()).hexdigest()[:8])
        lustre.update(extras.pop("LustreConfiguration", {}))
        if lustre:
            fs["LustreConfiguration"] = lustre
        fs.setdefault("Lifecycle", "AVAILABLE")
        fs.setdefault("OwnerId", ACCOUNT)
        fs.update(extras)
        return fs

    def _file_system_exists(self, resp: Any, file_system_id: str) -> bool:
        from moto.fsx.models import fsx_backends

        return file_system_id in fsx_backends[resp.current_account][resp.region].file_systems

    # ---- associations -------------------------------------------------------------------------
    def _create_association(self, resp: Any, params: dict[str, Any]) -> dict[str, Any]:
        fs_id = params["FileSystemId"]
        if not self._file_system_exists(resp, fs_id):
            raise JsonRESTError("FileSystemNotFound", f"File system {fs_id} not found")
        path = params.get("FileSystemPath", "/")
        token = params.get("ClientRequestToken")
        for assoc in self.associations.values():
            if token and assoc.get("_token") == token:
                return {"Association": _public(assoc)}
            if assoc["FileSystemId"] != fs_id:
                continue
            a = assoc["FileSystemPath"].rstrip("/") + "/"
            b = path.rstrip("/") + "/"
            if a.startswith(b) or b.startswith(a):
                raise JsonRESTError("BadRequest", f"FileSystemPath {path} overlaps {assoc['FileSystemPath']}")
            s, t = assoc["DataRepositoryPath"], params["DataRepositoryPath"]
            if s.startswith(t) or t.startswith(s):
                raise JsonRESTError("BadRequest", f"DataRepositoryPath {t} overlaps {s}")
        assoc_id = f"dra-{hashlib.sha1(f'{fs_id}{path}{len(self.associations)}'.encode()).hexdigest()[:17]}"
        assoc = {
            "AssociationId": assoc_id,
            "ResourceARN": f"arn:aws:fsx:{resp.region}:{ACCOUNT}:association/{fs_id}/{assoc_id}",
            "FileSystemId": fs_id,
            "Lifecycle": "CREATING",
            "FileSystemPath": path,
            "DataRepositoryPath": params["DataRepositoryPath"],
            "BatchImportMetaDataOnCreate": params.get("BatchImportMetaDataOnCreate", False),
            "ImportedFileChunkSize": params.get("ImportedFileChunkSize", 1024),
            "S3": params.get("S3", {}),
            "CreationTime": time.time(),
            "_token": token,
        }
        self.associations[assoc_id] = assoc
        return {"Association": _public(assoc)}

    def _describe_associations(self, resp: Any, params: dict[str, Any]) -> dict[str, Any]:
        out = []
        for assoc in self.associations.values():
            if params.get("AssociationIds") and assoc["AssociationId"] not in params["AssociationIds"]:
                continue
            ok = True
            for flt in params.get("Filters") or []:
                if flt["Name"] == "file-system-id" and assoc["FileSystemId"] not in flt["Values"]:
                    ok = False
            if not ok:
                continue
            shown = _public(assoc)
            if assoc["Lifecycle"] == "CREATING":
                assoc["Lifecycle"] = "AVAILABLE"  # available from the next describe on
            out.append(shown)
        if params.get("AssociationIds") and not out:
            raise JsonRESTError("DataRepositoryAssociationNotFound", "association not found")
        return {"Associations": out}

    # ---- tasks --------------------------------------------------------------------------------
    def _create_task(self, resp: Any, params: dict[str, Any]) -> dict[str, Any]:
        fs_id = params["FileSystemId"]
        if not self._file_system_exists(resp, fs_id):
            raise JsonRESTError("FileSystemNotFound", f"File system {fs_id} not found")
        token = params.get("ClientRequestToken")
        for task in self.tasks.values():
            if token and task.get("_token") == token:
                return {"DataRepositoryTask": _public(task)}
        plan = self.plans.pop(0) if self.plans else TaskPlan()
        task_id = f"task-{hashlib.sha1(f'{fs_id}{len(self.tasks)}'.encode()).hexdigest()[:17]}"
        total = plan.total if plan.total is not None else self._count_objects(params)
        task = {
            "TaskId": task_id,
            "Lifecycle": "PENDING",
            "Type": params["Type"],
            "CreationTime": time.time(),
            "ResourceARN": f"arn:aws:fsx:{resp.region}:{ACCOUNT}:task/{task_id}",
            "FileSystemId": fs_id,
            "Paths": params.get("Paths", []),
            "Report": params["Report"],
            "_token": token,
        }
        if "CapacityToRelease" in params:
            task["CapacityToRelease"] = params["CapacityToRelease"]
        if "ReleaseConfiguration" in params:
            task["ReleaseConfiguration"] = params["ReleaseConfiguration"]
        self.tasks[task_id] = task
        self._task_state[task_id] = {"plan": plan, "total": total, "polls": 0}
        return {"DataRepositoryTask": _public(task)}

    def _count_objects(self, params: dict[str, Any]) -> int:
        if params["Type"] != "IMPORT_METADATA_FROM_REPOSITORY":
            return 3
        try:
            from moto.s3.models import s3_backends

            backend = s3_backends[ACCOUNT]["aws"]
            total = 0
            for path in params.get("Paths") or []:
                bucket, _, prefix = path[len("s3://") :].partition("/")
                total += sum(
                    1 for k in backend.buckets[bucket].keys if k.startswith(prefix) and not k.endswith("/")
                )
            return total
        except Exception:
            return 3

    def _advance(self, resp: Any, task: dict[str, Any]) -> None:
        state = self._task_state[task["TaskId"]]
        plan: TaskPlan = state["plan"]
        total = state["total"]
        life = task["Lifecycle"]
        now = time.time()
        if life == "PENDING":
            task["Lifecycle"] = "EXECUTING"
            task["StartTime"] = now
            task["Status"] = {
                "TotalCount": total,
                "SucceededCount": 0,
                "FailedCount": 0,
                "LastUpdatedTime": now,
            }
        elif life == "EXECUTING":
            state["polls"] += 1
            if state["polls"] < plan.executing_polls:
                task["Status"]["SucceededCount"] = min(total, task["Status"]["SucceededCount"] + 1)
                task["Status"]["LastUpdatedTime"] = now
                return
            self._finish(resp, task, plan.outcome, plan, total)
        elif life == "CANCELING":
            self._finish(resp, task, "CANCELED", plan, total)

    def _finish(self, resp: Any, task: dict[str, Any], outcome: str, plan: TaskPlan, total: int) -> None:
        now = time.time()
        status = task.setdefault("Status", {"TotalCount": total, "SucceededCount": 0, "FailedCount": 0})
        status["LastUpdatedTime"] = now
        task["Lifecycle"] = outcome
        task["EndTime"] = now
        if outcome == "SUCCEEDED":
            status.update(SucceededCount=total, FailedCount=0)
        elif outcome == "FAILED":
            status.update(SucceededCount=total - plan.failed, FailedCount=plan.failed)
            task["FailureDetails"] = {"Message": plan.failure_message or f"{plan.failed} files failed"}
            self._write_report(task)
        if task["Type"] == "RELEASE_DATA_FROM_FILESYSTEM" and outcome == "SUCCEEDED":
            status["ReleasedCapacity"] = plan.released_bytes or 0

    def _write_report(self, task: dict[str, Any]) -> None:
        report = task.get("Report") or {}
        if not report.get("Enabled") or not report.get("Path"):
            return
        try:
            from moto.s3.models import s3_backends

            bucket, _, prefix = report["Path"][len("s3://") :].partition("/")
            key = f"{prefix.rstrip('/')}/{task['TaskId']}/failures.csv".lstrip("/")
            s3_backends[ACCOUNT]["aws"].put_object(bucket, key, b"FilePath,ErrorCode\nbad.bin,Error\n")
        except Exception:
            pass

    def _describe_tasks(self, resp: Any, params: dict[str, Any]) -> dict[str, Any]:
        out = []
        for task in self.tasks.values():
            if params.get("TaskIds") and task["TaskId"] not in params["TaskIds"]:
                continue
            out.append(_public(task))
            self._advance(resp, task)  # the next describe sees the next state
        if params.get("TaskIds") and not out:
            raise JsonRESTError("DataRepositoryTaskNotFound", "task not found")
        return {"DataRepositoryTasks": out}

    def _cancel_task(self, resp: Any, params: dict[str, Any]) -> dict[str, Any]:
        task = self.tasks.get(params["TaskId"])
        if task is None:
            raise JsonRESTError("DataRepositoryTaskNotFound", "task not found")
        if task["Lifecycle"] not in ("PENDING", "EXECUTING"):
            raise JsonRESTError("DataRepositoryTaskEnded", f"task is {task['Lifecycle']}")
        task["Lifecycle"] = "CANCELING"
        return {"Lifecycle": "CANCELING", "TaskId": task["TaskId"]}


def _public(item: dict[str, Any]) -> dict[str, Any]:
    return json.loads(json.dumps({k: v for k, v in item.items() if not k.startswith("_")}))
