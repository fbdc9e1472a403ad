"""The job-kind table and ``DurableJob``: a toy kind registered here runs on the moto server through
the same helper as training and processing; a fake client only injects faults (throttling, a
refused create, a job that never ends)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError

from airflow_dist_training.errors import CapacityError, SpecValidationError
from airflow_dist_training.hooks.sagemaker_jobs import DurableJob, SageMakerApi
from airflow_dist_training.job_states import ACTIVE_STATES, FAILED_STATES, SUCCESS_STATES
from airflow_dist_training.retry import PollTimeout
from airflow_dist_training.sagemaker import job_kinds
from airflow_dist_training.sagemaker.job_kinds import JOB_KINDS, get_job_kind, job_kind, register_job_kind

REGION = "us-east-1"


def test_the_table_spells_the_api_of_each_kind_and_takes_its_states_from_job_states() -> None:
    training, processing = get_job_kind("training"), get_job_kind("processing")
    assert (training.create, training.describe, training.stop, training.list) == (
        "CreateTrainingJob",
        "DescribeTrainingJob",
        "StopTrainingJob",
        "ListTrainingJobs",
    )
    assert (processing.name_key, processing.status_key, processing.summaries_key, processing.arn_resource) == (
        "ProcessingJobName",
        "ProcessingJobStatus",
        "ProcessingJobSummaries",
        "processing-job",
    )
    assert (training.log_group, processing.log_group) == ("/aws/sagemaker/TrainingJobs", "/aws/sagemaker/ProcessingJobs")
    for row in JOB_KINDS.records():
        assert row.terminal_states == SUCCESS_STATES | FAILED_STATES
        assert row.active_states == ACTIVE_STATES
    tuning = job_kind("tuning", "HyperParameterTuningJob", log_group=None)
    assert (tuning.label, tuning.summaries_key, tuning.arn_resource) == (
        "hyper parameter tuning job",
        "HyperParameterTuningJobSummaries",
        "hyper-parameter-tuning-job",
    )
    with pytest.raises(ValueError, match=r"kind: unknown SageMaker job kind 'nope'; registered kinds: training, processing, tuning"):
        get_job_kind("nope")


@pytest.fixture
def toy_kind() -> Iterator[str]:
    """A kind the provider does not ship: batch transform, registered as one row."""
    register_job_kind(job_kind("toy-transform", "TransformJob", log_group=None))
    yield "toy-transform"
    JOB_KINDS.forget("toy-transform")


def transform_request(name: str) -> dict[str, Any]:
    return {
        "TransformJobName": name,
        "ModelName": "toy-model",
        "TransformInput": {"DataSource": {"S3DataSource": {"S3DataType": "S3Prefix", "S3Uri": "s3://toy/in"}}},
        "TransformOutput": {"S3OutputPath": "s3://toy/out"},
        "TransformResources": {"InstanceType": "ml.m5.large", "InstanceCount": 1},
    }


@pytest.mark.integration
def test_a_toy_kind_is_found_or_created_waited_for_and_deferred_on_the_endpoint(moto_reset: str, toy_kind: str) -> None:
    from airflow_dist_training.hooks.training import SageMakerTrainingHook

    job = DurableJob(SageMakerTrainingHook(aws_conn_id=None, region_name=REGION), toy_kind)
    assert job.describe_or_none("toy-1") is None
    names = ["toy-1", "toy-1-r2"]
    ref = job.find_or_create(names, lambda name, ended: transform_request(name), exhausted=lambda: AssertionError())
    assert (ref.name, ref.created, ref.ended) == ("toy-1", True, ())
    done = job.wait("toy-1", poll_interval=0)
    assert done["TransformJobStatus"] == "Completed" and done["ModelName"] == "toy-model"
    # a retry of the task reattaches: no second create
    again = job.find_or_create(names, lambda name, ended: pytest.fail("created twice"), exhausted=AssertionError)
    assert (again.name, again.created) == ("toy-1", False)
    assert [s["TransformJobName"] for s in job.list()] == ["toy-1"]
    trigger = job.trigger("toy-1", aws_conn_id=None, region_name=REGION, poll_interval=5)
    classpath, kwargs = trigger.serialize()
    assert classpath == job_kinds.GENERIC_TRIGGER
    assert kwargs["kind"] == "toy-transform" and kwargs["job_name"] == "toy-1"


class FakeSageMaker:
    """Fault injection only: answers from a table of descriptions, throttles on demand, records calls."""

    def __init__(self, jobs: dict[str, str], throttle: int = 0, create_error: str | None = None) -> None:
        self.jobs = dict(jobs)  # name -> ProcessingJobStatus
        self.throttle = throttle
        self.create_error = create_error
        self.calls: list[str] = []

    def _error(self, code: str, message: str, operation: str) -> ClientError:
        return ClientError({"Error": {"Code": code, "Message": message}}, operation)

    def describe_processing_job(self, ProcessingJobName: str) -> dict[str, Any]:
        self.calls.append(f"describe {ProcessingJobName}")
        if self.throttle:
            self.throttle -= 1
            raise self._error("ThrottlingException", "Rate exceeded", "DescribeProcessingJob")
        if ProcessingJobName not in self.jobs:
            raise self._error("ValidationException", "Could not find requested job", "DescribeProcessingJob")
        return {
            "ProcessingJobName": ProcessingJobName,
            "ProcessingJobArn": f"arn:aws:sagemaker:{REGION}:1:processing-job/{ProcessingJobName}",
            "ProcessingJobStatus": self.jobs[ProcessingJobName],
        }

    def create_processing_job(self, **request: Any) -> dict[str, str]:
        name = request["ProcessingJobName"]
        self.calls.append(f"create {name}")
        if self.create_error:
            raise self._error(self.create_error, "no ml.p4d.24xlarge capacity", "CreateProcessingJob")
        self.jobs[name] = "InProgress"
        return {"ProcessingJobArn": f"arn:aws:sagemaker:{REGION}:1:processing-job/{name}"}

    def add_tags(self, ResourceArn: str, Tags: list[dict[str, str]]) -> dict[str, Any]:
        self.calls.append(f"tag {ResourceArn.rsplit('/', 1)[1]} {Tags[0]['Key']}")
        return {}

    def stop_processing_job(self, ProcessingJobName: str) -> dict[str, Any]:
        self.calls.append(f"stop {ProcessingJobName}")
        self.jobs[ProcessingJobName] = "Stopping"
        return {}


class FakeApi(SageMakerApi):
    aws_conn_id = None
    region_name = REGION
    log = logging.getLogger("test")
    throttle_base_delay = 0.0

    def __init__(self, client: FakeSageMaker) -> None:
        self.client = client
        self._sleep = lambda _s: None

    @property
    def sagemaker_client(self) -> Any:
        return self.client


def processing(client: FakeSageMaker) -> DurableJob:
    return DurableJob(FakeApi(client), "processing")


def test_ended_generations_are_passed_over_and_the_first_free_name_is_created_once() -> None:
    client = FakeSageMaker({"eval": "Failed", "eval-r2": "Stopped"})
    seen: list[tuple[str, int]] = []
    ref = processing(client).find_or_create(
        ["eval", "eval-r2", "eval-r3"],
        lambda name, ended: {"ProcessingJobName": name, "ended": [d["ProcessingJobStatus"] for d in ended]},
        exhausted=AssertionError,
        on_ended=lambda name, desc, following: seen.append((name, following)),
    )
    assert ref.name == "eval-r3" and [d["ProcessingJobStatus"] for d in ref.ended] == ["Failed", "Stopped"]
    assert seen == [("eval", 2), ("eval-r2", 3)]
    assert client.calls == ["describe eval", "describe eval-r2", "describe eval-r3", "create eval-r3"]


def test_every_generation_ended_is_the_callers_error_and_nothing_is_created() -> None:
    client = FakeSageMaker({"eval": "Failed"})
    with pytest.raises(RuntimeError, match="budget spent"):
        processing(client).find_or_create(
            ["eval"], lambda name, ended: {}, exhausted=lambda: RuntimeError("budget spent")
        )
    assert client.calls == ["describe eval"]


def test_processing_calls_are_throttle_aware_like_training_calls() -> None:
    client = FakeSageMaker({"eval": "Completed"}, throttle=2)
    assert processing(client).describe("eval")["ProcessingJobStatus"] == "Completed"
    assert client.calls == ["describe eval"] * 3


def test_a_create_refused_for_capacity_is_a_retryable_capacity_error() -> None:
    client = FakeSageMaker({}, create_error="ResourceLimitExceeded")
    with pytest.raises(CapacityError, match=r"SageMaker refused CreateProcessingJob for eval: ResourceLimitExceeded"):
        processing(client).create({"ProcessingJobName": "eval"})


def test_a_create_rejected_as_invalid_is_bad_input() -> None:
    client = FakeSageMaker({}, create_error="ValidationException")
    with pytest.raises(SpecValidationError, match=r"SageMaker rejected CreateProcessingJob for eval"):
        processing(client).create({"ProcessingJobName": "eval"})


def test_a_job_that_appeared_concurrently_is_reattached_not_created_again() -> None:
    client = FakeSageMaker({}, create_error="ResourceInUse")
    ref = processing(client).find_or_create(["eval"], lambda name, ended: {"ProcessingJobName": name}, exhausted=AssertionError)
    assert ref.name == "eval" and client.calls == ["describe eval", "create eval"]


def test_the_wait_ends_at_its_deadline_naming_the_job_and_its_state() -> None:
    client = FakeSageMaker({"eval": "InProgress"})
    with pytest.raises(PollTimeout, match=r"^processing job eval still InProgress after 0s$") as raised:
        processing(client).wait("eval", poll_interval=0, timeout=0)
    assert raised.value.last["ProcessingJobStatus"] == "InProgress"


def test_stop_tags_first_and_is_idempotent() -> None:
    client = FakeSageMaker({"eval": "InProgress", "done": "Completed"})
    job = processing(client)
    assert job.stop("eval") is True
    assert job.stop("eval") is False  # Stopping: on its way out already
    assert job.stop("done") is False
    assert client.calls == [
        "describe eval",
        "tag eval airflow-dist-training:stop-requested",
        "stop eval",
        "describe eval",
        "describe done",
    ]
