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
   SIGKILL a random 0-3 s after its task instance is ``running`` in the metadata DB;
2. forks a second child, the retry: the same command for the same DAG run, run to the end. It exits
   0 only if the task instance ends ``success`` in the metadata DB.

``--impl ours`` runs task ``train`` (``DistributedTrainingOperator``, Airflow 3.3 durable execution
+ deterministic names); ``--impl mapped`` runs ``train_mapped``, the same operator mapped over three
members (``.partial().expand(spec=...)``), each map index crashed and retried (``--map-index``);
``--impl amazon`` runs task ``train_amazon`` (the Amazon provider's
``SageMakerTrainingOperator`` with its defaults, ``action_if_job_exists="timestamp"``); ``--impl toy``
runs ``train_toy``, the operator on a durable backend that is not SageMaker (``tests/toy_backend.py``).
``--points a,b`` crashes run i at the i-th named point instead of a random one.
Prints one JSON line per run: ``{"run": i, "prefix": ..., "point": ..., "retry_ok": bool}``; the
jobs a run created are the ones whose names start with ``prefix``.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import random
import signal
import sqlite3
import sys
import textwrap
import time
from pathlib import Path

POINTS = ["before_create", "after_create", "after_persist", "wait"]
DAG_ID = "adt_crash_retry"
TASKS = {"ours": "train", "amazon": "train_amazon", "mapped": "train_mapped", "toy": "train_toy"}
MEMBERS = 3  # map indexes of train_mapped
HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]

CRASH_DAG = textwrap.dedent(
    f"""
    import sys

    import pendulum
    from airflow.providers.amazon.aws.operators.sagemaker import SageMakerTrainingOperator
    from airflow.sdk import DAG

    sys.path[:0] = [{str(HERE)!r}, {str(REPO)!r}]
    from fake_sagemaker_training import make_request, spec_dict
    from tests.toy_backend import register as register_toy_backend

    from airflow_dist_training.operators.training import DistributedTrainingOperator

    register_toy_backend()

    with DAG("{DAG_ID}", schedule=None, start_date=pendulum.datetime(2026, 1, 1), catchup=False):
        DistributedTrainingOperator(
            task_id="train",
            # the job names start with the run id; S3 channels only: an FSx channel would be
            # (rightly) refused by the FSx pre-flight, moto having no such file system
            spec=spec_dict(
                name="{{{{ run_id }}}}",
                channels={{"train": {{"type": "s3", "uri": "s3://my-ml-bucket/datasets/train/"}}}},
            ),
            aws_conn_id=None,
            region_name="us-east-1",
            deferrable=False,
            poll_interval=0.05,
            stream_logs=False,
            retries=3,
        )
        # three members, one map index each: the job names start with the run id and the member
        DistributedTrainingOperator.partial(
            task_id="train_mapped",
            aws_conn_id=None,
            region_name="us-east-1",
            deferrable=False,
            poll_interval=0.05,
            stream_logs=False,
            retries=3,
        ).expand(
            spec=[
                spec_dict(
                    name="{{{{ run_id }}}}-m" + str(member),
                    channels={{"train": {{"type": "s3", "uri": "s3://my-ml-bucket/datasets/train/"}}}},
                )
                for member in range({MEMBERS})
            ]
        )
        # the same run on a durable backend that is not SageMaker (tests/toy_backend.py)
        DistributedTrainingOperator(
            task_id="train_toy",
            backend="toy",
            spec={{
                key: value
                for key, value in spec_dict(
                    name="{{{{ run_id }}}}",
                    channels={{"train": {{"type": "s3", "uri": "s3://my-ml-bucket/datasets/train/"}}}},
                ).items()
                if key != "checkpoint"
            }},
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
    # sqlite's backup API: a consistent copy, including what is still in the source's WAL file
    with (
        contextlib.closing(sqlite3.connect(migrated_db)) as src,
        contextlib.closing(sqlite3.connect(home / "airflow.db")) as dst,
    ):
        src.backup(dst)
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


def prebuild_execution_api() -> None:
    """Build the task runner's in-process Execution API app once, before forking, as a warm worker has it.

    ``airflow tasks test`` builds a new app per task try and spends ~3 s generating its versioned
    routes (cadwyn) on the first request: 60% of a try here. The children get this built app from
    Airflow's own factory hook instead; each still starts its own event loop, lifespan and DB
    sessions, and every call goes through the same routes.
    """
    from airflow.api_fastapi.execution_api.app import InProcessExecutionAPI
    from airflow.sdk.execution_time import supervisor

    app = InProcessExecutionAPI().app
    app._cadwyn_initialize()
    supervisor.in_process_api_server = lambda: InProcessExecutionAPI(app=app)


def start_runs(run_ids: list[str]) -> None:
    """Move queued DAG runs to ``running`` as the scheduler does (``set_state`` sets ``start_date``).

    ``dags trigger`` leaves a run queued, with no ``start_date``. Airflow 3.1's Execution API
    refuses to start a task in such a run (``TIRunContext.dag_run.start_date`` is required there,
    optional from 3.2 on), so every ``tasks test`` of a never-started run fails on 3.1.
    """
    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session
    from airflow.utils.state import DagRunState
    from sqlalchemy import select

    with create_session() as session:
        runs = session.scalars(select(DagRun).where(DagRun.dag_id == DAG_ID, DagRun.run_id.in_(run_ids)))
        for run in runs:
            run.set_state(DagRunState.RUNNING)


def task_state(task_id: str, run_id: str, map_index: int = -1) -> str | None:
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        state = session.scalar(
            select(TaskInstance.state).where(
                TaskInstance.dag_id == DAG_ID,
                TaskInstance.task_id == task_id,
                TaskInstance.run_id == run_id,
                TaskInstance.map_index == map_index,
            )
        )
    return None if state is None else str(state)


_TI_STATE = (
    "SELECT state FROM task_instance WHERE dag_id = ? AND task_id = ? AND run_id = ? AND map_index = ?"
)
# what the operator persisted in Airflow's task_state_store table (JSON-encoded)
_STORED_JOB = (
    "SELECT value FROM task_state_store WHERE dag_id = ? AND task_id = ? AND run_id = ?"
    " AND map_index = ? AND key = 'sagemaker_training_job_name'"
)


def sql_value(db: Path, query: str, params: tuple[str | int, ...]) -> str | None:
    """One value from the metadata DB, read with plain sqlite3 (this process never opens Airflow's ORM)."""
    with contextlib.closing(sqlite3.connect(db, timeout=30)) as conn:
        row = conn.execute(query, params).fetchone()
    return None if row is None or row[0] is None else str(row[0])


def wait_until(predicate, pid: int, timeout: float = 60.0) -> int | None:  # type: ignore[no-untyped-def]
    """Poll ``predicate`` until it holds; the child's exit code if ``pid`` exited first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not predicate():
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.01)
    return None


def in_child(body, crash_at: str | None = None, log: Path | None = None) -> int:  # type: ignore[no-untyped-def]
    """Fork; the child runs ``body()`` (its int is the exit code, output to ``log``) and never returns."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            if log is not None:
                fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
                os.dup2(fd, 1)
                os.dup2(fd, 2)
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


# How the retry found its job, from the task log (ours: the mixin, then the operator's name lookup).
RESUMED_BY = {
    "Reconnecting to existing job": "task_state_store: running job",
    "Job already completed successfully": "task_state_store: completed job",
    "Found this run's training job": "job name",
    "toy: found this run's job": "job name",
    "Creating training job": "created",
    "toy: created job": "created",
}


def resumed_by(log: Path) -> str:
    text = log.read_text(errors="replace")
    return next((how for mark, how in RESUMED_BY.items() if mark in text), "unknown")


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
    parser.add_argument(
        "--points",
        help="comma-separated crash points: one DAG run crashed at each, in order (default: random)",
    )
    parser.add_argument(
        "--max-kill-delay", type=float, default=3.0, help="seconds after the task starts running"
    )
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
    prebuild_execution_api()

    assert wait_child(in_child(lambda: airflow_cli("dags", "reserialize"))) == 0, "dags reserialize failed"

    def run_task(run_id: str, map_index: int = -1) -> int:
        mapped = ("--map-index", str(map_index)) if map_index >= 0 else ()
        airflow_cli("tasks", "test", DAG_ID, task_id, run_id, *mapped)
        return 0 if task_state(task_id, run_id, map_index) == "success" else 1

    run_ids = [f"crash{i}" for i in range(args.first, args.first + args.runs)]

    def trigger_all() -> None:
        """The scheduler's part: each DAG run exists, and is running, before its task is tried."""
        for run_id in run_ids:
            airflow_cli("dags", "trigger", DAG_ID, "--run-id", run_id)
        start_runs(run_ids)

    assert wait_child(in_child(trigger_all)) == 0, "dags trigger failed"
    db = args.home / "airflow.db"

    def is_running(run_id: str, map_index: int) -> bool:
        return sql_value(db, _TI_STATE, (DAG_ID, task_id, run_id, map_index)) == "running"

    trials = [
        (i, run_id, member)
        for i, run_id in zip(range(args.first, args.first + args.runs), run_ids, strict=True)
        for member in (range(MEMBERS) if args.impl == "mapped" else (-1,))
    ]
    chosen = args.points.split(",") if args.points else None
    assert chosen is None or len(chosen) == len(trials), "--points names one crash point per run"
    for i, run_id, member in trials:
        if chosen is not None:
            point = crash_at = chosen[i - args.first]
            kill_after = None
        elif args.impl in ("ours", "mapped") and rng.random() < 0.6:
            point = crash_at = rng.choice(POINTS)
            kill_after = None
        else:
            kill_after = rng.uniform(0.0, args.max_kill_delay)
            point, crash_at = f"sigkill@{kill_after:.2f}s", None
        logs = {attempt: args.home / f"{run_id}.{member}.{attempt}.log" for attempt in ("crash", "retry")}
        pid = in_child(functools.partial(run_task, run_id, member), crash_at, logs["crash"])
        exited = None
        if kill_after is not None:  # count from the moment the task runner has the task running
            exited = wait_until(functools.partial(is_running, run_id, member), pid)
        crash_rc = exited if exited is not None else wait_child(pid, kill_after)
        retry_rc = wait_child(in_child(functools.partial(run_task, run_id, member), log=logs["retry"]))
        try:
            stored = sql_value(db, _STORED_JOB, (DAG_ID, task_id, run_id, member))
        except sqlite3.OperationalError:  # no task_state_store table: Airflow before 3.3
            stored = None
        record = {
            "run": i,
            "map_index": member,
            "prefix": f"{run_id}-m{member}-" if member >= 0 else f"{run_id}-",
            "point": point,
            "crash_rc": crash_rc,
            "retry_ok": retry_rc == 0,
            "retry_found_job_by": resumed_by(logs["retry"]),
            "stored_job": None if stored is None else json.loads(stored),
        }
        print("RESULT " + json.dumps(record), flush=True)


if __name__ == "__main__":
    main()
