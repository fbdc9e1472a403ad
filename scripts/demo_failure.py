#!/usr/bin/env python3
"""What failed in an ``airflow dags test`` log, in a few lines: each failed task, its error and the
last error lines its job printed, without the scheduler's chatter ("No tasks to run" every second
while a task waits for its retry).

scripts/demo.sh prints this when the demo's run fails::

    .venv/bin/python scripts/demo_failure.py .adt-demo/last-run.log

Prints nothing and exits 1 when the log names no failed task (then the log's tail is the help).
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

# a structlog line of `airflow dags test`: "2026-01-01T00:00:00.000000Z [error    ] message ..."
LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z? \[(?P<level>[a-z ]+)\] (?P<message>.*)$")
STARTING = re.compile(r"\[DAG TEST\] starting task_id=(?P<task>\S+)")
TASK_FAILED = "Task failed with exception"
NEW_STATE = re.compile(r"Task instance state updated .*\bnew_state=(?P<state>\w+)")
RETRY_DECISION = re.compile(r"Retry policy decision .*\baction=(?P<action>\w+).*?\breason='(?P<reason>[^']*)'")
# the message part of a line, without structlog's "[logger] key=value ..." suffix
SUFFIX = re.compile(r"\s+\[[\w.]+\](?:\s+\w+=\S*)*\s*$")
JOB_ERROR = re.compile(r"Error\b|Exception\b|Traceback|FailureReason|No module named|exited with")
ERROR_LINES = 8


@dataclass
class Attempt:
    task: str
    error: list[str] = field(default_factory=list)  # the exception the task failed with
    job_errors: list[str] = field(default_factory=list)  # error lines the task's job printed
    state: str = ""
    decision: str = ""
    failed: bool = False


def _exception_text(traceback: list[str]) -> list[str]:
    """The last exception of a traceback: the lines after its last frame."""
    frames = [i for i, line in enumerate(traceback) if line.startswith("  File ")]
    rest = traceback[frames[-1] + 1 :] if frames else traceback
    start = next((i for i, line in enumerate(rest) if line and not line.startswith(" ")), len(rest))
    return [line for line in rest[start:] if line.strip()]


def failed_attempts(lines: list[str]) -> list[Attempt]:
    """Every failed attempt of a task in the log, in order."""
    attempts: list[Attempt] = []
    current: Attempt | None = None
    traceback: list[str] | None = None
    for raw in lines:
        line = raw.rstrip("\n")
        match = LOG_LINE.match(line)
        if match is None:
            if traceback is not None:
                traceback.append(line)
            continue
        if traceback is not None and current is not None:
            current.error = _exception_text(traceback)
            traceback = None
        message = match["message"]
        if started := STARTING.search(message):
            current = Attempt(started["task"])
            attempts.append(current)
            continue
        if current is None:
            continue
        if message.startswith(TASK_FAILED):
            current.failed = True
            traceback = []
        elif state := NEW_STATE.search(message):
            current.state = state["state"]
        elif decision := RETRY_DECISION.search(message):
            current.decision = f"{decision['action']}: {decision['reason']}"
        elif match["level"].strip() in ("info", "warning", "error") and JOB_ERROR.search(message):
            current.job_errors.append(SUFFIX.sub("", message))
    if traceback is not None and current is not None:
        current.error = _exception_text(traceback)
    return [a for a in attempts if a.failed or a.state in ("failed", "up_for_retry")]


def summary(lines: list[str]) -> str:
    """The failed tasks, their errors and their jobs' last error lines; empty if none failed."""
    out: list[str] = []
    seen: set[tuple[str, tuple[str, ...]]] = set()
    for attempt in failed_attempts(lines):
        key = (attempt.task, tuple(attempt.error))
        if key in seen:  # a retry that failed the same way
            out.append(f"Task {attempt.task} failed again the same way ({attempt.state or 'failed'})")
            continue
        seen.add(key)
        action, _, reason = attempt.decision.partition(": ")
        if action == "fail":
            then = f", not retried: {reason}"
        elif action == "retry" or attempt.state == "up_for_retry":
            then = f", will retry{': ' + reason if reason else ''}"
        else:
            then = ""
        out.append(f"Task {attempt.task} failed{then}")
        error = attempt.error or ["(no exception in the log)"]
        if len(error) > ERROR_LINES:  # the exception's first line, then its end (the script's last lines)
            error = [error[0], "...", *error[-(ERROR_LINES - 1) :]]
        out += [f"  {line}" for line in error]
        job_errors = [line for line in attempt.job_errors if line not in attempt.error][-ERROR_LINES:]
        if job_errors:
            out.append("  last error lines of its job:")
            out += [f"    {line}" for line in job_errors]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: demo_failure.py <airflow dags test log>", file=sys.stderr)
        return 2
    text = summary(Path(args[0]).read_text(errors="replace").splitlines())
    if not text:
        return 1
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
