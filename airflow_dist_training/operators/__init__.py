"""Airflow operators."""

from __future__ import annotations

from airflow_dist_training.compat import conf


def default_deferrable(deferrable: bool | None = None) -> bool:
    """``deferrable``, else ``[operators] default_deferrable``: read when the task is built, not at import."""
    return (
        conf.getboolean("operators", "default_deferrable", fallback=False)
        if deferrable is None
        else deferrable
    )
