"""airflow-dist-training: validate, plan and inspect training specs and pipeline files without touching AWS.

Exit codes: 0 success, 2 invalid input (one "file: field.path: message" line per problem on stderr,
never a traceback).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

EXIT_INVALID = 2


def _check_flags(args: argparse.Namespace) -> None:
    """A bad flag value is the flag's error, not a spec field's."""
    from airflow_dist_training.errors import Problem, SpecValidationError

    problems = []
    region = getattr(args, "region", None)
    if region is not None:
        from airflow_dist_training.sagemaker.catalog import known_regions

        if region not in known_regions():
            why = f"{region!r} is not an AWS region with SageMaker training images (e.g. us-east-1, eu-west-1)"
            problems.append(Problem("--region", why))
    if getattr(args, "job_name", None):
        from airflow_dist_training.sagemaker.naming import job_name_problems

        problems += [Problem("--job-name", f"{args.job_name!r} {m}") for m in job_name_problems(args.job_name)]
    if problems:
        raise SpecValidationError(problems)


def _plan(args: argparse.Namespace) -> Any:
    from airflow_dist_training.errors import SpecValidationError
    from airflow_dist_training.sagemaker.naming import job_name
    from airflow_dist_training.sagemaker.request import plan_training_job
    from airflow_dist_training.spec.loading import load_spec

    _check_flags(args)
    spec = load_spec(args.spec)
    name = args.job_name or job_name(spec.name, args.run_identity or f"cli:{args.spec}")
    try:
        return plan_training_job(spec, job_name=name, region=args.region, run_identity=args.run_identity)
    except SpecValidationError as exc:  # planning errors name the file too
        raise SpecValidationError(exc.problems, source=exc.source or args.spec) from None


def _is_pipeline_file(path: str) -> bool:
    from airflow_dist_training.pipeline_checks import looks_like_pipeline
    from airflow_dist_training.spec.loading import read_yaml_file

    return looks_like_pipeline(read_yaml_file(path))


def cmd_validate_pipeline(args: argparse.Namespace) -> int:
    from airflow_dist_training.pipeline_checks import check_pipeline_file

    _check_flags(args)
    check = check_pipeline_file(args.spec, region=args.region if args.region_given else None)
    for warning in check.warnings:
        print(f"warning: {args.spec}: {warning}", file=sys.stderr)
    pipeline = check.pipeline
    where = f", planned for SageMaker ({check.plan.region})" if check.plan is not None else ""
    print(f"{args.spec}: valid pipeline {pipeline.dag_id!r} (backend {pipeline.backend}{where})")
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    if args.command == "validate-pipeline" or _is_pipeline_file(args.spec):
        return cmd_validate_pipeline(args)
    plan = _plan(args)
    for warning in plan.warnings:
        print(f"warning: {args.spec}: {warning}", file=sys.stderr)
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
    from airflow_dist_training.spec.pipeline import PipelineSpec
    from airflow_dist_training.spec.training import TrainingJobSpec

    print(json.dumps((PipelineSpec if args.pipeline else TrainingJobSpec).model_json_schema(), indent=2))
    return 0


def cmd_job_env(args: argparse.Namespace) -> int:
    """Build (or with --show, only name) a job environment of the local backend (default: pytorch)."""
    from pathlib import Path

    from airflow_dist_training.errors import SpecValidationError
    from airflow_dist_training.local import job_env

    if args.show:
        try:
            python, why = job_env.job_python(None, recipe_name=args.recipe)
        except SpecValidationError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        print(f"{python}\t{why}")
        return 0
    try:
        built = job_env.build(
            Path(args.path) if args.path else None,
            base_python=args.python,
            recipe=job_env.RECIPES.get(args.recipe, field="--recipe"),
            log=lambda line: print(line, file=sys.stderr),
        )
    except SpecValidationError as exc:  # an unknown recipe: the registered ones are listed
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except RuntimeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(built)
    return 0


def build_parser() -> argparse.ArgumentParser:
    from airflow_dist_training import __version__

    parser = argparse.ArgumentParser(prog="airflow-dist-training", description=__doc__)
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, handler, help_text in (
        ("validate", cmd_validate, "validate a spec or a pipeline file (exit 2 with one line per problem)"),
        ("plan", cmd_plan, "show the plan: cluster size, global batch, cost bound, warnings"),
        (
            "validate-pipeline",
            cmd_validate_pipeline,
            "validate a pipeline file and the spec it references (SageMaker pipelines are planned too)",
        ),
    ):
        p = sub.add_parser(name, help=help_text)
        p.add_argument("spec", help="path to a spec (or pipeline) YAML file")
        p.add_argument("--region", help="AWS region to plan for (default us-east-1; a pipeline's region_name)")
        p.add_argument("--job-name", help="explicit job name (default: derived from the spec name)")
        p.add_argument("--run-identity", help="run identity the job name derives from")
        p.set_defaults(handler=handler)
        if name == "plan":
            p.add_argument("--json", action="store_true", help="print the exact CreateTrainingJob request as JSON")
    schema = sub.add_parser("schema", help="print the JSON Schema of the spec (or of a pipeline file)")
    schema.add_argument("--pipeline", action="store_true", help="the pipeline file's schema")
    schema.set_defaults(handler=cmd_schema)
    env = sub.add_parser(
        "job-env",
        help="build the local backend's default job environment (torch, torchvision, numpy, AWS's "
        "toolkit), or another recipe's, and print its interpreter; idempotent",
    )
    env.add_argument(
        "--recipe",
        default="pytorch",
        help="which: pytorch (default), or huggingface (transformers, accelerate, datasets, as a layer "
        "over pytorch: the Hugging Face images' jobs)",
    )
    env.add_argument(
        "--path", default=None, help="where (default $ADT_JOB_ENVS/<recipe> or ~/.cache/...; a layer's base beside it)"
    )
    env.add_argument("--python", default=None, help="base interpreter of the venv (default: this one)")
    env.add_argument("--show", action="store_true", help="print which interpreter a job runs with; build nothing")
    env.set_defaults(handler=cmd_job_env)
    from airflow_dist_training.run_command import add_run_parser

    add_run_parser(sub)
    from airflow_dist_training.emulator.cli import add_emulator_parser

    add_emulator_parser(sub)
    from airflow_dist_training.checkpoints_command import add_checkpoints_parser

    add_checkpoints_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    import logging

    from airflow_dist_training.errors import SpecValidationError

    # Commands that build a hook import Airflow, which imports alembic; on Airflow 3.1 that logs
    # ``setup plugin alembic...`` INFO lines to the console, ahead of this command's own output.
    logging.getLogger("alembic").setLevel(logging.WARNING)
    args = build_parser().parse_args(argv)
    if hasattr(args, "region"):
        args.region_given = args.region is not None
        if args.region is None:
            args.region = "us-east-1"
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
