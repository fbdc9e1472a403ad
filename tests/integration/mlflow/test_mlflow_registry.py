"""The ``mlflow`` registry kind against a real MLflow server: a failure half-way through a
registration never leaves the ``champion`` alias on a version that is not fully registered."""

from __future__ import annotations

import json
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
