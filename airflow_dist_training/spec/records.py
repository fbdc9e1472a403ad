"""Records by name: the one shape of the backends, registries, strategies, stores, job kinds, and
evaluation and staging kinds.

Pure (stdlib; pydantic where a step is validated): a spec and a DAG parse validate a name without
importing what it names.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Generic, Protocol, TypeVar


class _Named(Protocol):
    @property
    def name(self) -> str: ...


R = TypeVar("R", bound=_Named)


class Factory:
    """A record whose implementation is ``factory``: ``"module:attribute"`` imported on first
    use, or a callable."""

    factory: str | Callable[..., Any]

    def load_factory(self) -> Callable[..., Any]:
        if callable(self.factory):
            return self.factory
        from importlib import import_module

        module, _, attribute = self.factory.partition(":")
        return getattr(import_module(module), attribute)  # type: ignore[no-any-return]


def _group_declared_on_path(group: str) -> bool:
    """Whether any installed distribution on ``sys.path`` declares the entry-point group ``group``.

    A substring check of each ``entry_points.txt`` (~2 ms for 250 distributions) instead of
    ``importlib.metadata`` (~30 ms to import it, ~8 ms to scan): the shipped DAG lists every backend
    at each parse, and usually no third-party backend is installed. Distributions that a path scan
    cannot see (zip archives, custom finders) make this answer True: the full scan then decides.
    """
    import os
    import sys
    from importlib.machinery import PathFinder

    # the path-based finders (the stdlib's, the importlib_metadata backport's) see what is scanned below
    if any(
        hasattr(f, "find_distributions") and f is not PathFinder and type(f).__name__ != "MetadataPathFinder"
        for f in sys.meta_path
    ):
        return True
    marker = f"[{group}]"
    for folder in sys.path:
        if os.path.isfile(folder):  # a zip archive on the path
            return True
        try:
            with os.scandir(folder or ".") as entries:
                names = [e.path for e in entries if e.name.endswith((".dist-info", ".egg-info"))]
        except OSError:
            continue
        for name in names:
            try:
                with open(os.path.join(name, "entry_points.txt"), encoding="utf-8") as f:
                    if marker in f.read():
                        return True
            except OSError:
                continue
    return False


class Records(Generic[R]):
    """Records of one ``kind`` by name: built in, registered at run time, or (with a ``group``)
    an entry point whose object is a ``kind``, read once and only for a name not registered.

    ``noun`` and ``plural`` word the unknown-name error; ``forget`` refuses the ``builtin`` ones."""

    def __init__(
        self, kind: type[R], noun: str, plural: str, group: str | None = None, builtin: Iterable[R] = ()
    ) -> None:
        self.kind, self.noun, self.plural, self.group = kind, noun, plural, group
        self.by_name: dict[str, R] = {record.name: record for record in builtin}
        self.builtin = frozenset(self.by_name)
        self.entry_points_loaded = group is None

    def register(self, record: R) -> R:
        """Register (or replace) ``record`` under its name; returns it."""
        self.by_name[record.name] = record
        return record

    def forget(self, name: str) -> None:
        """Unregister a name (tests that registered a toy record)."""
        if name in self.builtin:
            raise ValueError(f"{name!r} is a built-in {self.noun}")
        self.by_name.pop(name, None)

    def _load_entry_points(self) -> None:
        if self.entry_points_loaded or self.group is None:  # None: for mypy
            return
        self.entry_points_loaded = True
        if not _group_declared_on_path(self.group):
            return
        from importlib.metadata import entry_points

        for entry_point in entry_points(group=self.group):
            record = entry_point.load()
            if isinstance(record, self.kind):
                self.by_name.setdefault(record.name, record)

    def names(self) -> tuple[str, ...]:
        """Every registered name (built-in, entry points, registered at run time)."""
        self._load_entry_points()
        return tuple(self.by_name)

    def records(self) -> list[R]:
        self._load_entry_points()
        return list(self.by_name.values())

    def find(self, name: object) -> R | None:
        if not isinstance(name, str):
            return None
        if name not in self.by_name:
            self._load_entry_points()
        return self.by_name.get(name)

    def unknown(self, name: object) -> str:
        return f"unknown {self.noun} {name!r}; registered {self.plural}: {', '.join(self.names())}"

    def get(self, name: object, *, field: str) -> R:
        """The record of ``name``; ``SpecValidationError`` naming ``field`` and the registered names."""
        record = self.find(name)
        if record is None:
            from airflow_dist_training.errors import Problem, SpecValidationError

            raise SpecValidationError([Problem(field, self.unknown(name))])
        return record


def step_of_kind(records: Records[Any], value: Any, title: str, *, typed: type[Any], untyped: type[Any]) -> Any:
    """A pipeline step validated by the step model of the kind it names (its record in ``records``):
    a dict, or a step written for any backend (``untyped``); a ``typed`` one is returned as it is.
    An unknown kind is an error at ``kind``; the step model's errors keep their field paths."""
    if isinstance(value, untyped):
        value = value.model_dump(exclude_unset=True)
    elif isinstance(value, typed):
        return value
    kind = value.get("kind") if isinstance(value, dict) else None
    record = records.find(kind)
    if record is None:
        from pydantic import ValidationError
        from pydantic_core import PydanticCustomError

        message = records.unknown(kind).replace("{", "{{").replace("}", "}}")
        error = PydanticCustomError(f"unknown_{title}", message)
        raise ValidationError.from_exception_data(title, [{"type": error, "loc": ("kind",), "input": kind}])
    return record.step.model_validate(value)  # type: ignore[attr-defined]


class KindsSchema:
    """The JSON schema of a pipeline step: one of the registered kinds' (read when it is asked for)."""

    def __init__(self, records: Records[Any]) -> None:
        self.records = records

    def __get_pydantic_json_schema__(self, core_schema: Any, handler: Any) -> Any:
        # through ``handler``: a step's nested models land in the document's own ``$defs``
        return {"oneOf": [handler(r.step.__pydantic_core_schema__) for r in self.records.records()]}
