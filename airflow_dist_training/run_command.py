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
    """The run's lifecycle through the backend protocol (``planning.TrainingBackend``), as the
    training operator drives it: plan, find or create, wait, result."""
    from airflow_dist_training.errors import TrainingJobError
    from airflow_dist_training.hooks.backends import get_backend
    from airflow_dist_training.planning import RunJob
    from airflow_dist_training.sagemaker.naming import job_name
    from airflow_dist_training.spec.loading import load_spec

    spec = load_spec(args.spec)
    name = args.job_name or job_name(spec.name, f"cli-run:{args.spec}:{time.time()}")
    emit = (lambda line: print(line, flush=True)) if args.follow else (lambda line: None)
    backend = get_backend(
        args.backend,
        aws_conn_id=None,
        region_name=args.region,
        local_hook_kwargs={
            "root": args.jobs_root,
            "base_dir": str(Path(args.base_dir).absolute()),
            "job_log": emit,  # a local job's lines, as they come
        },
    )
    # every check before anything starts; a backend off AWS plans its request as it runs the job
    planned = backend.plan(spec, job_name=name, region=backend.region())
    request, uploads = (planned["request"], tuple(planned["uploads"])) if backend.record.on_aws else (None, ())
    job = RunJob(name, spec, spec, request, uploads)
    print(f"Starting training job {name} ({args.backend})", flush=True)
    backend.find_or_create(
        [name], lambda _name, _ended: job, exhausted=lambda: RuntimeError(f"training job {name} exists")
    )
    try:
        status = backend.wait(name, poll_interval=FOLLOW_POLL_SECONDS, log=emit, stream_logs=args.follow)
        result = backend.result_of(status)
    except KeyboardInterrupt:
        print(f"Interrupted: stopping training job {name}", file=sys.stderr, flush=True)
        backend.stop(name, reason="cli interrupted")
        return 130
    except TrainingJobError as exc:
        print(f"Training job {name} ended {exc.status}: {exc.failure_reason or exc}", file=sys.stderr)
        if exc.failure_reason and str(exc) != exc.failure_reason:
            print(str(exc), file=sys.stderr)  # the failing host and its last lines
        _print_folders(backend.links(status), sys.stderr)
        return EXIT_FAILED
    print(f"Training job {name} Completed", flush=True)
    print(f"  model artifact: {result['model_artifact_uri']}")
    print(f"  output:         {result['output_uri']}")
    if result["checkpoint_uri"]:
        print(f"  checkpoints:    {result['checkpoint_uri']}")
    if result["final_metrics"]:
        print(f"  final metrics:  {result['final_metrics']}")
    _print_folders(backend.links(status), sys.stdout)
    return 0


def _print_folders(links: dict[str, Any], stream: Any) -> None:
    """A job on this machine: its folder (each simulated host's /opt/ml under it)."""
    if links.get("job_dir"):
        print(f"  job folder:     {links['job_dir']}", file=stream)
