"""A real MLflow tracking server for the tests, and MLflow's own client to read what it holds.

Both run from the environment ``scripts/mlflow-server-env.sh`` builds (``setup.sh`` runs it): mlflow
cannot be installed into ``.venv`` beside the pinned Airflow (docs/mlflow.md). The server keeps its
runs and models in SQLite and serves artifacts from a temporary folder, on a free port.
"""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import free_port

ENV_DIR = Path(
    os.environ.get("ADT_MLFLOW_SERVER_ENV")
    or Path.home() / ".cache" / "airflow-dist-training" / "mlflow-server-env"
)


def _python() -> Path:
    python = ENV_DIR / "bin" / "python"
    if not python.exists():  # never a silent skip: setup.sh builds it
        pytest.fail(f"no MLflow server environment at {ENV_DIR}: run scripts/mlflow-server-env.sh")
    return python


@contextmanager
def running_mlflow_server(root: Path) -> Iterator[str]:
    """``mlflow server`` with a SQLite store under ``root``, artifacts served from ``root/artifacts``."""
    port = free_port()
    root.mkdir(parents=True, exist_ok=True)
    log = open(root / "server.log", "wb")
    command = [
        str(_python()), "-m", "mlflow", "server",
        "--backend-store-uri", f"sqlite:///{root / 'mlflow.db'}",
        "--artifacts-destination", str(root / "artifacts"),
        "--serve-artifacts", "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
    ]  # fmt: skip
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=2) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"mlflow server did not start:\n{(root / 'server.log').read_text()[-3000:]}")
            time.sleep(0.3)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


def mlflow_client_query(url: str, code: str) -> Any:
    """Run ``code`` with ``client = MlflowClient(url)`` in MLflow's environment; what it assigns to ``result``, as JSON."""
    script = (
        f"from mlflow.tracking import MlflowClient\nclient = MlflowClient({url!r})\n{textwrap.dedent(code)}\n"
    )
    script += "import json, sys\njson.dump(result, sys.stdout, default=str)\n"
    done = subprocess.run(
        [str(_python()), "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    if done.returncode:
        pytest.fail(f"MLflow client query failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout)


def registry_state(url: str, name: str) -> dict[str, Any]:
    """What the server holds for registered model ``name``: its versions (tags, source, run) and aliases."""
    state = mlflow_client_query(
        url,
        f"""
        model = client.get_registered_model({name!r})
        versions = client.search_model_versions("name='{name}'")
        result = {{
            "aliases": dict(model.aliases),
            "versions": {{
                int(v.version): {{"tags": dict(v.tags), "source": v.source, "run_id": v.run_id, "status": v.status}}
                for v in versions
            }},
        }}
        """,
    )
    return {**state, "versions": {int(v): entry for v, entry in state["versions"].items()}}


def runs_state(url: str, experiment: str) -> list[dict[str, Any]]:
    """Every run of ``experiment``: status, tags, params and each metric's ``[step, value]`` history."""
    return list(
        mlflow_client_query(
            url,
            f"""
            experiment = client.get_experiment_by_name({experiment!r})
            result = []
            for run in client.search_runs([experiment.experiment_id]):
                history = {{
                    key: [[m.step, m.value] for m in sorted(client.get_metric_history(run.info.run_id, key), key=lambda m: m.step)]
                    for key in run.data.metrics
                }}
                result.append({{
                    "run_id": run.info.run_id, "status": run.info.status, "tags": dict(run.data.tags),
                    "params": dict(run.data.params), "history": history,
                }})
            """,
        )
    )
