"""Hyperparameter tuning on the local backend, end to end through ``DistributedTuningOperator``.

The same tuning spec as the test endpoint's test (``tests/integration/emulator/test_tuning_on_emulator.py``):
the training script prints an objective that depends on its ``--lr`` (best at 0.1), so the best
training job is known. Its training jobs really run (script mode, AWS's toolkit in the default
job environment), at most ``max_parallel_jobs`` at a time.
"""

from __future__ import annotations

import json
import tarfile
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from airflow_dist_training.errors import TrainingJobError
from airflow_dist_training.local.hosts import probe
from airflow_dist_training.local.tuning import LEDGER, LocalTuningJob
from airflow_dist_training.operators.tuning import DistributedTuningOperator
from airflow_dist_training.sagemaker.tuning import plan_tuning_job
from airflow_dist_training.sagemaker.tuning_jobs import training_job_name, tuning_configurations

from .conftest import job_processes

pytestmark = [
    pytest.mark.integration,
    pytest.mark.slow,
    pytest.mark.skipif(not probe().namespaces, reason=f"no Linux namespaces here: {probe().why}"),
]

# objective 1 - |lr - 0.1|: lr=0.1 wins; the toolkit passes the tuned value as --lr
TRAIN = """\
import argparse, json, os, time
parser = argparse.ArgumentParser()
parser.add_argument("--lr", type=float)
parser.add_argument("--sleep", type=float, default=0)
args, _ = parser.parse_known_args()
time.sleep(args.sleep)
score = round(1.0 - abs(args.lr - 0.1), 4)
print(f"validation:score={score:.4f}", flush=True)
with open(os.path.join(os.environ["SM_MODEL_DIR"], "score.json"), "w") as fh:
    json.dump({"lr": args.lr, "score": score}, fh)
"""
LEARNING_RATES = [0.5, 0.1, 0.01, 0.3]
GRID = {
    "strategy": "Grid",
    "objective": {"metric": "validation:score", "type": "Maximize"},
    "max_parallel_jobs": 2,
    "ranges": {"lr": {"type": "categorical", "values": LEARNING_RATES}},
}


class _TI:
    dag_id, run_id, map_index, try_number = "tune_local", "run-1", -1, 1

    def __init__(self, task_id: str) -> None:
        self.task_id = task_id
        self.xcom: dict[str, Any] = {}

    def xcom_push(self, key: str, value: Any) -> None:
        self.xcom[key] = value


def context(task_id: str = "tune", run_id: str = "run-1") -> Any:
    ti = _TI(task_id)
    ti.run_id = run_id
    return {"ti": ti, "run_id": run_id}


def spec(tmp_path: Path, *, sleep: float) -> dict[str, Any]:
    code = tmp_path / "code"
    code.mkdir(exist_ok=True)
    (code / "train.py").write_text(TRAIN)
    return {
        "name": "local-tune",
        "image": {"framework": "pytorch", "framework_version": "2.8.0", "py_version": "py312"},
        "source": {"entry_point": "train.py", "source_dir": str(code)},
        "compute": {"instance_type": "ml.m5.xlarge", "instance_count": 1},
        "distribution": {"strategy": "none"},
        "hyperparameters": {"sleep": sleep},
        "metric_definitions": [{"name": "validation:score", "regex": "validation:score=([0-9.]+)"}],
        "stopping": {"max_runtime_seconds": 300},
    }


def tuning_operator(
    tmp_path: Path, *, sleep: float, tuning: dict[str, Any] = GRID, **kwargs: Any
) -> DistributedTuningOperator:
    return DistributedTuningOperator(
        task_id="tune",
        spec=spec(tmp_path, sleep=sleep),
        tuning=tuning,
        backend="local",
        local_hook_kwargs={"root": str(tmp_path / "jobs"), "use_s3": False, "stop_grace_seconds": 5},
        **kwargs,
    )


def job_dirs(root: Path, tuning_job: str) -> list[str]:
    return sorted(p.name for p in root.iterdir() if p.name.startswith(f"{tuning_job}-"))


def test_four_training_jobs_two_at_a_time_report_the_best_and_a_retry_runs_none_again(
    tmp_path: Path, job_env_python: Path
) -> None:
    start = time.monotonic()
    result = tuning_operator(tmp_path, sleep=2).execute(context())
    elapsed = time.monotonic() - start

    tuning = result["tuning"]
    name = tuning["job_name"]
    assert tuning["status"] == "Completed" and tuning["strategy"] == "Grid"
    assert tuning["training_job_counts"] == {
        "Completed": 4,
        "InProgress": 0,
        "RetryableError": 0,
        "NonRetryableError": 0,
        "Stopped": 0,
    }
    # SageMaker's (and the test endpoint's) names, in launch order, with the grid's values as passed
    table = tuning["training_jobs"]
    assert [j["job_name"] for j in table] == [training_job_name(name, i) for i in range(1, 5)]
    assert [j["tuned_hyperparameters"] for j in table] == [
        {"lr": json.dumps(str(lr))} for lr in LEARNING_RATES
    ]
    assert [j["objective_value"] for j in table] == [0.6, 1.0, 0.91, 0.8]
    # the best job is the one with lr=0.1 (the script's optimum), handed on as a training result
    assert result["job_name"] == table[1]["job_name"]
    assert tuning["objective_metric"] == "validation:score" and tuning["objective_value"] == 1.0
    assert tuning["tuned_hyperparameters"] == {"lr": '"0.1"'}
    assert result["backend"] == "local" and result["status"] == "Completed"
    assert result["final_metrics"]["validation:score"] == 1.0
    artifact = Path(result["model_artifact_uri"].removeprefix("file://"))
    with tarfile.open(artifact) as tar:
        member = tar.extractfile("score.json")
        assert member is not None and json.load(member) == {"lr": 0.1, "score": 1.0}

    root = tmp_path / "jobs"
    ledger = json.loads((root / name / LEDGER).read_text())
    assert ledger["MaxRunning"] == 2, "MaxParallelTrainingJobs is 2: two jobs ran at once, never more"
    # each training job got the static hyperparameters, SageMaker's _tuning_objective_metric and its lr
    job = json.loads((root / result["job_name"] / "input" / "config" / "hyperparameters.json").read_text())
    assert job["lr"] == '"0.1"' and job["sleep"] == "2"
    assert job["_tuning_objective_metric"] == '"validation:score"'
    print(f"\nlocal tuning: 4 training jobs, max parallel {ledger['MaxRunning']}, {elapsed:.1f} s")

    # a retry of the task (a fresh operator) finds the Completed tuning job: no training job runs
    jobs_before = {d: (root / d / "status.json").stat().st_mtime for d in job_dirs(root, name)}
    start = time.monotonic()
    again = tuning_operator(tmp_path, sleep=2).execute(context())
    print(f"local tuning retry: {time.monotonic() - start:.2f} s")
    assert again == result
    assert {d: (root / d / "status.json").stat().st_mtime for d in job_dirs(root, name)} == jobs_before
    assert len(jobs_before) == 4


def test_a_retry_after_a_dead_try_runs_only_the_training_jobs_that_had_not_ended(
    tmp_path: Path, job_env_python: Path
) -> None:
    """The try's process died with job 3 running (its ledger says so): the retry skips jobs 1 and 2,
    runs job 3 again under its name and job 4, and creates no other training job."""
    op = tuning_operator(tmp_path, sleep=0)
    full = op.execute(context(run_id="run-dead"))
    name = full["tuning"]["job_name"]
    root = tmp_path / "jobs"
    ledger_path = root / name / LEDGER
    ledger = json.loads(ledger_path.read_text())
    # as the dead try left it: 1 and 2 ended, 3 recorded as running, 4 not started
    ledger["HyperParameterTuningJobStatus"] = "InProgress"
    ledger["TrainingJobs"][2] = {
        k: ledger["TrainingJobs"][2][k] for k in ("TrainingJobName", "TunedHyperParameters")
    }
    ledger["TrainingJobs"][2]["TrainingJobStatus"] = "InProgress"
    del ledger["TrainingJobs"][3]
    ledger_path.write_text(json.dumps(ledger))
    before = {d: (root / d / "status.json").stat().st_mtime for d in job_dirs(root, name)}

    result = tuning_operator(tmp_path, sleep=0).execute(context(run_id="run-dead"))
    assert (
        result["job_name"] == full["job_name"]
        and result["tuning"]["training_jobs"] == full["tuning"]["training_jobs"]
    )
    after = {d: (root / d / "status.json").stat().st_mtime for d in job_dirs(root, name)}
    assert sorted(after) == sorted(before) == sorted(training_job_name(name, i) for i in range(1, 5)), (
        "no other job"
    )
    ran_again = sorted(d for d in after if after[d] != before[d])
    assert ran_again == [training_job_name(name, 3), training_job_name(name, 4)], (
        "ended jobs are not run again"
    )


def test_the_local_backend_samples_what_the_test_endpoint_samples_for_a_seed(tmp_path: Path) -> None:
    """The same tuning spec and seed: the local tuning job's configurations are those of the request
    SageMaker (and the test endpoint) gets, from the one sampler both run."""
    from airflow_dist_training.emulator import tuning as emulator_tuning
    from airflow_dist_training.hooks.local_training import LocalTrainingHook
    from airflow_dist_training.spec.loading import load_spec
    from airflow_dist_training.spec.tuning import load_tuning_spec

    random_search = {
        "strategy": "Random",
        "random_seed": 7,
        "objective": {"metric": "validation:score", "type": "Maximize"},
        "max_jobs": 5,
        "max_parallel_jobs": 2,
        "ranges": {
            "lr": {
                "type": "continuous",
                "min_value": 0.0001,
                "max_value": 0.1,
                "scaling_type": "Logarithmic",
            },
            "layers": {"type": "integer", "min_value": 1, "max_value": 4},
            "optimizer": {"type": "categorical", "values": ["sgd", "adam"]},
        },
    }
    training = load_spec(
        {
            **spec(tmp_path, sleep=0),
            "role_arn": "arn:aws:iam::123456789012:role/r",
            "output": {"s3_path": "s3://tuning-bucket/models"},
        }
    )
    tuning = load_tuning_spec(random_search)
    hook = LocalTrainingHook(root=tmp_path / "jobs", use_s3=False)
    local_request, _, _ = LocalTuningJob(hook, training, tuning, "local-tune-abc123")._plan()
    sagemaker_request = plan_tuning_job(
        training, tuning, job_name="local-tune-abc123", region="us-east-1"
    ).request

    local = tuning_configurations(local_request)
    assert local == tuning_configurations(sagemaker_request)
    assert len(local) == 5 and all(set(c) == {"lr", "layers", "optimizer"} for c in local)
    assert emulator_tuning.tuning_configurations is tuning_configurations, "one sampler for both"


def test_killing_the_task_stops_the_running_training_jobs_and_a_retry_starts_the_next_generation(
    tmp_path: Path, job_env_python: Path
) -> None:
    op = tuning_operator(tmp_path, sleep=120)
    outcome: dict[str, Any] = {}

    def execute() -> None:
        try:
            outcome["result"] = op.execute(context(run_id="run-kill"))
        except Exception as exc:
            outcome["error"] = exc

    worker = threading.Thread(target=execute)
    worker.start()
    deadline = time.monotonic() + 120
    running: list[str] = []
    while time.monotonic() < deadline and len(running) < 2:
        local = op._local
        handles = list(local._handles) if local is not None else []
        running = [n for n in handles if job_processes(n)]
        time.sleep(0.3)
    assert len(running) == 2, "the tuning job's first two training jobs never started"
    op.on_kill()
    worker.join(60)
    assert not worker.is_alive()

    error = outcome.get("error")
    assert isinstance(error, TrainingJobError), outcome
    assert "ended Stopped (stopped on request)" in str(error)
    assert "'Stopped': 2" in str(error)
    assert all(not job_processes(n) for n in running), "no training process is left"
    name = str(error.job_name)
    ledger = json.loads((tmp_path / "jobs" / name / LEDGER).read_text())
    assert ledger["HyperParameterTuningJobStatus"] == "Stopped"
    assert [j["TrainingJobStatus"] for j in ledger["TrainingJobs"]] == ["Stopped", "Stopped"], (
        "none after the stop"
    )

    # as on SageMaker, the run's next try starts the next generation instead of reviving a stopped one
    retry = tuning_operator(tmp_path, sleep=0)
    result = retry.execute(context(run_id="run-kill"))
    assert result["tuning"]["job_name"] == retry._names(context(run_id="run-kill"), "local-tune")[1]
    assert result["tuning"]["job_name"] != name
    assert result["tuning"]["tuned_hyperparameters"] == {"lr": '"0.1"'}


# the objective after each of three epochs; a score below 0.9 sleeps between epochs (a slow, bad job)
EPOCHS = """\
import argparse, time
parser = argparse.ArgumentParser()
parser.add_argument("--lr", type=float)
parser.add_argument("--sleep", type=float, default=0)
args, _ = parser.parse_known_args()
score = round(1.0 - abs(args.lr - 0.1), 4)
for epoch in range(3):
    print(f"validation:score={score:.4f}", flush=True)
    time.sleep(args.sleep if score < 0.9 else 0)
"""


def test_early_stopping_auto_stops_a_job_worse_than_the_median_and_max_jobs_bounds_the_grid(
    tmp_path: Path, job_env_python: Path
) -> None:
    """Grid over three learning rates, ``max_jobs: 2``: only two training jobs run, one after the
    other (``local_parallel_jobs=1``). The second (lr 0.5, 0.6 after its first epoch) is worse than
    the first job's running average (1.0) at that epoch: it is stopped there, not after its three
    slow epochs."""
    tuning = {
        **GRID,
        "early_stopping": "Auto",
        "max_jobs": 2,
        "max_parallel_jobs": 2,
        "ranges": {"lr": {"type": "categorical", "values": [0.1, 0.5, 0.01]}},
    }
    op = tuning_operator(tmp_path, sleep=60, tuning=tuning, local_parallel_jobs=1)
    (tmp_path / "code" / "train.py").write_text(EPOCHS)
    start = time.monotonic()
    result = op.execute(context(run_id="run-early"))
    assert time.monotonic() - start < 60, "the slow job was stopped after its first epoch"
    ledger = json.loads((tmp_path / "jobs" / result["tuning"]["job_name"] / LEDGER).read_text())
    assert ledger["HyperParameterTuningJobConfig"]["ResourceLimits"]["MaxNumberOfTrainingJobs"] == 2
    assert ledger["MaxRunning"] == 1  # local_parallel_jobs, below the spec's max_parallel_jobs
    first, second = ledger["TrainingJobs"]  # max_jobs: the grid's third value never ran
    assert first["TrainingJobStatus"] == "Completed" and first["ObjectiveSeries"] == [1.0, 1.0, 1.0]
    assert second["TrainingJobStatus"] == "Stopped" and second.get("StoppedEarly") is True
    assert second["ObjectiveSeries"] == [0.6]
    assert result["tuning"]["status"] == "Completed" and result["job_name"] == first["TrainingJobName"]


def test_max_wait_seconds_stops_the_local_tuning_job_and_fails_the_task(
    tmp_path: Path, job_env_python: Path
) -> None:
    from airflow_dist_training.compat import AirflowException

    op = tuning_operator(tmp_path, sleep=120, max_wait_seconds=3)
    start = time.monotonic()
    with pytest.raises(AirflowException, match=r"still InProgress after 3s\. The tuning job was stopped\.") as err:
        op.execute(context(run_id="run-wait"))
    assert time.monotonic() - start < 60
    name = str(op._job_name)
    assert name in str(err.value)
    ledger = json.loads((tmp_path / "jobs" / name / LEDGER).read_text())
    assert ledger["HyperParameterTuningJobStatus"] == "Stopped" and ledger["StopRequested"] is True
    assert {j["TrainingJobStatus"] for j in ledger["TrainingJobs"]} == {"Stopped"}
    for job in ledger["TrainingJobs"]:
        assert not job_processes(job["TrainingJobName"]), "no training process is left behind"


def test_max_runtime_stops_the_running_training_job_and_starts_no_more(
    tmp_path: Path, job_env_python: Path
) -> None:
    """``max_runtime_seconds: 120`` (the API's least) counts from the tuning job's creation, which a
    retry keeps: here a tuning job created 114 s ago by an earlier try that started nothing."""
    import datetime as dt

    tuning = {**GRID, "max_runtime_seconds": 120, "max_parallel_jobs": 1}
    op = tuning_operator(tmp_path, sleep=60, tuning=tuning)
    spec_obj, section = op._load()
    earlier = LocalTuningJob(op.executor_hook, spec_obj, section, "local-tune-runtime")
    request, _, _ = earlier._plan()
    earlier._start_ledger(request)
    assert earlier.ledger is not None
    created = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=114)
    earlier.ledger["CreationTime"] = created.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    earlier._write()

    start = time.monotonic()
    desc = LocalTuningJob(op.executor_hook, spec_obj, section, "local-tune-runtime").run()
    assert time.monotonic() - start < 50, "the running training job was stopped at the limit"
    [job] = desc["TrainingJobSummaries"]  # the grid's other three never started
    assert job["TrainingJobStatus"] == "Stopped"
    assert desc["RuntimeLimitReached"] is True and desc["HyperParameterTuningJobStatus"] == "Failed"
    assert "No training job reported the objective metric" in desc["FailureReason"]
