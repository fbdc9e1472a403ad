"""Training backends by name: what each one can do, and where its implementation lives.

Pure (pydantic + stdlib), so a spec and a DAG parse can validate a backend name without importing
any backend; third parties register a ``BackendRecord`` with an entry point in the group
``airflow_dist_training.backends``. Callers decide by the record's capabilities, never by the
backend's name: a new backend is its implementation (``hooks/backends.py``) and its record.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Annotated, Any

from pydantic import AfterValidator, Field

from airflow_dist_training.spec.records import Factory, Records

ENTRY_POINT_GROUP = "airflow_dist_training.backends"


@dataclass(frozen=True)
class BackendRecord(Factory):
    """A backend's name, its declared capabilities and its implementation."""

    name: str
    #: ``"module:attribute"`` (imported on first use) or a callable; called with ``aws_conn_id``,
    #: ``region_name``, ``hook_kwargs`` and ``record``, it returns the ``TrainingBackend``
    factory: str | Callable[..., Any]
    #: the staging kind (``spec/pipeline.py``) a pipeline's staging step without ``kind`` is of
    staging: str
    #: the evaluation kind (``spec/evaluations.py``): how the evaluation step runs
    evaluation: str
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
    #: a tuning job runs in the task, its trials on this machine's request executor (``local/tuning.py``)
    tunes_in_task: bool = False


BACKENDS: Records[BackendRecord] = Records(BackendRecord, "backend", "backends", ENTRY_POINT_GROUP)
register_backend = BACKENDS.register
forget_backend = BACKENDS.forget
backend_names = BACKENDS.names
find_backend = BACKENDS.find
#: the record of a name; ``SpecValidationError`` naming ``field`` and the registered names
backend_record = partial(BACKENDS.get, field="backend")


def runs_on_aws(name: object) -> bool | None:
    """Whether the backend a job record names runs jobs on AWS; None for one not registered here
    (a record written by a backend since uninstalled)."""
    record = find_backend(name)
    return None if record is None else record.on_aws


def _registered(name: str) -> str:
    if find_backend(name) is None:
        raise ValueError(BACKENDS.unknown(name))
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
        tunes_in_task=True,
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
