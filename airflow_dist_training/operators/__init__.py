"""Airflow operators. What several share lives here: importing any of them imports this anyway."""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow_dist_training.compat import conf

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_dist_training.hooks.backends import TrainingBackend


def default_deferrable(deferrable: bool | None = None) -> bool:
    """``deferrable``, else ``[operators] default_deferrable``: read when the task is built, not at import."""
    return conf.getboolean("operators", "default_deferrable", fallback=False) if deferrable is None else deferrable


class SpecBackendMixin:
    """A training spec run on a registered backend: the training and tuning operators' plumbing."""

    def _set_spec_backend(self, spec: Any, backend: str, local_hook_kwargs: dict[str, Any] | None) -> None:
        from airflow_dist_training.spec.backends import backend_record

        backend_record(backend)  # a registered name (SpecValidationError naming the registered ones)
        self.spec = str(spec) if isinstance(spec, Path) else spec
        self.backend = backend
        self.local_hook_kwargs = local_hook_kwargs or {}

    @cached_property
    def local_hook(self) -> Any:
        from airflow_dist_training.hooks.local_training import LocalTrainingHook

        return LocalTrainingHook(**self.local_hook_kwargs)

    @cached_property
    def training_backend(self) -> TrainingBackend:
        """Where the jobs run (``hooks/backends.py``); no I/O until a method is called."""
        from airflow_dist_training.hooks.backends import operator_backend

        return operator_backend(self)

    def render_template_fields(self, context: Context, jinja_env: Any = None) -> None:
        from airflow_dist_training.operators.training import mask_spec_secrets

        super().render_template_fields(context, jinja_env)  # type: ignore[misc]
        mask_spec_secrets(self.spec)  # secret-looking environment values never reach the task log
