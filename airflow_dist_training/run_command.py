"""``airflow-dist-training run SPEC.yaml``: run one training job without Airflow.

``--backend local`` (default) runs the exact ``CreateTrainingJob`` request on this machine,
``--backend sagemaker`` on SageMaker; ``--follow`` streams the log. Exit code 0 when the job ends
``Completed``, 1 with the failure reason, 2 for an invalid spec (nothing launched). Ctrl-C stops it.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

EXIT_FAILED = 1
# One DescribeTrainingJob every 2 s: the command returns within 5 s of the job's end (the SageMaker
# SDK's wait() polls every 5 s). One user at a terminal, so no deferral economy to keep here (the
# triggers poll less often, see triggers/).
FOLLOW_POLL_SECONDS = 2.0


def add_run_parser(sub: Any) -> None:
    run = sub.add_parser("run", help="run one training job (local or SageMaker) and wait for it")
    run.add_argument("spec", help="path to a spec YAML file")
    from airflow_dist_training.spec.backends import backend_names

    run.add_argument("--backend", choices=backend_names(), default="local")
    run.add_argument("--job-name", default=None, help="job name (default: <spec name>-<timestamp hash>)")
    run.add_argument("--follow", action="store_true", help="stream the job's log lines")
    run.add_argument("--region", default=None, help="AWS region (sagemaker; default: boto3's)")
    run.add_argument("--jobs-root", default=None, help="local: the jobs folder (default $ADT_LOCAL_ROOT or ...)")
    run.add_argument(
        "--base-dir", default=".", help="local: relative paths in the spec resolve against it (default .)"
    )
    run.set_defaults(handler=cmd_run)


def cmd_run(args: argparse.Namespace) -> int:
    from airflow_dist_training.errors import TrainingJobError
    from airflow_dist_training.hooks.backends import get_backend
    from airflow_dist_training.sagemaker.naming import job_name
    from airflow_dist_training.spec.loading import load_spec

    spec = load_spec(args.spec)
    name = args.job_name or job_name(spec.name, f"cli-run:{args.spec}:{time.time()}")
    emit = (lambda line: print(line, flush=True)) if args.follow else (lambda line: None)
    backend = get_backend(
        args.backend,
        aws_conn_id=None,
        region_name=args.region,
        local_hook_kwargs={"root": args.jobs_root, "base_dir": str(Path(args.base_dir).absolute())},
    )
    if not backend.record.durable:  # a job on this machine: its own checks, before saying it starts
        backend.plan(spec, job_name=name, region=args.region or "us-east-1")
    print(f"Starting training job {name} ({args.backend})", flush=True)
    backend.submit(spec, name, log=emit)
    try:
        if backend.record.durable:
            _follow_remote(backend, name, args.follow)
        result = backend.result(name)
    except KeyboardInterrupt:
        print(f"Interrupted: stopping training job {name}", file=sys.stderr, flush=True)
        backend.stop(name, reason="cli interrupted")
        return 130
    except TrainingJobError as exc:
        print(f"Training job {name} ended {exc.status}: {exc.failure_reason or exc}", file=sys.stderr)
        if exc.failure_reason and str(exc) != exc.failure_reason:
            print(str(exc), file=sys.stderr)  # the failing host and its last lines
        _print_folders(backend, name, sys.stderr)
        return EXIT_FAILED
    print(f"Training job {name} Completed", flush=True)
    print(f"  model artifact: {result['model_artifact_uri']}")
    print(f"  output:         {result['output_uri']}")
    if result["checkpoint_uri"]:
        print(f"  checkpoints:    {result['checkpoint_uri']}")
    if result["final_metrics"]:
        print(f"  final metrics:  {result['final_metrics']}")
    _print_folders(backend, name, sys.stdout)
    return 0


def _print_folders(backend: Any, name: str, stream: Any) -> None:
    """Local jobs: each simulated host's /opt/ml folders."""
    job = None if backend.record.durable else backend.hook.executor().get(name)
    for host, dirs in job.host_dirs().items() if job is not None else ():
        print(
            f"  {host}: model {dirs['model']}  output {dirs['output']}  checkpoints {dirs['checkpoints']}",
            file=stream,
        )


def _follow_remote(backend: Any, name: str, follow: bool, poll: float = FOLLOW_POLL_SECONDS) -> None:
    from airflow_dist_training.hooks.training import LogCursor
    from airflow_dist_training.job_states import TERMINAL_STATES
    from airflow_dist_training.retry import poll_until

    cursor = LogCursor()

    def read() -> dict[str, Any]:
        desc = backend.describe(name)
        if follow:
            for event in backend.hook.fetch_log_events(name, cursor):
                print(event.format(), flush=True)
        return dict(desc)

    poll_until(read, lambda desc: desc.get("TrainingJobStatus") in TERMINAL_STATES, interval=poll)
