"""The evaluation processing job runs for real on the emulator, deferred, with its logs in the task log."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from airflow_dist_training.operators.evaluation import EvaluationOperator

from .conftest import BUCKET, REPO

pytestmark = [pytest.mark.integration, pytest.mark.slow]
ROLE = "arn:aws:iam::123456789012:role/SageMakerTrainingRole"


class _TI:
    dag_id, task_id, run_id, map_index, try_number = "eval_dag", "evaluate", "manual__emu", -1, 1


def _run_deferred(op: EvaluationOperator, caplog: pytest.LogCaptureFixture) -> dict[str, Any]:
    from airflow_dist_training.compat import TaskDeferred

    ctx: Any = {"ti": _TI(), "run_id": _TI.run_id}
    with pytest.raises(TaskDeferred) as deferred:
        op.execute(ctx)
    trigger = deferred.value.trigger

    async def first_event() -> Any:
        async for event in trigger.run():
            return event.payload

    event = asyncio.run(first_event())
    return op.execute_complete(ctx, event=event, **(deferred.value.kwargs or {}))


def test_evaluation_processing_job_runs_local_script_and_data_deferred(
    sagemaker_endpoint: Any,
    demo_data: Path,
    model_tarball: bytes,
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
) -> None:
    s3 = sagemaker_endpoint.client("s3")
    s3.create_bucket(Bucket=BUCKET)
    s3.put_object(Bucket=BUCKET, Key="models/job-1/output/model.tar.gz", Body=model_tarball)
    op = EvaluationOperator(
        task_id="evaluate",
        backend="sagemaker",
        script=str(REPO / "examples" / "evaluate.py"),  # local: uploaded to the run's prefix
        dependencies=[str(REPO / "airflow_dist_training" / "checkpointing.py")],  # train.py imports it
        data_uri=str(demo_data / "test"),  # local: uploaded too
        model_uri=f"s3://{BUCKET}/models/job-1/output/model.tar.gz",
        output_uri=f"s3://{BUCKET}/models/evaluation/manual__emu",
        image_uri="763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.8.0-cpu-py312",
        role_arn=ROLE,
        deferrable=True,
        poll_interval=0.5,
        aws_conn_id=None,
        region_name="us-east-1",
    )
    with caplog.at_level("INFO"):
        result = _run_deferred(op, caplog)
    # the job really ran the script over the uploaded data: metrics from evaluate.py's own output
    assert set(result["metrics"]) == {"accuracy", "loss"}
    assert result["evaluation_set_hash"].startswith("sha256:")
    assert result["evaluation_uri"] == f"s3://{BUCKET}/models/evaluation/manual__emu/evaluation.json"
    stored = json.loads(
        s3.get_object(Bucket=BUCKET, Key="models/evaluation/manual__emu/evaluation.json")["Body"].read()
    )
    assert stored["metrics"] == result["metrics"]
    # inputs went to the run's prefix, and the endpoint's record says Completed
    keys = {
        o["Key"]
        for o in s3.list_objects_v2(Bucket=BUCKET, Prefix="models/evaluation/manual__emu/inputs/")["Contents"]
    }
    assert "models/evaluation/manual__emu/inputs/code/evaluate.py" in keys
    assert "models/evaluation/manual__emu/inputs/code/train.py" in keys  # the helper module next to it
    assert "models/evaluation/manual__emu/inputs/code/checkpointing.py" in keys  # its dependency
    assert "models/evaluation/manual__emu/inputs/data/data.csv" in keys
    desc = sagemaker_endpoint.client("sagemaker").describe_processing_job(
        ProcessingJobName=result["job_name"]
    )
    assert desc["ProcessingJobStatus"] == "Completed"
    # the processing job's own output was streamed into the task log while deferred
    logged = capfd.readouterr().out + "\n".join(r.getMessage() for r in caplog.records)
    assert json.dumps(result["metrics"], sort_keys=True) in logged


def test_failed_evaluation_job_reports_its_reason(
    sagemaker_endpoint: Any, demo_data: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from airflow_dist_training.hooks.evaluation import EvaluationScriptError

    s3 = sagemaker_endpoint.client("s3")
    s3.create_bucket(Bucket=BUCKET)
    s3.put_object(Bucket=BUCKET, Key="models/broken/model.tar.gz", Body=b"not a tarball")
    op = EvaluationOperator(
        task_id="evaluate",
        backend="sagemaker",
        script=str(REPO / "examples" / "evaluate.py"),
        data_uri=str(demo_data / "test"),
        model_uri=f"s3://{BUCKET}/models/broken/model.tar.gz",
        output_uri=f"s3://{BUCKET}/models/evaluation/broken",
        image_uri="763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.8.0-cpu-py312",
        role_arn=ROLE,
        deferrable=True,
        poll_interval=0.5,
        aws_conn_id=None,
        region_name="us-east-1",
    )
    with pytest.raises(
        EvaluationScriptError,
        match=r"ended Failed: AlgorithmError: the processing container exited with code",
    ):
        _run_deferred(op, caplog)
