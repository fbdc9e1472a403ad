"""Script failures on the local backend, in the provider-free default job environment: a job that
imports what it does not ship fails at once (no retry after a delay), naming the module in its
``FailureReason`` and the task log; a script's own ``/opt/ml/output/failure`` is the reason.

The evaluation of the demo runs there too: ``examples/evaluate.py`` imports ``train.py`` (beside
it), which imports the checkpoint helper, which the evaluation step ships as a dependency.
"""

from __future__ import annotations

import os
import tarfile
import textwrap
from pathlib import Path
from typing import Any

import pytest

from airflow_dist_training.errors import ScriptFailure, TrainingScriptError
from airflow_dist_training.local import job_env
from airflow_dist_training.local.hosts import probe
from airflow_dist_training.operators.evaluation import EvaluationOperator
from airflow_dist_training.operators.training import DistributedTrainingOperator
from tests.paths import REPO

from .conftest import script_spec

CHECKPOINT_HELPER = REPO / "airflow_dist_training" / "checkpointing.py"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not probe().namespaces, reason=f"no Linux namespaces here: {probe().why}"),
]


class _TI:
    dag_id, task_id, run_id, map_index, try_number = "failures", "task", "manual__1", -1, 1

    def __init__(self) -> None:
        self.xcom: dict[str, Any] = {}

    def xcom_push(self, key: str, value: Any) -> None:
        self.xcom[key] = value


def _context() -> dict[str, Any]:
    return {"ti": _TI(), "run_id": _TI.run_id}


def _fails_at_once(call: Any) -> BaseException:
    """The task's error: an ``AirflowFailException`` (Airflow fails it without a retry, on every
    version), still the ``ScriptFailure`` it was."""
    from airflow_dist_training.compat import AirflowFailException

    with pytest.raises(AirflowFailException) as info:
        call()
    assert isinstance(info.value, ScriptFailure)
    return info.value


def _training(tmp_path: Path, script: str, **over: Any) -> DistributedTrainingOperator:
    return DistributedTrainingOperator(
        task_id="train",
        spec=script_spec(tmp_path, script, **over),
        backend="local",
        local_hook_kwargs={"root": str(tmp_path / "jobs"), "use_s3": False, "stop_grace_seconds": 5},
        retries=3,
    )


def _no_machine_internals(reason: str, tmp_path: Path) -> None:
    assert "nsenter" not in reason and str(tmp_path) not in reason, reason
    assert str(job_env.default_env_dir()) not in reason, reason


def test_training_that_imports_a_module_it_does_not_ship_fails_at_once(
    tmp_path: Path, job_env_python: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    op = _training(tmp_path, "import helper_not_shipped\n")
    error = _fails_at_once(lambda: op.execute(_context()))
    logged = capfd.readouterr().out
    assert isinstance(error, TrainingScriptError)
    reason = error.failure_reason or ""
    assert reason.startswith("AlgorithmError: algo-1: ModuleNotFoundError: No module named 'helper_not_shipped'")
    assert "ExecuteUserScriptError:\nExitCode 1\n" in reason  # the toolkit's own text follows
    _no_machine_internals(reason, tmp_path)
    assert "No module named 'helper_not_shipped'" in str(error)  # what the task log shows
    assert f"[local] job Python: {job_env_python} (the pytorch job environment" in logged
    assert "No module named 'helper_not_shipped'" in logged


RANK1_WRITES_ITS_REASON = textwrap.dedent(
    """
    import os, sys
    if os.environ["RANK"] == "1":
        with open("/opt/ml/output/failure", "w") as f:
            f.write("CustomError: rank 1 refused on purpose")
        sys.exit(3)
    import time; time.sleep(30)
    """
)


@pytest.mark.parametrize(
    "distribution",
    [
        {"strategy": "launcher", "launcher": "torchrun", "processes_per_host": 2},  # our in-container launcher
        {"strategy": "torch_distributed", "processes_per_host": 2},  # AWS's toolkit
    ],
    ids=["launcher", "toolkit"],
)
def test_the_scripts_own_failure_file_is_the_failure_reason(
    tmp_path: Path, job_env_python: Path, distribution: dict[str, Any]
) -> None:
    op = _training(tmp_path, RANK1_WRITES_ITS_REASON, distribution=distribution)
    error = _fails_at_once(lambda: op.execute(_context()))
    assert isinstance(error, TrainingScriptError)
    assert error.failure_reason == "AlgorithmError: CustomError: rank 1 refused on purpose"


def _model(tmp_path: Path) -> Path:
    """A model.tar.gz the demo's evaluate.py loads (untrained weights of the demo MLP), made by the
    job environment's torch (the suite's own may differ)."""
    import subprocess

    out = tmp_path / "model"
    out.mkdir()
    maker = (
        "import json, sys, torch; sys.path.insert(0, sys.argv[1]); from train import build_model;"
        "torch.manual_seed(0); torch.save(build_model(8, 16, 4).state_dict(), sys.argv[2] + '/model.pt');"
        "open(sys.argv[2] + '/model_config.json', 'w').write(json.dumps("
        "{'in_features': 8, 'hidden': 16, 'classes': 4}))"
    )
    env = {**os.environ, "PYTHONPATH": str(CHECKPOINT_HELPER.parent)}  # only to build the fixture
    subprocess.run([str(job_env.default_env_dir() / "bin" / "python"), "-c", maker, str(REPO / "examples"), str(out)], check=True, env=env)
    archive = tmp_path / "model.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for path in out.iterdir():
            tar.add(path, arcname=path.name)
    return archive


def _evaluation(tmp_path: Path, model: Path, demo_data: Path, **kwargs: Any) -> EvaluationOperator:
    return EvaluationOperator(
        task_id="evaluate",
        script=str(REPO / "examples" / "evaluate.py"),
        model_uri=str(model),
        data_uri=str(demo_data / "test"),
        output_uri=str(tmp_path / "evaluation"),
        retries=3,
        **kwargs,
    )


def test_the_demo_evaluation_runs_in_the_job_environment_with_its_dependency_shipped(
    tmp_path: Path, job_env_python: Path, demo_data: Path, caplog: pytest.LogCaptureFixture
) -> None:
    model = _model(tmp_path)
    # without the helper train.py imports: the job environment has nothing of the provider
    with caplog.at_level("INFO"):
        error = _fails_at_once(lambda: _evaluation(tmp_path, model, demo_data).execute(_context()))
    assert "No module named 'airflow_dist_training'" in str(error)  # after `checkpointing`, the fallback
    assert getattr(error, "failure_reason", "").startswith("AlgorithmError: evaluate.py exited with code 1: ")
    assert f"Evaluation Python: {job_env_python} (the pytorch job environment" in caplog.text
    # as a processing job runs it (local/processing.py)
    assert "Running evaluation: python3 /opt/ml/processing/input/code/evaluate.py --model-dir " in caplog.text
    # shipped with it, as the shipped DAG and both YAML pipelines do: it runs
    op = _evaluation(tmp_path, model, demo_data, dependencies=[str(CHECKPOINT_HELPER)])
    result = op.execute(_context())
    assert set(result["metrics"]) == {"accuracy", "loss"}
    assert (tmp_path / "evaluation" / "evaluation.json").is_file()


def test_an_evaluation_that_imports_a_module_it_does_not_ship_fails_at_once(
    tmp_path: Path, job_env_python: Path, caplog: pytest.LogCaptureFixture
) -> None:
    script = tmp_path / "code" / "evaluate.py"
    script.parent.mkdir()
    script.write_text("import metrics_helper_not_shipped\n")
    (tmp_path / "beside").mkdir()
    op = EvaluationOperator(
        task_id="evaluate", script=str(script), model_uri=str(tmp_path / "beside"), retries=3,
        output_uri=str(tmp_path / "out"),
    )  # fmt: skip
    with caplog.at_level("INFO"):
        error = _fails_at_once(lambda: op.execute(_context()))
    reason = getattr(error, "failure_reason", "")
    assert reason == (
        "AlgorithmError: evaluate.py exited with code 1: "
        "ModuleNotFoundError: No module named 'metrics_helper_not_shipped'"
    )
    assert "No module named 'metrics_helper_not_shipped'" in caplog.text  # the script's stderr, streamed
