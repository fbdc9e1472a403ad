"""Tailing a job's CloudWatch logs: one cursor and paging logic, driven sync (hook) or async (trigger).

A job writes one stream per host (``<job name>/algo-1-<epoch>``). :class:`LogTail` keeps where
each stream was read to (``nextForwardToken``), finds the streams (``DescribeLogStreams`` is
paginated, 50 a page) and pages through ``GetLogEvents``; it does no I/O itself. It yields each
request as ``(operation, resource, kwargs)`` and is sent the page back (or thrown the error), so
``SageMakerTrainingHook.fetch_log_events`` drives it with boto3 (:func:`tail_sync`) and the
triggers drive it with aiobotocore (:func:`tail_async`), each with its own retry and error
translation.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator, Iterable
from dataclasses import dataclass, field
from typing import Any

from airflow_dist_training.aws_errors import error_code

#: One request of the tail: (operation, resource named in errors, keyword arguments).
Request = tuple[str, str, dict[str, Any]]
Tail = Generator[Request, Any, "list[LogEvent]"]


@dataclass(frozen=True)
class LogEvent:
    """One CloudWatch event of one host's stream."""

    timestamp: int  # ms since epoch
    stream: str  # e.g. "<job>/algo-1-1712345678"
    message: str

    @property
    def host(self) -> str:
        """The part of the stream name after the job name, e.g. ``algo-1-1712345678``."""
        return self.stream.split("/", 1)[1] if "/" in self.stream else self.stream

    def format(self) -> str:
        return f"[{self.host}] {self.message.rstrip()}"


@dataclass
class LogCursor:
    """Where log streaming stopped: ``nextForwardToken`` per stream (JSON-serialisable)."""

    tokens: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, str]:
        return dict(self.tokens)


def merge_log_events(per_stream: Iterable[list[LogEvent]]) -> list[LogEvent]:
    """Merge several streams' events into one list ordered by timestamp (stable per stream)."""
    # sorted is stable: each stream's order is kept on ties
    return sorted((e for events in per_stream for e in events), key=lambda e: e.timestamp)


class LogTail:
    """The streams of one job and where each was read to; :meth:`fetch` pages through what is new.

    :param rediscover_every: list the streams again every N fetches (and whenever fewer streams
        than the job's hosts are known): hosts restart, warm pools add streams.
    :param max_pages: ``GetLogEvents`` pages per stream and fetch; the rest comes next fetch.
    """

    def __init__(
        self,
        job_name: str,
        log_group: str,
        *,
        cursor: LogCursor | None = None,
        rediscover_every: int = 10,
        max_pages: int = 20,
    ) -> None:
        self.job_name = job_name
        self.log_group = log_group
        self.cursor = cursor if cursor is not None else LogCursor()
        self.rediscover_every = rediscover_every
        self.max_pages = max_pages
        self.streams: list[str] = []
        self.fetches = 0

    def fetch(self, expected_hosts: int = 1) -> Tail:
        """Every event written since the previous fetch, merged across streams by timestamp."""
        if len(self.streams) < expected_hosts or self.fetches % self.rediscover_every == 0:
            yield from self._discover()
        self.fetches += 1
        per_stream = []
        for stream in self.streams:
            per_stream.append((yield from self._read(stream)))
        return merge_log_events(per_stream)

    def _discover(self) -> Generator[Request, Any, None]:
        kwargs: dict[str, Any] = {
            "logGroupName": self.log_group,
            "logStreamNamePrefix": f"{self.job_name}/",
            "orderBy": "LogStreamName",
            "limit": 50,
        }
        while True:
            try:
                page = yield ("DescribeLogStreams", self.log_group, dict(kwargs))
            except Exception as exc:
                if error_code(exc) == "ResourceNotFoundException":  # no log group yet
                    return
                raise
            for stream in page.get("logStreams") or []:
                if stream["logStreamName"] not in self.streams:
                    self.streams.append(stream["logStreamName"])
            token = page.get("nextToken")
            if not token or token == kwargs.get("nextToken"):
                return
            kwargs["nextToken"] = token

    def _read(self, stream: str) -> Generator[Request, Any, list[LogEvent]]:
        events: list[LogEvent] = []
        for _ in range(self.max_pages):
            token = self.cursor.tokens.get(stream)
            kwargs: dict[str, Any] = {"logGroupName": self.log_group, "logStreamName": stream, "startFromHead": True}
            if token:
                kwargs["nextToken"] = token
            page = yield ("GetLogEvents", f"{self.log_group}:{stream}", kwargs)
            page_events = page.get("events") or []
            events.extend(LogEvent(int(e.get("timestamp", 0)), stream, str(e.get("message", ""))) for e in page_events)
            new_token = page.get("nextForwardToken")
            if new_token:
                self.cursor.tokens[stream] = new_token
            if not page_events or not new_token or new_token == token:
                break
        return events


class _Run:
    """One fetch in progress: the request it waits for, or its events once done."""

    def __init__(self, tail: Tail) -> None:
        self.tail = tail
        self.request: Request | None = None
        self.events: list[LogEvent] = []
        self._step(lambda: next(tail))

    def _step(self, advance: Callable[[], Request]) -> None:
        try:
            self.request = advance()
        except StopIteration as done:
            self.request, self.events = None, list(done.value)

    def answer(self, page: Any = None, error: Exception | None = None) -> None:
        self._step(lambda: self.tail.throw(error) if error is not None else self.tail.send(page))


def tail_sync(tail: Tail, call: Callable[[str, str, dict[str, Any]], Any]) -> list[LogEvent]:
    """Run a fetch with a blocking ``call(operation, resource, kwargs) -> page``."""
    run = _Run(tail)
    while run.request is not None:
        try:
            page = call(*run.request)
        except Exception as exc:
            run.answer(error=exc)
        else:
            run.answer(page)
    return run.events


async def tail_async(tail: Tail, call: Callable[[str, str, dict[str, Any]], Awaitable[Any]]) -> list[LogEvent]:
    """Run a fetch with an async ``call(operation, resource, kwargs) -> page``."""
    run = _Run(tail)
    while run.request is not None:
        try:
            page = await call(*run.request)
        except Exception as exc:
            run.answer(error=exc)
        else:
            run.answer(page)
    return run.events
