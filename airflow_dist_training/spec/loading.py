"""Turning user input (a spec object, a dict, a YAML file or YAML text) into a validated spec.

Every problem becomes a ``(field path, message)`` pair inside one ``SpecValidationError``: no
pydantic or YAML traceback ever reaches the user.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, ValidationError

from airflow_dist_training.errors import Problem, SpecValidationError

if TYPE_CHECKING:  # the training spec's models load when a training spec is read, not at import
    from airflow_dist_training.spec.training import TrainingJobSpec

M = TypeVar("M", bound=BaseModel)

# pydantic puts the discriminated-union tag into the location; users never wrote it.
# (the mapping holding the union's members -> their tags)
_UNION_TAGS = {"channels": {"s3", "fsx", "efs"}, "ranges": {"continuous", "integer", "categorical"}}
_STEP_TAGS = {"fsx", "directory"}  # a pipeline staging step's kind


SPEC_SCHEMA_HINT = "airflow-dist-training schema"
PIPELINE_SCHEMA_HINT = "airflow-dist-training schema --pipeline"


def _message(error: Any, hint: str = SPEC_SCHEMA_HINT) -> str:
    msg = str(error["msg"])
    kind = error.get("type", "")
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, ") :]
    if kind == "extra_forbidden":
        return f"unknown field (check the spelling; see `{hint}`)"
    if kind == "missing":
        return "is required"
    value = error.get("input")
    if kind in ("int_type", "int_from_float") and isinstance(value, bool):
        return f"must be an integer, not a boolean ({str(value).lower()})"
    if kind in ("int_type", "int_parsing") and isinstance(value, str):
        return f"must be an integer, not the string {value!r}"
    if kind == "bool_type":
        return f"must be true or false, got {value!r}"
    if kind == "string_pattern_mismatch":
        pattern = error.get("ctx", {}).get("pattern", "")
        return f"{error.get('input')!r} does not match the required pattern {pattern}"
    if kind == "union_tag_invalid" and "kind" in str(error.get("ctx", {}).get("discriminator")):
        return f"kind must be one of {error['ctx']['expected_tags']} (got {error['ctx']['tag']!r})"
    if kind == "union_tag_invalid":
        tags = str(error.get("ctx", {}).get("expected_tags", "")).replace("'", "")
        return f"type must be one of {tags} (got {error.get('input', {}).get('type')!r})"
    return msg


def problems_from_validation_error(
    exc: ValidationError, prefix: str = "", *, pipeline: bool = False
) -> list[Problem]:
    """Field-path problems; in a pipeline, the training spec's own fields keep the spec schema hint."""
    problems = []
    for error in exc.errors():
        loc = tuple(error["loc"])
        # Drop the union tag pydantic inserts for discriminated unions (channels.<name>.<tag>.field).
        cleaned: list[int | str] = [
            part
            for i, part in enumerate(loc)
            if not (i >= 2 and part in _UNION_TAGS.get(str(loc[i - 2]), ()))
            and not (i == 1 and loc[0] == "staging" and part in _STEP_TAGS)
        ]
        path = ".".join(
            str(p) if not isinstance(p, int) else f"[{p}]"
            for p in ((prefix,) if prefix else ()) + tuple(cleaned)
        ).replace(".[", "[")
        in_spec = not pipeline or (bool(cleaned) and cleaned[0] == "training")
        hint = SPEC_SCHEMA_HINT if in_spec else PIPELINE_SCHEMA_HINT
        problems.append(Problem(path=path, message=_message(error, hint)))
    return problems


# Hostile-input bounds (a spec or pipeline is a few KiB; these leave room for big hyperparameter maps).
MAX_FILE_BYTES = 1024 * 1024
MAX_ALIASES = 1000  # references to an anchor (*name); a YAML "billion laughs" needs many
MAX_NODES = 100_000  # values after alias expansion: what pydantic and json.dumps would walk
MAX_DEPTH = 100


class _YamlLimit(Exception):
    """A bound of the YAML document exceeded at ``node`` (its message names the node's line)."""

    def __init__(self, message: str, node: Any):
        super().__init__(f"line {node.start_mark.line + 1}: {message}")


def _check_alias_count(aliases: int, node: Any) -> None:
    if aliases > MAX_ALIASES:
        raise _YamlLimit(f"more than {MAX_ALIASES} alias references (*name): refusing to expand them", node)


def _check_duplicate_keys(node: Any) -> None:
    """A mapping node's keys are unique (YAML would silently keep only the last one)."""
    import yaml

    seen: dict[Any, int] = {}
    for k, _v in node.value:
        if isinstance(k, yaml.ScalarNode) and k.tag != "tag:yaml.org,2002:merge":
            ident = (k.tag, k.value)
            if ident in seen:
                raise _YamlLimit(
                    f"duplicate key {k.value!r} (first on line {seen[ident]}); "
                    "YAML would silently keep only the last one",
                    k,
                )
            seen[ident] = k.start_mark.line + 1


_TAG = "tag:yaml.org,2002:"
# The safe constructor's own functions for the plain scalar tags; any other tag (merge keys, !!set,
# !!binary, ...) leaves the document to PyYAML's constructor.
_SCALARS = {_TAG + name: name for name in ("str", "null", "bool", "int", "float")}


class _DocumentWalk:
    """Duplicate keys, alias count, expanded size and depth, on the composed node graph; and the
    document's value, built in the same walk (``plain`` turns false where PyYAML must build it).

    The graph shares a node wherever an alias points to it, so sizes are computed once per node
    (memoised): checking a "billion laughs" document costs its unique nodes, not its expansion. A
    shared node gives one shared value, as PyYAML's constructor does. Building here rather than in a
    second pass of ``construct_document`` halves the Python calls a file's YAML costs at each parse.
    """

    def __init__(self, loader: Any) -> None:
        self.loader = loader
        self.sizes: dict[int, int] = {}
        self.values: dict[int, Any] = {}
        self.on_path: set[int] = set()
        self.aliases = 0
        self.plain = True  # every node so far has its value built here

    def walk(self, node: Any, depth: int) -> int:
        import yaml

        key = id(node)
        if key in self.sizes:
            self.aliases += 1
            _check_alias_count(self.aliases, node)
            return self.sizes[key]
        if key in self.on_path:
            raise _YamlLimit("an alias refers to a value that contains it (recursive YAML)", node)
        if depth > MAX_DEPTH:
            raise _YamlLimit(f"nested more than {MAX_DEPTH} levels deep", node)
        self.on_path.add(key)
        if isinstance(node, yaml.MappingNode):
            total = self._mapping(node, depth)
        elif isinstance(node, yaml.SequenceNode):
            total = self._sequence(node, depth)
        else:
            total = 1
            self.values[key] = self._scalar(node) if self.plain else None
        self.on_path.discard(key)
        self.sizes[key] = total
        if total > MAX_NODES:
            raise _YamlLimit(
                f"expands to more than {MAX_NODES} values (alias expansion or a huge document)", node
            )
        return total

    def _mapping(self, node: Any, depth: int) -> int:
        import yaml

        _check_duplicate_keys(node)
        self.plain = self.plain and node.tag == _TAG + "map"
        mapping: dict[Any, Any] = {}
        self.values[id(node)] = mapping
        total = 1
        for k, v in node.value:
            total += self.walk(k, depth + 1) + self.walk(v, depth + 1)
            if self.plain and isinstance(k, yaml.ScalarNode):
                mapping[self.values[id(k)]] = self.values[id(v)]
            else:
                self.plain = False  # a mapping as a key: PyYAML's rules (and its error)
        return total

    def _sequence(self, node: Any, depth: int) -> int:
        self.plain = self.plain and node.tag == _TAG + "seq"
        items: list[Any] = []
        self.values[id(node)] = items
        total = 1
        for item in node.value:
            total += self.walk(item, depth + 1)
            if self.plain:
                items.append(self.values[id(item)])
        return total

    def _scalar(self, node: Any) -> Any:
        from yaml.constructor import SafeConstructor

        name = _SCALARS.get(node.tag)
        if name is None:  # a merge key, !!binary, ...
            self.plain = False
            return None
        if name == "str":
            return node.value
        try:
            return getattr(SafeConstructor, f"construct_yaml_{name}")(self.loader, node)
        except Exception:  # PyYAML's constructor raises it again, as the user's error
            self.plain = False
            return None


def _error(message: str, source: str) -> SpecValidationError:
    """A problem with the whole file (no field path)."""
    return SpecValidationError([Problem("", message)], source=source)


@cache
def _loader_class() -> Any:
    """The safe loader (C when available: ~10x faster), with dates and times kept as strings.

    No spec field is a date: ``start_date: 2026-01-01`` must reach the field as text, so a bad
    date is that field's error rather than a YAML constructor exception.
    """
    import yaml

    base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    resolvers = {
        first: [(tag, regexp) for tag, regexp in entries if tag != "tag:yaml.org,2002:timestamp"]
        for first, entries in base.yaml_implicit_resolvers.items()
    }
    return type("SpecLoader", (base,), {"yaml_implicit_resolvers": resolvers})


def parse_yaml(text: str, source: str) -> Any:
    """Parse YAML text safely: no duplicate keys, bounded aliases, size and depth; errors name the line."""
    import yaml

    loader_class = _loader_class()
    if len(text.encode("utf-8", "surrogatepass")) > MAX_FILE_BYTES:
        raise _error(
            f"is larger than {MAX_FILE_BYTES // 1024} KiB: not a spec (refusing to parse it)", source
        )
    loader = loader_class(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        document = _DocumentWalk(loader)
        document.walk(node, 0)
        return document.values[id(node)] if document.plain else loader.construct_document(node)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise _error(f"{where}invalid YAML: {problem}", source) from None
    except _YamlLimit as exc:
        raise _error(str(exc), source) from None
    except (ValueError, OverflowError, RecursionError, TypeError) as exc:
        # e.g. a timestamp that is no date (2026-02-30) or an integer with too many digits
        raise _error(f"invalid YAML value: {str(exc)[:200]}", source) from None
    finally:
        loader.dispose()


def decode_yaml_bytes(data: bytes, source: str) -> str:
    """UTF-8 (a BOM is allowed); anything else is an error naming the byte offset and line."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise _error(
            f"is not UTF-8 text: byte offset {exc.start} (line {line}) is 0x{data[exc.start]:02x}; "
            "save the file as UTF-8",
            source,
        ) from None


def read_yaml_file(path: str | Path, *, kind: str = "spec") -> Any:
    """Read a YAML file as bytes, bounded in size, and parse it (errors name the file)."""
    p = Path(path)
    source = str(p)
    try:
        with open(source, "rb") as fh:  # a directory raises here: no stat first (one call less per parse)
            data = fh.read(MAX_FILE_BYTES + 1)
    except IsADirectoryError:
        raise _error(f"is a directory, not a {kind} file (give the path of a .yaml file)", source) from None
    except OSError as exc:
        raise _error(f"cannot read {kind} file: {exc.strerror or exc}", source) from None
    if len(data) > MAX_FILE_BYTES:
        raise _error(
            f"is larger than {MAX_FILE_BYTES // 1024} KiB: not a {kind} file (refusing to read it)", source
        )
    return parse_yaml(decode_yaml_bytes(data, source), source=source)


def validate_model(
    model: type[M], data: Any, source: str | None = None, prefix: str = "", *, pipeline: bool = False
) -> M:
    """Validate ``data`` against ``model``, raising ``SpecValidationError`` with field paths."""
    if not isinstance(data, Mapping):
        raise SpecValidationError(
            [Problem(prefix, f"must be a mapping of fields, got {type(data).__name__}")], source=source
        )
    try:
        return model.model_validate(dict(data))
    except ValidationError as exc:
        raise SpecValidationError(
            problems_from_validation_error(exc, prefix, pipeline=pipeline), source=source
        ) from None


def load_spec(source: TrainingJobSpec | Mapping[str, Any] | str | Path) -> TrainingJobSpec:
    """Load a spec from an object, a dict, a ``.yaml``/``.yml`` path, or YAML text.

    Raises ``SpecValidationError`` listing every problem with its field path.
    """
    from airflow_dist_training.spec.training import TrainingJobSpec

    if isinstance(source, TrainingJobSpec):
        return source
    if isinstance(source, Mapping):
        return validate_model(TrainingJobSpec, source)
    if isinstance(source, Path) or (isinstance(source, str) and _looks_like_path(source)):
        spec = validate_model(TrainingJobSpec, read_yaml_file(source), source=str(source))
        spec._source_file = str(source)
        return spec
    if isinstance(source, str):
        return validate_model(TrainingJobSpec, parse_yaml(source, source="<yaml>"), source="<yaml>")
    raise SpecValidationError(
        [Problem("", f"a spec must be a TrainingJobSpec, a dict or a YAML path, got {type(source).__name__}")]
    )


def _looks_like_path(text: str) -> bool:
    if "\n" in text:
        return False
    if text.strip().endswith((".yaml", ".yml", ".json")):
        return True
    # a one-line string naming an existing file or directory is a path, not YAML text
    try:
        return ": " not in text and bool(text.strip()) and Path(text.strip()).exists()
    except (OSError, ValueError):
        return False
