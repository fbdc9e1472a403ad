"""Typed pipeline steps: a registry or staging step's kind is written, or the backend's default;
never guessed from which fields are set. Each rule between steps has one home, used at parse and
at plan time."""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_dist_training.errors import SpecValidationError
from airflow_dist_training.pipeline_checks import check_pipeline, check_steps, load_pipeline
from airflow_dist_training.spec.backends import backend_record
from airflow_dist_training.spec.pipeline import DirectoryStaging, RegistryStep, StagingStep
from airflow_dist_training.spec.registries import LocalRegistry, SageMakerRegistry
from tests.paths import REPO

SPEC = f"{REPO}/examples/specs/local_demo.yaml"


def _pipeline(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "p.yaml"
    path.write_text(f"dag_id: d\ntraining: {SPEC}\n{body}")
    return path


def _refusal(path: Path) -> str:
    with pytest.raises(SpecValidationError) as refused:
        load_pipeline(path)
    return refused.value.render()


def test_a_registry_without_kind_is_the_backends_default_registry(tmp_path: Path) -> None:
    local = load_pipeline(_pipeline(tmp_path, "registry: {model_package_group: churn}\n"))
    assert isinstance(local.registry, LocalRegistry) and local.registry.model_package_group == "churn"
    chosen = load_pipeline(_pipeline(tmp_path, "registry: {kind: sagemaker, model_package_group: churn}\n"))
    assert isinstance(chosen.registry, SageMakerRegistry)  # written, so kept: not turned into a local one


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("backend: hyperpod\n", "backend: unknown backend 'hyperpod'; registered backends: local, sagemaker"),
        ("registry: {kind: sagemaker}\n", "registry.model_package_group: is required"),
        (
            "registry: {kind: sagemaker, model_package_group: bad_name!}\n",
            "registry.model_package_group: 'bad_name!': 1-63 letters, digits and hyphens",
        ),
        ("registry: {kind: wandb}\n", "registry.kind: unknown registry kind 'wandb'; registered kinds: local, sagemaker, mlflow"),
        (
            "registry: {kind: mlflow, model_package_group: 'team/model'}\n",
            "registry.model_package_group: 'team/model': MLflow refuses a registered model name that is blank, "
            "has '/' or ':', or is '.' or starts with '..'",
        ),
        ("staging: {kind: fsx, source: 's3://b/train', file_system_id: fs-1}\n", "staging.file_system_path: is required"),
        (
            "staging: {kind: fsx, source: 's3://b/train', file_system_path: /train}\n",
            "staging: give file_system_id or scratch_file_system",
        ),
        ("staging: {kind: nfs, source: /data}\n", "staging.kind: unknown staging kind 'nfs'; registered kinds: fsx, directory"),
    ],
)
def test_a_step_that_does_not_fit_its_kind_names_the_file_and_field(tmp_path: Path, body: str, message: str) -> None:
    path = _pipeline(tmp_path, body)
    assert f"{path}: {message}" in _refusal(path)


def test_a_field_of_the_other_registry_kind_is_refused(tmp_path: Path) -> None:
    path = _pipeline(tmp_path, "registry: {kind: sagemaker, model_package_group: g, local_dir: /tmp/r}\n")
    assert f"{path}: registry.local_dir:" in _refusal(path)


def test_a_python_registry_step_takes_the_kind_of_the_backend_it_runs_on() -> None:
    step = RegistryStep(model_package_group="adt-demo", local_dir="/tmp/registry", auto_approve=True)
    local = step.for_backend(backend_record("local"))
    sagemaker = step.for_backend(backend_record("sagemaker"))
    assert isinstance(local, LocalRegistry) and local.local_dir == "/tmp/registry"
    assert isinstance(sagemaker, SageMakerRegistry) and sagemaker.auto_approve
    assert isinstance(StagingStep(source="/data").for_backend(backend_record("local")), DirectoryStaging)
    with pytest.raises(SpecValidationError, match=r"staging\.file_system_path: is required"):
        StagingStep(source="s3://b/p").for_backend(backend_record("sagemaker"))


@pytest.mark.parametrize(
    ("body", "rule"),
    [
        (
            "staging: {channel: trian, source: /data}\n",
            "staging.channel: 'trian' names no channel of the training spec (its channels: train)",
        ),
        (
            "evaluation: {script: 's3://code/evaluate.py'}\n",
            "evaluation.script: s3://code/evaluate.py: the local backend runs a local script, not a URI",
        ),
        ("evaluation: {script: evaluate.sh}\n", "evaluation.script: must be a .py file, got 'evaluate.sh'"),
    ],
)
def test_a_step_rule_is_the_same_at_parse_and_at_plan_time(tmp_path: Path, body: str, rule: str) -> None:
    """The DAG factory's parse, the CLI's validate (both ``check_pipeline``) and the plan task
    (``check_steps``) read one rule: the file's import error and the plan's refusal say the same."""
    path = _pipeline(tmp_path, body)
    pipeline = load_pipeline(path)
    parsed, _ = check_pipeline(pipeline, path=path, plan_job=False)
    planned = check_steps(
        pipeline.training, backend="local", staging=pipeline.staging, evaluation=pipeline.evaluation, base_dir=tmp_path
    )
    assert [str(p) for p in parsed if str(p).startswith(rule)] == [str(p) for p in planned if str(p).startswith(rule)]
    assert any(str(p).startswith(rule) for p in planned)
