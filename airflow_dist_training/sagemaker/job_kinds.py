"""The kinds of SageMaker job the provider drives, as data (as the Amazon provider's trigger keeps a job-type table).

Pure: no boto3, no Airflow. One record per kind says how to reach a job of that kind: its API
operations, the keys of its description, its terminal states (from ``job_states``, never spelled
here), its CloudWatch log group and the trigger a deferred task waits on. ``hooks/sagemaker_jobs.py``
(``DurableJob``) reads it and does the rest, so adding a kind (a batch transform job, say) is one
``register_job_kind(job_kind("transform", "TransformJob", log_group=...))`` plus its request.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from airflow_dist_training.job_states import ACTIVE_STATES, FAILED_STATES, STOPPABLE_STATES, SUCCESS_STATES
from airflow_dist_training.spec.records import Records

#: The trigger of a kind without its own: one describe per poll, its logs, the same events.
GENERIC_TRIGGER = "airflow_dist_training.triggers.processing.SageMakerJobKindTrigger"


@dataclass(frozen=True)
class SageMakerJobKind:
    """How to reach one kind of SageMaker job (see the module docstring)."""

    kind: str  # the table's key: "training", "processing", ...
    label: str  # in messages: "training job"
    create: str  # API operation names
    describe: str
    stop: str
    list: str
    name_key: str  # keys of the request and the description
    arn_key: str
    status_key: str
    summaries_key: str  # the list operation's answer
    arn_resource: str  # "training-job" in arn:aws:sagemaker:<region>:<account>:training-job/<name>
    log_group: str | None  # CloudWatch log group of the job's containers (None: it writes none)
    trigger: str = GENERIC_TRIGGER  # dotted path of the trigger class a deferred task waits on
    # a change short of a new status that the list operation's summaries show (the shared poller)
    progress_key: str | None = None
    failure_reason_key: str = "FailureReason"
    active_states: frozenset[str] = ACTIVE_STATES
    stoppable_states: frozenset[str] = STOPPABLE_STATES
    success_states: frozenset[str] = SUCCESS_STATES
    failed_states: frozenset[str] = FAILED_STATES

    @property
    def name(self) -> str:
        return self.kind

    @property
    def terminal_states(self) -> frozenset[str]:
        return self.success_states | self.failed_states

    def status(self, description: Mapping[str, Any]) -> str | None:
        value = description.get(self.status_key)
        return None if value is None else str(value)

    def is_terminal(self, description: Mapping[str, Any]) -> bool:
        return self.status(description) in self.terminal_states

    def succeeded(self, description: Mapping[str, Any]) -> bool:
        return self.status(description) in self.success_states


def job_kind(
    kind: str, noun: str, *, log_group: str | None, trigger: str = GENERIC_TRIGGER, progress_key: str | None = None
) -> SageMakerJobKind:
    """The row of a SageMaker job whose API follows the usual names: ``Create<noun>``,
    ``<noun>Name``, ``<noun>Status``, ``List<noun>s`` answering ``<noun>Summaries``."""
    words = "".join(f" {c.lower()}" if c.isupper() else c for c in noun).strip()
    return SageMakerJobKind(
        kind=kind,
        label=words,
        create=f"Create{noun}",
        describe=f"Describe{noun}",
        stop=f"Stop{noun}",
        list=f"List{noun}s",
        name_key=f"{noun}Name",
        arn_key=f"{noun}Arn",
        status_key=f"{noun}Status",
        summaries_key=f"{noun}Summaries",
        arn_resource=words.replace(" ", "-"),
        log_group=log_group,
        trigger=trigger,
        progress_key=progress_key,
    )


JOB_KINDS = Records(SageMakerJobKind, "SageMaker job kind", "kinds")
register_job_kind = JOB_KINDS.register


def get_job_kind(kind: str | SageMakerJobKind) -> SageMakerJobKind:
    return kind if isinstance(kind, SageMakerJobKind) else JOB_KINDS.get(kind, field="kind")


TRAINING = register_job_kind(
    job_kind(
        "training",
        "TrainingJob",
        log_group="/aws/sagemaker/TrainingJobs",
        trigger="airflow_dist_training.triggers.training.TrainingJobTrigger",
        progress_key="SecondaryStatus",
    )
)
PROCESSING = register_job_kind(
    job_kind(
        "processing",
        "ProcessingJob",
        log_group="/aws/sagemaker/ProcessingJobs",
        trigger="airflow_dist_training.triggers.processing.ProcessingJobTrigger",
    )
)
TUNING = register_job_kind(
    replace(
        job_kind(
            "tuning",
            "HyperParameterTuningJob",
            log_group=None,  # its training jobs write the logs
            trigger="airflow_dist_training.triggers.tuning.TuningJobTrigger",
            progress_key="TrainingJobStatusCounters",  # its training jobs starting and ending
        ),
        label="hyperparameter tuning job",
    )
)
