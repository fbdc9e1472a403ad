"""The project's exception types. Pure: no Airflow, no boto3.

``SpecValidationError`` is the one error for invalid specs: it carries every problem as a
``(field path, message)`` pair, and its text (one ``path: message`` line per problem) is what the
CLI prints and what the Airflow task log shows.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    """One problem found in a spec: where (dotted field path) and what is wrong."""

    path: str
    message: str
    severity: str = "error"  # "error" or "warning"

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


class SpecValidationError(ValueError):
    """A spec (or another user input) is invalid; nothing was launched."""

    def __init__(self, problems: Iterable[Problem | tuple[str, str]], source: str | None = None):
        self.problems: list[Problem] = [
            p if isinstance(p, Problem) else Problem(path=p[0], message=p[1]) for p in problems
        ]
        self.source = source
        super().__init__(self.render())

    def render(self) -> str:
        prefix = f"{self.source}: " if self.source else ""
        return "\n".join(f"{prefix}{p}" for p in self.problems)

    @property
    def errors(self) -> list[tuple[str, str]]:
        return [(p.path, p.message) for p in self.problems]


class TrainingJobError(RuntimeError):
    """A training job ended without success (Failed, Stopped, MaxRuntimeExceeded, ...)."""

    def __init__(self, message: str, *, job_name: str, status: str, failure_reason: str | None = None):
        self.job_name = job_name
        self.status = status
        self.failure_reason = failure_reason
        super().__init__(message)


class ScriptFailure(Exception):
    """The job's own script failed: a non-zero exit, a missing module, SageMaker's ``AlgorithmError``.

    Deterministic: a retry runs the same code on the same data, so the retry policy
    (``airflow_dist_training.retry``) fails the task at once. Infrastructure and capacity errors
    are not script failures and keep retrying.
    """


class TrainingScriptError(TrainingJobError, ScriptFailure):
    """A training job that failed in its script (``FailureReason`` starts ``AlgorithmError:``)."""


ALGORITHM_ERROR = "AlgorithmError:"


# The toolkit's ExtraInfo for a process killed by signal 9. The kernel's OOM killer and a reclaimed
# host look the same from inside the job, so a retry (from the last checkpoint) may succeed.
KILLED_BY_SIGKILL = "OutOfMemory: Process killed by SIGKILL (signal 9)"


def is_script_failure_reason(failure_reason: str | None) -> bool:
    """Whether a ``FailureReason`` blames the job's own code (SageMaker's ``AlgorithmError:``),
    except a process killed by SIGKILL, which is not deterministic."""
    text = str(failure_reason or "")
    return text.startswith(ALGORITHM_ERROR) and KILLED_BY_SIGKILL not in text


def training_job_error(message: str, *, job_name: str, status: str, failure_reason: str | None) -> TrainingJobError:
    """The error for a training job that ended ``status``: a ``TrainingScriptError`` when it failed
    in its script, else a plain ``TrainingJobError`` (the task's retries apply)."""
    cls = TrainingScriptError if status == "Failed" and is_script_failure_reason(failure_reason) else TrainingJobError
    return cls(message, job_name=job_name, status=status, failure_reason=failure_reason)


class CapacityError(TrainingJobError):
    """The job could not get capacity or hit an account limit: retry later, it is not a bug.

    Raised for ``InsufficientCapacityError`` and ``ResourceLimitExceeded`` so that a DAG can
    handle it (retries with a long delay, a fallback instance type) separately from real failures.
    """


class AwsPermissionError(PermissionError):
    """AWS refused an action: names the action, the resource and the IAM permission to grant."""
