"""An endpoint's raw JSON answer checked against botocore's service model, as AWS would answer.

botocore's parser drops members the model lacks and reads loosely, so a test that reads the parsed
response cannot see a misnamed member or a wrong type: these helpers read the raw body of a call and
walk it with the operation's output shape.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from botocore.model import Shape

_SCALARS: dict[str, Callable[[Any], bool]] = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "long": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "float": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "double": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    # the JSON protocol's timestamps are epoch seconds
    "timestamp": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
}


def shape_problems(value: Any, shape: Shape, path: str = "") -> list[str]:
    """What in ``value`` (a decoded JSON answer) AWS would never send under ``shape``: a member the
    model lacks, a missing required member, a wrong type, an enum value or a length out of range."""
    where = path or shape.name
    kind = shape.type_name
    if kind == "structure":
        if not isinstance(value, dict):
            return [f"{where}: {type(value).__name__}, not an object ({shape.name})"]
        problems = [f"{where}.{m}: required, missing" for m in shape.required_members if m not in value]
        for key, item in value.items():
            member = shape.members.get(key)  # type: ignore[attr-defined]
            if member is None:
                problems.append(f"{where}.{key}: not a member of {shape.name}")
            else:
                problems += shape_problems(item, member, f"{where}.{key}")
        return problems
    if kind == "list":
        if not isinstance(value, list):
            return [f"{where}: {type(value).__name__}, not a list"]
        return [
            p for i, item in enumerate(value) for p in shape_problems(item, shape.member, f"{where}[{i}]")
        ]  # type: ignore[attr-defined]
    if kind == "map":
        if not isinstance(value, dict):
            return [f"{where}: {type(value).__name__}, not a map"]
        problems = []
        for key, item in value.items():
            problems += shape_problems(key, shape.key, f"{where} key {key!r}")  # type: ignore[attr-defined]
            problems += shape_problems(item, shape.value, f"{where}[{key!r}]")  # type: ignore[attr-defined]
        return problems
    check = _SCALARS.get(kind)
    if check is None:
        return [f"{where}: a {kind} member (not checked here)"]
    if not check(value):
        return [f"{where}: {value!r} is not a {kind}"]
    meta = shape.metadata
    if kind == "string":
        enum = meta.get("enum")
        if enum and value not in enum:
            return [f"{where}: {value!r} is not one of {shape.name}'s values"]
        if len(value) < meta.get("min", 0) or len(value) > meta.get("max", len(value)):
            return [f"{where}: {len(value)} characters, outside {meta.get('min')}..{meta.get('max')}"]
        if meta.get("pattern") and not _matches(meta["pattern"], value):
            return [f"{where}: {value!r} does not match {shape.name}'s pattern"]
    if kind in ("integer", "long") and not meta.get("min", value) <= value <= meta.get("max", value):
        return [f"{where}: {value} outside {meta.get('min')}..{meta.get('max')}"]
    return []


def _matches(pattern: str, value: str) -> bool:
    try:
        return re.fullmatch(pattern, value, re.S) is not None  # as AWS checks: the whole value
    except re.error:  # a Java class Python lacks (\p{L} and the like): not checked
        return True


def raw_answer(client: Any, operation: str, **params: Any) -> tuple[dict[str, Any], Shape]:
    """The decoded JSON body the endpoint sent for ``operation`` (before botocore's parser), and the
    operation's output shape."""
    bodies: list[bytes] = []
    event = f"before-parse.{client.meta.service_model.service_name}.{operation}"

    def keep(response_dict: dict[str, Any], **_: Any) -> None:
        bodies.append(response_dict["body"])

    client.meta.events.register(event, keep)
    try:
        getattr(client, re.sub(r"(?<!^)(?=[A-Z])", "_", operation).lower())(**params)
    finally:
        client.meta.events.unregister(event, keep)
    shape = client.meta.service_model.operation_model(operation).output_shape
    return json.loads(bodies[-1]), shape
