"""The small JSON result every training backend returns (and the operator pushes to XCom).

The same shape for SageMaker and the local backend, so downstream tasks (checkpoints, evaluation,
registration) do not care where the job ran. Strings, numbers, lists and dicts only: no datetimes,
no boto responses, no credentials.
"""

from __future__ import annotations

from typing import NotRequired, TypedDict


class StatusTransition(TypedDict):
    status: str  # SecondaryStatus: Starting, Downloading, Training, Uploading, Completed, ...
    start: str  # ISO 8601, UTC
    end: str | None
    message: str


class ResumedFrom(TypedDict):
    """Where the run's job that completed started: the run's checkpoint it resumed from, and why."""

    step: int
    checkpoint_uri: str
    after: str  # "a spot interruption of job <name>", "a failure of job <name>", "an earlier try of the task"


class TrainingResult(TypedDict):
    backend: str  # the registered backend's name (spec/backends.py)
    job_name: str
    job_arn: str  # arn:aws:sagemaker:... or local://<job dir>
    status: str  # Completed (a result is only returned for success)
    model_artifact_uri: str | None  # s3://.../model.tar.gz or file:///.../model.tar.gz
    output_uri: str | None
    checkpoint_uri: str | None
    final_metrics: dict[str, float]
    billable_seconds: int | None
    training_seconds: int | None
    timeline: list[StatusTransition]
    resumed_from: NotRequired[ResumedFrom | None]  # set by the training operator; None: from scratch
