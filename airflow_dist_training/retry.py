"""The retry policy of training pipelines (Airflow 3.3 ``retry_policy``).

Bad input, missing permissions and a failing script (training's or evaluation's: a non-zero exit,
a missing module, SageMaker's ``AlgorithmError``) fail at once: retrying cannot fix them, and a
retry of a multi-node job costs money. Capacity and account-limit errors are retried later, with
a long delay, instead of being treated like bugs. Everything else (infrastructure: an instance
that failed, an internal error, a lost worker) follows the task's ``retries``.

It also holds the one throttle-aware call loop of the hooks (``call_throttled``), the triggers'
transient-error retry (``call_with_retry``) and the backoff they use; which AWS errors count as
throttling or transient is ``aws_errors``' call.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any, TypeVar

from airflow_dist_training.aws_errors import is_throttling, is_transient

log = logging.getLogger(__name__)
T = TypeVar("T")

CAPACITY_RETRY_DELAY = timedelta(minutes=30)


def training_retry_policy(capacity_retry_delay: timedelta = CAPACITY_RETRY_DELAY) -> Any:
    """The policy, or ``None`` on an Airflow without ``retry_policy`` (before 3.3; logged once).

    ``None`` in a task group's ``default_args`` is harmless there: operators ignore default
    arguments they do not take.
    """
    from airflow_dist_training.compat import FALLBACK_RETRY_POLICY, note_fallback, retry_policy_supported

    if not retry_policy_supported():
        note_fallback(FALLBACK_RETRY_POLICY)
        return None
    from airflow.sdk import ExceptionRetryPolicy, RetryAction, RetryRule

    fail = {
        "SpecValidationError": "invalid spec or input: fix it, retrying cannot",
        "AwsPermissionError": "missing IAM permission: grant it, retrying cannot",
        "ScriptFailure": "the job's script failed (its own error, not the infrastructure's): "
        "a retry would run the same code on the same data",
    }
    rules = [
        RetryRule(exception=f"airflow_dist_training.errors.{name}", action=RetryAction.FAIL, reason=reason)
        for name, reason in fail.items()
    ]
    capacity = RetryRule(
        exception="airflow_dist_training.errors.CapacityError",
        action=RetryAction.RETRY,
        retry_delay=capacity_retry_delay,
        reason="no capacity or an account limit: retrying later",
    )
    return ExceptionRetryPolicy(rules=[*rules, capacity])


@contextmanager
def failing_fast_without_retry_policy() -> Iterator[None]:
    """The policy's FAIL rules on an Airflow without ``retry_policy`` (before 3.3): the error is
    re-raised as also an ``AirflowFailException``, which fails at once instead of after
    ``retry_delay`` (``docs/compatibility.md``, "Retry policy"). Capacity errors follow ``retries``.
    """
    from airflow_dist_training.errors import AwsPermissionError, ScriptFailure, SpecValidationError

    try:
        yield
    except ScriptFailure as exc:
        # on every Airflow: an operator used outside a task group has no retry policy either
        raise _without_retry(exc) from exc
    except (SpecValidationError, AwsPermissionError) as exc:
        from airflow_dist_training.compat import retry_policy_supported

        if retry_policy_supported():
            raise
        raise _without_retry(exc) from exc


_WITHOUT_RETRY: dict[type[BaseException], type[BaseException]] = {}


def _without_retry(exc: BaseException) -> BaseException:
    """The same error, also an ``AirflowFailException`` (a subclass of both; same args and fields)."""
    from airflow_dist_training.compat import AirflowFailException

    cls = type(exc)
    both = _WITHOUT_RETRY.get(cls)
    if both is None:
        both = _WITHOUT_RETRY[cls] = type(cls.__name__, (cls, AirflowFailException), {"__module__": cls.__module__})
    copy = both.__new__(both, *exc.args)
    copy.args = exc.args
    copy.__dict__.update(exc.__dict__)
    return copy


# Throttle-aware call loops: the one backoff used by hooks (sync) and triggers (async).


class Backoff:
    """Exponential backoff with full jitter: ``uniform(base, min(cap, base * 2**n))``."""

    def __init__(self, base: float, cap: float) -> None:
        self.base = base
        self.cap = cap
        self.failures = 0

    def failure(self) -> float:
        self.failures += 1
        upper = min(self.cap, self.base * (2**self.failures))
        return random.uniform(min(self.base, upper), upper)


def call_throttled(
    fn: Callable[[], T],
    *,
    what: str,
    retries: int,
    base: float = 0.5,
    cap: float = 20.0,
    sleep: Callable[[float], None] = time.sleep,
    logger: Any = None,
) -> T:
    """Call ``fn()``; retry AWS throttling (after botocore gave up) up to ``retries`` times.

    Delay ``min(cap, base * 2**attempt)`` scaled by a jitter in [0.5, 1): bounded below, so a
    throttled caller always backs off. Every other error is re-raised at once.
    """
    attempt = 0
    while True:
        try:
            return fn()
        except Exception as exc:
            if not is_throttling(exc) or attempt >= retries:
                raise
            delay = min(cap, base * 2**attempt) * random.uniform(0.5, 1.0)
            attempt += 1
            (logger or log).info("%s throttled; retrying in %.1fs (attempt %d)", what, delay, attempt)
            sleep(delay)


async def call_with_retry(
    fn: Callable[[], Awaitable[Any]],
    *,
    what: str,
    base: float = 0.5,
    cap: float = 20.0,
    max_attempts: int | None = 8,
    logger: logging.Logger | None = None,
) -> Any:
    """Await ``fn()``; retry transient errors (throttling, 5xx, network) with backoff, re-raise anything else."""
    backoff = Backoff(base, cap)
    attempt = 0
    while True:
        attempt += 1
        try:
            return await fn()
        except Exception as exc:
            if not is_transient(exc) or (max_attempts is not None and attempt >= max_attempts):
                raise
            delay = backoff.failure()
            (logger or log).info("%s: transient error (%s), retrying in %.2fs", what, exc, delay)
            await asyncio.sleep(delay)


# The one synchronous wait: poll until done, or until a deadline.


class PollTimeout(TimeoutError):
    """``poll_until`` reached its timeout; ``last`` is the last value read."""

    def __init__(self, message: str, last: Any) -> None:
        super().__init__(message)
        self.last = last


def poll_until(
    read: Callable[[], T],
    done: Callable[[T], bool],
    *,
    interval: float,
    timeout: float | None = None,
    timeout_message: Callable[[T], str] = lambda last: f"still waiting: {last!r}",
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """Call ``read()`` every ``interval`` seconds until ``done(value)``; returns that value.

    ``read`` may raise to end the wait (a failed resource). Past ``timeout`` seconds (``None``: no
    limit) a value that is not done raises ``PollTimeout(timeout_message(value))``: a resource that
    has just finished is never reported as timed out.
    """
    started = time.monotonic()
    while True:
        value = read()
        if done(value):
            return value
        if timeout is not None and time.monotonic() - started > timeout:
            raise PollTimeout(timeout_message(value), value)
        sleep(interval)
