"""Warm start as an explicit choice: ``none`` | ``champion`` | ``promoted``. Pure.

The weights reach the script as the input channel ``warm_start``, not as a seeded checkpoint: the
checkpoint location means "resume this run" (docs/retraining.md).
"""

from __future__ import annotations

from typing import Any, Literal

from airflow_dist_training.errors import Problem, SpecValidationError
from airflow_dist_training.storage.location import split_uri, uri_scheme

WarmStart = Literal["none", "champion", "promoted"]
WARM_START_CHOICES: tuple[str, ...] = ("none", "champion", "promoted")
CHANNEL = "warm_start"
# The local backend reads ``local_source``; an S3Channel still needs an S3 URI to be valid.
_LOCAL_PLACEHOLDER = "s3://local-backend/warm_start"


def parse_warm_start(value: Any, field: str = "warm_start") -> WarmStart:
    text = "none" if value is None or value is False else str(value).strip().lower()
    if text not in WARM_START_CHOICES:
        raise SpecValidationError([Problem(field, f"must be one of none, champion, promoted; got {value!r}")])
    return text  # type: ignore[return-value]


def warm_start_source(
    choice: WarmStart, *, champion_model_uri: str | None, promoted_uri: str | None
) -> tuple[str | None, str]:
    """The URI to hand to the script, and a sentence saying what was chosen."""
    if choice == "none":
        return None, "warm start: none (from scratch)"
    if choice == "champion":
        if not champion_model_uri:
            return None, "warm start: champion requested, but there is no champion yet: from scratch"
        return champion_model_uri, f"warm start: the champion's model {champion_model_uri}"
    if not promoted_uri:
        return None, "warm start: promoted requested, but nothing was promoted yet: from scratch"
    return promoted_uri, f"warm start: the promoted checkpoint {promoted_uri}"


def warm_start_channel(uri: str) -> dict[str, Any]:
    """The ``warm_start`` input channel (spec fields) reading ``uri``."""
    if uri_scheme(uri) == "s3":
        return {"type": "s3", "uri": uri}
    return {"type": "s3", "uri": _LOCAL_PLACEHOLDER, "local_source": split_uri(uri)[2]}
