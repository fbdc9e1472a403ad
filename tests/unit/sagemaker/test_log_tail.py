"""One CloudWatch tail: the hook (sync) and the triggers (async) page and resume the same way."""

from __future__ import annotations

import asyncio
from typing import Any

from airflow_dist_training.sagemaker.log_tail import LogTail, tail_async, tail_sync


class _Logs:
    """Two hosts' streams, one event a page (so the tail has to page), 60 streams to list."""

    def __init__(self) -> None:
        self.streams = {f"job/algo-{i}": [(i * 10 + n, f"h{i} l{n}") for n in range(3)] for i in range(1, 3)}
        self.calls: list[str] = []

    def __call__(self, operation: str, resource: str, kwargs: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(operation)
        if operation == "DescribeLogStreams":
            return {"logStreams": [{"logStreamName": s} for s in self.streams]}
        events = self.streams[kwargs["logStreamName"]]
        at = int(kwargs.get("nextToken", "0"))
        page = events[at : at + 1]
        return {"events": [{"timestamp": t, "message": m} for t, m in page], "nextForwardToken": str(at + len(page))}


def test_sync_and_async_fetch_the_same_events_and_resume_where_they_stopped() -> None:
    logs = _Logs()
    sync_tail, async_tail = LogTail("job", "g"), LogTail("job", "g")

    async def call(operation: str, resource: str, kwargs: dict[str, Any]) -> dict[str, Any]:
        return logs(operation, resource, kwargs)

    first = tail_sync(sync_tail.fetch(2), logs)
    assert [e.format() for e in first] == [
        "[algo-1] h1 l0", "[algo-1] h1 l1", "[algo-1] h1 l2", "[algo-2] h2 l0", "[algo-2] h2 l1", "[algo-2] h2 l2",
    ]  # fmt: skip
    assert asyncio.run(tail_async(async_tail.fetch(2), call)) == first
    assert sync_tail.cursor.to_dict() == {"job/algo-1": "3", "job/algo-2": "3"}
    logs.streams["job/algo-2"].append((99, "late"))
    assert [e.message for e in tail_sync(sync_tail.fetch(2), logs)] == ["late"]
    assert [e.message for e in asyncio.run(tail_async(async_tail.fetch(2), call))] == ["late"]


def test_a_missing_log_group_is_no_events_yet() -> None:
    class NotFound(Exception):
        response = {"Error": {"Code": "ResourceNotFoundException"}}

    def call(operation: str, resource: str, kwargs: dict[str, Any]) -> Any:
        raise NotFound()

    assert tail_sync(LogTail("job", "g").fetch(), call) == []
