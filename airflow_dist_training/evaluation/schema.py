"""The ``evaluation.json`` contract between an evaluation script and the quality gate (``docs/evaluation.md``).

Pure: standard library and pydantic only. Metric values are finite numbers, ``metrics`` is not
empty, and unknown top-level keys are rejected (a typo such as ``"metric"`` would otherwise drop
every metric silently). Every problem is a ``SpecValidationError`` naming the file and the metric.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from airflow_dist_training.errors import Problem, SpecValidationError
from airflow_dist_training.storage.location import split_uri

SCHEMA_VERSION = "1"
EVALUATION_FILE_NAME = "evaluation.json"
HASH_PATTERN = r"^[a-z0-9]+:[0-9a-fA-F]{8,128}$"


class EvaluationResult(BaseModel):
    """A parsed, validated ``evaluation.json``."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    schema_version: Literal["1"] = Field(default="1", description="Version of this schema.")
    metrics: dict[str, float] = Field(description="Metric name -> finite number. At least one.")
    slices: dict[str, dict[str, float]] = Field(
        default_factory=dict, description="Slice name -> metric name -> finite number."
    )
    evaluation_set_hash: str | None = Field(
        default=None,
        pattern=HASH_PATTERN,
        description="Content hash of the evaluation set, '<algorithm>:<hex>', e.g. 'sha256:3f1c...'.",
    )
    model: str | None = Field(default=None, description="URI of the evaluated model artifact.")
    details: dict[str, Any] = Field(default_factory=dict, description="Free-form; ignored by the gate.")

    def metric(self, name: str) -> float | None:
        """The value of ``name`` (``metric`` or ``metric@slice``), or ``None`` when absent."""
        if "@" in name:
            metric, _, slice_name = name.partition("@")
            return self.slices.get(slice_name, {}).get(metric)
        return self.metrics.get(name)

    def metric_names(self) -> list[str]:
        """Every addressable metric: top-level names, then ``metric@slice`` names."""
        slices = [f"{m}@{name}" for name in sorted(self.slices) for m in sorted(self.slices[name])]
        return sorted(self.metrics) + slices


def _describe(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return repr(value) if isinstance(value, str) else json.dumps(value)[:60]


def _check_number(value: Any, path: str, problems: list[Problem]) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        problems.append(Problem(path, f"must be a number, got {_describe(value)}"))
    elif not math.isfinite(value):
        problems.append(Problem(path, f"must be a finite number, got {_describe(value)}"))


def _check_metrics(mapping: Any, path: str, problems: list[Problem], *, required: bool) -> None:
    if not isinstance(mapping, Mapping):
        problems.append(
            Problem(path, f"must be an object of metric name -> number, got {_describe(mapping)}")
        )
        return
    if required and not mapping:
        problems.append(Problem(path, "must hold at least one metric"))
    for name, value in mapping.items():
        _check_number(value, f"{path}.{name}", problems)


def parse_evaluation(data: Any, source: str) -> EvaluationResult:
    """Validate an already-decoded ``evaluation.json`` document (a dict).

    Numbers are checked by hand first so that every message names the metric and the wrong value
    in the user's words (pydantic would coerce ``"0.9"`` and say "Input should be a valid number").
    """
    if isinstance(data, EvaluationResult):
        return data
    if not isinstance(data, Mapping):
        raise SpecValidationError(
            [Problem("", f"must be a JSON object with a 'metrics' field, got {_describe(data)}")],
            source=source,
        )
    problems = _header_problems(data) + _metric_problems(data) + _annotation_problems(data)
    if problems:
        raise SpecValidationError(problems, source=source)
    return EvaluationResult.model_validate({k: v for k, v in data.items() if v is not None})


def _header_problems(data: Mapping[str, Any]) -> list[Problem]:
    """Unknown fields and the schema version."""
    allowed = ", ".join(sorted(EvaluationResult.model_fields))
    problems = [
        Problem(str(key), f"unknown field (allowed: {allowed})")
        for key in data
        if key not in EvaluationResult.model_fields
    ]
    version = data.get("schema_version", SCHEMA_VERSION)
    if version != SCHEMA_VERSION:
        why = f"unsupported version {_describe(version)} (supported: {SCHEMA_VERSION!r})"
        problems.append(Problem("schema_version", why))
    return problems


def _metric_problems(data: Mapping[str, Any]) -> list[Problem]:
    """``metrics`` (required) and ``slices``: every value a finite number."""
    problems: list[Problem] = []
    if "metrics" not in data:
        problems.append(Problem("metrics", "is required (an object of metric name -> number)"))
    else:
        _check_metrics(data["metrics"], "metrics", problems, required=True)
    slices = data.get("slices", {})
    if not isinstance(slices, Mapping):
        problems.append(
            Problem("slices", f"must be an object of slice name -> metrics, got {_describe(slices)}")
        )
    else:
        for slice_name, metrics in slices.items():
            _check_metrics(metrics, f"slices.{slice_name}", problems, required=False)
    return problems


def _annotation_problems(data: Mapping[str, Any]) -> list[Problem]:
    """``evaluation_set_hash``, ``model`` and ``details``."""
    problems: list[Problem] = []
    h = data.get("evaluation_set_hash")
    if h is not None and not (isinstance(h, str) and re.match(HASH_PATTERN, h)):
        problems.append(
            Problem("evaluation_set_hash", f"must look like 'sha256:<hex digest>', got {_describe(h)}")
        )
    if data.get("model") is not None and not isinstance(data["model"], str):
        problems.append(Problem("model", f"must be a string, got {_describe(data['model'])}"))
    if data.get("details") is not None and not isinstance(data["details"], Mapping):
        problems.append(Problem("details", f"must be an object, got {_describe(data['details'])}"))
    return problems


def parse_evaluation_text(text: str | bytes, source: str) -> EvaluationResult:
    """Decode and validate ``evaluation.json`` text; malformed JSON names the line and column."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise SpecValidationError(
                [Problem("", f"is not UTF-8 text ({exc.reason})")], source=source
            ) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SpecValidationError(
            [Problem("", f"malformed JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}")],
            source=source,
        ) from None
    return parse_evaluation(data, source)


def load_evaluation_file(path: str) -> EvaluationResult:
    """Read and validate a local ``evaluation.json`` (a path or a ``file://`` URI)."""
    from pathlib import Path

    local = split_uri(path)[2]
    try:
        raw = Path(local).read_bytes()
    except FileNotFoundError:
        why = "file not found (did the evaluation script write evaluation.json to its output dir?)"
        raise SpecValidationError([("", why)], source=path) from None
    except OSError as exc:
        raise SpecValidationError([Problem("", f"cannot read: {exc.strerror}")], source=path) from None
    return parse_evaluation_text(raw, source=path)


def evaluation_json_schema() -> dict[str, Any]:
    """The JSON Schema of ``evaluation.json`` (for docs and editors)."""
    return EvaluationResult.model_json_schema()
