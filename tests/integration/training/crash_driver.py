"""Crash-and-retry driver: Airflow runs a training task in real processes that are killed at random points.

Run as a script (a fresh interpreter) against a moto server whose SageMaker is patched by
``fake_sagemaker_training.FakeTrainingLifecycle`` (in the server's process, which counts every
CreateTrainingJob). The driver gets its own ``AIRFLOW_HOME`` (a copy of a migrated metadata DB and a
DAG folder with ``crash_dag.py``), imports Airflow once, then for each of ``--runs`` DAG runs:

1. forks a child that runs ``airflow tasks test adt_crash_retry <task> crash<i>`` (Airflow's own CLI
   entry point, parsed and dispatched as ``airflow`` does: the real task runner, in-process
   Execution API and ``task_state_store`` rows in the DB) and dies at a random point: either
   ``os._exit`` at a named point (``ADT_CRASH_AT`` = before_create | after_create | after_persist |
   wait; ``after_create`` is the window between CreateTrainingJob and persisting the name) or
   SIGKILL after a random delay;
2. forks a second child, the retry: the same command for the same DAG run, run to the end. It exits
   0 only if the task instance ends ``success`` in the metadata DB.

``--impl ours`` runs task ``train`` (``DistributedTrainingOperator``, Airflow 3.3 durable execution
+ deterministic names); ``--impl amazon`` runs task ``train_amazon`` (the Amazon provider's
``SageMakerTrainingOperator`` with its defaults, ``action_if_job_exists="timestamp"``).
Prints one JSON line per run: ``{"run": i, "prefix": ..., "point": ..., "retry_ok": bool}``; the
jobs a run created are the ones whose names start with ``prefix``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import sys
import textwrap
import time
from pathlib import Path

POINTS = ["before_create", "after_create", "after_persist", "wait"]
DAG_ID = "adt_crash_retry"
TASKS = {"ours": "train", "amazon": "train_amazon"}
HERE = Path(__file__).resolve().parent

CRASH_DAG = textwrap.dedent(
    f"""
    import sys

    import pendulum
    from airflow.providers.amazon.aws.operators.sagemaker import SageMakerTrainingOperator
    from airflow.sdk import DAG

    sys.path.insert(0, {str(HERE)!r})
    from fake_sagemaker_training import make_request, spec_dict

    from airflow_dist_training.operators.training import DistributedTrainingOperator

    with DAG("{DAG_ID}", schedule=None, start_date=pendulum.datetime(2026, 1, 1), catchup=False):
        DistributedTrainingOperator(
            task_id="train",
            spec=spec_dict(name="{{{{ run_id }}}}"),  # the job names start with the run id
            aws_conn_id=None,
            region_name="us-east-1",
            deferrable=False,
            poll_interval=0.05,
            stream_logs=False,
            retries=3,
        )
        SageMakerTrainingOperator(
            task_id="train_amazon",
            config=make_request("{{{{ run_id }}}}-amz"),
            aws_conn_id=None,
            region_name="us-east-1",
            check_interval=0.05,
            print_log=False,
            wait_for_completion=True,
            deferrable=False,
            retries=3,
        )
    """
)


def prepare_home(home: Path, migrated_db: Path) -> None:
    """A private AIRFLOW_HOME: the migrated DB copied (seconds saved per driver) and the crash DAG."""
    (home / "dags").mkdir(parents=True, exist_ok=True)
    shutil.copyfile(migrated_db, home / "airflow.db")
    (home / "dags" / "crash_dag.py").write_text(CRASH_DAG)
    os.environ.update(
        {
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(home / "dags"),
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home}/airflow.db",
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        }
    )


def airflow_cli(*argv: str) -> None:
    """What the ``airflow`` console script does with ``argv``, in this process."""
    from airflow.cli import cli_parser

    args = cli_parser.get_parser().parse_args(list(argv))
    args.func(args)


def task_state(task_id: str, run_id: str) -> str | None:
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        state = session.scalar(
            select(TaskInstance.state).where(
                TaskInstance.dag_id == DAG_ID, TaskInstance.task_id == task_id, TaskInstance.run_id == run_id
            )
        )
    return None if state is None else str(state)


def in_child(body, crash_at: str | None = None) -> int:  # type: ignore[no-untyped-def]
    """Fork; the child runs ``body()`` (its int is the exit code) and never returns here."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            if crash_at:
                os.environ["ADT_CRASH_AT"] = crash_at
            code = int(body() or 0)
        except BaseException as exc:
            sys.stderr.write(f"child failed: {type(exc).__name__}: {exc}\n")
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    return pid


def wait_child(pid: int, kill_after: float | None = None) -> int:
    if kill_after is not None:
        deadline = time.monotonic() + kill_after
        while time.monotonic() < deadline:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                return os.waitstatus_to_exitcode(status)
            time.sleep(0.005)
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--impl", choices=sorted(TASKS), default="ours")
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--first", type=int, default=0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--home", type=Path, required=True, help="a fresh AIRFLOW_HOME for this driver")
    parser.add_argument("--migrated-db", type=Path, required=True, help="a migrated Airflow SQLite DB")
    parser.add_argument("--max-kill-delay", type=float, default=2.5)
    args = parser.parse_args()
    prepare_home(args.home, args.migrated_db)
    rng = random.Random(args.seed)
    task_id = TASKS[args.impl]

    # Import once before forking (children inherit it); no DB connection is opened in this process.
    import boto3  # noqa: F401
    from airflow.cli import cli_parser
    from airflow.providers.amazon.aws.operators import sagemaker  # noqa: F401

    import airflow_dist_training.hooks.training as hooks_training
    import airflow_dist_training.operators.training  # noqa: F401

    hooks_training.SageMakerTrainingHook  # noqa: B018  (build the lazy class before forking)
    cli_parser.get_parser()

    assert wait_child(in_child(lambda: airflow_cli("dags", "reserialize"))) == 0, "dags reserialize failed"

    def run_task(run_id: str) -> int:
        airflow_cli("tasks", "test", DAG_ID, task_id, run_id)
        return 0 if task_state(task_id, run_id) == "success" else 1

    for i in range(args.first, args.first + args.runs):
        run_id = f"crash{i}"
        if args.impl == "ours" and rng.random() < 0.6:
            point = crash_at = rng.choice(POINTS)
            kill_after = None
        else:
            kill_after = rng.uniform(0.0, args.max_kill_delay)
            point, crash_at = f"sigkill@{kill_after:.2f}s", None
        # The scheduler's part: the DAG run exists before its task is tried (and retried).
        assert wait_child(in_child(lambda: airflow_cli("dags", "trigger", DAG_ID, "--run-id", run_id))) == 0
        started = time.monotonic()
        crash_rc = wait_child(in_child(lambda: run_task(run_id), crash_at), kill_after)
        crashed_after = time.monotonic() - started
        retry_rc = wait_child(in_child(lambda: run_task(run_id)))
        record = {
            "run": i,
            "prefix": f"{run_id}-",
            "point": point,
            "crash_rc": crash_rc,
            "crashed_after": round(crashed_after, 2),
            "retry_ok": retry_rc == 0,
        }
        print("RESULT " + json.dumps(record), flush=True)


if __name__ == "__main__":
    main()
