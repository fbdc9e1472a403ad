"""One shared SageMaker poller per (event loop, AWS connection, region) in a triggerer process.

Why: a triggerer runs up to 1,000 triggers; one ``DescribeTrainingJob`` each every 30 s would be
33 requests/s, far above SageMaker's throttling. Every ``TrainingJobTrigger`` subscribes to the
poller instead, which lists the jobs modified since its watermark and describes only the watched
ones that changed (its baseline, safety net, pacing and fallbacks: ``docs/polling.md``).
One poller per job kind (``sagemaker/job_kinds.py``): the tuning trigger's shares this economy, its
list operation and keys read from the kind's row.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import random
import time
import weakref
from collections.abc import Awaitable, Callable, Iterable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any

from airflow_dist_training.aws_errors import is_access_denied, is_throttling, is_transient
from airflow_dist_training.hooks.sagemaker_jobs import snake_case
from airflow_dist_training.retry import Backoff as Backoff  # re-exported: the poller's backoff
from airflow_dist_training.sagemaker.job_kinds import TRAINING, SageMakerJobKind, get_job_kind

log = logging.getLogger(__name__)

#: SecondaryStatus values after which a terminal status is usually near.
PRE_TERMINAL_SECONDARY = frozenset({"Uploading", "Stopping", "MaxRuntimeExceeded", "MaxWaitTimeExceeded"})

ClientFactory = Callable[[str], Awaitable[AbstractAsyncContextManager[Any]]]


def _as_utc(value: Any) -> dt.datetime | None:
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            return value.replace(tzinfo=dt.UTC)
        return value.astimezone(dt.UTC)
    return None


async def default_client_factory(aws_conn_id: str | None, region_name: str | None) -> ClientFactory:
    """Build aiobotocore clients through the Amazon provider's ``AwsBaseHook``.

    The connection's own botocore config (endpoint, proxies, timeouts) is kept; only retries are
    switched off, because the poller does its own throttling-aware backoff and must count its calls.
    """

    async def factory(client_type: str) -> AbstractAsyncContextManager[Any]:
        from asgiref.sync import sync_to_async

        def build() -> AbstractAsyncContextManager[Any]:
            from botocore.config import Config

            from airflow_dist_training.hooks.aws import aws_hook

            ours = Config(retries={"total_max_attempts": 1})
            probe = aws_hook(client_type, aws_conn_id=aws_conn_id, region_name=region_name)
            user_cfg = probe.conn_config.botocore_config if aws_conn_id else None
            hook = aws_hook(
                client_type,
                aws_conn_id=aws_conn_id,
                region_name=region_name,
                config=user_cfg.merge(ours) if user_cfg is not None else ours,
            )
            return hook.get_client_type(region_name=hook.region_name, deferrable=True)  # type: ignore[no-any-return]

        return await sync_to_async(build)()

    return factory


class AsyncClients:
    """aiobotocore clients of one connection and region, opened on first use and kept until
    ``aclose`` (which a later ``client`` call may follow: the clients are opened again)."""

    def __init__(
        self, aws_conn_id: str | None, region_name: str | None, factory: ClientFactory | None = None
    ) -> None:
        self.aws_conn_id = aws_conn_id
        self.region_name = region_name
        self._factory = factory
        self._clients: dict[str, Any] = {}
        self._stack: contextlib.AsyncExitStack | None = None
        self._lock = asyncio.Lock()

    async def client(self, client_type: str) -> Any:
        async with self._lock:
            if client_type not in self._clients:
                if self._stack is None:
                    self._stack = contextlib.AsyncExitStack()
                if self._factory is None:
                    self._factory = await default_client_factory(self.aws_conn_id, self.region_name)
                cm = await self._factory(client_type)
                self._clients[client_type] = await self._stack.enter_async_context(cm)
            return self._clients[client_type]

    async def aclose(self) -> None:
        async with self._lock:
            stack, self._stack = self._stack, None
            self._clients = {}
        if stack is not None:
            with contextlib.suppress(Exception):
                await stack.aclose()


class JobWatch:
    """A trigger's subscription to one job. Updated by the poller; awaited by the trigger."""

    def __init__(
        self, poller: TrainingJobPoller, job_name: str, interval: float, details: bool = True
    ) -> None:
        self.poller = poller
        self.job_name = job_name
        self.interval = interval
        #: Wants a full describe on every change (secondary status, hosts) - e.g. to stream logs.
        #: Without it, only TrainingJobStatus changes are described; other changes are published
        #: from the ListTrainingJobs summary.
        self.details = details
        #: Latest ``DescribeTrainingJob`` response (None until the first describe).
        self.description: dict[str, Any] | None = None
        #: A permanent error for this job (the trigger reports it as an "error" event).
        self.error: BaseException | None = None
        self._changed = asyncio.Event()

    def _publish(self, description: dict[str, Any] | None = None, error: BaseException | None = None) -> None:
        if description is not None:
            self.description = description
        if error is not None:
            self.error = error
        self._changed.set()

    async def wait(self, timeout: float) -> bool:
        """Wait until the poller publishes something new or ``timeout`` passes. True on news."""
        # asyncio.timeout, not wait_for: on Python 3.11 wait_for can swallow a cancellation that
        # arrives as the event is set, and a cancelled trigger (user kill) would then poll forever
        try:
            async with asyncio.timeout(max(0.0, timeout)):
                await self._changed.wait()
        except TimeoutError:
            return False
        finally:
            self._changed.clear()
        return True


@dataclass
class _JobState:
    kind: SageMakerJobKind = TRAINING
    key: tuple[Any, ...] | None = None  # (status, progress, last_modified) as last seen
    description: dict[str, Any] | None = None
    watches: set[JobWatch] = field(default_factory=set)

    @property
    def status(self) -> str | None:
        return None if self.description is None else self.kind.status(self.description)

    @property
    def terminal(self) -> bool:
        return self.status in self.kind.terminal_states

    @property
    def wants_details(self) -> bool:
        return any(w.details for w in self.watches)

    def publish(self, description: dict[str, Any] | None = None, error: BaseException | None = None) -> None:
        for w in list(self.watches):
            w._publish(description, error)


@dataclass
class PollerStats:
    cycles: int = 0
    list_calls: int = 0
    describe_calls: int = 0
    throttled: int = 0
    errors: int = 0


class TrainingJobPoller:
    """Refreshes every watched job of one kind (default: training jobs) of one (connection, region)
    with few API calls: the kind's list operation since a watermark, a describe only on a change."""

    def __init__(
        self,
        aws_conn_id: str | None,
        region_name: str | None,
        *,
        client_factory: ClientFactory | None = None,
        reconcile_every: int = 10,
        watermark_overlap: float = 300.0,
        page_size: int = 100,
        max_pages: int = 100,
        describe_concurrency: int = 10,
        max_backoff_factor: float = 8.0,
        cheap_list_pages: int = 1,
        kind: str | SageMakerJobKind = "training",
    ) -> None:
        self.kind = get_job_kind(kind)
        self.aws_conn_id = aws_conn_id
        self.region_name = region_name
        self.reconcile_every = reconcile_every
        self.watermark_overlap = dt.timedelta(seconds=watermark_overlap)
        self.page_size = page_size
        self.max_pages = max_pages
        self.max_backoff_factor = max_backoff_factor
        #: Poll at half the interval near a completion only while the change listing costs at most
        #: this many pages (then it is nearly free; above it, halving would double the calls).
        self.cheap_list_pages = cheap_list_pages
        self._last_list_pages = 0
        self.stats = PollerStats()
        self._clients = AsyncClients(aws_conn_id, region_name, client_factory)
        self._jobs: dict[str, _JobState] = {}
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._describe_sem = asyncio.Semaphore(describe_concurrency)
        self._watermark: dt.datetime | None = None
        self._list_allowed = True
        self._changed_last_cycle = False
        self._throttled_this_cycle = False
        self._throttle_failures = 0

    @property
    def watched_jobs(self) -> list[str]:
        return list(self._jobs)

    def subscribe(self, job_name: str, interval: float, details: bool = True) -> JobWatch:
        watch = JobWatch(self, job_name, interval, details)
        state = self._jobs.setdefault(job_name, _JobState(self.kind))
        state.watches.add(watch)
        if state.description is not None:
            watch._publish(state.description)
        self._wake.set()
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name=f"sagemaker-poller-{self.aws_conn_id}-{self.region_name}"
            )
        return watch

    def unsubscribe(self, watch: JobWatch) -> None:
        state = self._jobs.get(watch.job_name)
        if state is None:
            return
        state.watches.discard(watch)
        if not state.watches:
            del self._jobs[watch.job_name]
        if not self._jobs:
            self._wake.set()  # let the loop notice and shut down

    def base_interval(self) -> float:
        intervals = [w.interval for s in self._jobs.values() for w in s.watches]
        return min(intervals) if intervals else 30.0

    async def client(self, client_type: str) -> Any:
        """A shared aiobotocore client (``sagemaker`` or ``logs``), open while the poller runs."""
        return await self._clients.client(client_type)

    async def aclose(self) -> None:
        """Stop the poller task and close its clients (tests; the loop also ends by itself)."""
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        await self._clients.aclose()

    def next_interval(self) -> float:
        base = self.base_interval()
        if self._throttle_failures:
            upper = min(base * self.max_backoff_factor, base * 2**self._throttle_failures)
            return random.uniform(base, upper)
        if self._last_list_pages > self.cheap_list_pages:
            return base
        busy = self._changed_last_cycle or any(
            s.description is not None
            and not s.terminal
            and (s.description.get("SecondaryStatus") in PRE_TERMINAL_SECONDARY or s.status == "Stopping")
            for s in self._jobs.values()
        )
        return base / 2 if busy else base

    async def _run(self) -> None:
        try:
            next_cycle = time.monotonic()
            while self._jobs:
                self._wake.clear()
                try:
                    self._throttled_this_cycle = False
                    await self._describe_new()
                    if time.monotonic() >= next_cycle:
                        await self._cycle()
                        throttled = self._throttled_this_cycle
                        self._throttle_failures = self._throttle_failures + 1 if throttled else 0
                        next_cycle = time.monotonic() + self.next_interval()
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    next_cycle = time.monotonic() + self._cycle_failed(exc)
                if not self._jobs:
                    break
                with contextlib.suppress(TimeoutError):  # asyncio.timeout: see JobWatch.wait
                    async with asyncio.timeout(max(0.0, next_cycle - time.monotonic())):
                        await self._wake.wait()
        finally:
            await self._clients.aclose()

    def _cycle_failed(self, exc: Exception) -> float:
        """Count a failed cycle; returns the delay before the next one."""
        self.stats.errors += 1
        if is_transient(exc):
            if is_throttling(exc):
                self.stats.throttled += 1
            self._throttle_failures += 1
            delay = self.next_interval()
            log.info("SageMaker poller: transient error (%s); next poll in %.2fs", exc, delay)
            return delay
        # A permanent, poller-wide error (e.g. credentials): tell everyone.
        log.warning("SageMaker poller: %s", exc)
        for state in list(self._jobs.values()):
            state.publish(error=exc)
        return self.base_interval()

    def _describe_failed(self, name: str, exc: Exception) -> None:
        """A transient error: describe again next cycle. A permanent one: the watchers report it."""
        state = self._jobs.get(name)
        if is_transient(exc):
            if is_throttling(exc):
                self.stats.throttled += 1
                self._throttled_this_cycle = True
            if state is not None:
                state.key = None  # describe again next cycle
            return
        if state is not None:
            state.key = ("error", None, None)  # stop describing it; watchers report the error
            state.publish(error=exc)

    async def _describe(self, name: str) -> None:
        """Describe one job and publish the result to its watchers (if it changed)."""
        client = await self.client("sagemaker")
        async with self._describe_sem:
            self.stats.describe_calls += 1
            try:
                describe = getattr(client, snake_case(self.kind.describe))
                desc = await describe(**{self.kind.name_key: name})
            except Exception as exc:
                self._describe_failed(name, exc)
                return
        desc.pop("ResponseMetadata", None)
        state = self._jobs.get(name)
        if state is None:
            return
        self._update(state, desc, self._seen(desc))

    def _update(self, state: _JobState, desc: dict[str, Any], lmt: dt.datetime | None) -> None:
        """Record a job's latest view; publish it to the job's watchers when it changed."""
        state.key = (self.kind.status(desc), self._progress(desc), lmt)
        if state.description != desc:
            state.description = desc
            self._changed_last_cycle = True
            state.publish(desc)

    def _progress(self, desc: dict[str, Any], default: Any = None) -> Any:
        """The kind's change short of a new status (a training job's SecondaryStatus, a tuning
        job's counters), or ``default`` when the answer lacks it."""
        key = self.kind.progress_key
        return desc.get(key, default) if key else default

    async def _describe_many(self, names: Iterable[str]) -> None:
        names = [n for n in dict.fromkeys(names) if n in self._jobs]
        if names:
            await asyncio.gather(*(self._describe(n) for n in names))

    async def _describe_new(self) -> None:
        new = [n for n, s in self._jobs.items() if s.description is None and s.key is None]
        if not new:
            return
        # Many new jobs that only need their status (a triggerer restart, a burst of deferrals):
        # take their baseline from the InProgress/Stopping listing instead of one describe each.
        cheap = [n for n in new if not self._jobs[n].wants_details]
        pages = 2 * (len(self._jobs) // self.page_size + 1)
        if self._list_allowed and len(cheap) > pages:
            try:
                running = await self._running_summaries()
            except Exception as exc:
                if not self._list_denied(exc):
                    raise
            else:
                for name in cheap:
                    summary = running.get(name)
                    if summary is not None:
                        self._apply_summary(name, summary)
                        new.remove(name)
        await self._describe_many(new)

    def _apply_summary(self, name: str, summary: dict[str, Any]) -> None:
        """Publish a status change read from a list operation's summary (no describe)."""
        state, kind = self._jobs[name], self.kind
        desc = dict(state.description or {kind.name_key: name})
        desc[kind.status_key] = summary.get(kind.status_key)
        if kind.progress_key and kind.progress_key in summary:
            desc[kind.progress_key] = summary[kind.progress_key]
        if summary.get("LastModifiedTime") is not None:
            desc["LastModifiedTime"] = summary["LastModifiedTime"]
        self._update(state, desc, _as_utc(summary.get("LastModifiedTime")))

    def _list_denied(self, exc: BaseException) -> bool:
        if is_access_denied(exc):
            if self._list_allowed:
                log.warning(
                    "sagemaker:%s is denied (%s); falling back to one %s per watched job per poll. "
                    "Grant sagemaker:%s to poll cheaply.",
                    self.kind.list,
                    exc,
                    self.kind.describe,
                    self.kind.list,
                )
            self._list_allowed = False
            return True
        return False

    async def _running_summaries(self) -> dict[str, dict[str, Any]]:
        running: dict[str, dict[str, Any]] = {}
        for status in sorted(self.kind.active_states):
            for summary in (await self._list_pages(StatusEquals=status))[0]:
                running[summary[self.kind.name_key]] = summary
                self._seen(summary)
        return running

    def _seen(self, job: dict[str, Any]) -> dt.datetime | None:
        """A job's ``LastModifiedTime`` (UTC), moving the list watermark up to it."""
        lmt = _as_utc(job.get("LastModifiedTime"))
        if lmt is not None and (self._watermark is None or lmt > self._watermark):
            self._watermark = lmt
        return lmt

    async def _list_pages(self, **params: Any) -> tuple[list[dict[str, Any]], int]:
        """All summaries of one listing, and how many pages (calls) it took."""
        client = await self.client("sagemaker")
        summaries: list[dict[str, Any]] = []
        token: str | None = None
        pages = 0
        for _ in range(self.max_pages):
            pages += 1
            kwargs = dict(params, MaxResults=self.page_size)
            if token:
                kwargs["NextToken"] = token
            self.stats.list_calls += 1
            page = await getattr(client, snake_case(self.kind.list))(**kwargs)
            summaries.extend(page.get(self.kind.summaries_key, []))
            token = page.get("NextToken")
            if not token:
                break
        return summaries, pages

    async def _cycle(self) -> None:
        self.stats.cycles += 1
        self._changed_last_cycle = False
        live = {n for n, s in self._jobs.items() if s.description is not None and not s.terminal}
        # Jobs whose last describe failed transiently: describe again.
        retry = {n for n, s in self._jobs.items() if s.key is None and s.description is not None}
        to_describe: set[str] = set(retry)
        if not self._list_allowed:
            to_describe |= live
        elif live:
            try:
                to_describe |= await self._changed_since_watermark(live)
                if self.reconcile_every and self.stats.cycles % self.reconcile_every == 0:
                    to_describe |= await self._reconcile(live)
            except Exception as exc:
                if not self._list_denied(exc):
                    raise
                to_describe |= live
        await self._describe_many(to_describe)

    async def _changed_since_watermark(self, live: set[str]) -> set[str]:
        params: dict[str, Any] = {"SortBy": "CreationTime", "SortOrder": "Descending"}
        if self._watermark is not None:
            params["LastModifiedTimeAfter"] = self._watermark - self.watermark_overlap
        changed: set[str] = set()
        summaries, self._last_list_pages = await self._list_pages(**params)
        for summary in summaries:
            lmt = self._seen(summary)
            name = summary.get(self.kind.name_key)
            if name not in live:
                continue
            state = self._jobs[name]
            old = state.key
            if old is None:
                changed.add(name)
                continue
            status = summary.get(self.kind.status_key)
            secondary = self._progress(summary, old[1])
            newer = lmt is not None and old[2] is not None and lmt > old[2]
            if status != old[0] or (state.wants_details and (secondary != old[1] or newer)):
                changed.add(name)  # terminal/primary change, or a watcher wants the full details
            elif secondary != old[1] or newer:
                self._apply_summary(name, summary)
        return changed

    async def _reconcile(self, live: set[str]) -> set[str]:
        # One InProgress listing (not InProgress + Stopping: two listings): a watched job missing from
        # it is described, which also covers the few jobs we last saw Stopping.
        running = {s[self.kind.name_key] for s in (await self._list_pages(StatusEquals="InProgress"))[0]}
        return {n for n in live if n not in running}


_REGISTRY: weakref.WeakKeyDictionary[
    asyncio.AbstractEventLoop, dict[tuple[str | None, str | None, str], TrainingJobPoller]
]
_REGISTRY = weakref.WeakKeyDictionary()


def get_poller(aws_conn_id: str | None, region_name: str | None, kind: str = TRAINING.kind) -> TrainingJobPoller:
    """The poller shared by all triggers of this event loop for ``(aws_conn_id, region_name)`` and
    the job kind they wait for."""
    pollers = _REGISTRY.setdefault(asyncio.get_running_loop(), {})
    key = (aws_conn_id, region_name, kind)
    if key not in pollers:
        pollers[key] = TrainingJobPoller(aws_conn_id, region_name, kind=kind)
    return pollers[key]
