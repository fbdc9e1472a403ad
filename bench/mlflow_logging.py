"""Benchmark: requests to the MLflow tracking server to log one training job's metric curves.

Anchor (issue 34): ``mlflow.log_metric`` per point, one ``runs/log-metric`` request each. Ours:
``hooks/mlflow.py`` ``log_training_job``, the curves in ``runs/log-batch`` requests (MLflow's limits:
1000 metrics, 100 params, 100 tags a request). Both find or create the job's run, log the same params
and tags and finish the run, side by side against the same server: by default an in-process
recorder that answers the REST API like MLflow does; ``--server URL`` runs both against a real
``mlflow server`` (the figures in docs/benchmarks.md).

    .venv/bin/python bench/mlflow_logging.py                  # 100 epochs x 5 metrics
    .venv/bin/python bench/mlflow_logging.py --server http://127.0.0.1:5000
"""

from __future__ import annotations

import argparse
import json
import threading
import time
import uuid
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from airflow_dist_training.hooks.mlflow import MlflowRestClient, job_run, log_training_job, training_params


class _Recorder(BaseHTTPRequestHandler):
    """Enough of MLflow's REST API for both sides, counting requests per endpoint."""

    def _reply(self, status: int, body: dict[str, Any]) -> None:
        payload = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        endpoint = self.path.split("?")[0].removeprefix("/api/2.0/mlflow/")
        self.server.counts[endpoint] += 1  # type: ignore[attr-defined]
        if endpoint == "experiments/get-by-name":
            self._reply(404, {"error_code": "RESOURCE_DOES_NOT_EXIST", "message": "no such experiment"})
        elif endpoint == "experiments/create":
            self._reply(200, {"experiment_id": "1"})
        elif endpoint == "runs/create":
            self._reply(200, {"run": {"info": {"run_id": uuid.uuid4().hex}}})
        else:
            self._reply(200, {})

    do_GET = do_POST = _answer

    def log_message(self, *args: Any) -> None:
        pass


def curves(epochs: int, metrics: int) -> dict[str, Any]:
    series = {f"metric_{m}": [{"x": e, "value": 1.0 / (e + 1 + m), "host": "algo-1"} for e in range(epochs)] for m in range(metrics)}
    return {"axis": "epoch", "series": series}


SPEC = {"hyperparameters": {"epochs": 100, "lr": 0.05, "batch_size": 64}, "compute": {"instance_type": "ml.g5.xlarge", "count": 2}}


def ours(uri: str, job: str, data: dict[str, Any]) -> tuple[int, float]:
    client = MlflowRestClient(uri)
    started = time.perf_counter()
    log_training_job(client, experiment="bench-mlflow", result={"job_name": job, "backend": "local"}, spec=SPEC, curves=data)
    return client.calls, time.perf_counter() - started


def per_point(uri: str, job: str, data: dict[str, Any]) -> tuple[int, float]:
    """The anchor: the same run, params and tags, then one ``log_metric`` request per point."""
    client = MlflowRestClient(uri)
    started = time.perf_counter()
    run_id = job_run(client, "bench-mlflow", job, "local", "bench")
    params = [{"key": k, "value": v} for k, v in training_params(SPEC).items()]
    client.call("POST", "runs/log-batch", {"run_id": run_id, "params": params, "tags": [{"key": "training_job", "value": job}]})
    now = int(time.time() * 1000)
    for name, points in data["series"].items():
        for point in points:
            body = {"run_id": run_id, "key": name, "value": point["value"], "timestamp": now, "step": point["x"]}
            client.call("POST", "runs/log-metric", body)
    client.call("POST", "runs/update", {"run_id": run_id, "status": "FINISHED", "end_time": now})
    return client.calls, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=100)
    parser.add_argument("--metrics", type=int, default=5)
    parser.add_argument("--server", help="a real MLflow tracking server (default: an in-process recorder)")
    parser.add_argument("--quick", action="store_true", help="10 epochs x 2 metrics")
    args = parser.parse_args()
    epochs, metrics = (10, 2) if args.quick else (args.epochs, args.metrics)
    recorder = None
    uri = args.server
    if uri is None:
        recorder = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
        recorder.counts = Counter()  # type: ignore[attr-defined]
        threading.Thread(target=recorder.serve_forever, daemon=True).start()
        uri = f"http://127.0.0.1:{recorder.server_port}"
    data = curves(epochs, metrics)
    tag = uuid.uuid4().hex[:8]
    anchor_calls, anchor_s = per_point(uri, f"anchor-{tag}", data)
    our_calls, our_s = ours(uri, f"ours-{tag}", data)
    if recorder is not None:
        recorder.shutdown()
    print(f"one job: {epochs} epochs x {metrics} metrics = {epochs * metrics} points, server {args.server or 'in-process recorder'}")
    print(f"  log_metric per point (anchor): {anchor_calls:5d} requests  {anchor_s:7.3f} s")
    print(f"  log_batch (ours):              {our_calls:5d} requests  {our_s:7.3f} s")
    print(f"ratio requests ours/anchor = {our_calls / anchor_calls:.4f}x (goal <= {1 / 20:.2f})")
    print(f"ratio seconds ours/anchor = {our_s / anchor_s:.4f}x")


if __name__ == "__main__":
    main()
