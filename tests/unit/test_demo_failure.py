"""scripts/demo_failure.py: the demo's failure output names the failed task and its error, not the
scheduler's chatter. ``plan_refused.log`` is a real ``airflow dags test`` log of the demo (run by
scripts/demo.sh with ``instance_count: 17``); the training failure is built from its lines, with a
local job's real error text and the "No tasks to run" lines printed while a task waits to retry."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.paths import REPO

sys.path.insert(0, str(REPO / "scripts"))
import demo_failure

sys.path.pop(0)

LOGS = Path(__file__).parent / "demo_logs"
T = "2026-12-03T18:10:34.603163Z"


def _training_failure(attempts: int) -> list[str]:
    lines = (LOGS / "plan_refused.log").read_text().splitlines()[:49]  # set-up, choose_backend ran
    for attempt in range(1, attempts + 1):
        lines += [
            f"{T} [info     ] [DAG TEST] starting task_id=local.train map_index=-1 [airflow.sdk.definitions.dag] loc=dag.py:1501",
            f"{T} [info     ] Task started                   [airflow.api_fastapi.execution_api.routes.task_instances] hostname=vm loc=task_instances.py:226",
            f"{T} [info     ] [algo-1] epoch=0 loss=0.6931   [airflow.task.hooks.airflow_dist_training.hooks.local_training.LocalTrainingHook] loc=local_training.py:230",
            f"{T} [info     ] [algo-1] Traceback (most recent call last): [airflow.task.hooks.airflow_dist_training.hooks.local_training.LocalTrainingHook] loc=local_training.py:230",
            f"{T} [info     ] [algo-1]   File \"/opt/ml/code/train.py\", line 12, in <module> [airflow.task.hooks.airflow_dist_training.hooks.local_training.LocalTrainingHook] loc=local_training.py:230",
            f"{T} [info     ] [algo-1] ModuleNotFoundError: No module named 'checkpointing' [airflow.task.hooks.airflow_dist_training.hooks.local_training.LocalTrainingHook] loc=local_training.py:230",
            f"{T} [error    ] Task failed with exception     [task] loc=task_runner.py:1676",
            "Traceback (most recent call last):",
            '  File "/home/user/airflow-dist-training/.venv/lib/python3.11/site-packages/airflow/sdk/execution_time/task_runner.py", line 1579, in _run_task_and_map_outcome',
            "    result = _execute_task(context=context, ti=ti, log=log)",
            "             ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
            '  File "/home/user/airflow-dist-training/airflow_dist_training/hooks/training.py", line 202, in raise_for_status',
            "    raise training_job_error(",
            "airflow_dist_training.errors.TrainingScriptError: Training job local-demo-1 ended Failed: AlgorithmError: algo-1: ModuleNotFoundError: No module named 'checkpointing'",
            f"{T} [info     ] Retry policy decision          [task] action={'retry' if attempt < attempts else 'fail'} loc=task_runner.py:1806 reason='{'a retry may succeed' if attempt < attempts else 'retries exhausted'}'",
            f"{T} [info     ] Task instance state updated    [airflow.api_fastapi.execution_api.routes.task_instances] loc=task_instances.py:485 new_state={'up_for_retry' if attempt < attempts else 'failed'} rows_affected=1",
            f"{T} [info     ] [DAG TEST] end task task_id=local.train map_index=-1 [airflow.sdk.definitions.dag] loc=dag.py:1563",
        ]
        if attempt < attempts:
            lines += [
                f"{T} [warning  ] No tasks to run. unrunnable tasks: {{<TaskInstance: distributed_retraining.local.train manual__2026 [up_for_retry]>}} [airflow.models.dag] loc=dag.py:1530"
            ] * 300
    return [
        *lines,
        f"{T} [info     ] Marking run <DagRun distributed_retraining> failed [airflow.models.dagrun.DagRun] loc=dagrun.py:1219",
        "DagRun failed",
    ]


def test_a_refused_plan_is_named_with_its_error_in_two_lines() -> None:
    out = demo_failure.summary((LOGS / "plan_refused.log").read_text().splitlines())
    assert out.splitlines() == [
        "Task local.plan failed, not retried: invalid spec or input: fix it, retrying cannot",
        "  airflow_dist_training.errors.SpecValidationError: trigger form: params.instance_count: 17 is "
        "above this DAG's limit of 16; nothing was launched",
    ]


def test_a_training_failure_shows_the_task_its_reason_and_the_scripts_error_not_the_chatter() -> None:
    out = demo_failure.summary(_training_failure(attempts=2))
    lines = out.splitlines()
    assert lines[0] == "Task local.train failed, will retry: a retry may succeed"
    assert "TrainingScriptError: Training job local-demo-1 ended Failed: AlgorithmError: algo-1: " in lines[1]
    assert "No module named 'checkpointing'" in lines[1]
    assert "  last error lines of its job:" in lines
    assert "    [algo-1] ModuleNotFoundError: No module named 'checkpointing'" in lines
    assert "    [algo-1] epoch=0 loss=0.6931" not in lines  # not an error line
    assert lines[-1] == "Task local.train failed again the same way (failed)"
    assert "No tasks to run" not in out
    assert len(lines) <= 12


def test_a_long_exception_keeps_its_first_line_and_its_end() -> None:
    error = ["airflow_dist_training.errors.TrainingScriptError: Local training job x failed on host algo-1 (exit code 1)."]
    error += [f"  line {i}" for i in range(30)] + ["CustomError: rank 1 refused on purpose"]
    lines = (LOGS / "plan_refused.log").read_text().splitlines()
    at = lines.index(next(line for line in lines if line.startswith("airflow_dist_training.errors.SpecValidationError")))
    out = demo_failure.summary(lines[:at] + error + lines[at + 1 :]).splitlines()
    assert out[1] == "  " + error[0]
    assert out[2] == "  ..."
    assert out[-1] == "  CustomError: rank 1 refused on purpose"
    assert len(out) == 1 + demo_failure.ERROR_LINES + 1


def test_a_log_without_a_failed_task_prints_nothing_and_exits_1(tmp_path: Path, capsys) -> None:
    log = tmp_path / "ok.log"
    log.write_text("\n".join((LOGS / "plan_refused.log").read_text().splitlines()[:49]))
    assert demo_failure.main([str(log)]) == 1
    assert capsys.readouterr().out == ""
