"""The ``tuning`` step of a YAML pipeline and of ``stage_train_evaluate``: what it builds, and what it
refuses (each problem naming its field, before any run)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from airflow_dist_training.errors import SpecValidationError
from airflow_dist_training.pipeline_checks import check_pipeline_file
from tests.paths import REPO

SHIPPED = REPO / "dags" / "pipelines" / "tuning_local.yaml"


def _pipeline(tmp_path: Path, **changes: object) -> Path:
    data = yaml.safe_load(SHIPPED.read_text().replace("../../", f"{REPO}/"))
    data.update(changes)
    path = tmp_path / "tuned.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _refusal(path: Path) -> str:
    with pytest.raises(SpecValidationError) as info:
        check_pipeline_file(path)
    return info.value.render()


def test_the_shipped_pipeline_trains_with_a_tuning_task_whose_result_feeds_the_later_steps() -> None:
    from airflow_dist_training.dag_factory import dag_from_yaml
    from airflow_dist_training.operators.tuning import DistributedTuningOperator

    dag = dag_from_yaml(str(SHIPPED.with_suffix(".py")))
    train = dag.get_task("stage_train_evaluate.train")
    assert isinstance(train, DistributedTuningOperator)
    assert train.backend == "local"
    assert train.tuning["strategy"] == "Grid" and train.tuning["objective"]["metric"] == "train:accuracy"
    assert {t.task_id for t in train.upstream_list} == {
        "stage_train_evaluate.plan",  # its spec is the plan task's (the run's overrides applied)
        "stage_train_evaluate.check_changes",  # skipped with training when nothing changed
    }
    assert {"stage_train_evaluate.evaluate", "stage_train_evaluate.checkpoint_retention"} <= set(
        train.downstream_task_ids
    )
    register = dag.get_task("stage_train_evaluate.register")
    assert "stage_train_evaluate.train" in register.upstream_task_ids  # registers the best job's result


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        (
            {"checkpoints": {"freshness": {"max_age_seconds": 600}}},
            "checkpoints.freshness: cannot be combined with tuning: the stall watch follows one training job",
        ),
        ({"warm_start": "champion"}, "warm_start: cannot be combined with tuning"),
        (
            {
                "tuning": {
                    "objective": {"metric": "val:acc", "type": "Maximize"},
                    "strategy": "Grid",
                    "ranges": {"lr": {"type": "categorical", "values": [0.1]}},
                }
            },
            "tuning.objective.metric: 'val:acc' is not one of the training spec's metric_definitions",
        ),
    ],
)
def test_what_a_tuning_step_cannot_do_is_refused_naming_the_field(
    tmp_path: Path, changes: dict[str, object], expected: str
) -> None:
    assert expected in _refusal(_pipeline(tmp_path, **changes))


def test_tuning_and_a_sweep_are_refused_together(tmp_path: Path) -> None:
    sweep = {
        "strategy": "grid",
        "ranges": {"lr": [0.1, 0.2]},
        "objective": {"metric": "accuracy", "type": "Maximize"},
    }
    assert "give tuning (one model, its hyperparameters searched) or for_each/sweep, not both" in _refusal(
        _pipeline(tmp_path, sweep=sweep)
    )


def test_a_python_group_with_tuning_refuses_members_before_the_dag_exists() -> None:
    from airflow_dist_training.compat import DAG
    from airflow_dist_training.task_groups import stage_train_evaluate

    data = yaml.safe_load(SHIPPED.read_text().replace("../../", f"{REPO}/"))
    with DAG("tuned_members", schedule=None), pytest.raises(SpecValidationError) as info:
        stage_train_evaluate(
            spec=data["training"],
            tuning=data["tuning"],
            members=[{"name": "a"}, {"name": "b"}],
            base_dir=REPO,
        )
    assert "for_each: cannot be combined with tuning" in info.value.render()
