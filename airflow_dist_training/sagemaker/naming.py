"""Deterministic, valid training-job names.

A name is ``<sanitised base>-<run hash>`` (plus ``-r<n>`` when an earlier job of the same run ended
in failure and a new one is started). The run hash comes from the Airflow run identity
(dag_id, task_id, run_id, map_index), so a retry computes the same name and finds its job, while two
runs never collide. Names always match the API pattern ``[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}``.

We deliberately differ from the SageMaker SDK, which appends a timestamp (so a retry can never find
the earlier job) and does not sanitise the base (``my_job`` is rejected by the API).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Any

MAX_NAME_LENGTH = 63
NAME_PATTERN = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")
_HASH_LENGTH = 10


def run_identity(dag_id: str, task_id: str, run_id: str, map_index: int = -1) -> str:
    """The stable identity of one task in one DAG run (the same across its tries)."""
    return f"{dag_id}:{task_id}:{run_id}:{map_index}"


def identity_from_context(
    context: Mapping[str, Any], task_id: str, *, dag_id: str | None = None, map_index: int | None = None
) -> str:
    """The run identity of ``task_id`` in the DAG run of an Airflow ``context``: the one home of
    this rule (the plan task computes its training task's, the evaluation and teardown tasks theirs)."""
    ti = context.get("ti")
    if dag_id is None:
        dag_id = str(getattr(ti, "dag_id", None) or "no-dag")
    if map_index is None:
        found = getattr(ti, "map_index", None)
        map_index = -1 if found is None else int(found)
    run_id = context.get("run_id") or getattr(ti, "run_id", None) or "manual"
    return run_identity(dag_id, task_id, str(run_id), map_index)


def sanitise_base(base: str) -> str:
    """Map any text onto the job-name alphabet: runs of other characters become one hyphen."""
    cleaned = re.sub(r"[^a-zA-Z0-9]+", "-", base).strip("-")
    return cleaned or "job"


def run_identity_hash(identity: str) -> str:
    """The 10-hex-digit hash of a run identity that every job name of the run carries."""
    return hashlib.sha256(identity.encode()).hexdigest()[:_HASH_LENGTH]


def job_name(base: str, identity: str, generation: int = 1, *, max_length: int = MAX_NAME_LENGTH) -> str:
    """The job name for ``identity``; ``generation`` > 1 after an earlier job of this run failed.

    ``max_length``: 63 for training and processing jobs, 32 for hyperparameter tuning jobs.
    """
    digest = run_identity_hash(identity)
    return generation_name(
        f"{sanitise_base(base)}-{digest}", generation, keep_tail=_HASH_LENGTH + 1, max_length=max_length
    )


def generation_name(name: str, generation: int, *, keep_tail: int = 0, max_length: int = MAX_NAME_LENGTH) -> str:
    """``name`` for the run's ``generation``-th job: ``<name>-r<generation>`` from the second on.

    Shortens the head (never the last ``keep_tail`` characters, e.g. a run hash) to stay within
    ``max_length`` characters (the API's 63 by default).
    """
    if generation < 1:
        raise ValueError("generation must be >= 1")
    name = sanitise_base(name)
    suffix = name[len(name) - keep_tail :] if keep_tail else ""
    suffix += f"-r{generation}" if generation > 1 else ""
    head = name[: len(name) - keep_tail] if keep_tail else name
    head = head[: max_length - len(suffix)].rstrip("-") or "job"
    result = head + suffix
    assert NAME_PATTERN.match(result), result
    return result


def job_name_problems(name: str) -> list[str]:
    """Why ``name`` is not a valid TrainingJobName (empty when valid)."""
    problems = []
    if len(name) > MAX_NAME_LENGTH:
        problems.append(f"is {len(name)} characters; the API allows at most {MAX_NAME_LENGTH}")
    if not NAME_PATTERN.match(name[:MAX_NAME_LENGTH] or "-"):
        problems.append("must match [a-zA-Z0-9](-*[a-zA-Z0-9]){0,62} (letters, digits, inner hyphens)")
    return problems
