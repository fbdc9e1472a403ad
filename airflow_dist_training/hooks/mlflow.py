"""MLflow as a model registry: the ``mlflow`` registry kind (``spec/registries.py``).

It talks to the tracking server over MLflow's REST API (``/api/2.0/mlflow/...``, the interface
every MLflow client uses), one HTTP request a call, with the standard library. Why not the
``mlflow-skinny`` client: every release of it requires ``cachetools<8``, and Airflow 3.3's
constraints pin ``cachetools==8.0.2``, so it cannot be installed next to the pinned Airflow
(docs/mlflow.md). The server is the one ``MLFLOW_TRACKING_URI`` names, as for every MLflow client.

A registration is one model version of the registered model ``group``. Its source is the model
artifact (an ``s3://`` one as it is; a local file is uploaded into the training run's artifacts
first, as MLflow refuses local paths); its tags carry the challenger's metrics, the data, code and
spec fingerprints, the training job and the gate's decision. The champion is the version the
``champion`` alias points at: the alias moves only once the version is READY and marked complete,
so a failure half-way never leaves the alias on a version that is not fully registered.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any

from airflow_dist_training.errors import Problem, SpecValidationError
from airflow_dist_training.evaluation.gate import Champion, ChampionUnreadableError
from airflow_dist_training.evaluation.registration import APPROVED, PENDING, REJECTED, approval_status
from airflow_dist_training.evaluation.schema import EvaluationResult
from airflow_dist_training.hooks.evaluation import ArtifactStore
from airflow_dist_training.storage.location import file_uri_path

log = logging.getLogger(__name__)

TRACKING_URI_ENV = "MLFLOW_TRACKING_URI"
CHAMPION_ALIAS = "champion"
# Model version tags: the challenger's metrics are "metric.<name>", the rest are these keys.
METRIC_TAG = "metric."
_LINEAGE_TAGS = (
    "data_fingerprint",
    "code_hash",
    "spec_hash",
    "evaluation_fingerprint",
    "run_id",
    "dag_id",
    "champion_compared_with",
    "gate_decision",
)
_REGISTRATION = "registration"  # "incomplete" until every step is done, then "complete"
_TOKEN = "register_token"
_TRANSIENT_HTTP = {429, 500, 502, 503, 504}


class MlflowTrackingError(Exception):
    """A call to the tracking server failed: its URI, the endpoint and MLflow's own message."""

    def __init__(
        self, uri: str, endpoint: str, message: str, code: str | None = None, transient: bool = False
    ) -> None:
        super().__init__(f"MLflow tracking server {uri}: {endpoint}: {message}")
        self.uri, self.endpoint, self.message, self.code, self.transient = (
            uri,
            endpoint,
            message,
            code,
            transient,
        )


#: SageMaker managed MLflow: a tracking server's or an MLflow App's ARN, as the ``sagemaker-mlflow``
#: plugin takes it for a tracking URI.
_MANAGED_ARN = re.compile(
    r"^arn:(aws|aws-us-gov):sagemaker:([a-z0-9-]+):(\d{12}):(mlflow-tracking-server|mlflow-app)/[^/#\s]+$"
)
#: What the plugin reads to send the requests elsewhere than the region's endpoint (tests, VPC endpoints).
CUSTOM_ENDPOINT_ENV = "SAGEMAKER_MLFLOW_CUSTOM_ENDPOINT"


def tracking_uri(uri: str | None = None) -> str:
    """The tracking server: ``uri``, else ``$MLFLOW_TRACKING_URI``; an ``http(s)://`` URL or a SageMaker
    managed MLflow ARN (refused when unset or neither)."""
    chosen = uri or os.environ.get(TRACKING_URI_ENV, "")
    if not chosen:
        raise SpecValidationError(
            [Problem("registry", f"kind mlflow needs the tracking server: set {TRACKING_URI_ENV}")]
        )
    if chosen.startswith("arn:"):
        if not _MANAGED_ARN.match(chosen):
            why = (
                f"{TRACKING_URI_ENV}={chosen!r}: not a SageMaker managed MLflow ARN "
                "(arn:aws:sagemaker:<region>:<account>:mlflow-tracking-server/<name> or mlflow-app/<id>)"
            )
            raise SpecValidationError([Problem("registry", why)])
        return chosen
    if not chosen.startswith(("http://", "https://")):
        why = f"{TRACKING_URI_ENV}={chosen!r}: the registry talks to a tracking server over http(s)://"
        raise SpecValidationError([Problem("registry", why)])
    return chosen.rstrip("/")


class MlflowRestClient:
    """MLflow's REST API: one request a call, transient failures retried with backoff.

    A SageMaker managed MLflow ARN is reached as AWS's ``sagemaker-mlflow`` plugin reaches it: the
    region's ``https://<region>.experiments.sagemaker.aws`` (or ``$SAGEMAKER_MLFLOW_CUSTOM_ENDPOINT``),
    the ARN in ``x-mlflow-sm-tracking-server-arn``, and each request signed with SigV4 for the
    ``sagemaker-mlflow`` service with the default AWS credentials.

    :param uri: the tracking server (``http(s)://host:port``, or a managed MLflow ARN).
    :param timeout: seconds per request.
    :param attempts: tries per call; connection errors, 429 and 5xx are retried, other errors are not.
    :param backoff: seconds before the second try, doubled after each.
    :param sleep: how to wait between tries (default ``time.sleep``).
    """

    def __init__(
        self,
        uri: str,
        *,
        timeout: float = 10.0,
        attempts: int = 4,
        backoff: float = 0.5,
        sleep: Callable[[float], None] | None = None,
    ) -> None:
        self.uri = uri.rstrip("/")
        self.base, self._signer, self._arn_header = self.uri, None, {}
        managed = _MANAGED_ARN.match(self.uri)
        if managed:
            import boto3
            from botocore.auth import SigV4Auth

            region = managed.group(2)  # both partitions' endpoints end in .aws
            self.base = os.environ.get(CUSTOM_ENDPOINT_ENV, "").rstrip("/") or (
                f"https://{region}.experiments.sagemaker.aws"
            )
            self._signer = SigV4Auth(boto3.Session().get_credentials(), "sagemaker-mlflow", region)
            self._arn_header = {"x-mlflow-sm-tracking-server-arn": self.uri}
        self.timeout, self.attempts, self.backoff = timeout, attempts, backoff
        self._sleep = sleep or time.sleep
        self.calls = 0  # requests sent (retries included): what bench/mlflow_logging.py counts

    def call(
        self,
        method: str,
        endpoint: str,
        body: Mapping[str, Any] | None = None,
        params: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """``method /api/2.0/mlflow/<endpoint>`` with a JSON body (or query ``params``); the JSON answer."""
        data = None if body is None else json.dumps(body).encode()
        raw = self.send(method, f"/api/2.0/mlflow/{endpoint}", data, params, "application/json")
        return dict(json.loads(raw or b"{}"))

    def send(
        self,
        method: str,
        path: str,
        data: bytes | None = None,
        params: Mapping[str, Any] | None = None,
        content_type: str = "application/octet-stream",
    ) -> bytes:
        # %20, not +, for spaces: what SigV4's canonical query string expects
        query = urllib.parse.urlencode(params, quote_via=urllib.parse.quote) if params else ""
        url = self.base + path + (f"?{query}" if query else "")
        delay = self.backoff
        for attempt in range(1, self.attempts + 1):
            try:
                return self._once(method, url, path, data, content_type)
            except MlflowTrackingError as exc:
                if not exc.transient or attempt == self.attempts:
                    raise
                log.info("MLflow %s %s failed (%s); retrying in %.1f s", method, path, exc.message, delay)
                self._sleep(delay)
                delay *= 2
        raise AssertionError("unreachable")  # the loop returns or raises

    def _once(self, method: str, url: str, path: str, data: bytes | None, content_type: str) -> bytes:
        self.calls += 1
        headers = {"Content-Type": content_type, **self._arn_header}
        if self._signer is not None:
            from botocore.awsrequest import AWSRequest

            headers["X-Amz-Content-SHA256"] = hashlib.sha256(data or b"").hexdigest()
            signed = AWSRequest(method=method, url=url, data=data, headers=headers)
            self._signer.add_auth(signed)
            headers = dict(signed.headers.items())
        request = urllib.request.Request(url, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                return bytes(response.read())
        except urllib.error.HTTPError as exc:
            text = exc.read().decode("utf-8", "replace")
            try:
                answer = json.loads(text)
                code, message = answer.get("error_code"), answer.get("message") or text
            except (json.JSONDecodeError, AttributeError):
                code, message = None, text.strip()[:300] or exc.reason
            raise MlflowTrackingError(
                self.uri, path, f"HTTP {exc.code}: {message}", code, exc.code in _TRANSIENT_HTTP
            ) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise MlflowTrackingError(self.uri, path, f"unreachable ({reason})", transient=True) from None


def check_tracking_server(step: Any, client: MlflowRestClient | None = None) -> list[Problem]:
    """The ``mlflow`` kind's preflight: the server answers, or the problem names the URI and the error."""
    try:
        client = client or MlflowRestClient(tracking_uri(), attempts=2, timeout=5.0)
        client.call("GET", "registered-models/search", params={"max_results": 1})
    except SpecValidationError as exc:
        return list(exc.problems)
    except MlflowTrackingError as exc:
        return [Problem("registry", f"cannot reach the MLflow tracking server {exc.uri}: {exc.message}")]
    return []


def _tags(values: Mapping[str, Any]) -> list[dict[str, str]]:
    return [{"key": k, "value": str(v)} for k, v in values.items() if v is not None and v != ""]


def _tag_map(entity: Mapping[str, Any]) -> dict[str, str]:
    return {t["key"]: t.get("value", "") for t in entity.get("tags") or []}


def experiment_id(client: MlflowRestClient, name: str) -> str:
    """The id of the experiment ``name``, created when missing (mapped members finishing together
    race to create it: the losers read the winner's)."""

    def by_name() -> str | None:
        try:
            found = client.call("GET", "experiments/get-by-name", params={"experiment_name": name})
            return str(found["experiment"]["experiment_id"])
        except MlflowTrackingError as exc:
            if exc.code != "RESOURCE_DOES_NOT_EXIST":
                raise
        return None

    found = by_name()
    if found is not None:
        return found
    try:
        return str(client.call("POST", "experiments/create", {"name": name})["experiment_id"])
    except MlflowTrackingError as exc:
        if exc.code != "RESOURCE_ALREADY_EXISTS" or (raced := by_name()) is None:
            raise
        return raced


def job_run(
    client: MlflowRestClient, experiment: str, job: str | None, backend: str | None, fallback: str
) -> str:
    """The run of training job ``job`` in ``experiment`` (tag ``training_job``), created when there is none."""
    exp_id = experiment_id(client, experiment)
    if job:
        query = {"experiment_ids": [exp_id], "filter": f"tags.training_job = '{job}'", "max_results": 1}
        runs = client.call("POST", "runs/search", query).get("runs") or []
        if runs:
            return str(runs[0]["info"]["run_id"])
    body = {
        "experiment_id": exp_id,
        "run_name": str(job or fallback),
        "start_time": int(time.time() * 1000),
        "tags": _tags({"training_job": job, "training_backend": backend}),
    }
    return str(client.call("POST", "runs/create", body)["run"]["info"]["run_id"])


#: The tag that marks a DAG run's parent run (``<dag_id>/<run_id>``) and MLflow's own nesting tag.
DAG_RUN_TAG = "dag_run"
PARENT_TAG = "mlflow.parentRunId"


def _dag_run_parents(client: MlflowRestClient, exp_id: str, key: str) -> list[str]:
    query = {"experiment_ids": [exp_id], "filter": f"tags.{DAG_RUN_TAG} = '{key}'", "max_results": 100}
    return sorted(
        str(r["info"]["run_id"]) for r in client.call("POST", "runs/search", query).get("runs") or []
    )


def dag_run_parent(client: MlflowRestClient, exp_id: str, dag_id: str, run_id: str) -> tuple[str, str | None]:
    """The parent run under which a DAG run's mapped members nest, and the one this call created
    (None if it found one). Members that finish together may each create one: they all settle on
    the smallest id (``settle_parent``) once they have logged."""
    key = f"{dag_id}/{run_id}"
    found = _dag_run_parents(client, exp_id, key)
    if found:
        return found[0], None
    body = {
        "experiment_id": exp_id,
        "run_name": f"{dag_id} {run_id}",
        "start_time": int(time.time() * 1000),
        "tags": _tags({DAG_RUN_TAG: key}),
    }
    ours = str(client.call("POST", "runs/create", body)["run"]["info"]["run_id"])
    return min(_dag_run_parents(client, exp_id, key) or [ours]), ours


def settle_parent(
    client: MlflowRestClient, exp_id: str, dag_id: str, run_id: str, child: str, chosen: str, ours: str | None
) -> str:
    """After logging ``child`` under ``chosen``: every parent created by then is visible, so all
    members agree on the smallest id. Re-nest ``child`` if that is another, and delete ``ours`` if it lost."""
    final = min(_dag_run_parents(client, exp_id, f"{dag_id}/{run_id}") or [chosen])
    if final != chosen:
        client.call("POST", "runs/set-tag", {"run_id": child, "key": PARENT_TAG, "value": final})
    if ours is not None and ours != final:
        client.call("POST", "runs/delete", {"run_id": ours})
    return final


class MlflowModelRegistry:
    """A registered model in an MLflow Model Registry, through the ``ModelRegistry`` protocol.

    :param group: the registered model's name.
    :param client: the tracking server's REST client.
    :param store: reads the evaluation report and a local model artifact.
    :param experiment: the experiment a registration's run goes to when no run of the training job exists (default: ``group``).
    """

    kind = "mlflow"

    def __init__(
        self,
        group: str,
        client: MlflowRestClient,
        store: ArtifactStore | None = None,
        experiment: str | None = None,
    ) -> None:
        self.group = group
        self.client = client
        self.store = store or ArtifactStore()
        self.experiment = experiment or group

    # -- reading

    def _version(self, version: str | int) -> dict[str, Any]:
        answer = self.client.call(
            "GET", "model-versions/get", params={"name": self.group, "version": str(version)}
        )
        return dict(answer["model_version"])

    def champion_version(self) -> dict[str, Any] | None:
        """The model version the ``champion`` alias points at (None: no alias, or no such model yet)."""
        try:
            answer = self.client.call(
                "GET", "registered-models/alias", params={"name": self.group, "alias": CHAMPION_ALIAS}
            )
        except MlflowTrackingError as exc:
            if exc.code == "RESOURCE_DOES_NOT_EXIST" or "not found" in exc.message.lower():
                return None
            raise
        return dict(answer["model_version"])

    def get_champion(self) -> Champion | None:
        entry = self.champion_version()
        if entry is None:
            return None
        tags = _tag_map(entry)
        who = f"models:/{self.group}/{entry['version']}"
        try:
            evaluation = EvaluationResult(
                metrics={
                    k.removeprefix(METRIC_TAG): float(v) for k, v in tags.items() if k.startswith(METRIC_TAG)
                },
                slices=json.loads(tags.get("evaluation_slices") or "{}"),
                evaluation_set_hash=tags.get("evaluation_set_hash") or None,
            )
        except (ValueError, TypeError) as exc:  # pydantic's ValidationError is a ValueError
            why = f"its metric tags cannot be read as an evaluation: {exc}"
            raise ChampionUnreadableError([Problem("tags", why)], source=f"champion {who}") from None
        return Champion(
            id=who,
            evaluation=evaluation,
            evaluation_uri=tags.get("evaluation_uri"),
            version=int(entry["version"]),
            model_data_uri=tags.get("model_data_uri"),
            lineage={key: tags.get(key) for key in _LINEAGE_TAGS},
        )

    # -- registering

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
        evaluation = self.store.load_evaluation(evaluation_uri)  # validated before anything is written
        entry = self._registered_by(client_token) if client_token else None
        if entry is None:
            self._ensure_model()
            run_id = self._run_for(training)
            self._log_evaluation(run_id, evaluation)
            source = self._source(model_data_uri, run_id)
            version_tags = {
                **_version_tags(evaluation, evaluation_uri, decision, training, lineage),
                "model_data_uri": model_data_uri,
                "evaluation_report_uri": report_uri,
                "image_uri": image_uri,
                "approval_status": status,
                _TOKEN: client_token,
                _REGISTRATION: "incomplete",
                **dict(tags or {}),
            }
            body = {
                "name": self.group,
                "source": source,
                "run_id": run_id,
                "tags": _tags(version_tags),
                "description": description
                or f"Trained by {(training or {}).get('job_name') or 'unknown job'}",
            }
            entry = dict(self.client.call("POST", "model-versions/create", body)["model_version"])
        else:
            log.info("Version %s was already registered by this task (retry): finishing it", entry["version"])
        version = str(entry["version"])
        self._wait_ready(version)
        self.client.call(
            "POST",
            "model-versions/set-tag",
            {"name": self.group, "version": version, "key": _REGISTRATION, "value": "complete"},
        )
        if _tag_map(entry).get("approval_status", status) == APPROVED:  # the last step: the alias moves
            self._set_alias(version)
        log.info("Registered models:/%s/%s as %s", self.group, version, status)
        return {
            "registry": self.kind,
            "group": self.group,
            "package_id": f"models:/{self.group}/{version}",
            "version": int(version),
            "approval_status": _tag_map(entry).get("approval_status", status),
            "model_data_uri": model_data_uri,
            "evaluation_uri": evaluation_uri,
            "audit_uri": (
                f"{self.client.uri}/#/models/{urllib.parse.quote(self.group)}/versions/{version}"
                if self.client.uri.startswith("http")
                else f"models:/{self.group}/{version}"  # managed MLflow's UI opens through a presigned URL
            ),
        }

    def _ensure_model(self) -> None:
        try:
            body = {"name": self.group, "description": "Registered by airflow-dist-training"}
            self.client.call("POST", "registered-models/create", body)
        except MlflowTrackingError as exc:
            if exc.code != "RESOURCE_ALREADY_EXISTS":
                raise

    def _registered_by(self, client_token: str) -> dict[str, Any] | None:
        """The version a retried register task created (found by its token tag)."""
        query = f"name='{self.group}' and tags.{_TOKEN}='{client_token}'"
        try:
            found = self.client.call(
                "GET", "model-versions/search", params={"filter": query, "max_results": 1}
            )
        except MlflowTrackingError as exc:
            if exc.code == "RESOURCE_DOES_NOT_EXIST":
                return None
            raise
        versions = found.get("model_versions") or []
        return dict(versions[0]) if versions else None

    def _run_for(self, training: Mapping[str, Any] | None) -> str:
        training = training or {}
        return job_run(
            self.client, self.experiment, training.get("job_name"), training.get("backend"), self.group
        )

    def _log_evaluation(self, run_id: str, evaluation: EvaluationResult) -> None:
        now = int(time.time() * 1000)
        metrics = [
            {"key": f"eval_{k}", "value": v, "timestamp": now, "step": 0}
            for k, v in evaluation.metrics.items()
        ]
        self.client.call("POST", "runs/log-batch", {"run_id": run_id, "metrics": metrics})

    def _source(self, model_data_uri: str, run_id: str) -> str:
        """The version's source: a remote artifact as it is; a local file uploaded into the run first."""
        if "://" in model_data_uri and not model_data_uri.startswith("file://"):
            return model_data_uri
        run = self.client.call("GET", "runs/get", params={"run_id": run_id})["run"]
        artifact_uri = str(run["info"]["artifact_uri"])
        prefix = "mlflow-artifacts:"
        if not artifact_uri.startswith(prefix):
            why = (
                f"{model_data_uri} is a local file and the run's artifacts ({artifact_uri}) are not served by "
                "the tracking server (start it with --serve-artifacts), so MLflow cannot take it as a source"
            )
            raise SpecValidationError([Problem("model_data_uri", why)])
        data = self.store.read_bytes(model_data_uri)
        name = file_uri_path(model_data_uri).name
        relative = artifact_uri.removeprefix(prefix).lstrip("/")
        self.client.send("PUT", f"/api/2.0/mlflow-artifacts/artifacts/{relative}/model/{name}", data)
        return f"{artifact_uri}/model"

    def _wait_ready(self, version: str, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while (status := self._version(version).get("status", "READY")) == "PENDING_REGISTRATION":
            if time.monotonic() > deadline:
                raise MlflowTrackingError(
                    self.client.uri, "model-versions/get", f"version {version} still {status}"
                )
            time.sleep(0.5)
        if status != "READY":
            raise MlflowTrackingError(self.client.uri, "model-versions/get", f"version {version} is {status}")

    def _set_alias(self, version: str) -> None:
        body = {"name": self.group, "alias": CHAMPION_ALIAS, "version": version}
        self.client.call("POST", "registered-models/alias", body)

    def record_evaluation(
        self, champion: Champion, *, evaluation_uri: str, evaluation_fingerprint: str | None, run_id: str | None
    ) -> dict[str, Any]:
        """The champion version's tags become the new evaluation's (``metric.*``, slices, set hash,
        ``evaluation_fingerprint``, ``evaluation_uri``) plus ``reevaluated_at``/``reevaluated_by_run``;
        metric tags the new evaluation lacks are deleted. No new version."""
        from airflow_dist_training.hooks.registry import _reevaluation

        evaluation = self.store.load_evaluation(evaluation_uri)
        version = str(champion.version)
        record = _reevaluation(champion, evaluation, evaluation_uri, evaluation_fingerprint, run_id)
        tags = {
            **{f"{METRIC_TAG}{k}": v for k, v in evaluation.metrics.items()},
            "evaluation_slices": json.dumps(evaluation.slices, sort_keys=True) if evaluation.slices else "{}",
            "evaluation_set_hash": evaluation.evaluation_set_hash,
            "evaluation_fingerprint": evaluation_fingerprint,
            "evaluation_uri": evaluation_uri,
            "reevaluated_at": record["reevaluated_at"],
            "reevaluated_by_run": run_id,
        }
        stale = [k for k in _tag_map(self._version(version)) if k.startswith(METRIC_TAG) and k not in tags]
        for key in stale:
            body = {"name": self.group, "version": version, "key": key}
            self.client.call("DELETE", "model-versions/delete-tag", body)
        for key, value in tags.items():
            if value is not None:
                body = {"name": self.group, "version": version, "key": key, "value": str(value)}
                self.client.call("POST", "model-versions/set-tag", body)
        log.info("MLflow: recorded a re-evaluation of %s version %s (no new version)", self.group, version)
        return {"registry": self.kind, "group": self.group, **record}

    def set_approval(self, package_id: str, status: str, description: str | None = None) -> None:
        if status not in (APPROVED, PENDING, REJECTED):
            raise SpecValidationError(
                [("status", f"must be one of {sorted((APPROVED, PENDING, REJECTED))}, got {status!r}")]
            )
        version = str(package_id).rsplit("/", 1)[-1]
        entry = self._version(version)
        if _tag_map(entry).get(_REGISTRATION) != "complete":
            raise SpecValidationError([Problem("package_id", f"{package_id} is not fully registered")])
        self.client.call(
            "POST",
            "model-versions/set-tag",
            {"name": self.group, "version": version, "key": "approval_status", "value": status},
        )
        if status == APPROVED:
            self._set_alias(version)
        elif (champion := self.champion_version()) is not None and str(champion["version"]) == version:
            self.client.call(
                "DELETE", "registered-models/alias", params={"name": self.group, "alias": CHAMPION_ALIAS}
            )


def mlflow_registry(
    *, group: str, aws_conn_id: str | None, region_name: str | None, **_: Any
) -> MlflowModelRegistry:
    """The ``mlflow`` kind's factory: the server ``MLFLOW_TRACKING_URI`` names."""
    return MlflowModelRegistry(
        group, MlflowRestClient(tracking_uri()), store=ArtifactStore(aws_conn_id, region_name)
    )


# -- tracking: each training job an MLflow run

# MLflow's runs/log-batch limits per request (REST API reference)
_BATCH_METRICS, _BATCH_PARAMS, _BATCH_TAGS, _BATCH_ENTITIES = 1000, 100, 100, 1000
# the spec's key settings logged as params beside the hyperparameters
_SPEC_PARAMS = {
    "compute.instance_type": ("compute", "instance_type"),
    "compute.count": ("compute", "count"),
    "distribution.strategy": ("distribution", "strategy"),
    "image.uri": ("image", "uri"),
    "image.framework": ("image", "framework"),
    "image.framework_version": ("image", "framework_version"),
    "source.entry_point": ("source", "entry_point"),
}


def metric_history(curves: Mapping[str, Any], timestamp_ms: int) -> list[dict[str, Any]]:
    """A job's metric curves (the Training view's ``{"series": {name: [{"x", "value", "host"}]}}``) as
    MLflow metrics: the first host's points in order, step = the point's index in its curve (one
    point per epoch for a script that prints once per epoch). Not the view's epoch axis: it counts
    any metric named ``*epoch*`` (``epochs_trained`` too) as the epoch."""
    metrics = []
    for name, points in (curves.get("series") or {}).items():
        first = [p for p in points if p.get("host", "algo-1") == "algo-1"] or list(points)
        for step, point in enumerate(first):
            metrics.append(
                {"key": name, "value": float(point["value"]), "timestamp": timestamp_ms, "step": step}
            )
    return metrics


def log_batches(
    client: MlflowRestClient,
    run_id: str,
    metrics: list[dict[str, Any]],
    params: Mapping[str, Any] | None = None,
    tags: Mapping[str, Any] | None = None,
) -> int:
    """Log everything with as few ``runs/log-batch`` requests as MLflow's limits allow; returns how many."""
    params_left, tags_left, metrics_left = _tags(params or {}), _tags(tags or {}), list(metrics)
    requests = 0
    while params_left or tags_left or metrics_left or requests == 0:
        batch_params, params_left = params_left[:_BATCH_PARAMS], params_left[_BATCH_PARAMS:]
        batch_tags, tags_left = tags_left[:_BATCH_TAGS], tags_left[_BATCH_TAGS:]
        room = min(_BATCH_METRICS, _BATCH_ENTITIES - len(batch_params) - len(batch_tags))
        batch_metrics, metrics_left = metrics_left[:room], metrics_left[room:]
        body = {"run_id": run_id, "metrics": batch_metrics, "params": batch_params, "tags": batch_tags}
        client.call("POST", "runs/log-batch", body)
        requests += 1
    return requests


def training_params(spec: Mapping[str, Any]) -> dict[str, str]:
    """The run's params: the hyperparameters and the spec's key settings (``compute.instance_type``, ...)."""
    params = {
        k: v if isinstance(v, str) else json.dumps(v) for k, v in (spec.get("hyperparameters") or {}).items()
    }
    for key, (section, field) in _SPEC_PARAMS.items():
        value = (spec.get(section) or {}).get(field)
        if value is not None:
            params[key] = str(value)
    return params


def log_training_job(
    client: MlflowRestClient,
    *,
    experiment: str,
    result: Mapping[str, Any],
    spec: Mapping[str, Any],
    curves: Mapping[str, Any],
    link: str | None = None,
    parent: str | None = None,
) -> str:
    """One finished training job as an MLflow run (the job's run when it has one): params, metric
    curves, the job's name, backend and link, nested under ``parent``; the run is FINISHED. Returns
    the run id."""
    job, backend = result.get("job_name"), result.get("backend")
    run_id = job_run(client, experiment, job, backend, experiment)
    now = int(time.time() * 1000)
    tags = {
        "training_job": job,
        "training_backend": backend,
        "training_job_arn": result.get("job_arn"),
        "training_job_link": link,
        "model_data_uri": result.get("model_artifact_uri"),
        PARENT_TAG: parent,
    }
    log_batches(client, run_id, metric_history(curves, now), training_params(spec), tags)
    client.call("POST", "runs/update", {"run_id": run_id, "status": "FINISHED", "end_time": now})
    return run_id


def job_curves(result: Mapping[str, Any], region: str | None, aws_conn_id: str | None) -> dict[str, Any]:
    """A finished job's metric curves: the local metric log, or CloudWatch for a SageMaker job."""
    arn = str(result.get("job_arn") or "")
    if arn.startswith("local://"):
        from airflow_dist_training.ui.data import local_job_view

        return dict(local_job_view(arn.removeprefix("local://"))["metrics"])
    from airflow_dist_training.ui.sagemaker_source import sagemaker_job_view

    return dict(sagemaker_job_view(str(result["job_name"]), region, aws_conn_id)["metrics"])


def track_training_task(
    context: Mapping[str, Any],
    result: Any,
    *,
    plan_task_id: str,
    experiment: str,
    client: MlflowRestClient | None = None,
) -> str | None:
    """The train task's ``post_execute``: log its finished job to MLflow. Never raises: transient
    errors are retried with backoff (the client), then a warning; the job's result stands."""
    if not isinstance(result, Mapping) or not result.get("job_name"):
        return None
    try:
        from airflow_dist_training.links.sagemaker import XCOM_KEY, job_links
        from airflow_dist_training.ui.data import MLFLOW_RUN_KEY  # the Training view links the run

        ti = context["ti"]
        spec = ti.xcom_pull(task_ids=plan_task_id, key="spec") or {}
        info = ti.xcom_pull(task_ids=ti.task_id, key=XCOM_KEY) or {}
        region = info.get("region")
        curves = job_curves(result, region, getattr(ti.task, "aws_conn_id", None))
        client = client or MlflowRestClient(tracking_uri())
        exp_id = experiment_id(client, experiment)
        map_index = getattr(ti, "map_index", None)
        member = map_index is not None and int(map_index) >= 0
        # mapped members nest under one parent run per DAG run
        parent, ours = dag_run_parent(client, exp_id, ti.dag_id, ti.run_id) if member else (None, None)
        run_id = log_training_job(
            client,
            experiment=experiment,
            result=result,
            spec=spec,
            curves=curves,
            link=job_links(info).get("job") or None,
            parent=parent,
        )
        if parent is not None:
            settle_parent(client, exp_id, ti.dag_id, ti.run_id, run_id, parent, ours)
        url = f"{client.uri}/#/experiments/{exp_id}/runs/{run_id}" if client.uri.startswith("http") else None
        ti.xcom_push(key=MLFLOW_RUN_KEY, value={"run_id": run_id, "experiment_id": exp_id, "url": url})
    except (MlflowTrackingError, SpecValidationError, OSError, KeyError, ValueError) as exc:
        log.warning(
            "MLflow: could not log training job %s (%s); the job's result stands", result.get("job_name"), exc
        )
        return None
    log.info(
        "MLflow: training job %s logged as run %s (%s calls)", result.get("job_name"), run_id, client.calls
    )
    return run_id


def _version_tags(
    evaluation: EvaluationResult,
    evaluation_uri: str,
    decision: Mapping[str, Any] | None,
    training: Mapping[str, Any] | None,
    lineage: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """What a version records of its evaluation, its gate decision, its training job and lineage."""
    return {
        **{f"{METRIC_TAG}{k}": v for k, v in evaluation.metrics.items()},
        "evaluation_slices": json.dumps(evaluation.slices, sort_keys=True) if evaluation.slices else None,
        "evaluation_set_hash": evaluation.evaluation_set_hash,
        **{key: (lineage or {}).get(key) for key in _LINEAGE_TAGS},
        "gate_decision": None if decision is None else ("passed" if decision.get("passed") else "rejected"),
        "gate_reasons": None if decision is None else json.dumps(list(decision.get("reasons", []))),
        "training_job_name": (training or {}).get("job_name"),
        "training_job_arn": (training or {}).get("job_arn"),
        "training_backend": (training or {}).get("backend"),
        "evaluation_uri": evaluation_uri,
    }
