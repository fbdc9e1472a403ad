"""Hyperparameter tuning jobs on the test endpoint, end to end through ``DistributedTuningOperator``.

The training script prints an objective that depends on its ``--lr`` (best at 0.1), so the best
training job is known in advance. Its training jobs really run (script mode, the toolkit in the
job environment), at most ``max_parallel_jobs`` at a time.
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from airflow_dist_training.errors import TrainingJobError
from airflow_dist_training.operators.tuning import DistributedTuningOperator
from tests.paths import REPO

from .conftest import BUCKET, script_job_spec
from .test_training_on_emulator import run_task

sys.path.insert(0, str(REPO / "tests" / "integration" / "training"))
from fake_sagemaker_training import make_context

pytestmark = [pytest.mark.integration, pytest.mark.slow]

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


def tuning_operator(tmp_path: Path, *, sleep: float, **kwargs: Any) -> DistributedTuningOperator:
    spec = script_job_spec(
        tmp_path,
        "emu-tune",
        TRAIN,
        distribution={"strategy": "none"},
        hyperparameters={"sleep": sleep},
        metric_definitions=[{"name": "validation:score", "regex": "validation:score=([0-9.]+)"}],
    )
    tuning = {
        "strategy": "Grid",
        "objective": {"metric": "validation:score", "type": "Maximize"},
        "max_parallel_jobs": 2,
        "ranges": {"lr": {"type": "categorical", "values": LEARNING_RATES}},
    }
    op = DistributedTuningOperator(
        task_id="tune",
        spec=spec,
        tuning=tuning,
        aws_conn_id=None,
        region_name="us-east-1",
        poll_interval=0.5,
        **kwargs,
    )
    op.hook.throttle_base_delay = 0.05
    return op


def test_a_tuning_job_of_four_training_jobs_runs_two_at_a_time_and_reports_the_best(
    sagemaker_endpoint: Any, tmp_path: Path
) -> None:
    sagemaker_endpoint.client("s3").create_bucket(Bucket=BUCKET)
    op = tuning_operator(tmp_path, sleep=2, deferrable=True)
    ctx = make_context("run-tune")
    start = time.monotonic()
    result = run_task(op, ctx)
    elapsed = time.monotonic() - start

    sm = sagemaker_endpoint.client("sagemaker")
    tuning = result["tuning"]
    desc = sm.describe_hyper_parameter_tuning_job(HyperParameterTuningJobName=tuning["job_name"])
    assert desc["HyperParameterTuningJobStatus"] == "Completed"
    assert desc["TrainingJobStatusCounters"] == {
        "Completed": 4,
        "InProgress": 0,
        "RetryableError": 0,
        "NonRetryableError": 0,
        "Stopped": 0,
    }
    assert desc["ObjectiveStatusCounters"] == {"Succeeded": 4, "Pending": 0, "Failed": 0}
    # the best job is the one with lr=0.1 (the script's optimum), and the operator hands it on
    jobs = sm.list_training_jobs_for_hyper_parameter_tuning_job(
        HyperParameterTuningJobName=tuning["job_name"],
        SortBy="FinalObjectiveMetricValue",
        SortOrder="Descending",
    )["TrainingJobSummaries"]
    assert [j["TunedHyperParameters"]["lr"] for j in jobs] == ['"0.1"', '"0.01"', '"0.3"', '"0.5"']
    assert [j["FinalHyperParameterTuningJobObjectiveMetric"]["Value"] for j in jobs] == [1.0, 0.91, 0.8, 0.6]
    best = desc["BestTrainingJob"]
    assert best["TrainingJobName"] == jobs[0]["TrainingJobName"] == result["job_name"]
    assert tuning["objective_value"] == 1.0 and tuning["tuned_hyperparameters"] == {"lr": '"0.1"'}
    # every training job in launch order, as the local backend lists them (tests/integration/local/test_tuning_local.py)
    assert [
        (j["tuned_hyperparameters"], j["objective_value"], j["status"]) for j in tuning["training_jobs"]
    ] == [
        ({"lr": '"0.5"'}, 0.6, "Completed"),
        ({"lr": '"0.1"'}, 1.0, "Completed"),
        ({"lr": '"0.01"'}, 0.91, "Completed"),
        ({"lr": '"0.3"'}, 0.8, "Completed"),
    ]
    assert result["model_artifact_uri"] == f"s3://{BUCKET}/models/{result['job_name']}/output/model.tar.gz"
    assert result["final_metrics"]["validation:score"] == 1.0
    bucket, key = result["model_artifact_uri"][5:].split("/", 1)
    sagemaker_endpoint.client("s3").head_object(Bucket=bucket, Key=key)
    # each training job: SageMaker's naming, the tuning job's ARN, static + tuned hyperparameters
    training = sm.describe_training_job(TrainingJobName=result["job_name"])
    assert result["job_name"].startswith(f"{tuning['job_name']}-00")
    assert training["TuningJobArn"] == desc["HyperParameterTuningJobArn"]
    assert training["HyperParameters"]["lr"] == '"0.1"' and training["HyperParameters"]["sleep"] == "2"
    assert (
        training["HyperParameters"]["_tuning_objective_metric"] == '"validation:score"'
    )  # as SageMaker adds it
    static = desc["TrainingJobDefinition"]["StaticHyperParameters"]
    assert static["_tuning_objective_metric"] == '"validation:score"' and "lr" not in static

    state = sagemaker_endpoint.state()
    run = state["tuning_jobs"][tuning["job_name"]]
    assert len(run["training_jobs"]) == 4
    assert run["max_running"] == 2, "MaxParallelTrainingJobs is 2: two jobs ran at once, never more"
    assert state["sagemaker_calls"]["CreateHyperParameterTuningJob"] == 1
    print(
        f"\ntuning e2e: 4 training jobs, max parallel {run['max_running']}, {elapsed:.1f} s, "
        f"SageMaker calls {state['sagemaker_calls']}"
    )

    # a retry of the task reattaches to the completed tuning job: no second one
    (tmp_path / "retry").mkdir()
    again = run_task(tuning_operator(tmp_path / "retry", sleep=2, deferrable=True), ctx)
    assert again["job_name"] == result["job_name"]
    assert sagemaker_endpoint.state()["sagemaker_calls"]["CreateHyperParameterTuningJob"] == 1


def test_killing_the_task_mid_tuning_stops_the_tuning_job_and_its_training_jobs(
    sagemaker_endpoint: Any, tmp_path: Path
) -> None:
    sagemaker_endpoint.client("s3").create_bucket(Bucket=BUCKET)
    op = tuning_operator(tmp_path, sleep=120, deferrable=False)
    outcome: dict[str, Any] = {}

    def execute() -> None:
        try:
            outcome["result"] = op.execute(make_context("run-kill"))
        except Exception as exc:
            outcome["error"] = exc

    worker = threading.Thread(target=execute)
    worker.start()
    sm = sagemaker_endpoint.client("sagemaker")
    deadline = time.monotonic() + 120
    training: list[str] = []
    while time.monotonic() < deadline:  # until both first training jobs run their script
        running = sm.list_training_jobs(StatusEquals="InProgress")["TrainingJobSummaries"]
        training = [
            j["TrainingJobName"]
            for j in running
            if sm.describe_training_job(TrainingJobName=j["TrainingJobName"])["SecondaryStatus"] == "Training"
        ]
        if len(training) == 2:
            break
        time.sleep(0.5)
    assert len(training) == 2, "the tuning job's first two training jobs never started training"
    op.on_kill()
    worker.join(120)
    assert not worker.is_alive()

    error = outcome.get("error")
    assert isinstance(error, TrainingJobError), outcome
    assert "ended Stopped (stopped on request)" in str(error)
    name = error.job_name
    desc = sm.describe_hyper_parameter_tuning_job(HyperParameterTuningJobName=name)
    assert desc["HyperParameterTuningJobStatus"] == "Stopped"
    assert desc["TrainingJobStatusCounters"]["Stopped"] == 2
    jobs = sm.list_training_jobs_for_hyper_parameter_tuning_job(HyperParameterTuningJobName=name)[
        "TrainingJobSummaries"
    ]
    assert sorted(j["TrainingJobName"] for j in jobs) == sorted(training), "no training job after the stop"
    assert [j["TrainingJobStatus"] for j in jobs] == ["Stopped", "Stopped"]
    assert sagemaker_endpoint.state()["training_jobs"] == {j["TrainingJobName"]: "Stopped" for j in jobs}


def test_killing_the_deferred_task_stops_the_tuning_job_from_the_trigger(
    sagemaker_endpoint: Any, tmp_path: Path
) -> None:
    import asyncio

    from airflow_dist_training.compat import TaskDeferred
    from airflow_dist_training.triggers.tuning import TuningJobTrigger

    sagemaker_endpoint.client("s3").create_bucket(Bucket=BUCKET)
    op = tuning_operator(tmp_path, sleep=120, deferrable=True)
    (tmp_path / "retry").mkdir()
    with pytest.raises(TaskDeferred) as deferred:
        op.execute(make_context("run-deferred-kill"))
    trigger = deferred.value.trigger
    assert isinstance(trigger, TuningJobTrigger)
    name = trigger.job_name
    # a retried try (another worker) reattaches to the running tuning job: no second one
    with pytest.raises(TaskDeferred) as again:
        tuning_operator(tmp_path / "retry", sleep=120, deferrable=True).execute(
            make_context("run-deferred-kill")
        )
    assert again.value.trigger.job_name == name
    assert sagemaker_endpoint.state()["sagemaker_calls"]["CreateHyperParameterTuningJob"] == 1
    sm = sagemaker_endpoint.client("sagemaker")
    deadline = time.monotonic() + 60
    while (
        sm.describe_hyper_parameter_tuning_job(HyperParameterTuningJobName=name)["TrainingJobStatusCounters"][
            "InProgress"
        ]
        < 2
        and time.monotonic() < deadline
    ):
        time.sleep(0.3)
    asyncio.run(trigger.on_kill())  # what the triggerer runs when the user kills the deferred task
    while time.monotonic() < deadline:
        desc = sm.describe_hyper_parameter_tuning_job(HyperParameterTuningJobName=name)
        if desc["HyperParameterTuningJobStatus"] == "Stopped":
            break
        time.sleep(0.3)
    assert desc["HyperParameterTuningJobStatus"] == "Stopped"
    assert desc["TrainingJobStatusCounters"]["Stopped"] == 2
    assert desc["TrainingJobStatusCounters"]["InProgress"] == 0


@pytest.mark.xdist_group("sagemaker-emulator")  # a dag.test() run, as test_dags_on_emulator.py
def test_the_shipped_tuning_pipeline_on_sagemaker_registers_the_best_training_job(
    aws_default_on_endpoint: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, airflow_db: Path
) -> None:
    """``dags/pipelines/tuning_local.yaml`` with ``backend: sagemaker``, a real ``dag.test()`` run: the
    tuning task defers (its trigger serialised, run and resumed by Airflow), and the best training
    job of the endpoint's tuning job is the one evaluated (a processing job), gated and registered.
    ``aws_default`` points at the endpoint (its ``endpoint_url`` extra), as a user sets it up."""
    import yaml

    from airflow_dist_training.compat import DagBag
    from tests.datasets import make_dataset

    from .conftest import fast_polling, serve_dags_folder

    endpoint = aws_default_on_endpoint
    s3 = endpoint.client("s3")
    s3.create_bucket(Bucket="adt-demo-bucket")  # the shipped file's bucket
    data = make_dataset(tmp_path / "data", train=1000, test=400)
    s3.upload_file(str(data / "train" / "data.csv"), "adt-demo-bucket", "tuning/train/data.csv")
    pipeline = yaml.safe_load((REPO / "dags" / "pipelines" / "tuning_local.yaml").read_text())
    training = pipeline["training"]
    training["source"]["source_dir"] = str(REPO / "examples")
    training["source"]["dependencies"] = [str(REPO / "airflow_dist_training" / "checkpointing.py")]
    for local in ("checkpoint", "output"):
        training[local].pop("local_uri")
    training["channels"]["train"].pop("local_source")
    pipeline.update(
        {
            "dag_id": "tuning_on_sagemaker",
            "retries": 0,
            "backend": "sagemaker",
            "evaluation": {
                "script": str(REPO / "examples" / "evaluate.py"),
                "channel_source": str(data / "test"),
                "dependencies": [str(REPO / "airflow_dist_training" / "checkpointing.py")],
            },
            "registry": {"model_package_group": "tuned-mlp", "auto_approve": True},
        }
    )
    dags = tmp_path / "dags"
    dags.mkdir()
    (dags / "tuning_on_sagemaker.yaml").write_text(yaml.safe_dump(pipeline))
    (dags / "tuning_on_sagemaker.py").write_text(
        "from airflow_dist_training.dag_factory import dag_from_yaml\n\ndag = dag_from_yaml(__file__)\n"
    )
    serve_dags_folder(dags, monkeypatch)
    bag = DagBag(dag_folder=str(dags), safe_mode=False)
    assert bag.import_errors == {}
    run = fast_polling(bag.dags["tuning_on_sagemaker"]).test()
    states = {ti.task_id: str(ti.state) for ti in run.get_task_instances()}
    assert str(run.state) == "success", states
    assert states["stage_train_evaluate.register"] == "success", states

    sm = endpoint.client("sagemaker")
    calls = endpoint.state()["sagemaker_calls"]
    assert calls["CreateHyperParameterTuningJob"] == 1
    # the deferred wait polled through the triggerer's shared poller of tuning jobs (a listing per poll)
    assert calls["ListHyperParameterTuningJobs"] >= 1
    train = next(ti for ti in run.get_task_instances() if ti.task_id == "stage_train_evaluate.train")
    result = train.xcom_pull(task_ids=train.task_id)
    # the request sent: the shipped tuning section, as CreateHyperParameterTuningJob carried it
    tuning_job = sm.describe_hyper_parameter_tuning_job(HyperParameterTuningJobName=result["tuning"]["job_name"])
    config = tuning_job["HyperParameterTuningJobConfig"]
    assert config["Strategy"] == "Grid"
    assert config["HyperParameterTuningJobObjective"] == {"MetricName": "train:accuracy", "Type": "Maximize"}
    assert config["ParameterRanges"]["CategoricalParameterRanges"] == [{"Name": "lr", "Values": ['"0.001"', '"0.1"']}]
    assert config["ResourceLimits"]["MaxRuntimeInSeconds"] == 3600
    # the best job chosen: the endpoint's BestTrainingJob, the highest train:accuracy of the two
    summaries = sm.list_training_jobs_for_hyper_parameter_tuning_job(
        HyperParameterTuningJobName=tuning_job["HyperParameterTuningJobName"]
    )["TrainingJobSummaries"]
    values = {s["TrainingJobName"]: s["FinalHyperParameterTuningJobObjectiveMetric"]["Value"] for s in summaries}
    assert len(values) == 2
    best = max(values, key=lambda name: values[name])
    assert tuning_job["BestTrainingJob"]["TrainingJobName"] == best == result["job_name"]
    assert result["model_artifact_uri"].endswith(f"/{best}/output/model.tar.gz")
    # the registered model is the best training job's
    [package] = sm.list_model_packages(ModelPackageGroupName="tuned-mlp")["ModelPackageSummaryList"]
    detail = sm.describe_model_package(ModelPackageName=package["ModelPackageArn"])
    assert detail["CustomerMetadataProperties"]["TrainingJobName"] == best
    assert detail["InferenceSpecification"]["Containers"][0]["ModelDataUrl"] == result["model_artifact_uri"]

    # the Training view's JSON for the run (ui/app.run_view: the run's XComs, then each training
    # job's DescribeTrainingJob and CloudWatch metrics through aws_default): one chart per metric
    # with every training job's curve, the best one marked
    from airflow.utils.session import create_session

    from airflow_dist_training.ui.app import run_view

    with create_session() as session:
        view = run_view(session, run.dag_id, run.run_id)
    (block,) = view["members"]
    assert block["tuning_job"] == tuning_job["HyperParameterTuningJobName"] and block["winner"] == best
    assert block["objective"] == "train:accuracy"
    launched = [j["job_name"] for j in result["tuning"]["training_jobs"]]  # in launch order
    assert sorted(launched) == sorted(values)
    assert [(m["member"], m["winner"], m["error"]) for m in block["members"]] == [
        (n, n == best, None) for n in launched
    ]
    for metric in ("train:accuracy", "train:loss"):
        curves = block["metrics"][metric]
        assert [(c["member"], c["winner"]) for c in curves] == [(n, n == best) for n in launched], metric
        assert all(c["points"] for c in curves), curves


def test_a_wait_past_max_wait_seconds_stops_the_tuning_job_and_fails(
    sagemaker_endpoint: Any, tmp_path: Path
) -> None:
    from airflow_dist_training.compat import AirflowException

    sagemaker_endpoint.client("s3").create_bucket(Bucket=BUCKET)
    op = tuning_operator(tmp_path, sleep=120, deferrable=False, max_wait_seconds=3)
    with pytest.raises(
        AirflowException, match=r"still InProgress after 3s\. The tuning job was stopped\."
    ) as err:
        op.execute(make_context("run-timeout"))
    name = str(op._job_name)
    assert name in str(err.value)
    sm = sagemaker_endpoint.client("sagemaker")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        status = sm.describe_hyper_parameter_tuning_job(HyperParameterTuningJobName=name)[
            "HyperParameterTuningJobStatus"
        ]
        if status == "Stopped":
            break
        time.sleep(0.3)
    assert status == "Stopped"


def test_an_objective_outside_the_metric_definitions_is_refused_as_sagemaker_does(
    sagemaker_endpoint: Any, tmp_path: Path
) -> None:
    from botocore.exceptions import ClientError

    from airflow_dist_training.sagemaker.tuning import plan_tuning_job

    op = tuning_operator(tmp_path, sleep=0)
    spec, tuning = op._load()
    request = plan_tuning_job(spec, tuning, job_name="emu-bad-objective", region="us-east-1").request
    request["HyperParameterTuningJobConfig"]["HyperParameterTuningJobObjective"]["MetricName"] = "val:acc"
    with pytest.raises(
        ClientError, match="A metric is required for this hyperparameter tuning job objective"
    ):
        sagemaker_endpoint.client("sagemaker").create_hyper_parameter_tuning_job(**request)
    # (our planner refuses such a spec before any call: tests/unit/tuning); nothing was recorded
    assert sagemaker_endpoint.state()["tuning_jobs"] == {}


def test_a_tuning_job_whose_training_jobs_all_fail_fails_the_task_with_their_reason(
    sagemaker_endpoint: Any, tmp_path: Path
) -> None:
    sagemaker_endpoint.client("s3").create_bucket(Bucket=BUCKET)
    op = tuning_operator(tmp_path, sleep=0, deferrable=True)
    assert isinstance(op.spec, dict)
    (tmp_path / "code" / "train.py").write_text("raise ValueError('no data for this lr')\n")
    op.tuning = {**op.tuning, "ranges": {"lr": {"type": "categorical", "values": [0.1, 0.2]}}}  # type: ignore[dict-item]
    with pytest.raises(TrainingJobError) as err:
        run_task(op, make_context("run-all-fail"))
    message = str(err.value)
    assert f"Hyperparameter tuning job {err.value.job_name} ended Failed" in message
    assert "No training job reported the objective metric 'validation:score' (2 training jobs)" in message
    assert "no data for this lr" in message, "the first training job's own failure reason is shown"
    assert "'NonRetryableError': 2" in message
