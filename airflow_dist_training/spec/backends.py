"""Training backends by name: what each one can do, and where its implementation lives.

Pure (stdlib only), so a spec and a DAG parse can validate a backend name without importing any
backend. One ``BackendRecord`` per backend, registered by name like the distribution strategies
(``sagemaker/strategies.py``); third parties register theirs with an entry point in the group
``airflow_dist_training.backends`` whose object is a ``BackendRecord``.

Callers decide by the record's capabilities, never by the backend's name: a new backend is one
module with its implementation (``TrainingBackend`` of ``hooks/backends.py``) and its record.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Generic, Literal, Protocol, TypeVar

from pydantic import AfterValidator, Field

ENTRY_POINT_GROUP = "airflow_dist_training.backends"

#: how a pipeline's staging step puts a dataset where the job reads it
StagingKind = Literal["directory", "fsx"]
#: how the evaluation step runs: a process on the worker, or a SageMaker processing job
EvaluationKind = Literal["process", "processing_job"]


@dataclass(frozen=True)
class BackendRecord:
    """A backend's name, its declared capabilities and its implementation."""

    name: str
    #: ``"module:attribute"`` (imported on first use) or a callable; called with ``aws_conn_id``,
    #: ``region_name``, ``hook_kwargs`` and ``record``, it returns the ``TrainingBackend``
    factory: str | Callable[..., Any]
    staging: StagingKind
    evaluation: EvaluationKind
    #: the registry kind (``spec/registries.py``) a pipeline whose registry step names none uses
    default_registry: str
    #: the job outlives the worker: the task persists its name, reattaches after a crash, may
    #: defer to the triggerer, and a teardown stops a job its task left running
    durable: bool
    #: jobs run in an AWS account: plans use the task's region, S3 inputs are checked before
    #: launch, time is billed per instance-hour, links go to the AWS console. Otherwise the job
    #: runs on this machine and reads the channels' local sources.
    on_aws: bool
    description: str = ""

    def load_factory(self) -> Callable[..., Any]:
        return load_reference(self.factory)


def load_reference(reference: str | Callable[..., Any]) -> Callable[..., Any]:
    """A record's factory: ``"module:attribute"`` imported on first use, or the callable itself."""
    if callable(reference):
        return reference
    from importlib import import_module

    module, _, attribute = reference.partition(":")
    return getattr(import_module(module), attribute)  # type: ignore[no-any-return]


class _Named(Protocol):
    @property
    def name(self) -> str: ...


R = TypeVar("R", bound=_Named)


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
    """Records by name: built in, registered at run time, or an entry point in ``group`` whose
    object is a ``kind`` (read once, and only for a name not built in)."""

    def __init__(self, group: str, kind: type[R]) -> None:
        self.group, self.kind = group, kind
        self.by_name: dict[str, R] = {}
        self.entry_points_loaded = False

    def register(self, record: R) -> R:
        """Register (or replace) ``record`` under its name; returns it."""
        self.by_name[record.name] = record
        return record

    def forget(self, name: str) -> None:
        """Unregister a name (tests that registered a toy record)."""
        self.by_name.pop(name, None)

    def _load_entry_points(self) -> None:
        if self.entry_points_loaded:
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

    def find(self, name: object) -> R | None:
        if not isinstance(name, str):
            return None
        if name not in self.by_name:
            self._load_entry_points()
        return self.by_name.get(name)


BACKENDS: Records[BackendRecord] = Records(ENTRY_POINT_GROUP, BackendRecord)
register_backend = BACKENDS.register
forget_backend = BACKENDS.forget
backend_names = BACKENDS.names
find_backend = BACKENDS.find


def unknown_backend_message(name: object) -> str:
    return f"unknown backend {name!r}; registered backends: {', '.join(backend_names())}"


def backend_record(name: str, *, field: str = "backend") -> BackendRecord:
    """The record of ``name``; ``SpecValidationError`` naming ``field`` and the registered names."""
    record = find_backend(name)
    if record is None:
        from airflow_dist_training.errors import Problem, SpecValidationError

        raise SpecValidationError([Problem(field, unknown_backend_message(name))])
    return record


def runs_on_aws(name: object) -> bool | None:
    """Whether the backend a job record names runs jobs on AWS; None for one not registered here
    (a record written by a backend since uninstalled)."""
    record = find_backend(name)
    return None if record is None else record.on_aws


def _registered(name: str) -> str:
    if find_backend(name) is None:
        raise ValueError(unknown_backend_message(name))
    return name


def _registered_names(schema: dict[str, Any]) -> None:
    schema["examples"] = list(backend_names())


#: a backend name, validated against the registry when a spec or pipeline is parsed
BackendName = Annotated[
    str, AfterValidator(_registered), Field(json_schema_extra=_registered_names, description="a registered backend")
]


register_backend(
    BackendRecord(
        name="local",
        factory="airflow_dist_training.hooks.backends:LocalBackend",
        staging="directory",
        evaluation="process",
        default_registry="local",
        durable=False,
        on_aws=False,
        description="the CreateTrainingJob request runs on this machine (simulated hosts, torchrun)",
    )
)
register_backend(
    BackendRecord(
        name="sagemaker",
        factory="airflow_dist_training.hooks.backends:SageMakerBackend",
        staging="fsx",
        evaluation="processing_job",
        default_registry="sagemaker",
        durable=True,
        on_aws=True,
        description="the job runs on SageMaker",
    )
)
