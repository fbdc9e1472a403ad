"""One real MLflow tracking server for this folder's tests (per xdist worker; they share a group)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.mlflow_server import running_mlflow_server


@pytest.fixture(scope="session")
def mlflow_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The server's URL; each test uses registered model and experiment names of its own."""
    with running_mlflow_server(tmp_path_factory.mktemp("mlflow-server")) as url:
        yield url
