"""Evaluation kinds (``spec/evaluations.py``) and staging kinds (``spec/pipeline.py``) are records.

A kind registered in a test, with a backend naming it, is what the operators and the task group
use: nothing in the package is edited. And no module decides by a kind's name.
"""

from __future__ import annotations

import ast
import dataclasses
import datetime as dt
from collections.abc import Iterator
from typing import Any, Literal

import pytest
from airflow.sdk import DAG

from airflow_dist_training.errors import SpecValidationError
from airflow_dist_training.evaluation.schema import parse_evaluation
from airflow_dist_training.operators.evaluation import Evaluated, EvaluationOperator
from airflow_dist_training.spec.backends import BackendRecord, forget_backend, register_backend
from airflow_dist_training.spec.evaluations import EvaluationRecord, forget_evaluation, register_evaluation
from airflow_dist_training.spec.pipeline import (
    StagingRecord,
    StagingStepModel,
    forget_staging,
    register_staging,
)
from tests.paths import REPO

PACKAGE = REPO / "airflow_dist_training"
CALLS: list[tuple[str, Any]] = []


class ToyRunner:
    """An evaluation kind defined only here: it 'evaluates' by reading the model URI."""

    def __init__(self, task: EvaluationOperator) -> None:
        self.task = task

    def evaluate(self, context: Any) -> Evaluated:
        CALLS.append(("evaluate", self.task.model_uri))
        result = parse_evaluation({"metrics": {"accuracy": 0.75}}, source="toy")
        return Evaluated(result, f"toy://{self.task.model_uri}/evaluation.json", {"job_name": "toy-1"})

    def resume(self, event: dict[str, Any], evaluation_uri: str) -> Evaluated:
        CALLS.append(("resume", event))
        return Evaluated(parse_evaluation({"metrics": {"accuracy": 0.5}}, source="toy"), evaluation_uri, {})

    def on_kill(self) -> None:
        CALLS.append(("on_kill", None))


@pytest.fixture
def toy_kinds() -> Iterator[None]:
    register_evaluation(EvaluationRecord(name="toy_eval", factory=ToyRunner, on_aws=False))
    register_backend(
        BackendRecord(
            name="toy_kinds",
            factory="airflow_dist_training.hooks.backends:LocalBackend",
            staging="directory",
            evaluation="toy_eval",
            default_registry="local",
            durable=False,
            on_aws=False,
        )
    )
    CALLS.clear()
    yield
    forget_backend("toy_kinds")
    forget_evaluation("toy_eval")


def test_an_evaluation_kind_registered_in_a_test_runs_the_evaluation_task(toy_kinds: None) -> None:
    op = EvaluationOperator(task_id="evaluate", script="evaluate.py", model_uri="m1", backend="toy_kinds")
    out = op.execute({"ti": None})  # type: ignore[arg-type]
    assert out["metrics"] == {"accuracy": 0.75}
    assert (out["evaluation_uri"], out["job_name"], out["backend"]) == ("toy://m1/evaluation.json", "toy-1", "toy_kinds")
    op.on_kill()
    resumed = op.execute_complete({}, event={"status": "success"}, evaluation_uri="toy://x/evaluation.json")  # type: ignore[arg-type]
    assert resumed["metrics"] == {"accuracy": 0.5}
    assert CALLS == [("evaluate", "m1"), ("on_kill", None), ("resume", {"status": "success"})]


def test_an_evaluation_kind_not_on_aws_needs_no_image_role_or_output(toy_kinds: None) -> None:
    from airflow_dist_training.spec.pipeline import EvaluationStep
    from airflow_dist_training.task_groups import stage_train_evaluate
    from tests.unit.sagemaker.specs import example

    with DAG(dag_id="toy", schedule=None, start_date=dt.datetime(2026, 1, 1)) as dag:
        stage_train_evaluate(
            spec=example("local_demo"),
            backend="toy_kinds",
            base_dir="/tmp",
            evaluation=EvaluationStep(script="examples/evaluate.py"),
        )
    evaluate = dag.get_task("stage_train_evaluate.evaluate")
    assert isinstance(evaluate, EvaluationOperator)
    assert (evaluate.backend, evaluate.image_uri, evaluate.role_arn, evaluate.output_uri) == ("toy_kinds", None, None, None)


def test_an_unknown_evaluation_kind_names_the_registered_ones(toy_kinds: None) -> None:
    register_backend(
        BackendRecord(
            name="toy_kinds",
            factory="airflow_dist_training.hooks.backends:LocalBackend",
            staging="directory",
            evaluation="nowhere",
            default_registry="local",
            durable=False,
            on_aws=False,
        )
    )
    with pytest.raises(SpecValidationError, match="unknown evaluation kind 'nowhere'; registered kinds: process, processing_job"):
        EvaluationOperator(task_id="evaluate", script="evaluate.py", model_uri="m1", backend="toy_kinds")


class ToyStaging(StagingStepModel):
    """A staging kind defined only here: its own step field, and a task of its own."""

    kind: Literal["toy_copy"] = "toy_copy"
    copies: int = 1


def toy_staging_task(g: Any, step: ToyStaging, data_asset: Any) -> Any:
    from airflow.providers.standard.operators.empty import EmptyOperator

    return EmptyOperator(task_id=f"stage_{step.copies}_copies")


@pytest.fixture
def toy_staging(toy_kinds: None) -> Iterator[None]:
    from airflow_dist_training.spec.backends import backend_record

    register_staging(StagingRecord(name="toy_copy", step=ToyStaging, factory=toy_staging_task, returns_channel=True))
    register_backend(dataclasses.replace(backend_record("toy_kinds"), staging="toy_copy"))
    yield
    forget_staging("toy_copy")


def test_a_staging_kind_registered_in_a_test_is_a_pipeline_step_and_stages_the_channel(toy_staging: None) -> None:
    from airflow_dist_training.dag_factory import build_dag
    from airflow_dist_training.operators.training import DistributedTrainingOperator
    from airflow_dist_training.spec.loading import validate_model
    from airflow_dist_training.spec.pipeline import PipelineSpec, resolve_training_reference

    data = {"dag_id": "toy", "backend": "toy_kinds", "training": (REPO / "examples/specs/local_demo.yaml").as_posix()}
    data = resolve_training_reference({**data, "staging": {"source": "/data", "copies": 3}}, REPO)
    pipeline = validate_model(PipelineSpec, data, source="p.yaml", pipeline=True)
    assert pipeline.staging == ToyStaging(source="/data", copies=3)  # the backend's kind, its own field

    dag = build_dag(pipeline, base_dir=REPO)
    [stage] = [t for t in dag.tasks if t.task_id.endswith(".stage_3_copies")]  # the toy's own task
    train = next(t for t in dag.tasks if isinstance(t, DistributedTrainingOperator))
    assert dag.get_task(stage.task_id.replace("stage_3_copies", "plan")).task_id in stage.upstream_task_ids
    assert stage.task_id in train.upstream_task_ids
    assert train.channels is not None and train.channels["train"].operator is stage  # the channel it returns

    bad = {**data, "staging": {"source": "/data", "copies": "many"}}
    with pytest.raises(SpecValidationError, match=r"staging\.copies"):
        validate_model(PipelineSpec, bad, source="p.yaml", pipeline=True)


def kind_name_comparisons(source: str) -> list[tuple[int, str]]:
    """``x.evaluation == "..."`` or ``x.staging != "..."``: a decision by a kind's name."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            by_kind = any(isinstance(o, ast.Attribute) and o.attr in ("evaluation", "staging") for o in operands)
            if by_kind and any(isinstance(o, ast.Constant) and isinstance(o.value, str) for o in operands):
                found.append((node.lineno, ast.unparse(node)))
    return found


def test_no_module_decides_by_an_evaluation_or_staging_kind_name() -> None:
    offenders = [
        f"{path.relative_to(REPO)}:{line}: {text}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for line, text in kind_name_comparisons(path.read_text())
    ]
    assert not offenders, "read the kind's record instead:\n" + "\n".join(offenders)
    assert kind_name_comparisons("a = record.evaluation == 'processing_job'")
