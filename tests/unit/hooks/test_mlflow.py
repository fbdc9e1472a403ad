"""The MLflow REST client and the ``mlflow`` kind's preflight, against small local HTTP servers."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from airflow_dist_training.errors import SpecValidationError
from airflow_dist_training.hooks.mlflow import MlflowRestClient, MlflowTrackingError, check_tracking_server
from airflow_dist_training.spec.registries import MlflowRegistry, registry_record
from tests.conftest import free_port


class _Scripted(BaseHTTPRequestHandler):
    """Answers each request with the next (status, body) of the server's script."""

    def _answer(self) -> None:
        self.server.paths.append(self.path)  # type: ignore[attr-defined]
        status, body = self.server.script.pop(0)  # type: ignore[attr-defined]
        payload = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_POST = _answer

    def log_message(self, *args: Any) -> None:  # quiet
        pass


@pytest.fixture
def scripted() -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Scripted)
    server.script, server.paths = [], []  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def _client(server: ThreadingHTTPServer, sleeps: list[float]) -> MlflowRestClient:
    return MlflowRestClient(
        f"http://127.0.0.1:{server.server_port}", attempts=3, backoff=0.25, sleep=sleeps.append
    )


def test_a_transient_error_is_retried_with_backoff(scripted) -> None:
    scripted.script += [(503, {"error_code": "TEMPORARILY_UNAVAILABLE", "message": "busy"})] * 2 + [
        (200, {"ok": 1})
    ]
    sleeps: list[float] = []
    client = _client(scripted, sleeps)
    assert client.call("POST", "runs/log-batch", {"run_id": "r"}) == {"ok": 1}
    assert sleeps == [0.25, 0.5] and client.calls == 3
    assert scripted.paths == ["/api/2.0/mlflow/runs/log-batch"] * 3


def test_a_refusal_is_not_retried_and_keeps_mlflows_message(scripted) -> None:
    scripted.script.append(
        (400, {"error_code": "INVALID_PARAMETER_VALUE", "message": "Invalid model name 'a/b'."})
    )
    sleeps: list[float] = []
    with pytest.raises(MlflowTrackingError) as failed:
        _client(scripted, sleeps).call("POST", "registered-models/create", {"name": "a/b"})
    assert failed.value.code == "INVALID_PARAMETER_VALUE" and sleeps == []
    assert str(failed.value).endswith(
        "/api/2.0/mlflow/registered-models/create: HTTP 400: Invalid model name 'a/b'."
    )


def test_an_unreachable_server_fails_the_preflight_naming_the_uri_and_the_error(monkeypatch) -> None:
    uri = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    [problem] = registry_record("mlflow").check_reachable(MlflowRegistry())
    assert problem.path == "registry"
    assert problem.message.startswith(f"cannot reach the MLflow tracking server {uri}: ")
    assert "unreachable (" in problem.message and "Connection refused" in problem.message


def test_the_preflight_asks_for_the_tracking_uri_when_none_is_set(monkeypatch) -> None:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    [problem] = check_tracking_server(MlflowRegistry())
    assert str(problem) == "registry: kind mlflow needs the tracking server: set MLFLOW_TRACKING_URI"


def test_a_server_that_answers_passes_the_preflight(scripted, monkeypatch) -> None:
    scripted.script.append((200, {"registered_models": []}))
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"http://127.0.0.1:{scripted.server_port}/")
    assert check_tracking_server(MlflowRegistry()) == []
    assert scripted.paths == ["/api/2.0/mlflow/registered-models/search?max_results=1"]


@pytest.mark.parametrize("name", ["team/model", "a:b", " ", ".", "..x"])
def test_a_registered_model_name_mlflow_refuses_is_a_field_error(name: str) -> None:
    from airflow_dist_training.spec.loading import validate_model

    with pytest.raises(SpecValidationError) as refused:
        validate_model(
            MlflowRegistry, {"kind": "mlflow", "model_package_group": name}, prefix="registry", pipeline=True
        )
    [problem] = refused.value.problems
    assert problem.path == "registry.model_package_group" and "MLflow refuses" in problem.message


@pytest.mark.parametrize("name", ["adt-demo", "My Model v2", "team.model_1"])
def test_a_name_mlflow_takes_is_taken(name: str) -> None:
    assert MlflowRegistry(model_package_group=name).model_package_group == name


def test_the_curves_go_in_as_few_batches_as_mlflows_limits_allow(scripted) -> None:
    from airflow_dist_training.hooks.mlflow import log_batches, metric_history

    curves = {"axis": "epoch", "series": {f"m{i}": [{"x": e, "value": e, "host": "algo-1"} for e in range(300)] for i in range(5)}}
    metrics = metric_history(curves, 0)
    assert len(metrics) == 1500 and {m["step"] for m in metrics} == set(range(300))
    scripted.script += [(200, {})] * 2
    client = _client(scripted, [])
    params = {f"p{i}": i for i in range(150)}  # 100 params a request at most
    assert log_batches(client, "run", metrics, params) == 2 and client.calls == 2


def test_a_tracking_server_that_keeps_failing_warns_and_the_jobs_result_stands(scripted, monkeypatch) -> None:
    import logging

    from airflow_dist_training.hooks import mlflow

    warnings: list[logging.LogRecord] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = warnings.append  # type: ignore[method-assign]
    monkeypatch.setattr(mlflow.log, "handlers", [*mlflow.log.handlers, handler])

    scripted.script += [(503, {"error_code": "TEMPORARILY_UNAVAILABLE", "message": "down"})] * 3
    monkeypatch.setattr(mlflow, "job_curves", lambda *a: {"axis": "epoch", "series": {}})

    class _TI:
        task_id, task = "g.train", None

        def xcom_pull(self, **_: Any) -> dict[str, Any]:
            return {}

    result = {"job_name": "job-1", "backend": "local", "job_arn": "local:///tmp/x"}
    client = _client(scripted, [])
    run = mlflow.track_training_task({"ti": _TI()}, result, plan_task_id="g.plan", experiment="e", client=client)
    assert run is None and client.calls == 3  # retried with backoff, then given up
    [warning] = [r.getMessage() for r in warnings]
    assert warning.startswith("MLflow: could not log training job job-1 (") and warning.endswith("the job's result stands")


def test_a_managed_mlflow_arn_is_a_tracking_uri_and_a_malformed_one_is_refused_naming_it(monkeypatch) -> None:
    from airflow_dist_training.hooks.mlflow import tracking_uri

    arn = "arn:aws:sagemaker:eu-west-1:123456789012:mlflow-tracking-server/team"
    assert tracking_uri(arn) == arn
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.delenv("SAGEMAKER_MLFLOW_CUSTOM_ENDPOINT", raising=False)
    assert MlflowRestClient(arn).base == "https://eu-west-1.experiments.sagemaker.aws"  # the plugin's endpoint
    with pytest.raises(SpecValidationError, match="not a SageMaker managed MLflow ARN") as info:
        tracking_uri("arn:aws:sagemaker:eu-west-1:123456789012:training-job/x")
    assert "arn:aws:sagemaker:eu-west-1:123456789012:training-job/x" in str(info.value)
