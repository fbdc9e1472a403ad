"""Model registries by kind: the pipeline step each one reads, and where its implementation lives.

Pure, like ``spec/backends.py``; third parties register a ``RegistryRecord`` with an entry point in
the group ``airflow_dist_training.registries``. A pipeline's ``registry`` step is validated by the
model of the kind it names, so a registered kind is a pipeline YAML kind.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Annotated, Any, Literal

from pydantic import Field, PlainValidator, SerializeAsAny, field_validator

from airflow_dist_training.spec.backends import BackendRecord
from airflow_dist_training.spec.records import Factory, KindsSchema, Records, step_of_kind
from airflow_dist_training.spec.training import _Model

ENTRY_POINT_GROUP = "airflow_dist_training.registries"


class RegistryStepModel(_Model):  # strict: no `auto_approve: "yes"`
    """The fields every registry step has; a kind's step model subclasses it with ``kind: Literal[...]``."""

    kind: str
    auto_approve: bool = Field(
        default=False, description="Approved when the gate passed; else PendingManualApproval"
    )
    inference_image: str | None = Field(
        default=None,
        description="The image the registered model is served with (default: the training image)",
    )
    model_package_group: str | None = Field(default=None, description="The group (default: the spec's name)")


@dataclass(frozen=True)
class RegistryRecord(Factory):
    """A registry kind: its pipeline step, what it needs, and its implementation."""

    name: str
    step: type[RegistryStepModel]
    #: ``"module:attribute"`` (imported on first use) or a callable; called with ``group``,
    #: ``local_dir``, ``aws_conn_id`` and ``region_name``, it returns the ``ModelRegistry``
    #: (``hooks/registry.py``)
    factory: str | Callable[..., Any]
    #: keeps its versions in a directory: the step's ``local_dir`` (default: the pipeline's
    #: workspace) is passed to the factory, and operators require ``local_registry_dir``
    local_dir: bool = False
    #: a registration names the image the model is served with (operators require ``image_uri``)
    needs_image: bool = False
    description: str = ""
    #: ``"module:attribute"``: called with the typed step by the plan task (not in a dry run), it
    #: returns the ``Problem`` list of what the registry cannot do (an unreachable server), so a
    #: run fails before training is paid for
    preflight: str | None = None
    #: ``"module:attribute"``: the train task's ``post_execute`` calls it with ``(context, result)``,
    #: ``plan_task_id`` and ``experiment`` (the registered model's name): it logs the finished job
    tracker: str | None = None

    def check_reachable(self, step: RegistryStepModel) -> list[Any]:
        """The preflight's problems (none when the kind has no preflight)."""
        if self.preflight is None:
            return []
        from importlib import import_module

        module, _, attribute = self.preflight.partition(":")
        return list(getattr(import_module(module), attribute)(step))


REGISTRIES: Records[RegistryRecord] = Records(RegistryRecord, "registry kind", "kinds", ENTRY_POINT_GROUP)
register_registry = REGISTRIES.register
forget_registry = REGISTRIES.forget
registry_kinds = REGISTRIES.names
find_registry = REGISTRIES.find
#: the record of a kind; ``SpecValidationError`` naming ``field`` and the registered kinds
registry_record = partial(REGISTRIES.get, field="registry")


def _typed_step(value: Any) -> RegistryStepModel:
    return step_of_kind(REGISTRIES, value, "registry", typed=RegistryStepModel, untyped=RegistryStep)  # type: ignore[no-any-return]


#: a pipeline's registry step, of a registered kind
TypedRegistry = Annotated[SerializeAsAny[RegistryStepModel], PlainValidator(_typed_step), KindsSchema(REGISTRIES)]


class RegistryStep(RegistryStepModel):
    """A registry step written for any backend: ``kind`` (default: the backend's default registry)
    picks the kind's step model; fields the kind does not have are not used."""

    kind: str | None = None  # type: ignore[assignment]
    local_dir: str | None = Field(default=None, description="Registry directory (kinds that keep one)")

    def for_backend(self, backend: BackendRecord) -> RegistryStepModel:
        """The typed registry on ``backend``, its rules checked (``SpecValidationError``)."""
        from airflow_dist_training.spec.loading import validate_model

        kind = self.kind or backend.default_registry
        model = registry_record(kind, field="registry.kind").step
        kept = {k: v for k, v in self.model_dump(exclude_unset=True).items() if k in model.model_fields}
        return validate_model(model, {**kept, "kind": kind}, prefix="registry", pipeline=True)


# -- the built-in kinds


class SageMakerRegistry(RegistryStepModel):
    """A SageMaker model package group."""

    kind: Literal["sagemaker"] = "sagemaker"
    model_package_group: str = Field(description="SageMaker model package group")

    @field_validator("model_package_group")
    @classmethod
    def _group_name(cls, value: str) -> str:
        if not re.fullmatch(r"[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}", value):
            raise ValueError(f"{value!r}: 1-63 letters, digits and hyphens")
        return value


class LocalRegistry(RegistryStepModel):
    """A registry in a directory (or S3 prefix) of its own: packages as JSON, no AWS registry."""

    kind: Literal["local"] = "local"
    local_dir: str | None = Field(default=None, description="Registry directory (default .adt-demo/registry)")


# MLflow's rules for a registered model name (``mlflow.utils.validation._validate_model_name``):
# not blank, no "/" or ":", and not a path that resolves elsewhere ("." or starting with "..").
# A name MLflow would refuse at registration fails here, at validation, with its field path.
_MLFLOW_NAME_REFUSED = re.compile(r"\s*|.*[/:].*|\.|\.\..*", re.DOTALL)


class MlflowRegistry(RegistryStepModel):
    """A registered model in an MLflow Model Registry (the worker's ``MLFLOW_TRACKING_URI``)."""

    kind: Literal["mlflow"] = "mlflow"
    model_package_group: str | None = Field(
        default=None, description="The registered model's name (default: the spec's name)"
    )

    @field_validator("model_package_group")
    @classmethod
    def _model_name(cls, value: str | None) -> str | None:
        if value is not None and _MLFLOW_NAME_REFUSED.fullmatch(value):
            why = "MLflow refuses a registered model name that is blank, has '/' or ':', or is '.' or starts with '..'"
            raise ValueError(f"{value!r}: {why}")
        return value


register_registry(
    RegistryRecord(
        name="local",
        step=LocalRegistry,
        factory="airflow_dist_training.hooks.registry:local_registry",
        local_dir=True,
        description="a directory of JSON packages",
    )
)
register_registry(
    RegistryRecord(
        name="sagemaker",
        step=SageMakerRegistry,
        factory="airflow_dist_training.hooks.registry:sagemaker_registry",
        needs_image=True,
        description="a SageMaker model package group",
    )
)
register_registry(
    RegistryRecord(
        name="mlflow",
        step=MlflowRegistry,
        factory="airflow_dist_training.hooks.mlflow:mlflow_registry",
        preflight="airflow_dist_training.hooks.mlflow:check_tracking_server",
        tracker="airflow_dist_training.hooks.mlflow:track_training_task",
        description="a registered model in an MLflow Model Registry; the champion is an alias",
    )
)
