"""Pipeline files are checked like specs: each mistake is a clear error naming the file and field."""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_dist_training.errors import SpecValidationError
from airflow_dist_training.pipeline_checks import check_pipeline_file
from tests.paths import REPO

STUB = "from airflow_dist_training.dag_factory import dag_from_yaml\n\ndag = dag_from_yaml(__file__)\n"
SAGEMAKER = (REPO / "dags" / "pipelines" / "llm_finetune_sagemaker.yaml").read_text().replace(
    "../../", str(REPO) + "/"
)
SPEC = """\
name: demo
image: {framework: pytorch, framework_version: "2.8.0", py_version: py312}
source: {entry_point: train.py, source_dir: code}
compute: {instance_type: ml.m5.xlarge}
channels:
  train: {type: s3, uri: s3://bucket/train, local_source: data/train}
output: {s3_path: s3://bucket/out, local_uri: out}
"""


def _error(path: Path) -> str:
    with pytest.raises(SpecValidationError) as info:
        check_pipeline_file(path)
    return info.value.render()


def _write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text)
    return path


def test_staging_channel_that_names_no_spec_channel_is_an_error(tmp_path):
    path = _write(tmp_path, "p.yaml", SAGEMAKER.replace("  channel: train\n", "  channel: trian\n"))
    assert _error(path) == (
        f"{path}: staging.channel: 'trian' names no channel of the training spec (its channels: train); "
        "the staged data would never reach the job"
    )


def test_sagemaker_staging_without_file_system_path_fails_validation_not_the_run(tmp_path):
    path = _write(tmp_path, "p.yaml", SAGEMAKER.replace("  file_system_path: /datasets/train\n", ""))
    assert (
        f"{path}: staging.file_system_path: is required" in _error(path)
    )


def test_sagemaker_rules_of_the_referenced_spec_are_checked_with_the_training_prefix(tmp_path):
    spec = (REPO / "examples" / "specs" / "torch_distributed_p4d.yaml").read_text()
    _write(tmp_path, "spec.yaml", spec.replace("ml.p4d.24xlarge", "ml.c5.xlarge"))
    path = _write(
        tmp_path,
        "p.yaml",
        SAGEMAKER.replace(f"training: {REPO}/examples/specs/torch_distributed_p4d.yaml", "training: spec.yaml"),
    )
    assert (
        f"{path}: training.compute.instance_type: Currently torch_distributed is supported only for GPU and "
        "Trainium instances." in _error(path)
    )


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("start_date: 2026-13-45", "start_date: '2026-13-45' is not an ISO date or date-time, e.g. 2026-01-01"),
        (
            "schedule: '@nightly'",
            "schedule: unknown schedule preset '@nightly'; one of @once, @continuous, @hourly, @daily, @weekly, "
            "@monthly, @quarterly, @yearly",
        ),
        ("schedul: '@daily'", "schedul: unknown field (check the spelling; see `airflow-dist-training schema --pipeline`)"),
    ],
)
def test_bad_pipeline_fields_name_file_and_field(tmp_path, line, expected):
    text = SAGEMAKER.replace('schedule: "0 4 * * 1"\n', "")
    path = _write(tmp_path, "p.yaml", f"{line}\n{text}")
    assert _error(path) == f"{path}: {expected}"


def test_unknown_spec_field_in_a_pipeline_points_to_the_spec_schema(tmp_path):
    spec = (REPO / "examples" / "specs" / "torch_distributed_p4d.yaml").read_text()
    _write(tmp_path, "spec.yaml", spec + "colour: blue\n")
    path = _write(
        tmp_path,
        "p.yaml",
        SAGEMAKER.replace(f"training: {REPO}/examples/specs/torch_distributed_p4d.yaml", "training: spec.yaml"),
    )
    assert "training.colour: unknown field (check the spelling; see `airflow-dist-training schema`)" in _error(path)


def test_paths_in_a_referenced_spec_resolve_against_the_spec_files_folder(tmp_path):
    from airflow_dist_training.dag_factory import load_pipeline

    (tmp_path / "specs").mkdir()
    (tmp_path / "dags").mkdir()
    _write(tmp_path / "specs", "job.yaml", SPEC)
    path = _write(tmp_path / "dags", "p.yaml", "dag_id: p\ntraining: ../specs/job.yaml\n")
    spec = load_pipeline(path).training
    assert spec.source.source_dir == str(tmp_path / "specs" / "code")
    assert spec.channels["train"].local_source == str(tmp_path / "specs" / "data" / "train")  # type: ignore[union-attr]
    assert spec.output is not None and spec.output.local_uri == str(tmp_path / "specs" / "out")


def test_local_data_inside_the_dags_folder_is_an_error(tmp_path):
    text = "dag_id: p\ntraining:\n" + "".join(f"  {line}\n" for line in SPEC.splitlines())
    path = _write(tmp_path, "p.yaml", text)
    message = _error(path)
    assert f"{path}: training.output.local_uri: 'out' resolves to {tmp_path / 'out'}, inside the DAGs folder" in message
    assert "training.channels.train.local_source: 'data/train'" in message


def test_staged_channel_and_registry_default_to_a_workspace_outside_the_dags_folder(tmp_path, monkeypatch):
    from airflow_dist_training.dag_factory import load_pipeline

    monkeypatch.setenv("ADT_LOCAL_ROOT", str(tmp_path / "root"))
    spec = SPEC.replace(", local_source: data/train", "").replace(", local_uri: out", "")
    text = "dag_id: p\nstaging: {source: /data}\nregistry: {}\ntraining:\n" + "".join(
        f"  {line}\n" for line in spec.splitlines()
    )
    pipeline = load_pipeline(_write(tmp_path / "", "p.yaml", text))
    workspace = tmp_path / "root" / "pipelines" / "p"
    assert pipeline.training.channels["train"].local_source == str(workspace / "channels" / "train")  # type: ignore[union-attr]
    assert pipeline.registry is not None and pipeline.registry.local_dir == str(workspace / "registry")


def test_duplicate_dag_id_across_pipeline_files_is_an_import_error_naming_both(tmp_path):
    from airflow_dist_training.compat import DagBag

    for name in ("a", "b"):
        _write(tmp_path, f"{name}.yaml", SAGEMAKER)
        _write(tmp_path, f"{name}.py", STUB)
    bag = DagBag(dag_folder=str(tmp_path), safe_mode=False)
    errors = {Path(k).name: v for k, v in bag.import_errors.items()}
    assert set(errors) == {"a.py", "b.py"}
    assert (
        f"{tmp_path}/a.yaml: dag_id: 'llm_finetune_sagemaker' is also the dag_id of {tmp_path}/b.yaml: "
        "one would silently replace the other" in errors["a.py"]
    )
    assert f"is also the dag_id of {tmp_path}/a.yaml" in errors["b.py"]
    # `airflow-dist-training validate` finds it too, before the DAG processor does
    with pytest.raises(SpecValidationError) as refused:
        check_pipeline_file(tmp_path / "a.yaml")
    assert f"dag_id: 'llm_finetune_sagemaker' is also the dag_id of {tmp_path}/b.yaml" in str(refused.value)


def test_shipped_pipelines_validate():
    for path in sorted((REPO / "dags" / "pipelines").glob("*.yaml")):
        check = check_pipeline_file(path)
        assert check.pipeline.dag_id
