"""Trigger-form limits that the plan task enforces, so an out-of-range value never reaches a run.

A JSON-Schema ``maximum`` on an Airflow ``Param`` makes the UI's number field clamp the value to it
silently: the run is created with 16 instances when 20 were typed. DAGs therefore put the limit in
the field's title and under ``x-maximum`` (a keyword the form ignores), and ``check_form_limits``
(called by the plan task, before anything launches) refuses values above it with a clear error.
Pure: reads only the Param schemas.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_dist_training.errors import Problem, SpecValidationError

LIMIT_KEY = "x-maximum"


def limited_param_schema(maximum: float) -> dict[str, Any]:
    """The extra schema keys of a Param with a limit the plan task enforces (``Param(**...)``)."""
    return {LIMIT_KEY: maximum}


def form_limit_problems(values: Mapping[str, Any], schemas: Mapping[str, Mapping[str, Any]]) -> list[Problem]:
    problems = []
    for name, value in values.items():
        limit = schemas.get(name, {}).get(LIMIT_KEY)
        if limit is None or isinstance(value, bool) or not isinstance(value, int | float):
            continue
        if value > limit:
            problems.append(
                Problem(f"params.{name}", f"{value} is above this DAG's limit of {limit:g}; nothing was launched")
            )
    return problems


def check_form_limits(context: Mapping[str, Any]) -> None:
    """Raise ``SpecValidationError`` when a run's param exceeds its Param's ``x-maximum``."""
    dag = context.get("dag")
    params = getattr(dag, "params", None)
    if params is None:
        return
    schemas: dict[str, Mapping[str, Any]] = {}
    for name in list(params.keys()):
        param = params.get_param(name) if hasattr(params, "get_param") else None
        schema = getattr(param, "schema", None)
        if isinstance(schema, Mapping):
            schemas[name] = schema
    problems = form_limit_problems(dict(context.get("params") or {}), schemas)
    if problems:
        raise SpecValidationError(problems, source="trigger form")
