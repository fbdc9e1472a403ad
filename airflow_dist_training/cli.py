"""``airflow-dist-training``: validate, plan and inspect training specs without touching AWS.

Exit codes: 0 success, 2 invalid input (one ``field.path: message`` line per problem on stderr,
never a traceback).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

EXIT_INVALID = 2


def _load(path: str) -> Any:
    from airflow_dist_training.spec.loading import load_spec

    return load_spec(path)


def _plan(args: argparse.Namespace) -> Any:
    from airflow_dist_training.sagemaker.naming import job_name
    from airflow_dist_training.sagemaker.request import plan_training_job

    spec = _load(args.spec)
    name = args.job_name or job_name(spec.name, args.run_identity or f"cli:{args.spec}")
    return plan_training_job(spec, job_name=name, region=args.region, run_identity=args.run_identity)


def cmd_validate(args: argparse.Namespace) -> int:
    plan = _plan(args)
    for warning in plan.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    print(
        f"{args.spec}: valid ({plan.cluster.instances} instance(s), cluster size {plan.cluster.cluster_size})"
    )
    return 0


def cmd_plan(args: argparse.Namespace) -> int:
    plan = _plan(args)
    if args.json:
        print(json.dumps(plan.request, indent=2, sort_keys=True))
        for warning in plan.warnings:
            print(f"warning: {warning}", file=sys.stderr)
        return 0
    from airflow_dist_training.sagemaker.summary import render_plan

    print(render_plan(plan))
    return 0


def cmd_schema(args: argparse.Namespace) -> int:
    from airflow_dist_training.spec.training import TrainingJobSpec

    print(json.dumps(TrainingJobSpec.model_json_schema(), indent=2))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="airflow-dist-training", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    for name, handler, help_text in (
        ("validate", cmd_validate, "validate a spec (exit 2 with one line per problem)"),
        ("plan", cmd_plan, "show the plan: cluster size, global batch, cost bound, warnings"),
    ):
        p = sub.add_parser(name, help=help_text)
        p.add_argument("spec", help="path to a spec YAML file")
        p.add_argument("--region", default="us-east-1", help="AWS region to plan for (default us-east-1)")
        p.add_argument(
            "--job-name", default=None, help="explicit job name (default: derived from the spec name)"
        )
        p.add_argument("--run-identity", default=None, help="run identity the job name derives from")
        p.set_defaults(handler=handler)
        if name == "plan":
            p.add_argument(
                "--json", action="store_true", help="print the exact CreateTrainingJob request as JSON"
            )
    schema = sub.add_parser("schema", help="print the JSON Schema of the spec")
    schema.set_defaults(handler=cmd_schema)
    from airflow_dist_training.run_command import add_run_parser

    add_run_parser(sub)
    from airflow_dist_training.emulator.cli import add_emulator_parser

    add_emulator_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from airflow_dist_training.errors import SpecValidationError

    args = build_parser().parse_args(argv)
    try:
        return int(args.handler(args))
    except SpecValidationError as exc:
        for problem in exc.problems:
            where = f"{exc.source}: " if exc.source else ""
            print(f"error: {where}{problem}", file=sys.stderr)
        return EXIT_INVALID
    except BrokenPipeError:  # e.g. `plan ... | head`
        return 0


if __name__ == "__main__":
    sys.exit(main())
