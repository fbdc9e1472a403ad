"""MLflow on the SageMaker test endpoint: a job whose request has ``MlflowConfig`` logs to the
tracking server, and the shipped DAG's three-run scenario on the SageMaker backend.

The spec's ``mlflow:`` block becomes the request's ``MlflowConfig``; the endpoint, standing a real
``mlflow server`` in for the managed resource, creates the job's run and gives the job
``MLFLOW_TRACKING_URI`` and the run settings. The job's image is a Python with ``mlflow`` (the MLflow
server's environment): the script only calls ``mlflow.log_param`` and ``mlflow.log_metric``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from airflow_dist_training.emulator.pytest_plugin import EmulatorProcess
from airflow_dist_training.operators.training import DistributedTrainingOperator
from airflow_dist_training.sagemaker.request import plan_training_job
from airflow_dist_training.spec.loading import load_spec
from tests.mlflow_server import ENV_DIR, mlflow_client_query, running_mlflow_server
from tests.paths import REPO

sys.path.insert(0, str(REPO / "tests" / "integration" / "training"))
from fake_sagemaker_training import make_context

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("mlflow")]
BUCKET = "adt-mlflow-endpoint"
ARN = "arn:aws:sagemaker:us-east-1:123456789012:mlflow-tracking-server/team"
SCRIPT = """\
import os, mlflow
mlflow.log_param("tracking_uri", os.environ["MLFLOW_TRACKING_URI"])
for step in range(3):
    mlflow.log_metric("loss", 1.0 / (step + 1), step=step)
os.makedirs("/opt/ml/model" if os.path.isdir("/opt/ml") else "model", exist_ok=True)
print("logged to", os.environ["MLFLOW_TRACKING_URI"], "run", mlflow.active_run().info.run_name)
"""


def test_a_job_with_mlflow_config_logs_to_the_tracking_server(
    mlflow_server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scripts = tmp_path / "scripts"
    scripts.mkdir()
    (scripts / "log_mlflow.py").write_text(SCRIPT)
    data: dict[str, Any] = yaml.safe_load((REPO / "examples" / "specs" / "own_entry_point.yaml").read_text())
    data["image"]["container_entry_point"] = ["python3", "/opt/ml/input/data/scripts/log_mlflow.py"]
    data["image"].pop("container_arguments")
    data["source"] = {"entry_point": "log_mlflow.py", "source_dir": str(scripts)}
    data["channels"] = {"scripts": {"type": "s3", "uri": f"s3://{BUCKET}/scripts"}}
    data["output"] = {"s3_path": f"s3://{BUCKET}/models"}
    data["mlflow"] = {"resource_arn": ARN, "experiment_name": "endpoint-tests", "run_name": "nightly"}
    request = plan_training_job(load_spec(data), job_name="planned", region="us-east-1").request
    assert request["MlflowConfig"] == {
        "MlflowResourceArn": ARN,
        "MlflowExperimentName": "endpoint-tests",
        "MlflowRunName": "nightly",
    }

    environ = {**os.environ, "ADT_LOCAL_PYTHON": str(ENV_DIR / "bin" / "python"), "ADT_EMULATOR_MLFLOW_URI": mlflow_server}
    (tmp_path / "endpoint").mkdir()
    endpoint = EmulatorProcess(tmp_path / "endpoint", environ)
    try:
        monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint.endpoint)
        for key, value in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing"), ("AWS_DEFAULT_REGION", "us-east-1")):
            monkeypatch.setenv(key, value)
        s3 = endpoint.client("s3")
        s3.create_bucket(Bucket=BUCKET)
        s3.upload_file(str(scripts / "log_mlflow.py"), BUCKET, "scripts/log_mlflow.py")
        op = DistributedTrainingOperator(
            task_id="train", spec=data, backend="sagemaker", aws_conn_id=None, region_name="us-east-1",
            poll_interval=0.5, deferrable=False,
        )  # fmt: skip
        result = op.execute(make_context("run-mlflow-endpoint"))
        desc = endpoint.client("sagemaker").describe_training_job(TrainingJobName=result["job_name"])
        assert desc["TrainingJobStatus"] == "Completed", desc.get("FailureReason")
        assert desc["MlflowConfig"] == request["MlflowConfig"]  # as sent, as SageMaker answers it
        details = desc["MlflowDetails"]
    finally:
        endpoint.stop()

    run = mlflow_client_query(
        mlflow_server,
        """
        experiment = client.get_experiment_by_name("endpoint-tests")
        [run] = client.search_runs([experiment.experiment_id], "attributes.run_name = 'nightly'")
        result = {
            "experiment_id": experiment.experiment_id, "run_id": run.info.run_id,
            "tags": dict(run.data.tags), "params": dict(run.data.params),
            "loss": [[m.step, m.value] for m in client.get_metric_history(run.info.run_id, "loss")],
        }
        """,
    )
    assert run["tags"]["sagemaker.training_job"] == result["job_name"]
    assert details == {"MlflowExperimentId": run["experiment_id"], "MlflowRunId": run["run_id"]}
    assert run["params"]["tracking_uri"] == mlflow_server  # what the job was given
    assert sorted(run["loss"]) == [[0, 1.0], [1, 0.5], [2, 1.0 / 3]]


@pytest.mark.slow
def test_the_shipped_dag_on_the_sagemaker_backend_registers_skips_and_retrains_against_mlflow(
    sagemaker_endpoint: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, airflow_db: Path
) -> None:
    """The three-run scenario on the SageMaker backend (the test endpoint) with ``registry.kind: mlflow``,
    against a server of its own (the shipped DAG's model is ``adt-demo`` on every backend)."""
    with running_mlflow_server(tmp_path / "mlflow") as mlflow_server:
        _three_runs_on_the_endpoint(mlflow_server, sagemaker_endpoint, tmp_path, monkeypatch)


def _three_runs_on_the_endpoint(mlflow_server: str, sagemaker_endpoint: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_dist_training.compat import DagBag
    from tests.datasets import make_dataset
    from tests.mlflow_server import registry_state, runs_state

    make_dataset(tmp_path / "source", train=400, test=200, seed=0)
    monkeypatch.setenv("ADT_DEMO_DIR", str(tmp_path))
    monkeypatch.setenv("ADT_DEMO_REGISTRY", "mlflow")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", mlflow_server)
    dag = DagBag(dag_folder=str(REPO / "dags" / "distributed_retraining.py"), safe_mode=False).dags["distributed_retraining"]
    for task in dag.tasks:  # the endpoint's jobs are tiny: poll every second
        if hasattr(task, "poll_interval"):
            task.poll_interval = 1.0
        if hasattr(task, "job_wait_seconds"):  # dag.test has no scheduler to race (the stall watcher)
            task.job_wait_seconds = 1.0
    s3 = sagemaker_endpoint.client("s3")
    s3.create_bucket(Bucket="adt-demo-bucket")
    s3.upload_file(str(tmp_path / "source" / "train" / "data.csv"), "adt-demo-bucket", "data/train/data.csv")

    def states(run: Any) -> dict[str, str]:
        return {ti.task_id: str(ti.state) for ti in run.get_task_instances()}

    run1 = dag.test(run_conf={"backend": "sagemaker", "epochs": 3})
    assert states(run1)["sagemaker.register"] == "success", states(run1)
    assert registry_state(mlflow_server, "adt-demo")["aliases"] == {"champion": "1"}

    run2 = dag.test(run_conf={"backend": "sagemaker", "epochs": 3})
    assert states(run2)["sagemaker.train"] == "skipped", states(run2)
    summary = (tmp_path / "last-run-summary.txt").read_text()
    assert "SKIPPED: no new data or code since champion models:/adt-demo/1 (data fingerprint " in summary

    new = make_dataset(tmp_path / "new", train=400, test=200, seed=7)  # new training data, same evaluation set
    s3.upload_file(str(new / "train" / "data.csv"), "adt-demo-bucket", "data/train/data.csv")
    run3 = dag.test(run_conf={"backend": "sagemaker", "epochs": 4, "warm_start": "champion"})
    assert states(run3)["sagemaker.register"] == "success", states(run3)

    state = registry_state(mlflow_server, "adt-demo")
    assert state["aliases"] == {"champion": "2"} and sorted(state["versions"]) == [1, 2]
    v1, v2 = state["versions"][1], state["versions"][2]
    assert v1["source"].startswith("s3://adt-demo-bucket/") and v1["source"].endswith("model.tar.gz")
    assert v2["tags"]["champion_compared_with"] == "models:/adt-demo/1"
    assert v2["tags"]["training_backend"] == "sagemaker" and v2["tags"]["training_job_arn"].startswith("arn:aws:sagemaker:")
    runs = {run["tags"]["training_job"]: run for run in runs_state(mlflow_server, "adt-demo")}
    run = runs[v2["tags"]["training_job_name"]]
    assert run["status"] == "FINISHED" and run["tags"]["training_job_link"].startswith("https://")
    assert run["history"]["train:loss"] and run["params"]["epochs"] == "4"  # curves from CloudWatch


@pytest.mark.slow
def test_the_yaml_pipeline_on_the_sagemaker_backend_registers_skips_and_retrains_against_mlflow(
    sagemaker_endpoint: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, airflow_db: Path, capfd: Any
) -> None:
    """Issue 34: the shipped YAML pipeline (``demo_mlp_local.yaml``) with ``backend: sagemaker`` and
    ``registry: {kind: mlflow}``, three runs on the test endpoint against a server of its own: v1 and
    the ``champion`` alias; skipped citing the champion; new data, gated against v1, v2. The data is
    the S3 channel the pipeline names (no staging step: the FSx staging is the emulator suite's)."""
    from airflow_dist_training.compat import DagBag
    from tests.dag_bundles import fast_polling, serve_dags_folder
    from tests.datasets import make_dataset
    from tests.mlflow_server import registry_state, runs_state

    source = make_dataset(tmp_path / "source")
    pipeline = yaml.safe_load((REPO / "dags" / "pipelines" / "demo_mlp_local.yaml").read_text())
    pipeline.pop("staging")
    training = pipeline["training"]
    training["source"]["source_dir"] = str(REPO / "examples")
    training["source"]["dependencies"] = [str(REPO / "airflow_dist_training" / "checkpointing.py")]
    pipeline.update(
        {
            "dag_id": "demo_mlp_yaml_mlflow_on_sagemaker",
            "backend": "sagemaker",
            "checkpoints": {**pipeline["checkpoints"], "promote_to": "s3://adt-demo-bucket/promoted/"},
            "evaluation": {
                "script": str(REPO / "examples" / "evaluate.py"),
                "channel_source": str(source / "test"),
                "dependencies": [str(REPO / "airflow_dist_training" / "checkpointing.py")],
            },
            "registry": {"kind": "mlflow", "model_package_group": "yaml-on-sagemaker", "auto_approve": True},
        }
    )
    dags = tmp_path / "dags"
    dags.mkdir()
    (dags / "pipeline.yaml").write_text(yaml.safe_dump(pipeline))
    (dags / "pipeline.py").write_text("from airflow_dist_training.dag_factory import dag_from_yaml\n\ndag = dag_from_yaml(__file__)\n")
    serve_dags_folder(dags, monkeypatch)
    s3 = sagemaker_endpoint.client("s3")
    s3.create_bucket(Bucket="adt-demo-bucket")
    s3.upload_file(str(source / "train" / "data.csv"), "adt-demo-bucket", "data/train/data.csv")

    def states(run: Any) -> dict[str, str]:
        return {ti.task_id.rsplit(".", 1)[-1]: str(ti.state) for ti in run.get_task_instances()}

    with running_mlflow_server(tmp_path / "mlflow") as mlflow_server:
        monkeypatch.setenv("MLFLOW_TRACKING_URI", mlflow_server)
        bag = DagBag(dag_folder=str(dags), safe_mode=False)
        assert bag.import_errors == {}
        dag = fast_polling(bag.dags["demo_mlp_yaml_mlflow_on_sagemaker"])

        first = dag.test(run_conf={"epochs": 4})
        assert states(first)["register"] == "success", states(first)
        assert registry_state(mlflow_server, "yaml-on-sagemaker")["aliases"] == {"champion": "1"}
        capfd.readouterr()

        second = dag.test(run_conf={"epochs": 4})
        for task in ("train", "evaluate", "gate", "register"):
            assert states(second)[task] == "skipped", (task, states(second))
        assert "no new data or code since champion models:/yaml-on-sagemaker/1 (data fingerprint " in capfd.readouterr().out

        new = make_dataset(tmp_path / "new", seed=7)  # new training data, same evaluation set
        s3.upload_file(str(new / "train" / "data.csv"), "adt-demo-bucket", "data/train/data.csv")
        third = dag.test(run_conf={"epochs": 5})
        assert states(third)["gate"] == states(third)["register"] == "success", states(third)

        state = registry_state(mlflow_server, "yaml-on-sagemaker")
        runs = {run["tags"]["training_job"]: run for run in runs_state(mlflow_server, "yaml-on-sagemaker")}
    assert state["aliases"] == {"champion": "2"} and sorted(state["versions"]) == [1, 2]
    v2 = state["versions"][2]
    assert v2["tags"]["champion_compared_with"] == "models:/yaml-on-sagemaker/1" and v2["tags"]["gate_decision"] == "passed"
    assert v2["tags"]["training_backend"] == "sagemaker" and v2["source"].startswith("s3://adt-demo-bucket/")
    run = runs[v2["tags"]["training_job_name"]]
    assert run["status"] == "FINISHED" and run["params"]["epochs"] == "5" and run["history"]["train:loss"]
