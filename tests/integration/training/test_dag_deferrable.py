"""End to end: dag.test() of a DAG using the operator in deferrable mode against the moto server.

The trigger (TrainingJobTrigger) runs inline in dag.test(); the job's CloudWatch logs (seeded for
two hosts when the job is created) and its status transitions reach the task log.
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path
from typing import Any

import pytest
from fake_sagemaker_training import FakeTrainingLifecycle, seed_logs, spec_dict

pytestmark = pytest.mark.integration

DAG_FILE = """
import json
from pathlib import Path

from airflow.sdk import DAG

from airflow_dist_training.operators.training import DistributedTrainingOperator

SPEC = json.loads((Path(__file__).parent / "spec.json").read_text())

with DAG("adt_training_e2e", schedule=None) as dag:
    DistributedTrainingOperator(
        task_id="train",
        spec=SPEC,
        aws_conn_id=None,
        region_name="us-east-1",
        deferrable=True,
        poll_interval=0.5,
    )
"""


@pytest.fixture
def dag(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    folder = tmp_path / "dags"
    folder.mkdir()
    (folder / "training_dag.py").write_text(DAG_FILE)
    (folder / "spec.json").write_text(json.dumps(spec_dict(name="e2e")))
    monkeypatch.setenv(
        "AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST",
        json.dumps(
            [
                {
                    "name": f"training-tests-{tmp_path.name}",
                    "classpath": "airflow.dag_processing.bundles.local.LocalDagBundle",
                    "kwargs": {"path": str(folder), "refresh_interval": 0},
                }
            ]
        ),
    )
    spec = importlib.util.spec_from_file_location("adt_training_dag", folder / "training_dag.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.dag


def test_dag_test_deferrable_run_streams_logs_and_pushes_result(
    airflow_db: Any, fake: FakeTrainingLifecycle, dag: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    import boto3
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    logs = boto3.client("logs", region_name="us-east-1", endpoint_url=os.environ["AWS_ENDPOINT_URL"])
    fake.complete_after = 2.0
    fake.on_create = lambda name: seed_logs(logs, name, hosts=2, lines_per_host=2)

    dr = dag.test()
    captured = capfd.readouterr()
    text = captured.out + captured.err
    assert dr.state == "success", text[-4000:]
    assert fake.total_creates == 1
    name = fake.create_log[0]
    assert fake.job(name).training_job_status == "Completed"
    assert "host 1 line 0" in text and "host 2 line 1" in text  # CloudWatch logs, both hosts
    assert "Downloading" in text and "Uploading" in text  # SecondaryStatus transitions
    with create_session() as session:
        rows = session.query(XComModel).filter_by(dag_id="adt_training_e2e", run_id=dr.run_id).all()
        values = {r.key: r.value for r in rows}
    result = values["return_value"]
    result = json.loads(result) if isinstance(result, str) else result
    assert result["job_name"] == name and result["status"] == "Completed"
    assert "sagemaker_training_job" in values
