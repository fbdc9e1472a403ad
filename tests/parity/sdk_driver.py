"""Runs INSIDE the throwaway SageMaker SDK v2 venv (never imported by our package or our venv).

Reads a JSON list of cases from argv[1], writes a JSON dict ``{case_id: result}`` to argv[2]:

- ``tuning`` cases build the same estimator, wrap it in a ``HyperparameterTuner`` and record the
  ``create_hyper_parameter_tuning_job`` kwargs of ``tuner.fit(job_name=..., wait=False)``;
- ``request`` cases build a v2 estimator (PyTorch / TensorFlow) with a real ``sagemaker.session.Session``
  whose boto session and SageMaker client are mocks, call ``fit(inputs, job_name=..., wait=False)`` and
  record the exact ``create_training_job`` kwargs the client received (or the error the SDK raised).
- ``image`` cases call ``sagemaker.image_uris.retrieve(...)`` (or ``get_training_image_uri`` for SMP v2).
- ``name`` cases call ``sagemaker.utils.name_from_base`` (to document the job-name difference).
- ``constants`` cases read named ``sagemaker.fw_utils`` constants (the version lists we generate).

No AWS call is made: every client is a ``MagicMock``; S3 uploads go nowhere.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import sys
import tempfile
import traceback
from typing import Any
from unittest import mock

os.environ.setdefault("SAGEMAKER_SUPPRESS_V2_WARNING", "1")
logging.disable(logging.WARNING)

import sagemaker  # noqa: E402
from sagemaker import fw_utils, image_uris  # noqa: E402
from sagemaker.debugger import TensorBoardOutputConfig  # noqa: E402
from sagemaker.huggingface import HuggingFace  # noqa: E402
from sagemaker.inputs import FileSystemInput, ShuffleConfig, TrainingInput  # noqa: E402
from sagemaker.instance_group import InstanceGroup  # noqa: E402
from sagemaker.pytorch import PyTorch  # noqa: E402
from sagemaker.session import Session  # noqa: E402
from sagemaker.telemetry import telemetry_logging  # noqa: E402
from sagemaker.tensorflow import TensorFlow  # noqa: E402
from sagemaker.tuner import (  # noqa: E402
    CategoricalParameter,
    ContinuousParameter,
    HyperparameterTuner,
    IntegerParameter,
)

# No network: the SDK's usage telemetry would try an HTTPS request after each fit().
telemetry_logging._send_telemetry_request = lambda *args, **kwargs: None
# Speed only: the SDK re-reads botocore's endpoints.json (~0.1 s) on every image lookup.
sagemaker.utils._botocore_resolver = functools.cache(sagemaker.utils._botocore_resolver)

ESTIMATORS = {"PyTorch": PyTorch, "TensorFlow": TensorFlow, "HuggingFace": HuggingFace}


def make_session(region: str, bucket: str) -> tuple[Session, mock.MagicMock]:
    boto_session = mock.MagicMock(name="boto_session", region_name=region)
    client = mock.MagicMock(name="sagemaker_client")
    client.create_training_job.return_value = {"TrainingJobArn": "arn:aws:sagemaker:x:1:training-job/x"}
    session = Session(
        boto_session=boto_session,
        sagemaker_client=client,
        sagemaker_runtime_client=mock.MagicMock(name="runtime"),
        sagemaker_config={},
    )
    session.default_bucket = lambda: bucket  # type: ignore[method-assign]
    session.expand_role = lambda role: role  # type: ignore[method-assign]
    return session, client


def build_inputs(spec: dict[str, Any] | None) -> Any:
    if spec is None:
        return None
    inputs = {}
    for name, channel in spec.items():
        kwargs = dict(channel["kwargs"])
        if "shuffle_seed" in kwargs:
            kwargs["shuffle_config"] = ShuffleConfig(kwargs.pop("shuffle_seed"))
        inputs[name] = TrainingInput(**kwargs) if channel["type"] == "s3" else FileSystemInput(**kwargs)
    return inputs


def build_estimator(case: dict[str, Any], workdir: str, session: Session) -> Any:
    """The case's v2 estimator (``PyTorch``/``TensorFlow``/``HuggingFace``) on ``session``."""
    kwargs = dict(case["kwargs"])
    if kwargs.get("source_dir") == "@local":
        src = os.path.join(workdir, case["id"])
        os.makedirs(src, exist_ok=True)
        with open(os.path.join(src, kwargs["entry_point"]), "w") as fh:
            fh.write("print('hello')\n")
        kwargs["source_dir"] = src
    if "instance_groups" in kwargs:
        kwargs["instance_groups"] = [InstanceGroup(**g) for g in kwargs["instance_groups"]]
    distribution = kwargs.get("distribution")
    if distribution and "instance_groups" in distribution:
        by_name = {g.instance_group_name: g for g in kwargs["instance_groups"]}
        distribution["instance_groups"] = [  # an unknown name: a group the estimator does not have
            by_name.get(n) or InstanceGroup(n, "ml.c5.xlarge", 1) for n in distribution["instance_groups"]
        ]
    if "tensorboard_output_config" in kwargs:
        kwargs["tensorboard_output_config"] = TensorBoardOutputConfig(**kwargs["tensorboard_output_config"])
    return ESTIMATORS[case["estimator"]](sagemaker_session=session, **kwargs)


def run_request(case: dict[str, Any], workdir: str) -> dict[str, Any]:
    session, client = make_session(case["region"], case.get("default_bucket", "sdk-default-bucket"))
    try:
        estimator = build_estimator(case, workdir, session)
        estimator.fit(build_inputs(case.get("inputs")), job_name=case["job_name"], wait=False, logs=False)
    except Exception as exc:  # the SDK's validation error is the result
        return {"error": str(exc), "error_type": type(exc).__name__}
    calls = client.create_training_job.call_args_list
    if len(calls) != 1:
        return {"error": f"create_training_job called {len(calls)} times", "error_type": "DriverError"}
    return {"request": calls[0].kwargs}


def sdk_range(spec: dict[str, Any]) -> Any:
    if spec["type"] == "categorical":
        return CategoricalParameter(spec["values"])
    cls = ContinuousParameter if spec["type"] == "continuous" else IntegerParameter
    return cls(spec["min_value"], spec["max_value"], scaling_type=spec.get("scaling_type", "Auto"))


def run_tuning(case: dict[str, Any], workdir: str) -> dict[str, Any]:
    """``HyperparameterTuner(estimator, ...).fit(job_name=...)``: the CreateHyperParameterTuningJob kwargs."""
    session, client = make_session(case["region"], case.get("default_bucket", "sdk-default-bucket"))
    tuner_kwargs = dict(case["tuner"])
    ranges = {name: sdk_range(r) for name, r in tuner_kwargs.pop("ranges").items()}
    try:
        estimator = build_estimator(case, workdir, session)
        tuner = HyperparameterTuner(estimator, hyperparameter_ranges=ranges, **tuner_kwargs)
        tuner.fit(build_inputs(case.get("inputs")), job_name=case["job_name"], wait=False)
    except Exception as exc:
        return {"error": str(exc), "error_type": type(exc).__name__}
    calls = client.create_hyper_parameter_tuning_job.call_args_list
    if len(calls) != 1:
        return {"error": f"create_hyper_parameter_tuning_job called {len(calls)} times", "error_type": "DriverError"}
    return {"request": calls[0].kwargs}


def run_image(case: dict[str, Any]) -> dict[str, Any]:
    try:
        if case["framework"] == "huggingface":
            uri = image_uris.get_training_image_uri(
                case["region"],
                "huggingface",
                framework_version=case["version"],
                py_version=case.get("py_version"),
                instance_type=case["instance_type"],
                **{f"{case['base']}_version": case["base_version"]},
            )
        elif case.get("distribution"):
            uri = image_uris.get_training_image_uri(
                case["region"],
                case["framework"],
                framework_version=case["version"],
                py_version=case.get("py_version"),
                distribution=case["distribution"],
                instance_type=case["instance_type"],
            )
        else:
            uri = image_uris.retrieve(
                case["framework"],
                case["region"],
                version=case["version"],
                py_version=case.get("py_version"),
                instance_type=case["instance_type"],
                image_scope="training",
            )
    except Exception as exc:
        return {"error": str(exc), "error_type": type(exc).__name__}
    return {"uri": uri}


def main() -> None:
    cases = json.load(open(sys.argv[1]))
    results: dict[str, Any] = {"_sdk_version": sagemaker.__version__}
    with tempfile.TemporaryDirectory() as workdir:
        for case in cases:
            try:
                if case["kind"] == "request":
                    results[case["id"]] = run_request(case, workdir)
                elif case["kind"] == "tuning":
                    results[case["id"]] = run_tuning(case, workdir)
                elif case["kind"] == "image":
                    results[case["id"]] = run_image(case)
                elif case["kind"] == "name":
                    results[case["id"]] = {"name": sagemaker.utils.name_from_base(case["base"])}
                elif case["kind"] == "constants":
                    results[case["id"]] = {"values": {n: getattr(fw_utils, n) for n in case["names"]}}
            except Exception:
                results[case["id"]] = {"error": traceback.format_exc(), "error_type": "DriverError"}
    with open(sys.argv[2], "w") as fh:
        json.dump(results, fh, indent=1, sort_keys=True, default=str)


if __name__ == "__main__":
    main()
