"""Deliberate differences from the SageMaker SDK that are not request fields of the v2 cases.

- Job names: the SDK appends a timestamp and does not sanitise; we sanitise and use a run-identity hash.
- The launcher strategy: our own launcher, compared with SDK v3 ``ModelTrainer`` + ``Torchrun()`` by
  structure (see docs/parity.md for why it cannot be compared byte for byte).
"""

from __future__ import annotations

import re
from typing import Any

from airflow_dist_training.sagemaker.launcher import CODE_CHANNEL, LAUNCHER_CHANNEL
from airflow_dist_training.sagemaker.naming import NAME_PATTERN, job_name, job_name_problems
from airflow_dist_training.sagemaker.request import plan_training_job
from tests.parity.cases import NAME_BASES, REGION, RUN_IDENTITY, load


def test_sdk_job_names_are_timestamped_and_unsanitised(sdk_results: dict[str, Any]) -> None:
    sdk = sdk_results["name:my_job"]["name"]
    assert re.fullmatch(r"my_job-\d{4}(-\d{2}){5}-\d{3}", sdk)  # base + UTC timestamp with ms
    assert job_name_problems(sdk), "the SDK's name would be accepted by the API pattern"
    ours = job_name("my_job", RUN_IDENTITY)
    assert NAME_PATTERN.match(ours) and ours.startswith("my-job-")
    assert ours == job_name("my_job", RUN_IDENTITY)  # stable across retries: the SDK's is not


def test_sdk_cuts_long_bases_to_39_characters(sdk_results: dict[str, Any]) -> None:
    long_base = NAME_BASES[2]
    sdk = sdk_results[f"name:{long_base}"]["name"]
    assert len(sdk) == 63 and sdk.startswith("a" * 39 + "-")
    ours = job_name(long_base, RUN_IDENTITY)
    assert len(ours) == 63 and ours.startswith("a" * 52 + "-")  # we keep more of the base


def test_launcher_differs_from_model_trainer_by_design() -> None:
    """SDK v3 ModelTrainer(Torchrun): /bin/bash sm_train.sh entrypoint, ``sm_drivers`` channel.

    Ours: python3 adt_launch.py entrypoint, ``adt_launcher`` channel; same ``code`` channel name,
    same hyperparameter encoding (v3 ``safe_serialize``: strings unquoted, the rest JSON), and like
    v3 no Debugger/Profiler configs and no ``sagemaker_*`` hyperparameters.
    """
    spec = load(
        "launcher_any_image", {"hyperparameters": {"epochs": 3, "lr": 0.1, "name": "abc", "cfg": {"a": 1}}}
    )
    request = plan_training_job(spec, job_name="parity-launcher", region=REGION).request
    algorithm = request["AlgorithmSpecification"]
    assert algorithm["ContainerEntrypoint"] == [
        "python3",
        f"/opt/ml/input/data/{LAUNCHER_CHANNEL}/adt_launch.py",
    ]
    assert algorithm["ContainerArguments"] == [
        "--config",
        f"/opt/ml/input/data/{LAUNCHER_CHANNEL}/launch.json",
    ]
    # v3 (reference doc, verified with sagemaker 3.20.0): {"epochs":"3","lr":"0.1","name":"abc","cfg":"{\"a\": 1}"}
    expected = {"epochs": "3", "lr": "0.1", "name": "abc", "cfg": '{"a": 1}', "model": "resnet50"}
    assert request["HyperParameters"] == expected
    assert [c["ChannelName"] for c in request["InputDataConfig"]] == [CODE_CHANNEL, LAUNCHER_CHANNEL]
    assert all(c["InputMode"] == "File" for c in request["InputDataConfig"])  # as v3's managed channels
    assert "DebugHookConfig" not in request and "ProfilerConfig" not in request
    assert "EnableSageMakerMetricsTimeSeries" not in algorithm
