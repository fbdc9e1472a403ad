"""Model registries: SageMaker model package groups, and a local directory with the same interface.

Both answer the same three questions: *who is the champion* (the latest approved version, with the
metrics of its stored evaluation report), *register this challenger* (with an approval status and
an audit record), and *change a version's approval*. The request itself is built by the pure
``airflow_dist_training.evaluation.registration``.

Lineage: SageMaker packages carry ``MetadataProperties.GeneratedBy`` = the training job ARN, the
job name/ARN in ``CustomerMetadataProperties`` and a tag.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import json
import logging
from collections.abc import Callable, Iterator, Mapping
from functools import cached_property
from pathlib import Path
from typing import Any, Protocol

from airflow_dist_training.aws_errors import describe_error, error_code
from airflow_dist_training.errors import Problem, SpecValidationError
from airflow_dist_training.evaluation.gate import Champion, ChampionUnreadableError
from airflow_dist_training.evaluation.registration import (
    APPROVED,
    AUDIT_FILE_NAME,
    PENDING,
    REGISTER_TOKEN_KEY,
    REJECTED,
    approval_status,
    build_audit_record,
    build_create_model_package_request,
    validate_group_name,
)
from airflow_dist_training.evaluation.schema import EVALUATION_FILE_NAME, load_evaluation_file
from airflow_dist_training.hooks.aws import AwsConnectionMixin
from airflow_dist_training.hooks.evaluation import ArtifactStore
from airflow_dist_training.storage import atomic_write
from airflow_dist_training.storage.location import file_uri_path, join_uri, parent_uri

log = logging.getLogger(__name__)

_STATUSES = {APPROVED, PENDING, REJECTED}
# the model package metadata key naming a re-evaluation's report (ModelMetrics cannot be updated)
CURRENT_EVALUATION_KEY = "CurrentEvaluation"
# what ``register`` returns besides the registry and the group
_RESULT_KEYS = ("package_id", "version", "approval_status", "model_data_uri", "evaluation_uri", "audit_uri")


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class ModelRegistry(Protocol):
    """What the gate and the registration operator need from a registry."""

    kind: str
    group: str

    def get_champion(self) -> Champion | None: ...

    def register(
        self,
        *,
        model_data_uri: str,
        image_uri: str | None,
        evaluation_uri: str,
        decision: Mapping[str, Any] | None,
        auto_approve: bool = False,
        training: Mapping[str, Any] | None = None,
        description: str | None = None,
        report_uri: str | None = None,
        tags: Mapping[str, str] | None = None,
        client_token: str | None = None,
        lineage: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]: ...

    def set_approval(self, package_id: str, status: str, description: str | None = None) -> None: ...

    def record_evaluation(
        self, champion: Champion, *, evaluation_uri: str, evaluation_fingerprint: str | None, run_id: str | None
    ) -> dict[str, Any]:
        """Record a re-evaluation of ``champion`` (its model, a new evaluation set) on the champion
        itself, no new version: the next run compares against it (``docs/retraining.md``)."""
        ...


def _check_status(status: str) -> None:
    if status not in _STATUSES:
        raise SpecValidationError([("status", f"must be one of {sorted(_STATUSES)}, got {status!r}")])


def _group_missing(exc: Exception) -> bool:
    return error_code(exc) == "ValidationException" and "does not exist" in describe_error(exc)


def _package_uris(desc: Mapping[str, Any]) -> tuple[Any, Any]:
    """A package's model data URL and the URI of its evaluation report (``ModelQuality`` statistics)."""
    containers = (desc.get("InferenceSpecification") or {}).get("Containers") or [{}]
    stats = ((desc.get("ModelMetrics") or {}).get("ModelQuality") or {}).get("Statistics") or {}
    return containers[0].get("ModelDataUrl"), stats.get("S3Uri")


def _reevaluation(
    champion: Champion, evaluation: Any, evaluation_uri: str, evaluation_fingerprint: str | None, run_id: str | None
) -> dict[str, Any]:
    """One re-evaluation's record (what every registry keeps of it, and returns)."""
    return {
        "package_id": champion.id,
        "version": champion.version,
        "model_data_uri": champion.model_data_uri,
        "evaluation_uri": evaluation_uri,
        "evaluation_fingerprint": evaluation_fingerprint,
        "evaluation_set_hash": evaluation.evaluation_set_hash,
        "metrics": dict(evaluation.metrics),
        "previous_evaluation_uri": champion.evaluation_uri,
        "previous_evaluation_fingerprint": (champion.lineage or {}).get("evaluation_fingerprint"),
        "run_id": run_id,
        "reevaluated_at": _now(),
    }


def _read_champion(
    who: str, uri: str, missing: Problem, load: Callable[[str], Any], **champion: Any
) -> Champion:
    """The champion ``who`` with its evaluation report at ``uri`` (none stored: ``missing`` says so)."""
    if not uri:
        raise ChampionUnreadableError([missing], source=f"champion {who}")
    try:
        evaluation = load(uri)
    except SpecValidationError as exc:
        problems = [Problem(p.path, p.message) for p in exc.problems]
        raise ChampionUnreadableError(problems, source=f"champion {who} ({uri})") from None
    return Champion(evaluation=evaluation, evaluation_uri=uri, **champion)


class LocalModelRegistry:
    """A model registry in a directory: ``<root>/<group>/index.json`` plus one folder per version.

    ``index.json`` lists versions with their approval status; each version folder holds a copy of
    its ``evaluation.json`` (the champion's metrics are read from it, as SageMaker reads
    ``ModelMetrics``) and its ``audit.json``. Writes are atomic (temp file + ``os.replace``) and
    serialised by an ``flock`` on ``<root>/<group>/.lock``.

    :param root: registry directory (path or ``file://`` URI).
    :param group: model group name (same rules as a SageMaker model package group name).
    :param store: how to read an ``s3://`` evaluation to copy it in (optional).
    """

    kind = "local"

    def __init__(self, root: str | Path, group: str, store: ArtifactStore | None = None) -> None:
        validate_group_name(group)
        self.root = file_uri_path(str(root))
        self.group = group
        self.store = store or ArtifactStore()

    @property
    def group_dir(self) -> Path:
        return self.root / self.group

    @property
    def index_path(self) -> Path:
        return self.group_dir / "index.json"

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.group_dir.mkdir(parents=True, exist_ok=True)
        with open(self.group_dir / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            yield  # closing the file releases the lock

    def _read_index(self) -> dict[str, Any]:
        if not self.index_path.exists():
            return {"group": self.group, "versions": []}
        try:
            data = json.loads(self.index_path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            why = f"malformed registry index at line {exc.lineno}, column {exc.colno}: {exc.msg}"
            raise SpecValidationError([("", why)], source=str(self.index_path)) from None
        return dict(data)

    def _write_index(self, index: Mapping[str, Any]) -> None:
        atomic_write(self.index_path, json.dumps(index, indent=2, sort_keys=True).encode("utf-8"))

    def versions(self) -> list[dict[str, Any]]:
        return list(self._read_index()["versions"])

    def get_champion(self) -> Champion | None:
        approved = [v for v in self.versions() if v.get("approval_status") == APPROVED]
        if not approved:
            return None
        entry = max(approved, key=lambda v: int(v["version"]))
        who = f"{self.group}/{entry['version']}"
        return _read_champion(
            who,
            str(entry.get("evaluation_uri") or ""),
            Problem("", "has no stored evaluation report; cannot compare metrics against it"),
            load_evaluation_file,
            id=who,
            version=int(entry["version"]),
            model_data_uri=entry.get("model_data_uri"),
            lineage=entry.get("lineage"),
        )

    def register(
        self,
        *,
        model_data_uri: str,
        image_uri: str | None,
        evaluation_uri: str,
        decision: Mapping[str, Any] | None,
        auto_approve: bool = False,
        training: Mapping[str, Any] | None = None,
        description: str | None = None,
        report_uri: str | None = None,
        tags: Mapping[str, str] | None = None,
        client_token: str | None = None,
        lineage: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        status = approval_status(decision, auto_approve)
        # Read (and validate) the evaluation before taking the lock or writing anything.
        evaluation_bytes = self.store.read_bytes(evaluation_uri)
        with self._locked():
            index = self._read_index()
            for entry in index["versions"]:
                if client_token and entry.get("client_token") == client_token:
                    log.info("Version %s was already registered by this task (retry): reusing it", entry["version"])
                    return self._result(entry)
            version = max((int(v["version"]) for v in index["versions"]), default=0) + 1
            vdir = self.group_dir / "versions" / str(version)
            stored_eval = vdir / EVALUATION_FILE_NAME
            atomic_write(stored_eval, evaluation_bytes)
            audit_path = vdir / AUDIT_FILE_NAME
            now = _now()
            audit = build_audit_record(
                decision=decision,
                status=status,
                registry=self.kind,
                group=self.group,
                model_data_uri=model_data_uri,
                image_uri=image_uri,
                evaluation_uri=evaluation_uri,
                training=training,
                registered_at=now,
                package_id=f"{self.group}/{version}",
                lineage=lineage,
            )
            atomic_write(audit_path, json.dumps(audit, indent=2, sort_keys=True).encode("utf-8"))
            entry = {
                "version": version,
                "package_id": f"{self.group}/{version}",
                "approval_status": status,
                "created_at": now,
                "model_data_uri": model_data_uri,
                "image_uri": image_uri,
                "evaluation_uri": str(stored_eval),
                "source_evaluation_uri": evaluation_uri,
                "report_uri": report_uri,
                "audit_uri": str(audit_path),
                "description": description,
                "training_job_name": (training or {}).get("job_name"),
                "training_job_arn": (training or {}).get("job_arn"),
                "evaluation_set_hash": ((decision or {}).get("challenger") or {}).get("evaluation_set_hash"),
                "tags": dict(tags or {}),
                "client_token": client_token,
                "lineage": dict(lineage) if lineage else None,
            }
            index["versions"].append(entry)
            self._write_index(index)
        log.info("Registered %s/%s as %s", self.group, version, status)
        return self._result(entry)

    def _result(self, entry: Mapping[str, Any]) -> dict[str, Any]:
        return {"registry": self.kind, "group": self.group, **{key: entry[key] for key in _RESULT_KEYS}}

    def record_evaluation(
        self, champion: Champion, *, evaluation_uri: str, evaluation_fingerprint: str | None, run_id: str | None
    ) -> dict[str, Any]:
        """Store the new evaluation beside the version and make it the version's current one
        (``evaluation_uri``, ``evaluation_set_hash``, ``lineage.evaluation_fingerprint``); the
        earlier ones stay listed under ``reevaluations``."""
        evaluation_bytes = self.store.read_bytes(evaluation_uri)
        evaluation = self.store.load_evaluation(evaluation_uri)
        version = int(str(champion.id).rsplit("/", 1)[-1])
        with self._locked():
            index = self._read_index()
            entry = next((v for v in index["versions"] if int(v["version"]) == version), None)
            if entry is None:
                raise SpecValidationError([Problem("version", f"no version {version} in group {self.group}")])
            done = list(entry.get("reevaluations") or [])
            stored = self.group_dir / "versions" / str(version) / "reevaluations" / str(len(done) + 1) / EVALUATION_FILE_NAME
            atomic_write(stored, evaluation_bytes)
            record = _reevaluation(champion, evaluation, str(stored), evaluation_fingerprint, run_id)
            record["source_evaluation_uri"] = evaluation_uri
            entry["reevaluations"] = [*done, record]
            entry["evaluation_uri"] = str(stored)
            entry["evaluation_set_hash"] = evaluation.evaluation_set_hash
            entry["lineage"] = {**(entry.get("lineage") or {}), "evaluation_fingerprint": evaluation_fingerprint}
            self._write_index(index)
        log.info("Recorded a re-evaluation of %s/%s (no new version)", self.group, version)
        return {"registry": self.kind, "group": self.group, **record}

    def set_approval(self, package_id: str, status: str, description: str | None = None) -> None:
        _check_status(status)
        version = int(str(package_id).rsplit("/", 1)[-1])
        with self._locked():
            index = self._read_index()
            for entry in index["versions"]:
                if entry["version"] == version:
                    entry.update(
                        approval_status=status, approval_description=description, approval_changed_at=_now()
                    )
                    break
            else:
                raise SpecValidationError([Problem("version", f"no version {version} in group {self.group}")])
            self._write_index(index)


class ModelRegistryHook(AwsConnectionMixin):
    """A SageMaker model package group as a model registry.

    :param model_package_group_name: the group; created on first registration when missing.
    :param aws_conn_id: Airflow AWS connection (SageMaker and S3).
    :param region_name: AWS region; defaults to the connection's.
    :param group_description: description used when the group has to be created.
    """

    kind = "sagemaker"

    def __init__(
        self,
        model_package_group_name: str,
        aws_conn_id: str | None = "aws_default",
        region_name: str | None = None,
        group_description: str | None = None,
    ) -> None:
        self.group = validate_group_name(model_package_group_name)
        self._set_aws_connection(aws_conn_id, region_name)
        self.group_description = group_description
        self.store = ArtifactStore(aws_conn_id, region_name)

    @cached_property
    def client(self) -> Any:
        return self.aws_client("sagemaker")

    def group_exists(self) -> bool:
        try:
            self.client.describe_model_package_group(ModelPackageGroupName=self.group)
            return True
        except Exception as exc:
            if _group_missing(exc):
                return False
            raise

    def ensure_group(self) -> bool:
        """Create the group when it is missing; return True when it was created."""
        if self.group_exists():
            return False
        self.client.create_model_package_group(
            ModelPackageGroupName=self.group,
            ModelPackageGroupDescription=self.group_description or "Created by airflow-dist-training",
        )
        log.info("Created model package group %s", self.group)
        return True

    def _newest_packages(self, **filters: Any) -> list[dict[str, Any]]:
        """The group's package summaries, newest first (none while the group does not exist)."""
        try:
            resp = self.client.list_model_packages(
                ModelPackageGroupName=self.group, SortBy="CreationTime", SortOrder="Descending", **filters
            )
        except Exception as exc:
            if _group_missing(exc):
                return []
            raise
        return list(resp.get("ModelPackageSummaryList") or [])

    def latest_approved_arn(self) -> str | None:
        summaries = self._newest_packages(ModelApprovalStatus=APPROVED, MaxResults=1)
        return str(summaries[0]["ModelPackageArn"]) if summaries else None

    def get_champion(self) -> Champion | None:
        arn = self.latest_approved_arn()
        if arn is None:
            return None
        desc = self.client.describe_model_package(ModelPackageName=arn)
        from airflow_dist_training.evaluation.registration import lineage_from_metadata

        model_data_uri, uri = _package_uris(desc)
        # a re-evaluation on a newer evaluation set supersedes the registered report (ModelMetrics
        # cannot be updated): record_evaluation
        uri = (desc.get("CustomerMetadataProperties") or {}).get(CURRENT_EVALUATION_KEY) or uri
        why = "is not set (the package was registered without an evaluation report); cannot compare metrics against it"
        return _read_champion(
            f"model package {arn}",
            str(uri) if uri else "",
            Problem("ModelMetrics.ModelQuality.Statistics", why),
            self.store.load_evaluation,
            id=arn,
            version=desc.get("ModelPackageVersion"),
            model_data_uri=model_data_uri,
            lineage=lineage_from_metadata(desc.get("CustomerMetadataProperties")),
        )

    def register(
        self,
        *,
        model_data_uri: str,
        image_uri: str | None,
        evaluation_uri: str,
        decision: Mapping[str, Any] | None,
        auto_approve: bool = False,
        training: Mapping[str, Any] | None = None,
        description: str | None = None,
        report_uri: str | None = None,
        tags: Mapping[str, str] | None = None,
        client_token: str | None = None,
        lineage: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        status = approval_status(decision, auto_approve)
        audit_uri = join_uri(parent_uri(evaluation_uri), AUDIT_FILE_NAME)
        request = build_create_model_package_request(
            group=self.group,
            model_data_uri=model_data_uri,
            image_uri=image_uri or "",
            evaluation_uri=evaluation_uri,
            status=status,
            training=training,
            decision=decision,
            audit_uri=audit_uri,
            report_uri=report_uri,
            description=description,
            tags=tags,
            client_token=client_token,
            lineage=lineage,
        )
        audit_kwargs: dict[str, Any] = {
            "lineage": lineage,
            "decision": decision,
            "status": status,
            "registry": self.kind,
            "group": self.group,
            "model_data_uri": model_data_uri,
            "image_uri": image_uri,
            "evaluation_uri": evaluation_uri,
            "training": training,
        }
        self.ensure_group()
        if client_token and (existing := self._registered_by(client_token)) is not None:
            log.info("Version %s was already registered by this task (retry): reusing it", existing)
            return self._result_for(existing, audit_uri)
        # Audit first: a package never points at a missing audit record.
        self._write_audit(audit_uri, build_audit_record(**audit_kwargs, registered_at=_now()))
        arn = str(self.client.create_model_package(**request)["ModelPackageArn"])
        self._write_audit(audit_uri, build_audit_record(**audit_kwargs, registered_at=_now(), package_id=arn))
        log.info("Registered %s as %s", arn, status)
        return self._result(arn, status, model_data_uri, evaluation_uri, audit_uri)

    # A retried register task finds its version among the newest ones (ClientToken alone is not
    # enough: its idempotency window is short, and emulators ignore it).
    _RETRY_LOOKBACK = 10

    def _registered_by(self, client_token: str) -> str | None:
        """The ARN of the version this registration token created, among the newest few."""
        token = client_token[:36]
        for summary in self._newest_packages(MaxResults=self._RETRY_LOOKBACK):
            arn = str(summary["ModelPackageArn"])
            desc = self.client.describe_model_package(ModelPackageName=arn)
            if (desc.get("CustomerMetadataProperties") or {}).get(REGISTER_TOKEN_KEY) == token:
                return arn
        return None

    def _result_for(self, arn: str, audit_uri: str) -> dict[str, Any]:
        desc = self.client.describe_model_package(ModelPackageName=arn)
        return self._result(arn, desc.get("ModelApprovalStatus"), *_package_uris(desc), audit_uri)

    def _result(
        self, arn: str, status: Any, model_data_uri: Any, evaluation_uri: Any, audit_uri: str
    ) -> dict[str, Any]:
        tail = arn.rsplit("/", 1)[-1]
        values = (arn, int(tail) if tail.isdigit() else None, status, model_data_uri, evaluation_uri, audit_uri)
        return {"registry": self.kind, "group": self.group, **dict(zip(_RESULT_KEYS, values, strict=True))}

    def _write_audit(self, uri: str, record: Mapping[str, Any]) -> None:
        self.store.write_text(uri, json.dumps(record, indent=2, sort_keys=True), "application/json")

    def record_evaluation(
        self, champion: Champion, *, evaluation_uri: str, evaluation_fingerprint: str | None, run_id: str | None
    ) -> dict[str, Any]:
        """``UpdateModelPackage``: the package's ``CustomerMetadataProperties`` name the new
        evaluation report (``CurrentEvaluation``, read before ``ModelMetrics``, which cannot be
        updated), its ``EvaluationFingerprint`` and ``EvaluationSetHash``, and when and by which
        run it was re-evaluated."""
        evaluation = self.store.load_evaluation(evaluation_uri)
        desc = self.client.describe_model_package(ModelPackageName=champion.id)
        record = _reevaluation(champion, evaluation, evaluation_uri, evaluation_fingerprint, run_id)
        updates = {
            CURRENT_EVALUATION_KEY: evaluation_uri,
            "EvaluationFingerprint": evaluation_fingerprint,
            "EvaluationSetHash": evaluation.evaluation_set_hash,
            "ReevaluatedAt": record["reevaluated_at"],
            "ReevaluatedByRun": run_id,
        }
        # the whole map: SageMaker merges it, some emulators replace it
        metadata = {**(desc.get("CustomerMetadataProperties") or {}), **{k: str(v)[:256] for k, v in updates.items() if v}}
        self.client.update_model_package(ModelPackageArn=champion.id, CustomerMetadataProperties=metadata)
        log.info("Recorded a re-evaluation of %s (no new version)", champion.id)
        return {"registry": self.kind, "group": self.group, **record}

    def set_approval(self, package_id: str, status: str, description: str | None = None) -> None:
        _check_status(status)
        extra = {"ApprovalDescription": description} if description else {}
        self.client.update_model_package(ModelPackageArn=package_id, ModelApprovalStatus=status, **extra)


def get_registry(
    registry: str,
    *,
    group: str,
    local_registry_dir: str | None = None,
    aws_conn_id: str | None = "aws_default",
    region_name: str | None = None,
) -> ModelRegistry:
    """Build the registry an operator was configured with: its kind's factory (``spec/registries.py``)."""
    from airflow_dist_training.spec.registries import registry_record

    record = registry_record(registry)
    if record.local_dir and not local_registry_dir:
        raise SpecValidationError([Problem("local_registry_dir", f"is required when registry={registry!r}")])
    return record.load_factory()(group=group, local_dir=local_registry_dir, aws_conn_id=aws_conn_id, region_name=region_name)  # type: ignore[no-any-return]


def local_registry(*, group: str, local_dir: str, aws_conn_id: str | None, region_name: str | None) -> ModelRegistry:
    """The ``local`` kind's factory."""
    return LocalModelRegistry(local_dir, group, store=ArtifactStore(aws_conn_id, region_name))


def sagemaker_registry(*, group: str, aws_conn_id: str | None, region_name: str | None, **_: Any) -> ModelRegistry:
    """The ``sagemaker`` kind's factory."""
    return ModelRegistryHook(group, aws_conn_id=aws_conn_id, region_name=region_name)
