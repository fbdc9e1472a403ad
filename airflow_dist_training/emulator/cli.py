"""``airflow-dist-training emulator``: the SageMaker test endpoint in the foreground."""

from __future__ import annotations

import argparse
from typing import Any


def add_emulator_parser(sub: Any) -> None:
    p = sub.add_parser(
        "emulator",
        help="serve S3, SageMaker (jobs really run), CloudWatch Logs and IAM/STS on 127.0.0.1",
        description="A SageMaker test endpoint on 127.0.0.1 that runs training and processing jobs "
        "on this machine. Prints 'endpoint: http://127.0.0.1:N' when ready; stops on SIGINT/SIGTERM.",
    )
    p.add_argument("--port", type=int, default=0, help="TCP port (default: a free one)")
    p.add_argument("--root", default=None, help="folder for job files (default: a temporary folder)")
    p.add_argument(
        "--throttle",
        type=float,
        default=0.0,
        metavar="SHARE",
        help="answer this share of SageMaker calls with ThrottlingException",
    )
    p.add_argument(
        "--capacity-failures",
        type=int,
        default=0,
        metavar="N",
        help="the next N training jobs fail with InsufficientCapacityError",
    )
    p.add_argument(
        "--region",
        default="us-east-1",
        help="the region of the endpoint's own calls; point clients at the same (default: us-east-1)",
    )
    p.add_argument(
        "--account",
        default="123456789012",
        help="the 12-digit account every request acts in: ARNs, GetCallerIdentity (default: 123456789012)",
    )
    p.add_argument(
        "--debug-stream",
        action="store_true",
        help="also write the executor's own lines (always in this command's log) to a "
        "<job>/emulator-debug-<epoch> stream beside the jobs' host streams",
    )
    p.set_defaults(handler=cmd_emulator)


def cmd_emulator(args: argparse.Namespace) -> int:
    try:
        from airflow_dist_training.emulator.server import serve_forever
    except ImportError as exc:  # moto is an optional dependency
        raise SystemExit(
            f"the emulator needs moto: pip install 'airflow-dist-training[emulator]' ({exc})"
        ) from None
    if not (len(args.account) == 12 and args.account.isdigit()):
        raise SystemExit(f"emulator: --account {args.account!r} is not a 12-digit AWS account id")
    return serve_forever(
        port=args.port,
        root=args.root,
        region=args.region,
        account=args.account,
        debug_stream=args.debug_stream,
        throttle_share=args.throttle,
        capacity_failures=args.capacity_failures,
    )
