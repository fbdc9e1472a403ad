"""Checks of every step of a run (training, evaluation, gate, registry) for the ``plan`` task.

The training request is validated by the planner; this module adds what the later steps need,
so that a run is rejected **before anything is launched**, not after training was paid for:

- evaluation: the script, the dependencies it ships and its data exist (local paths are uploaded
  to the run's S3 prefix on SageMaker), and a SageMaker evaluation has a role and an output location;
- gate: its thresholds parse, and there is an evaluation for it to read;
- registry: a valid model package group and an inference image on SageMaker, a directory locally;
- S3: every bucket the run reads or writes exists, and every input prefix has objects (the AWS
  reads themselves are in :mod:`airflow_dist_training.hooks.s3_checks`; this module only lists them).

Pure: no Airflow, no boto3 (local files are only tested for existence and listed).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow_dist_training.errors import Problem, SpecValidationError
from airflow_dist_training.storage.location import split_uri, uri_scheme

if TYPE_CHECKING:
    from airflow_dist_training.spec.backends import BackendRecord
    from airflow_dist_training.spec.pipeline import (
        EvaluationStep,
        RegistryStep,
        StagingStep,
        TypedRegistry,
        TypedStaging,
    )
    from airflow_dist_training.spec.training import TrainingJobSpec

# registry/repository[:tag|@digest]: what CreateModelPackage accepts as an inference image
_IMAGE = re.compile(r"^[\w.\-]+(:\d+)?/[\w.\-/]+([:@][\w.\-:]+)?$")


@dataclass(frozen=True)
class S3Location:
    """An S3 location the run uses: ``field`` names it for the user; inputs must hold objects."""

    field: str
    uri: str
    is_input: bool


def is_remote(uri: str | None) -> bool:
    return bool(uri) and "://" in str(uri) and not str(uri).startswith("file://")


def resolve_local(path: str, base_dir: str | Path | None) -> Path:
    p = Path(split_uri(path)[2])
    return p if p.is_absolute() or base_dir is None else Path(base_dir) / p


def check_steps(
    spec: TrainingJobSpec,
    *,
    backend: str,
    evaluation: EvaluationStep | None = None,
    gate: Mapping[str, Any] | None = None,
    registry: RegistryStep | TypedRegistry | None = None,
    inference_image: str | None = None,
    base_dir: str | Path | None = None,
    staging: StagingStep | TypedStaging | None = None,
) -> list[Problem]:
    """Every problem of the staging, evaluation, gate and registry steps (errors and warnings) on ``backend``."""
    from airflow_dist_training.spec.backends import backend_record
    from airflow_dist_training.spec.pipeline import step_problems

    record = backend_record(backend)
    problems = step_problems(spec, record, staging=staging, evaluation=evaluation, gate=gate, registry=registry)
    if evaluation is not None:
        problems += _check_evaluation(evaluation, record, base_dir)
    if gate is not None:
        problems += _check_gate(gate)
    if registry is not None:
        problems += _check_registry(registry, record, inference_image)
    return problems


def _check_evaluation(step: EvaluationStep, backend: BackendRecord, base_dir: str | Path | None) -> list[Problem]:
    problems = _evaluation_script_problems(step.script, backend, base_dir)
    if step.dependencies and not problems:
        from airflow_dist_training.evaluation.code import evaluation_code_files

        deps = [str(resolve_local(d, base_dir)) for d in step.dependencies]
        try:  # what the evaluation ships: every missing or shadowing entry, before training is paid for
            evaluation_code_files(resolve_local(step.script, base_dir), deps, field_prefix="evaluation.")
        except SpecValidationError as exc:
            problems += exc.problems
    data = step.channel_source
    if data and is_remote(data) and uri_scheme(data) != "s3":
        problems.append(Problem("evaluation.channel_source", f"{data}: must be a local path or an s3:// URI"))
    elif data and not is_remote(data) and not (path := resolve_local(data, base_dir)).exists():
        problems.append(Problem("evaluation.channel_source", f"{path} does not exist"))
    return problems


def _evaluation_script_problems(
    script: str, backend: BackendRecord, base_dir: str | Path | None
) -> list[Problem]:
    problems: list[Problem] = []
    if not script.endswith(".py"):
        problems.append(Problem("evaluation.script", f"must be a .py file, got {script!r}"))
    if is_remote(script):
        from airflow_dist_training.spec.evaluations import evaluation_record

        if not evaluation_record(backend.evaluation).on_aws:
            problems.append(
                Problem("evaluation.script", f"{script}: the {backend.name} backend runs a local script, not a URI")
            )
        elif uri_scheme(script) != "s3":
            problems.append(Problem("evaluation.script", f"{script}: must be a local path or an s3:// URI"))
    elif not (path := resolve_local(script, base_dir)).is_file():
        problems.append(Problem("evaluation.script", f"{path} does not exist (or is not a file)"))
    return problems


def _check_gate(gate: Mapping[str, Any]) -> list[Problem]:
    from airflow_dist_training.spec.gate import parse_gate_spec

    try:
        parse_gate_spec(
            dict(gate.get("thresholds") or {}),
            require_same_evaluation_set=bool(gate.get("require_same_evaluation_set", False)),
        )
    except SpecValidationError as exc:
        return [Problem(f"gate.{p.path}".rstrip("."), p.message) for p in exc.problems]
    return []


def _check_registry(
    registry: RegistryStep | TypedRegistry, backend: BackendRecord, inference_image: str | None
) -> list[Problem]:
    from airflow_dist_training.spec.registries import find_registry

    # the registry's kind and its own rules: spec/pipeline.step_problems
    record = find_registry(registry.kind or backend.default_registry)
    if record is None or (record.local_dir and getattr(registry, "local_dir", None)):
        return []
    if record.local_dir:
        message = "not set: the local registry goes to .adt-demo/registry"
        return [Problem("registry.local_dir", message, "warning")]
    image = inference_image or registry.inference_image
    if not record.needs_image or not image or _IMAGE.match(image):
        return []
    message = f"{image!r} is not an image URI (<registry>/<repository>:<tag> or @<digest>)"
    return [Problem("registry.inference_image", message)]


def s3_locations(
    spec: TrainingJobSpec,
    *,
    evaluation: EvaluationStep | None = None,
    staging: StagingStep | TypedStaging | None = None,
) -> list[S3Location]:
    """The S3 locations a SageMaker run reads (inputs) and writes, with the field naming each.

    A channel the staging step replaces (FSx) is read from the staging source, not its own URI."""
    from airflow_dist_training.spec.training import S3Channel

    found: list[S3Location] = []
    if staging is not None and uri_scheme(staging.source) == "s3":
        found.append(S3Location("staging.source", staging.source, True))
    for name, channel in spec.channels.items():
        if staging is not None and name == staging.channel:
            continue
        if isinstance(channel, S3Channel):
            found.append(S3Location(f"channels.{name}.uri", channel.uri, True))
    source_dir = spec.source.source_dir
    if source_dir and uri_scheme(source_dir) == "s3":
        found.append(S3Location("source.source_dir", source_dir, True))
    if spec.output is not None and spec.output.s3_path:
        found.append(S3Location("output.s3_path", spec.output.s3_path, False))
    if spec.checkpoint is not None and spec.checkpoint.s3_uri:
        found.append(S3Location("checkpoint.s3_uri", spec.checkpoint.s3_uri, False))
    if evaluation is not None:  # its script and the data channel it reads
        found += [
            S3Location(f"evaluation.{name}", str(uri), True)
            for name, uri in (("script", evaluation.script), ("channel_source", evaluation.channel_source))
            if uri_scheme(uri) == "s3"
        ]
    return found
