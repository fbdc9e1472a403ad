"""docs/emulator.md "Test your existing SageMaker code" is parsed against the code: each action it
lists as implemented is a real AWS operation the endpoint answers, its example of an unimplemented
call is one, and its command-line flags, environment and pytest options exist."""

from __future__ import annotations

import argparse
import configparser
import importlib
import inspect
import re
from typing import Any

import botocore.session
import pytest

from tests.paths import REPO

DOC = (REPO / "docs" / "emulator.md").read_text(encoding="utf-8")
SECTION = DOC.split("## Test your existing SageMaker code", 1)[1].split("\n## ", 1)[0]
IMPLEMENTED = SECTION.split("**Implemented beyond moto.**", 1)[1].split("**Everything else", 1)[0]
UNIMPLEMENTED = SECTION.split("**Everything else", 1)[1]
ACTION = re.compile(r"`([a-z0-9]+):([A-Z][A-Za-z]+)`")
FENCE = re.compile(r"^```(\w+)\s*\n(.*?)^```", re.M | re.S)


def _answers(service: str, action: str) -> bool:
    """Whether the endpoint has a handler for ``service:action`` (moto's or its own)."""
    from moto.core.responses import BaseResponse
    from moto.core.utils import camelcase_to_underscores

    from airflow_dist_training.emulator.server import _install_patches

    _install_patches()
    module = importlib.import_module(f"moto.{service}.responses")
    classes = [c for _, c in inspect.getmembers(module, inspect.isclass) if issubclass(c, BaseResponse)]
    return any(hasattr(c, camelcase_to_underscores(action)) for c in classes)


@pytest.mark.parametrize("service,action", sorted(set(ACTION.findall(IMPLEMENTED))))
def test_each_listed_action_is_an_aws_operation_the_endpoint_answers(service: str, action: str) -> None:
    assert action in botocore.session.get_session().get_service_model(service).operation_names
    assert _answers(service, action), f"docs/emulator.md lists {service}:{action}, which nothing answers"


def test_the_unimplemented_example_is_unimplemented() -> None:
    [(service, action)] = re.findall(r"does not implement ([a-z0-9]+):([A-Z][A-Za-z]+)", UNIMPLEMENTED)
    assert action in botocore.session.get_session().get_service_model(service).operation_names
    assert not _answers(service, action)


def test_the_commands_flags_environment_and_pytest_options_exist() -> None:
    from airflow_dist_training.emulator.cli import add_emulator_parser
    from airflow_dist_training.emulator.pytest_plugin import pytest_addoption

    parser = argparse.ArgumentParser()
    add_emulator_parser(parser.add_subparsers())
    blocks = FENCE.findall(SECTION)
    commands = [b for kind, b in blocks if kind == "bash"]
    args = commands[0].split()[1:]
    parsed = parser.parse_args(args)
    assert (parsed.port, parsed.region, parsed.account) == (4566, "eu-west-1", "111122223333")
    assert "AWS_ENDPOINT_URL=http://127.0.0.1:4566" in commands[1]
    assert "--debug-stream" in SECTION and parser.parse_args(["emulator", "--debug-stream"]).debug_stream

    class Options:
        def __init__(self) -> None:
            self.names: set[str] = set()

        def addini(self, name: str, *_: Any, **__: Any) -> None:
            self.names.add(name)

        def addoption(self, name: str, *_: Any, **__: Any) -> None:
            self.names.add(name)

    options = Options()
    pytest_addoption(options)  # type: ignore[arg-type]
    ini = configparser.ConfigParser()
    ini.read_string(next(b for kind, b in blocks if kind == "ini"))
    assert set(ini["pytest"]) <= options.names
    assert {"--sagemaker-emulator-region", "--sagemaker-emulator-account"} <= options.names
    assert all(f"`{o}`" in SECTION for o in ("--sagemaker-emulator-region", "--sagemaker-emulator-account"))


def test_the_sdk_config_is_the_one_the_sdk_tests_use() -> None:
    """The SDK config file the page shows (telemetry off, a named default bucket) is what the SDK v3
    test gives ModelTrainer, but for the bucket's name."""
    import yaml

    from tests.integration.emulator.test_sdk_v3_on_emulator import BUCKET, SDK_CONFIG

    shown = yaml.safe_load(next(b for kind, b in FENCE.findall(SECTION) if kind == "yml"))
    used = yaml.safe_load(SDK_CONFIG)
    used["SageMaker"]["PythonSDK"]["Modules"]["Session"]["DefaultS3Bucket"] = "my-bucket"
    assert shown == used and BUCKET
