"""Crash-and-retry driver: real processes run a training task and are killed at random points.

Run as a script (a fresh interpreter) against a moto server whose SageMaker is patched by
``fake_sagemaker_training.FakeTrainingLifecycle`` (in the server's process, which counts every
CreateTrainingJob). The driver imports everything once, then for each of ``--runs`` task runs:

1. forks a child that runs the task and dies at a random point: either ``os._exit`` at a named
   point (``ADT_CRASH_AT`` = before_create | after_create | after_persist | wait; ``after_create``
   is the window between CreateTrainingJob and persisting the name) or SIGKILL after a random delay;
2. forks a second child, the retry, which runs the same task (same run identity, same
   ``task_state_store`` file) to the end.

``--impl ours`` runs ``DistributedTrainingOperator`` through ``execute`` (Airflow 3.3
``ResumableJobMixin`` + deterministic names); ``--impl amazon`` runs the Amazon provider's
``SageMakerTrainingOperator`` with its defaults (``action_if_job_exists="timestamp"``).
Prints one JSON line per run: ``{"run": i, "prefix": ..., "point": ..., "retry_ok": bool}``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

POINTS = ["before_create", "after_create", "after_persist", "wait"]


class FileTaskStateStore:
    """``task_state_store`` persisted in a JSON file, so it survives the killed process."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def _load(self) -> dict[str, Any]:
        try:
            return dict(json.loads(self.path.read_text()))
        except (OSError, ValueError):
            return {}

    def get(self, key: str, default: Any = None) -> Any:
        return self._load().get(key, default)

    def set(self, key: str, value: Any, **_: Any) -> None:
        data = self._load()
        data[key] = value
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data))
        os.replace(tmp, self.path)


def run_ours(run: int, workdir: Path) -> None:
    from fake_sagemaker_training import FakeTI, spec_dict

    from airflow_dist_training.operators.training import DistributedTrainingOperator

    op = DistributedTrainingOperator(
        task_id="train",
        spec=spec_dict(name=f"crash{run}"),
        aws_conn_id=None,
        region_name="us-east-1",
        deferrable=False,
        poll_interval=0.05,
        stream_logs=False,
    )
    run_id = f"crash__{run}"
    ctx = {
        "ti": FakeTI(run_id),
        "run_id": run_id,
        "task_state_store": FileTaskStateStore(workdir / f"{run}.json"),
    }
    op.execute(ctx)  # type: ignore[arg-type]


def run_amazon(run: int, workdir: Path) -> None:
    from airflow.providers.amazon.aws.operators.sagemaker import SageMakerTrainingOperator
    from fake_sagemaker_training import FakeTI, make_request

    train = SageMakerTrainingOperator(
        task_id="train",
        config=make_request(f"crash{run}-amz"),
        aws_conn_id=None,
        region_name="us-east-1",
        check_interval=0.05,  # type: ignore[arg-type]
        print_log=False,
        wait_for_completion=True,
        deferrable=False,
    )
    train.execute({"ti": FakeTI(f"crash__{run}")})  # type: ignore[arg-type]


def child(impl: str, run: int, workdir: Path, crash_at: str | None) -> None:
    if crash_at:
        os.environ["ADT_CRASH_AT"] = crash_at
    else:
        os.environ.pop("ADT_CRASH_AT", None)
    try:
        (run_ours if impl == "ours" else run_amazon)(run, workdir)
    except BaseException as exc:
        sys.stderr.write(f"run {run} failed: {type(exc).__name__}: {exc}\n")
        os._exit(1)
    os._exit(0)


def fork_run(impl: str, run: int, workdir: Path, crash_at: str | None, kill_after: float | None) -> int:
    pid = os.fork()
    if pid == 0:
        child(impl, run, workdir, crash_at)
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
    parser.add_argument("--impl", choices=["ours", "amazon"], default="ours")
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--first", type=int, default=0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workdir", type=Path, required=True)
    parser.add_argument("--max-kill-delay", type=float, default=0.8)
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    rng = random.Random(args.seed)

    # Import everything once before forking (children inherit it: cheap and realistic).
    import boto3  # noqa: F401

    if args.impl == "ours":
        import airflow_dist_training.hooks.training as hooks_training
        import airflow_dist_training.operators.training
        import airflow_dist_training.sagemaker.request  # noqa: F401

        hooks_training.SageMakerTrainingHook  # noqa: B018  (build the lazy class before forking)
    else:
        import airflow.providers.amazon.aws.operators.sagemaker  # noqa: F401

    for i in range(args.first, args.first + args.runs):
        if args.impl == "ours" and rng.random() < 0.6:
            point, crash_at, kill_after = rng.choice(POINTS), None, None
            crash_at = point
        else:
            kill_after = rng.uniform(0.0, args.max_kill_delay)
            point, crash_at = f"sigkill@{kill_after:.2f}s", None
        crash_rc = fork_run(args.impl, i, args.workdir, crash_at, kill_after)
        retry_rc = fork_run(args.impl, i, args.workdir, None, None)
        prefix = f"crash{i}-"
        print(
            "RESULT "
            + json.dumps(
                {"run": i, "prefix": prefix, "point": point, "crash_rc": crash_rc, "retry_ok": retry_rc == 0}
            ),
            flush=True,
        )


if __name__ == "__main__":
    main()
