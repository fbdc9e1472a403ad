"""Script failures on the SageMaker backend (the emulator), training in the provider-free default job
environment: a job that imports what it does not ship fails at once, without a retry, with the
module's name in ``FailureReason`` and the task log; a script's own ``/opt/ml/output/failure`` is
the ``FailureReason``, as SageMaker gives it."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest

from airflow_dist_training.errors import ScriptFailure
from airflow_dist_training.local import job_env
from airflow_dist_training.operators.evaluation import EvaluationOperator
from airflow_dist_training.operators.training import DistributedTrainingOperator

from .conftest import BUCKET, REPO, ROLE, script_job_spec
from .conftest import log_messages as _log_messages

sys.path.insert(0, str(REPO / "tests" / "integration" / "training"))
from fake_sagemaker_training import make_context

pytestmark = [pytest.mark.integration, pytest.mark.slow]
IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.8.0-cpu-py312"


@pytest.fixture
def endpoint(sagemaker_endpoint: Any, job_env_python: Path) -> Any:
    sagemaker_endpoint.client("s3").create_bucket(Bucket=BUCKET)
    return sagemaker_endpoint


def _fails_at_once(call: Any) -> BaseException:
    from airflow_dist_training.compat import AirflowFailException

    with pytest.raises(AirflowFailException) as info:
        call()
    assert isinstance(info.value, ScriptFailure)
    return info.value


def _run(op: Any, ctx: dict[str, Any]) -> Any:
    """execute, then each deferral's trigger and resume method, as Airflow runs them."""
    from airflow_dist_training.compat import TaskDeferred

    call: Any = lambda: op.execute(ctx)  # noqa: E731
    while True:
        try:
            return call()
        except TaskDeferred as deferred:

            async def first(trigger: Any = deferred.trigger) -> dict[str, Any]:
                async for event in trigger.run():
                    return dict(event.payload)
                raise AssertionError("the trigger ended without an event")

            event = asyncio.run(first())
            method = getattr(op, deferred.method_name)
            call = lambda m=method, e=event, kw=deferred.kwargs or {}: m(ctx, event=e, **kw)  # noqa: E731


def _training(tmp_path: Path, name: str, script: str) -> DistributedTrainingOperator:
    spec = script_job_spec(tmp_path, name, script)
    op = DistributedTrainingOperator(
        task_id="train", spec=spec, backend="sagemaker", aws_conn_id=None, region_name="us-east-1",
        poll_interval=0.5, deferrable=True, retries=3,
    )  # fmt: skip
    op.hook.throttle_base_delay = 0.05
    return op


def _one_job(endpoint: Any) -> dict[str, Any]:
    sm = endpoint.client("sagemaker")
    [job] = sm.list_training_jobs()["TrainingJobSummaries"]  # one job: nothing was retried
    return dict(sm.describe_training_job(TrainingJobName=job["TrainingJobName"]))


def _default_job_python() -> str:
    env = job_env.default_env_dir()
    assert job_env.why_not_ready(env) is None
    return str(env / "bin" / "python")


@pytest.mark.parametrize(
    ("script", "missing"),
    [
        ("import helper_not_shipped\n", "helper_not_shipped"),
        # the demo's train.py alone in the code archive: without checkpointing.py it falls back to
        # the provider's copy, which no AWS image has
        ((REPO / "examples" / "train.py").read_text(), "airflow_dist_training"),
    ],
    ids=["own-helper", "demo-train-without-checkpointing"],
)
def test_training_that_imports_a_module_it_does_not_ship_fails_at_once(
    endpoint: Any, tmp_path: Path, capfd: pytest.CaptureFixture[str], script: str, missing: str
) -> None:
    op = _training(tmp_path, "emu-missing-module", script)
    error = _fails_at_once(lambda: _run(op, make_context("run-missing")))
    desc = _one_job(endpoint)
    assert desc["TrainingJobStatus"] == "Failed"
    reason = desc["FailureReason"]
    assert reason.startswith(f"AlgorithmError: algo-1: ModuleNotFoundError: No module named '{missing}'")
    assert "nsenter" not in reason and str(tmp_path) not in reason
    assert str(job_env.default_env_dir()) not in reason
    assert f"No module named '{missing}'" in str(error)  # the task's error
    out = capfd.readouterr().out
    assert f"No module named '{missing}'" in out  # the streamed job log
    if missing == "airflow_dist_training":
        assert "No module named 'checkpointing'" in out
    # the job ran in the default job environment, as the endpoint's log says (not the job's: a
    # path of this machine)
    log = (endpoint.root / "emulator.log").read_text(errors="replace")
    assert f"TrainingJobs {desc['TrainingJobName']}: [local] job Python: {_default_job_python()} (" in log
    job_log = _log_messages(endpoint, "/aws/sagemaker/TrainingJobs", desc["TrainingJobName"])
    assert not any("job Python: " in m for m in job_log), job_log


def test_the_scripts_own_failure_file_is_the_failure_reason(endpoint: Any, tmp_path: Path) -> None:
    script = (
        "import os, sys, time\n"
        "if os.environ['RANK'] == '1':\n"
        "    open('/opt/ml/output/failure', 'w').write('CustomError: rank 1 refused on purpose')\n"
        "    sys.exit(3)\n"
        "time.sleep(30)\n"
    )
    op = _training(tmp_path, "emu-own-reason", script)
    _fails_at_once(lambda: _run(op, make_context("run-own-reason")))
    assert _one_job(endpoint)["FailureReason"] == "AlgorithmError: CustomError: rank 1 refused on purpose"


def _evaluation(tmp_path: Path, script_text: str, prefix: str) -> EvaluationOperator:
    script = tmp_path / "eval" / "evaluate.py"
    script.parent.mkdir()
    script.write_text(script_text)
    return EvaluationOperator(
        task_id="evaluate", backend="sagemaker", script=str(script),
        model_uri=f"s3://{BUCKET}/{prefix}/model/", output_uri=f"s3://{BUCKET}/{prefix}/evaluation",
        image_uri=IMAGE, role_arn=ROLE, deferrable=True, poll_interval=0.5, aws_conn_id=None,
        region_name="us-east-1", retries=3,
    )  # fmt: skip


class _TI:
    dag_id, task_id, run_id, map_index, try_number = "eval_dag", "evaluate", "manual__emu", -1, 1


def _eval_context() -> dict[str, Any]:
    return {"ti": _TI(), "run_id": _TI.run_id}


def _processing_reason(endpoint: Any) -> str:
    sm = endpoint.client("sagemaker")
    [job] = sm.list_processing_jobs()["ProcessingJobSummaries"]  # one job: nothing was retried
    desc = sm.describe_processing_job(ProcessingJobName=job["ProcessingJobName"])
    assert desc["ProcessingJobStatus"] == "Failed"
    return str(desc["FailureReason"])


@pytest.mark.parametrize(
    "missing",
    # the provider itself: the emulator's own interpreter has it, the image's environment does not
    ["metrics_helper_not_shipped", "airflow_dist_training"],
)
def test_an_evaluation_that_imports_a_module_it_does_not_ship_fails_at_once(
    endpoint: Any, tmp_path: Path, missing: str
) -> None:
    endpoint.client("s3").put_object(Bucket=BUCKET, Key="missing/model/model.pt", Body=b"weights")
    op = _evaluation(tmp_path, f"import sys\nprint('prefix', sys.prefix)\nimport {missing}\n", "missing")
    error = _fails_at_once(lambda: _run(op, _eval_context()))
    reason = _processing_reason(endpoint)
    assert reason == (
        "AlgorithmError: the processing container exited with code 1 on algo-1: "
        f"ModuleNotFoundError: No module named '{missing}'"
    )
    assert f"No module named '{missing}'" in str(error)
    # python3 was the default job environment's interpreter (the endpoint's log says so); the job's
    # log shows it as the image's /opt/conda, no path of this machine
    sm = endpoint.client("sagemaker")
    [job] = sm.list_processing_jobs()["ProcessingJobSummaries"]
    log = _log_messages(endpoint, "/aws/sagemaker/ProcessingJobs", job["ProcessingJobName"])
    endpoint_log = (endpoint.root / "emulator.log").read_text(errors="replace")
    said = f"ProcessingJobs {job['ProcessingJobName']}: [emulator] python3: {_default_job_python()} ("
    assert said in endpoint_log
    assert "prefix /opt/conda" in log and not [m for m in log if str(job_env.default_env_dir()) in m], log


def test_an_evaluation_scripts_own_failure_file_is_the_failure_reason(endpoint: Any, tmp_path: Path) -> None:
    endpoint.client("s3").put_object(Bucket=BUCKET, Key="own/model/model.pt", Body=b"weights")
    # /opt/ml/output/failure; the emulator runs processing without a container, so /opt/ml is the
    # job's folder, reached from the output dir it names (/opt/ml/processing/evaluation)
    script = (
        "import os, sys\n"
        "out = os.path.join(os.environ['ADT_OUTPUT_DIR'], '..', '..', 'output')\n"
        "os.makedirs(out, exist_ok=True)\n"
        "open(os.path.join(out, 'failure'), 'w').write('CustomError: the model is empty')\n"
        "sys.exit(2)\n"
    )
    op = _evaluation(tmp_path, script, "own")
    _fails_at_once(lambda: _run(op, _eval_context()))
    assert _processing_reason(endpoint) == "AlgorithmError: CustomError: the model is empty"
