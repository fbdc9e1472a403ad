"""pytest fixtures for the SageMaker test endpoint (registered through the ``pytest11`` entry point).

``sagemaker_emulator`` (session) runs ``airflow-dist-training emulator`` in a subprocess, so moto's
state stays out of the test process; ``sagemaker_endpoint`` (function) resets it and points
``AWS_ENDPOINT_URL`` (and test credentials) at it, so boto3, aiobotocore and Airflow's AWS
connections all talk to it (docs/emulator.md).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

DEFAULT_REGION = "us-east-1"
DEFAULT_ACCOUNT = "123456789012"


class EmulatorProcess:
    """A running ``airflow-dist-training emulator`` subprocess; ``environ`` is its environment
    (default: this process's), which chooses its jobs' interpreter (``$ADT_LOCAL_PYTHON``, else the
    default job environment)."""

    def __init__(
        self,
        root: Path,
        environ: Mapping[str, str] | None = None,
        *,
        region: str = DEFAULT_REGION,
        account: str = DEFAULT_ACCOUNT,
    ) -> None:
        self.root = root
        self.region = region
        self.account = account
        environ = os.environ if environ is None else environ
        env = {k: v for k, v in environ.items() if not k.startswith("AWS_ENDPOINT_URL")}
        command = [sys.executable, "-m", "airflow_dist_training.cli", "emulator", "--root", str(root)]
        self.proc = subprocess.Popen(
            [*command, "--region", region, "--account", account],
            stdout=subprocess.PIPE,
            stderr=open(root / "emulator.log", "wb"),
            env=env,
            text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line.startswith("endpoint: "):
            self.proc.kill()
            log = (root / "emulator.log").read_text(errors="replace")[-3000:]
            raise RuntimeError(f"the emulator did not start (got {line!r}):\n{log}")
        self.endpoint = line.split(" ", 1)[1].strip()

    def _admin(self, path: str, payload: dict[str, Any] | None = None) -> dict[str, Any]:
        data = json.dumps(payload or {}).encode()
        req = urllib.request.Request(f"{self.endpoint}/_emulator/{path}", data=data, method="POST")
        with urllib.request.urlopen(req, timeout=60) as resp:
            return dict(json.loads(resp.read()))

    def inject(self, fault: str, **params: Any) -> dict[str, Any]:
        """Arm a fault: ``spot_interruption`` (job_name), ``host_failure`` (count or job_name),
        ``insufficient_capacity`` (count), ``throttle`` (share)."""
        return self._admin("faults", {"fault": fault, **params})

    def state(self) -> dict[str, Any]:
        return self._admin("state")

    def reset(self) -> None:
        self._admin("reset")

    def client(self, service: str) -> Any:
        import boto3

        return boto3.client(
            service,
            region_name=self.region,
            endpoint_url=self.endpoint,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )

    def stop(self, timeout: float = 60.0) -> int:
        """SIGTERM, as a user's Ctrl-C would; the emulator stops its jobs and exits."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return int(self.proc.returncode)


def pytest_addoption(parser: pytest.Parser) -> None:
    for name, default, what in (
        ("region", DEFAULT_REGION, "the region of the SageMaker test endpoint and of its clients"),
        ("account", DEFAULT_ACCOUNT, "the account the SageMaker test endpoint acts in"),
    ):
        parser.addini(f"sagemaker_emulator_{name}", f"{what} (default {default})", default=default)
        parser.addoption(
            f"--sagemaker-emulator-{name}", default=None, help=f"{what}; overrides the ini option"
        )


def _setting(config: pytest.Config, name: str) -> str:
    return str(
        config.getoption(f"--sagemaker-emulator-{name}") or config.getini(f"sagemaker_emulator_{name}")
    )


@pytest.fixture(scope="session")
def sagemaker_emulator(
    tmp_path_factory: pytest.TempPathFactory, pytestconfig: pytest.Config
) -> Iterator[EmulatorProcess]:
    """The SageMaker test endpoint, one per test session (a subprocess); its region and account come
    from ``--sagemaker-emulator-region``/``--sagemaker-emulator-account`` or the ini options
    ``sagemaker_emulator_region``/``sagemaker_emulator_account``."""
    emulator = EmulatorProcess(
        tmp_path_factory.mktemp("sagemaker-emulator"),
        region=_setting(pytestconfig, "region"),
        account=_setting(pytestconfig, "account"),
    )
    try:
        yield emulator
    finally:
        emulator.stop()


@pytest.fixture
def sagemaker_endpoint(
    sagemaker_emulator: EmulatorProcess, monkeypatch: pytest.MonkeyPatch
) -> Iterator[EmulatorProcess]:
    """An empty emulator for this test, with ``AWS_ENDPOINT_URL`` pointing at it and the clients'
    region (``AWS_DEFAULT_REGION``, ``AWS_REGION``) the emulator's."""
    sagemaker_emulator.reset()
    monkeypatch.setenv("AWS_ENDPOINT_URL", sagemaker_emulator.endpoint)
    for key, value in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing")):
        monkeypatch.setenv(key, os.environ.get(key, value))
    monkeypatch.setenv("AWS_DEFAULT_REGION", sagemaker_emulator.region)
    monkeypatch.setenv("AWS_REGION", sagemaker_emulator.region)
    yield sagemaker_emulator
