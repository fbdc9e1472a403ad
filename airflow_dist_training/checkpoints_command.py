"""``airflow-dist-training checkpoints list|latest URI``: what a checkpoint root holds, without Airflow running.

For each checkpoint: its layout and step, whether it is complete and if not why, its size and its
metrics. S3 is reached through the AWS environment (boto3's default chain) or ``--aws-conn-id``;
local paths directly.

Exit codes: 0 success (``latest``: a complete checkpoint was found); 1 ``latest`` found no complete
checkpoint (``list`` never fails for that); 2 invalid input: a bad URI, an unknown layout, a file
that could not be parsed in the way of ``latest``, mixed layouts under ``auto`` for ``latest``;
3 the store refused access (the message names the permission).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import sys
from typing import Any

EXIT_NONE_COMPLETE = 1
EXIT_ACCESS = 3


def add_checkpoints_parser(sub: Any) -> None:
    from airflow_dist_training.checkpoints.layouts import layout_names

    parser = sub.add_parser(
        "checkpoints", help="list a checkpoint root, or print its newest complete checkpoint"
    )
    actions = parser.add_subparsers(dest="action", required=True)
    for name, help_text in (
        ("list", "every checkpoint: layout, step, complete or why not, size, metrics"),
        ("latest", "the newest complete checkpoint (exit 1 when there is none)"),
    ):
        p = actions.add_parser(name, help=help_text)
        p.add_argument("uri", help="checkpoint root: s3://bucket/prefix/, file:///dir or /dir")
        p.add_argument("--layout", default="auto", help=f"one of {', '.join(layout_names())} (default auto)")
        p.add_argument(
            "--step-pattern", default=None, help="single-file: e.g. epoch={epoch}-step={step}.ckpt"
        )
        p.add_argument("--json", action="store_true", help="print JSON")
        p.add_argument(
            "--aws-conn-id", default=None, help="Airflow connection for S3 (default: the AWS environment)"
        )
        p.add_argument(
            "--region", dest="aws_region", default=None, help="AWS region (default: the environment's)"
        )
        p.set_defaults(handler=cmd_checkpoints)


def _size(size: int | None) -> str:
    value = float(size or 0)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError  # unreachable: the loop returns at GiB


def _row(item: dict[str, Any]) -> str:
    metrics = " ".join(f"{k}={v:g}" for k, v in sorted(item["metrics"].items()))
    state = "complete" if item["complete"] else "INCOMPLETE"
    line = f"{item['step']:>12}  {item['layout']:<11}  {state:<10}  {_size(item['total_bytes']):>10}  {item['uri']}"
    return line + (f"  {metrics}" if metrics else "")


def cmd_checkpoints(args: argparse.Namespace) -> int:
    from airflow_dist_training.errors import AwsPermissionError
    from airflow_dist_training.hooks.checkpoints import CheckpointHook

    # stdout is the answer's: not the INFO lines botocore and the Amazon provider log on the way
    disabled = logging.root.manager.disable
    logging.disable(logging.INFO)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            hook = CheckpointHook(
                aws_conn_id=args.aws_conn_id,
                region_name=args.aws_region,
                verify_region=False,
                layout=args.layout,
                step_pattern=args.step_pattern,
            )
            found: Any = hook.latest_complete(args.uri) if args.action == "latest" else hook.scan(args.uri)
    except AwsPermissionError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_ACCESS
    finally:
        logging.disable(disabled)
    return _latest(found, args) if args.action == "latest" else _list(found, args)


def _latest(info: Any, args: argparse.Namespace) -> int:
    if info is None:
        print(f"no complete checkpoint under {args.uri}", file=sys.stderr)
        return EXIT_NONE_COMPLETE
    print(json.dumps(info.to_xcom(), indent=2, sort_keys=True) if args.json else info.uri)
    return 0


def _list(infos: list[Any], args: argparse.Namespace) -> int:
    from airflow_dist_training.hooks.checkpoints import mixed_layouts

    items = [{**info.to_xcom(), "name": info.name} for info in infos]
    if args.json:
        print(json.dumps(items, indent=2, sort_keys=True))
    elif not items:
        print(f"no checkpoints under {args.uri} (layout {args.layout})")
    else:
        print(f"{'step':>12}  {'layout':<11}  {'state':<10}  {'size':>10}  uri  metrics")
        for item in items:
            print(_row(item))
            for reason in item["reasons"]:
                print(f"{'':>14}why: {reason}")
    if (
        args.layout == "auto"
        and (mixed := mixed_layouts([(i.layout, i.name) for i in infos], args.uri)) is not None
    ):
        print(f"warning: {mixed.problems[0].message}", file=sys.stderr)
    return 0
