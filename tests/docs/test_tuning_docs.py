"""docs/tuning.md: its tuning section plans the request it describes, its DAG builds (no I/O) and
wires the best training job into evaluation and registry, and the errors it quotes are ours."""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml

from airflow_dist_training.errors import SpecValidationError
from airflow_dist_training.results import TrainingResult
from airflow_dist_training.sagemaker.tuning import plan_tuning_job, tuning_job_name
from airflow_dist_training.spec.loading import load_spec
from airflow_dist_training.spec.tuning import load_tuning_spec, tuning_problems
from tests.paths import REPO

DOC = (REPO / "docs" / "tuning.md").read_text(encoding="utf-8")
FENCE = re.compile(r"^```(yaml|python)\s*\n(.*?)^```", re.M | re.S)
BLOCKS = {kind: text for kind, text in reversed(FENCE.findall(DOC))}  # the first of each kind
LOCAL_DAG = [text for kind, text in FENCE.findall(DOC) if kind == "python" and 'backend="local"' in text]
TRAINING: dict[str, Any] = {
    "name": "churn",
    "image": {"framework": "pytorch", "framework_version": "2.8.0", "py_version": "py312"},
    "source": {"entry_point": "train.py", "source_dir": "s3://ml-code/churn/sourcedir.tar.gz"},
    "role_arn": "arn:aws:iam::123456789012:role/sagemaker-exec",
    "compute": {"instance_type": "ml.m5.xlarge", "instance_count": 1},
    "output": {"s3_path": "s3://ml-artifacts/churn/models"},
    "metric_definitions": [{"name": "validation:accuracy", "regex": "val_acc=([0-9.]+)"}],
}


def test_the_tuning_section_plans_the_request_the_page_describes() -> None:
    tuning = load_tuning_spec(BLOCKS["yaml"])
    spec = load_spec(TRAINING)
    name = tuning_job_name(spec.name, "docs:tune:manual__1:-1")
    request = plan_tuning_job(spec, tuning, job_name=name, region="us-east-1").request
    config = request["HyperParameterTuningJobConfig"]
    assert config["Strategy"] == "Random" and config["RandomSeed"] == 42
    assert config["ResourceLimits"] == {"MaxNumberOfTrainingJobs": 8, "MaxParallelTrainingJobs": 2}
    assert config["TrainingJobEarlyStoppingType"] == "Off"
    ranges = config["ParameterRanges"]
    assert ranges["CategoricalParameterRanges"] == [{"Name": "optimizer", "Values": ['"sgd"', '"adam"']}]
    assert [r["Name"] for r in ranges["ContinuousParameterRanges"] + ranges["IntegerParameterRanges"]] == [
        "lr",
        "layers",
    ]
    assert len(request["HyperParameterTuningJobName"]) <= 32


def test_the_quoted_errors_are_the_ones_users_get() -> None:
    quoted = re.findall(r"^- `(tuning[^`]*)`", DOC, re.M)
    assert len(quoted) == 3
    section = yaml.safe_load(BLOCKS["yaml"])
    wrong_metric = load_tuning_spec({**section, "objective": {"metric": "val:acc", "type": "Maximize"}})
    got = [str(p) for p in tuning_problems(load_spec(TRAINING), wrong_metric)]
    for bad in (
        {**section, "ranges": {"lr": {"type": "continuous", "min_value": 0.1, "max_value": 0.01}}},
        {**section, "strategy": "Grid", "max_jobs": None, "ranges": {"lr": section["ranges"]["lr"]}},
    ):
        with pytest.raises(SpecValidationError) as err:
            load_tuning_spec(bad)
        got += [str(p) for p in err.value.problems]
    assert sorted(q.rstrip(";.") for q in quoted) == sorted(got)


def test_the_dag_builds_without_io_and_hands_the_best_job_to_evaluation_and_registry() -> None:
    namespace: dict[str, Any] = {}
    exec(compile(BLOCKS["python"], "docs/tuning.md", "exec"), namespace)
    dag = namespace["dag"]
    assert [t.task_id for t in dag.topological_sort()] == ["tune", "evaluate", "gate", "register"]
    tune, evaluate = dag.get_task("tune"), dag.get_task("evaluate")
    assert tune.spec == "specs/churn.yaml" and "hook" not in tune.__dict__
    key = re.search(r"xcom_pull\('tune'\)\['(\w+)'\]", evaluate.model_uri)
    assert key is not None and key.group(1) in TrainingResult.__annotations__


def test_the_local_dag_builds_without_io_and_runs_tuning_evaluation_and_registry_locally() -> None:
    assert len(LOCAL_DAG) == 1
    namespace: dict[str, Any] = {}
    exec(compile(LOCAL_DAG[0], "docs/tuning.md", "exec"), namespace)
    dag = namespace["dag"]
    assert [t.task_id for t in dag.topological_sort()] == ["tune", "evaluate", "gate", "register"]
    tune = dag.get_task("tune")
    assert tune.backend == "local" and "local_hook" not in tune.__dict__
    assert dag.get_task("evaluate").backend == "local"
    assert dag.get_task("register").registry == "local"
