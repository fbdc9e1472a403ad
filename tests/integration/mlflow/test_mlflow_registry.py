"""The ``mlflow`` registry kind against a real MLflow server: a failure half-way through a
registration never leaves the ``champion`` alias on a version that is not fully registered."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from airflow_dist_training.hooks.mlflow import MlflowModelRegistry, MlflowRestClient, MlflowTrackingError
from tests.mlflow_server import registry_state

pytestmark = [pytest.mark.xdist_group("mlflow")]


class _FailingOnce(MlflowRestClient):
    """Fault injection: the first call to ``endpoint`` fails as a refusing server would."""

    def __init__(self, uri: str, endpoint: str) -> None:
        super().__init__(uri)
        self.endpoint = endpoint

    def call(self, method: str, endpoint: str, body: Any = None, params: Any = None) -> dict[str, Any]:
        if endpoint == self.endpoint:
            self.endpoint = ""
            raise MlflowTrackingError(self.uri, endpoint, "HTTP 400: injected", "INVALID_STATE")
        return super().call(method, endpoint, body, params)


def _inputs(tmp_path: Path, accuracy: float) -> dict[str, Any]:
    model, evaluation = tmp_path / f"model-{accuracy}.tar.gz", tmp_path / f"evaluation-{accuracy}.json"
    model.write_bytes(b"weights")
    evaluation.write_text(json.dumps({"metrics": {"accuracy": accuracy}}))
    return {
        "model_data_uri": str(model),
        "image_uri": None,
        "evaluation_uri": str(evaluation),
        "decision": {"passed": True, "reasons": []},
        "auto_approve": True,
        "training": {"job_name": f"job-{accuracy}", "backend": "local"},
    }


def test_a_failed_registration_leaves_the_alias_on_the_champion_and_its_retry_finishes(
    mlflow_server, tmp_path
):
    name = "half-registered"
    registry = MlflowModelRegistry(name, MlflowRestClient(mlflow_server))
    registry.register(**_inputs(tmp_path, 0.9), client_token="run-1")
    assert registry.get_champion().version == 1  # type: ignore[union-attr]

    # v2's version exists, but marking it complete fails: the alias must not move to it
    failing = MlflowModelRegistry(name, _FailingOnce(mlflow_server, "model-versions/set-tag"))
    with pytest.raises(MlflowTrackingError, match="injected"):
        failing.register(**_inputs(tmp_path, 0.95), client_token="run-2")
    champion = registry.get_champion()
    assert champion is not None and champion.version == 1 and champion.evaluation.metrics == {"accuracy": 0.9}

    # the task's retry (same token) finishes that version instead of creating a third
    result = registry.register(**_inputs(tmp_path, 0.95), client_token="run-2")
    assert result["package_id"] == f"models:/{name}/2" and result["approval_status"] == "Approved"

    state = registry_state(mlflow_server, name)  # through MLflow's own client
    assert sorted(state["versions"]) == [1, 2] and state["aliases"] == {"champion": "2"}
    assert state["versions"][2]["tags"]["registration"] == "complete"
    assert state["versions"][2]["tags"]["metric.accuracy"] == "0.95"


def test_a_re_evaluation_retags_the_champion_version_and_registers_no_new_one(mlflow_server, tmp_path):
    name = "reevaluated"
    registry = MlflowModelRegistry(name, MlflowRestClient(mlflow_server))
    inputs = _inputs(tmp_path, 0.9)
    evaluation = json.loads(Path(inputs["evaluation_uri"]).read_text())
    Path(inputs["evaluation_uri"]).write_text(
        json.dumps({**evaluation, "metrics": {"accuracy": 0.9, "f1": 0.8}})
    )
    registry.register(
        **inputs, lineage={"data_fingerprint": "sha256:d", "evaluation_fingerprint": "sha256:old"}
    )
    champion = registry.get_champion()
    assert champion is not None and champion.lineage is not None
    assert champion.lineage["evaluation_fingerprint"] == "sha256:old"  # what judged it is recorded
    new = tmp_path / "new-set.json"
    new.write_text(json.dumps({"metrics": {"accuracy": 0.85}, "evaluation_set_hash": "sha256:" + "a" * 64}))
    record = registry.record_evaluation(
        champion, evaluation_uri=str(new), evaluation_fingerprint="sha256:new", run_id="r3"
    )
    assert record["package_id"] == f"models:/{name}/1" and record["metrics"] == {"accuracy": 0.85}
    state = registry_state(mlflow_server, name)  # through MLflow's own client
    assert sorted(state["versions"]) == [1] and state["aliases"] == {"champion": "1"}
    tags = state["versions"][1]["tags"]
    assert tags["metric.accuracy"] == "0.85" and "metric.f1" not in tags  # not measured on the new set
    assert (tags["evaluation_fingerprint"], tags["evaluation_uri"], tags["reevaluated_by_run"]) == (
        "sha256:new",
        str(new),
        "r3",
    )
    again = registry.get_champion()
    assert again is not None and again.evaluation.metrics == {"accuracy": 0.85}
    assert again.lineage is not None and again.lineage["evaluation_fingerprint"] == "sha256:new"


def test_mapped_members_finishing_together_nest_under_one_parent_run_per_dag_run(mlflow_server: str) -> None:
    """Issue 34: mapped members are child runs of one parent run per DAG run,
    even when they finish at the same moment; an unmapped task's run has no parent."""
    import threading
    from types import SimpleNamespace

    from airflow_dist_training.hooks import mlflow as tracking

    experiment = "members-nesting"

    pushed: dict[int, Any] = {}

    def ti(map_index: int) -> Any:
        return SimpleNamespace(
            dag_id="mapped_retraining", run_id="scheduled__2026-12-07T00:00:00+00:00", task_id="g.train",
            map_index=map_index, task=None, xcom_pull=lambda **_: {},
            xcom_push=lambda key, value: pushed.__setitem__(map_index, (key, value)),
        )  # fmt: skip

    def track(map_index: int, job: str) -> None:
        result = {"job_name": job, "backend": "local", "job_arn": f"local:///tmp/{job}"}
        ran[job] = tracking.track_training_task(
            {"ti": ti(map_index)}, result, plan_task_id="g.plan", experiment=experiment,
            client=MlflowRestClient(mlflow_server),
        )  # fmt: skip

    ran: dict[str, str | None] = {}
    original = tracking.job_curves
    tracking.job_curves = lambda *a: {
        "axis": "epoch",
        "series": {"loss": [{"x": 0, "value": 1.0, "host": "algo-1"}]},
    }
    try:
        members = [threading.Thread(target=track, args=(i, f"member-{i}")) for i in range(3)]
        for thread in members:
            thread.start()
        for thread in members:
            thread.join(60)
        track(-1, "unmapped")
    finally:
        tracking.job_curves = original
    client = MlflowRestClient(mlflow_server)
    exp_id = tracking.experiment_id(client, experiment)
    runs = client.call("POST", "runs/search", {"experiment_ids": [exp_id], "max_results": 100})["runs"]
    tags = {r["info"]["run_id"]: {t["key"]: t["value"] for t in r["data"].get("tags", [])} for r in runs}
    parents = [
        run
        for run, t in tags.items()
        if t.get("dag_run") == "mapped_retraining/scheduled__2026-12-07T00:00:00+00:00"
    ]
    assert len(parents) == 1, tags  # one parent, whoever created it first
    assert all(ran[f"member-{i}"] for i in range(3)) and ran["unmapped"]
    assert {tags[str(ran[f"member-{i}"])].get("mlflow.parentRunId") for i in range(3)} == {parents[0]}
    assert "mlflow.parentRunId" not in tags[str(ran["unmapped"])]
    # each task's XCom links the Training view to its run's page on the server
    assert pushed[0] == ("mlflow_run", {
        "run_id": ran["member-0"], "experiment_id": exp_id,
        "url": f"{mlflow_server}/#/experiments/{exp_id}/runs/{ran['member-0']}",
    })  # fmt: skip


class _SigV4CheckingProxy(BaseHTTPRequestHandler):
    """SageMaker managed MLflow's front door, in front of a real server: a request must carry the
    tracking server's ARN and a valid SigV4 signature for ``sagemaker-mlflow`` (recomputed here with
    botocore from the headers it signed); a good one is passed on, a bad one gets 403."""

    def _handle(self) -> None:
        import urllib.request as request_lib

        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest
        from botocore.credentials import Credentials

        body = self.rfile.read(int(self.headers.get("Content-Length") or 0)) or None
        auth = self.headers.get("Authorization", "")
        problem = None
        if self.headers.get("x-mlflow-sm-tracking-server-arn") != self.server.arn:  # type: ignore[attr-defined]
            problem = "no tracking server ARN"
        elif (
            not auth.startswith("AWS4-HMAC-SHA256 Credential=testing/")
            or "/us-east-1/sagemaker-mlflow/" not in auth
        ):
            problem = f"not signed for sagemaker-mlflow in us-east-1: {auth!r}"
        else:
            signed = auth.split("SignedHeaders=")[1].split(",")[0].split(";")
            url = f"http://{self.headers['Host']}{self.path}"
            again = AWSRequest(
                method=self.command, url=url, data=body, headers={h: self.headers[h] for h in signed}
            )
            again.context["timestamp"] = self.headers["X-Amz-Date"]
            signer = SigV4Auth(Credentials("testing", "testing"), "sagemaker-mlflow", "us-east-1")
            expected = signer.signature(signer.string_to_sign(again, signer.canonical_request(again)), again)
            if not auth.endswith(f"Signature={expected}"):
                problem = "bad signature"
            if (
                self.headers.get("X-Amz-Content-SHA256")
                != __import__("hashlib").sha256(body or b"").hexdigest()
            ):
                problem = "bad payload hash"
        self.server.seen.append((self.path, problem))  # type: ignore[attr-defined]
        if problem:
            self.send_response(403)
            payload = json.dumps({"error_code": "PERMISSION_DENIED", "message": problem}).encode()
        else:
            forwarded = request_lib.Request(
                self.server.upstream + self.path, data=body, method=self.command,  # type: ignore[attr-defined]
                headers={"Content-Type": self.headers.get("Content-Type", "application/json")},
            )  # fmt: skip
            try:
                with request_lib.urlopen(forwarded, timeout=30) as answer:
                    status, payload = answer.status, answer.read()
            except request_lib.HTTPError as exc:
                status, payload = exc.code, exc.read()
            self.send_response(status)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle

    def log_message(self, *args: Any) -> None:
        pass


def test_the_registry_on_sagemaker_managed_mlflow_signs_each_request(
    mlflow_server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 34: ``MLFLOW_TRACKING_URI`` may be a managed MLflow ARN, reached as AWS's
    ``sagemaker-mlflow`` plugin reaches it (the plugin's ``SAGEMAKER_MLFLOW_CUSTOM_ENDPOINT`` puts a
    checking proxy in front of a real server here). A registration and the champion read back go
    through, every request signed; unsigned requests are refused, so the check can fail."""
    import threading
    from http.server import ThreadingHTTPServer

    from airflow_dist_training.hooks.mlflow import tracking_uri

    arn = "arn:aws:sagemaker:us-east-1:123456789012:mlflow-tracking-server/team"
    proxy = ThreadingHTTPServer(("127.0.0.1", 0), _SigV4CheckingProxy)
    proxy.arn, proxy.upstream, proxy.seen = arn, mlflow_server, []  # type: ignore[attr-defined]
    threading.Thread(target=proxy.serve_forever, daemon=True).start()
    try:
        monkeypatch.setenv("SAGEMAKER_MLFLOW_CUSTOM_ENDPOINT", f"http://127.0.0.1:{proxy.server_port}")
        for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
            monkeypatch.setenv(key, "testing")
        monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
        assert tracking_uri(arn) == arn
        registry = MlflowModelRegistry("managed-demo", MlflowRestClient(tracking_uri(arn)))
        entry = registry.register(**_inputs(tmp_path, 0.9), client_token="tok-managed")
        assert (
            entry["package_id"] == "models:/managed-demo/1" and entry["audit_uri"] == "models:/managed-demo/1"
        )
        champion = registry.get_champion()
        assert (
            champion is not None
            and champion.version == 1
            and champion.evaluation.metrics == {"accuracy": 0.9}
        )
        seen = proxy.seen  # type: ignore[attr-defined]
        assert seen and all(problem is None for _, problem in seen), seen
        # an unsigned client (plain http to the same door) is turned away with the reason
        with pytest.raises(MlflowTrackingError, match="HTTP 403: no tracking server ARN"):
            MlflowRestClient(f"http://127.0.0.1:{proxy.server_port}", attempts=1).call(
                "GET", "registered-models/search", params={"max_results": 1}
            )
    finally:
        proxy.shutdown()
        proxy.server_close()
    assert registry_state(mlflow_server, "managed-demo")["aliases"] == {"champion": "1"}
