"""One durable SageMaker job, of any kind in ``sagemaker/job_kinds.py``: find-or-create, wait, stop, trigger.

``SageMakerApi`` is the base every SageMaker call goes through: throttling-aware retries
(``retry.call_throttled``, after botocore's own ``adaptive`` retries give up) and AWS errors
translated into what the user can do (``aws_errors``). ``DurableJob(api, kind)`` drives one kind of
job through it, reading only its table row. Describe before create, over the run's deterministic
names, is what makes a job durable: a crash between the create and persisting the name is
harmless (the retry finds the job by name), and a create answered ``ResourceInUse`` reattaches.
Importing this module imports neither boto3 nor the Amazon provider.
"""

from __future__ import annotations

import importlib
import re
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from airflow_dist_training.aws_errors import (
    error_code,
    error_message,
    is_access_denied,
    is_already_exists,
    is_capacity_refusal,
    is_not_found,
    permission_error,
)
from airflow_dist_training.errors import AwsPermissionError, CapacityError, Problem, SpecValidationError
from airflow_dist_training.hooks.aws import environment_region
from airflow_dist_training.retry import call_throttled, poll_until
from airflow_dist_training.sagemaker.job_kinds import GENERIC_TRIGGER, SageMakerJobKind, get_job_kind

TAG_STOP_REQUESTED = "airflow-dist-training:stop-requested"
#: why Airflow stopped a job, when the stop is not a kill of its task (e.g. ``checkpoint-stall``)
TAG_STOP_CAUSE = "airflow-dist-training:stop-cause"


class JobAlreadyExistsError(RuntimeError):
    """A create call answered ResourceInUse: a job with this name exists (reattach to it)."""

    def __init__(self, job_name: str, label: str = "training job"):
        self.job_name = job_name
        super().__init__(f"{label} {job_name} already exists")


def snake_case(operation: str) -> str:
    """``CreateTrainingJob`` -> ``create_training_job`` (the boto3 method)."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", operation).lower()


class SageMakerApi:
    """The throttle-aware, error-translating call (mixed into a hook that has ``aws_conn_id`` and ``log``).

    :attr throttle_retries: our own extra retries on ThrottlingException after botocore gives up.
    """

    aws_conn_id: str | None
    log: Any

    throttle_retries: int = 8
    throttle_base_delay: float = 0.5
    throttle_max_delay: float = 20.0
    _sleep: Callable[[float], None] = staticmethod(time.sleep)

    @property
    def sagemaker_client(self) -> Any:
        raise NotImplementedError

    def region_hint(self) -> str:
        return (
            getattr(self, "_region_name", None) or getattr(self, "region_name", None) or environment_region() or "<region>"
        )

    def _call(self, client: Any, operation: str, resource: str, **kwargs: Any) -> Any:
        """Call ``client.<snake operation>(**kwargs)`` with throttling backoff and error translation."""
        method = getattr(client, snake_case(operation))
        try:
            return call_throttled(
                lambda: method(**kwargs),
                what=operation,
                retries=self.throttle_retries,
                base=self.throttle_base_delay,
                cap=self.throttle_max_delay,
                sleep=self._sleep,
                logger=self.log,
            )
        except Exception as exc:
            if is_access_denied(exc):
                raise permission_error(exc, operation=operation, resource=resource, conn_id=self.aws_conn_id) from None
            if error_code(exc) == "NoSuchBucket":  # bad input, not transient: fail at once, naming it
                bucket = kwargs.get("Bucket") or resource
                raise SpecValidationError(
                    [Problem("", f"{operation} {resource}: bucket {bucket} does not exist")]
                ) from None
            raise


@dataclass(frozen=True)
class JobRef:
    """What describe-before-create found for a run: the job to use and the run's ended ones."""

    name: str
    description: dict[str, Any] | None  # the job reattached to; None: ``name`` was free (created)
    ended: tuple[dict[str, Any], ...] = ()  # earlier generations that ended without success, oldest first

    @property
    def created(self) -> bool:
        return self.description is None


class DurableJob:
    """One kind of SageMaker job driven through a ``SageMakerApi`` (see the module docstring)."""

    def __init__(self, api: SageMakerApi, kind: str | SageMakerJobKind) -> None:
        self.api = api
        self.kind = get_job_kind(kind)

    @property
    def log(self) -> Any:
        return self.api.log

    def _call(self, operation: str, resource: str, **kwargs: Any) -> Any:
        return self.api._call(self.api.sagemaker_client, operation, resource, **kwargs)

    def arn_hint(self, name: str) -> str:
        return f"arn:aws:sagemaker:{self.api.region_hint()}:<account>:{self.kind.arn_resource}/{name}"

    def describe(self, name: str) -> dict[str, Any]:
        """The raw description (datetimes included)."""
        return dict(self._call(self.kind.describe, self.arn_hint(name), **{self.kind.name_key: name}))

    def describe_or_none(self, name: str) -> dict[str, Any] | None:
        """The description, or None when no job has this name."""
        try:
            return self.describe(name)
        except Exception as exc:
            if is_not_found(exc):  # never an AwsPermissionError (it has no AWS error code)
                return None
            raise

    def create(self, request: Mapping[str, Any]) -> str:
        """Create the job; returns its ARN.

        Raises ``JobAlreadyExistsError`` on ResourceInUse (reattach instead), ``CapacityError`` on
        ResourceLimitExceeded, ``AwsPermissionError`` on AccessDenied and ``SpecValidationError``
        on ValidationException (SageMaker rejected the request: nothing was launched).
        """
        kind, name = self.kind, str(request[self.kind.name_key])
        try:
            response = self._call(kind.create, self.arn_hint(name), **request)
        except AwsPermissionError:
            raise
        except Exception as exc:
            code, message = error_code(exc), error_message(exc)
            if is_already_exists(exc):
                raise JobAlreadyExistsError(name, kind.label) from None
            if is_capacity_refusal(exc):
                raise CapacityError(
                    f"SageMaker refused {kind.create} for {name}: {code}: {message}. Retry later, request a "
                    "service-quota increase, or use another instance type or region.",
                    job_name=name,
                    status="NotCreated",
                    failure_reason=message,
                ) from None
            if code == "ValidationException":
                raise SpecValidationError([Problem("", f"SageMaker rejected {kind.create} for {name}: {message}")]) from None
            raise
        return str(response.get(kind.arn_key, ""))

    def pages(self, operation: str, resource: str, items_key: str, **kwargs: Any) -> list[dict[str, Any]]:
        """Every item of a paginated call, following NextToken."""
        items: list[dict[str, Any]] = []
        while True:
            page = self._call(operation, resource, **kwargs)
            items += page.get(items_key) or []
            if not page.get("NextToken"):
                return items
            kwargs["NextToken"] = page["NextToken"]

    def tags(self, arn: str) -> dict[str, str]:
        return {t["Key"]: t["Value"] for t in self.pages("ListTags", arn, "Tags", ResourceArn=arn)}

    def stop_tags(self, description: Mapping[str, Any]) -> dict[str, str]:
        """The job's tags (from the description, else ``ListTags``); {} when they cannot be read."""
        tags = {t["Key"]: t["Value"] for t in description.get("Tags") or [] if "Key" in t}
        if not tags and description.get(self.kind.arn_key):
            try:
                tags = self.tags(str(description[self.kind.arn_key]))
            except Exception:  # tags are advisory: never fail a status check on them
                return {}
        return tags

    def stop_requested(self, description: Mapping[str, Any]) -> bool:
        """Did we (Airflow) ask for this job to stop? Looks at the ``stop-requested`` tag."""
        return self.stop_tags(description).get(TAG_STOP_REQUESTED) == "true"

    def stop_cause(self, description: Mapping[str, Any]) -> str | None:
        """Why Airflow stopped the job, if a cause was given (the ``stop-cause`` tag)."""
        return self.stop_tags(description).get(TAG_STOP_CAUSE)

    def stop(self, name: str, *, reason: str = "airflow", cause: str | None = None) -> bool:
        """Stop the job; idempotent. Tags it ``stop-requested`` (and ``stop-cause``, given one) first.
        Returns True if a stop was sent.

        A job that is already Stopping, Stopped, Completed or Failed (or absent) is fine: False.
        """
        desc = self.describe_or_none(name)
        if desc is None or self.kind.status(desc) not in self.kind.stoppable_states:
            return False
        if arn := str(desc.get(self.kind.arn_key, "")):
            tags = [{"Key": TAG_STOP_REQUESTED, "Value": "true"}]
            if cause:
                tags.append({"Key": TAG_STOP_CAUSE, "Value": cause})
            try:
                self._call("AddTags", arn, ResourceArn=arn, Tags=tags)
            except Exception as exc:  # a missing tag only changes how the stop is reported
                self.log.warning("Could not tag %s as stop-requested: %s", name, exc)
        try:
            self._call(self.kind.stop, self.arn_hint(name), **{self.kind.name_key: name})
        except Exception as exc:
            if error_code(exc) == "ValidationException":  # already terminal / stopping
                self.log.info("%s %s: %s (nothing to stop)", self.kind.stop, name, error_message(exc))
                return False
            raise
        self.log.info("Requested %s for %s (%s)", self.kind.stop, name, reason)
        return True

    def list(self, **filters: Any) -> list[dict[str, Any]]:
        """The list operation, following NextToken (100 per page)."""
        return self.pages(self.kind.list, "*", self.kind.summaries_key, **{"MaxResults": 100, **filters})

    def find(
        self, names: Iterable[str], on_ended: Callable[[str, dict[str, Any], int], None] | None = None
    ) -> JobRef | None:
        """Describe before create over the run's names, oldest generation first: the first job that
        is active or completed (reattach), else the first free name. ``on_ended(name, description,
        next generation)`` hears of each job that ended without success. None: every name is taken
        by an ended job."""
        ended: list[dict[str, Any]] = []
        for generation, name in enumerate(names, start=1):
            desc = self.describe_or_none(name)
            if desc is None:
                return JobRef(name, None, tuple(ended))
            status = self.kind.status(desc)
            if status in self.kind.active_states or status in self.kind.success_states:
                self.log.info(
                    "Found this run's %s %s (%s): reattaching, not creating.", self.kind.label, name, status
                )
                return JobRef(name, desc, tuple(ended))
            ended.append(desc)
            if on_ended is not None:
                on_ended(name, desc, generation + 1)
        return None

    def find_or_create(
        self,
        names: Iterable[str],
        request_for: Callable[[str, tuple[dict[str, Any], ...]], Mapping[str, Any]],
        *,
        exhausted: Callable[[], Exception],
        on_ended: Callable[[str, dict[str, Any], int], None] | None = None,
    ) -> JobRef:
        """``find``, then create the free name with ``request_for(name, ended jobs)``.

        ``exhausted()`` is raised when every name is taken by a job that ended without success.
        """
        ref = self.find(names, on_ended)
        if ref is None:
            raise exhausted()
        if ref.description is not None:
            return ref
        request = request_for(ref.name, ref.ended)
        try:
            arn = self.create(request)
            self.log.info("Created %s %s (%s)", self.kind.label, ref.name, arn)
        except JobAlreadyExistsError:
            self.log.info("%s %s appeared concurrently (ResourceInUse): reattaching.", self.kind.label, ref.name)
        return ref

    def wait(
        self,
        name: str,
        *,
        poll_interval: float,
        timeout: float | None = None,
        limit: str | None = None,
        on_poll: Callable[[dict[str, Any]], None] | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> dict[str, Any]:
        """Poll until the job is terminal; returns its description. ``on_poll`` sees every one.

        Raises ``retry.PollTimeout`` (a ``TimeoutError``) once ``timeout`` seconds passed, naming
        the job, its state and ``limit`` (default ``"<timeout>s"``); the job keeps running.
        """

        def read() -> dict[str, Any]:
            desc = self.describe(name)
            if on_poll is not None:
                on_poll(desc)
            return desc

        return poll_until(
            read,
            self.kind.is_terminal,
            interval=poll_interval,
            timeout=timeout,
            timeout_message=lambda desc: (
                f"{self.kind.label} {name} still {self.kind.status(desc)} after {limit or f'{timeout:g}s'}"
            ),
            sleep=sleep,
        )

    def trigger(self, name: str, **settings: Any) -> Any:
        """The trigger a deferred task waits on for job ``name`` (the row's ``trigger`` class)."""
        if self.kind.trigger == GENERIC_TRIGGER:
            settings["kind"] = self.kind.kind
        module, _, cls = self.kind.trigger.rpartition(".")
        return getattr(importlib.import_module(module), cls)(job_name=name, **settings)
