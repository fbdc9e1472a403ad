"""The local backend's tuning job: how many training jobs run at once, and a bad tuning spec refused
before anything launches (nothing written, the field named)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from airflow_dist_training.errors import SpecValidationError
from airflow_dist_training.local.tuning import local_parallelism
from airflow_dist_training.operators.tuning import DistributedTuningOperator


@pytest.mark.parametrize(
    ("max_parallel", "processes", "cpus", "expected"),
    [
        (2, 1, 2, 2),  # fits: the spec's bound
        (4, 1, 2, 2),  # two 1-process jobs fill 2 cores
        (2, 2, 2, 1),  # one 2-process job fills them
        (2, 4, 2, 1),  # at least one job (the job itself decides about oversubscribing)
        (1, 1, 64, 1),  # never more than MaxParallelTrainingJobs
    ],
)
def test_parallelism_is_the_specs_bound_lowered_to_the_cores(
    max_parallel: int, processes: int, cpus: int, expected: int
) -> None:
    parallel, why = local_parallelism(max_parallel, processes, cpus)
    assert parallel == expected
    assert (f"lowered to {expected}: {cpus} cores here" in why) == (expected < max_parallel)


GOOD_TUNING = {
    "strategy": "Grid",
    "objective": {"metric": "validation:score", "type": "Maximize"},
    "ranges": {"lr": {"type": "categorical", "values": [0.1, 0.2]}},
}


def _operator(tmp_path: Path, tuning: dict[str, Any], **over: Any) -> DistributedTuningOperator:
    code = tmp_path / "code"
    code.mkdir()
    (code / "train.py").write_text("print('validation:score=1')\n")
    spec = {
        "name": "t",
        "image": {"framework": "pytorch", "framework_version": "2.8.0", "py_version": "py312"},
        "source": {"entry_point": "train.py", "source_dir": str(code)},
        "compute": {"instance_type": "ml.m5.xlarge", "instance_count": 1},
        "distribution": {"strategy": "none"},
        "metric_definitions": [{"name": "validation:score", "regex": "validation:score=([0-9.]+)"}],
        **over,
    }
    return DistributedTuningOperator(
        task_id="tune",
        spec=spec,
        tuning=tuning,
        backend="local",
        local_hook_kwargs={"root": str(tmp_path / "jobs"), "use_s3": False},
    )


def _context() -> Any:
    class TI:
        dag_id, task_id, run_id, map_index, try_number = "d", "tune", "r", -1, 1

    return {"ti": TI(), "run_id": "r"}


def test_a_bad_tuning_spec_is_refused_on_the_local_backend_before_anything_runs(tmp_path: Path) -> None:
    tuning = {
        "strategy": "Grid",
        "objective": {"metric": "val:acc", "type": "Maximize"},
        "ranges": {"lr": {"type": "categorical", "values": [0.1, 0.2]}},
    }
    op = _operator(tmp_path, tuning, distribution={"strategy": "launcher", "launcher": "torchrun"})
    with pytest.raises(SpecValidationError) as err:
        op.execute(_context())
    message = str(err.value)
    assert (
        "tuning.objective.metric: 'val:acc' is not one of the training spec's metric_definitions" in message
    )
    assert "distribution.strategy: 'launcher' starts the job through its own container entry point" in message
    assert not (tmp_path / "jobs").exists(), "nothing was written or launched"


def test_the_backend_is_checked_when_the_dag_is_built() -> None:
    with pytest.raises(
        SpecValidationError, match="backend: unknown backend 'kubernetes'; registered backends: "
    ):
        DistributedTuningOperator(task_id="t", spec={}, tuning={}, backend="kubernetes")


def test_a_backend_that_can_run_no_tuning_job_is_refused_before_anything_runs(tmp_path: Path) -> None:
    from airflow_dist_training.spec.backends import BackendRecord, forget_backend, register_backend

    class Elsewhere:  # runs jobs somewhere that is neither SageMaker nor the local executor
        def __init__(self, *, record: BackendRecord, **_: Any) -> None:
            self.record = record

    register_backend(
        BackendRecord(
            name="elsewhere",
            factory=Elsewhere,
            staging="directory",
            evaluation="process",
            default_registry="local",
            durable=False,
            on_aws=False,
        )
    )
    try:
        op = _operator(tmp_path, GOOD_TUNING)
        op.backend = "elsewhere"
        with pytest.raises(SpecValidationError, match="backend: 'elsewhere' cannot run tuning jobs"):
            op.execute(_context())
    finally:
        forget_backend("elsewhere")
    assert not (tmp_path / "jobs").exists()


def test_local_parallel_jobs_is_at_least_one() -> None:
    with pytest.raises(ValueError, match="local_parallel_jobs must be at least 1, got 0"):
        DistributedTuningOperator(task_id="t", spec={}, tuning={}, backend="local", local_parallel_jobs=0)
