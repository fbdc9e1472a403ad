"""Metric definitions applied to a job's output lines, as SageMaker does (pure, stdlib only).

Each ``{Name, Regex}`` is searched in every stdout and stderr line; the first group (the whole
match when the regex has no group) is the value, lines whose capture is not a number are skipped.
The final value of a metric is its last one (``DescribeTrainingJob`` reports the final iteration);
the whole series is kept with the time each line was seen.
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass, field


@dataclass(frozen=True)
class MetricPoint:
    name: str
    value: float
    timestamp: float  # epoch seconds
    host: str


@dataclass
class MetricParser:
    """Feed output lines; read ``final`` (name -> last value) and ``series``."""

    definitions: list[tuple[str, str]]
    series: list[MetricPoint] = field(default_factory=list)
    final: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._compiled = [(name, re.compile(regex)) for name, regex in self.definitions]

    def feed(self, line: str, *, host: str = "algo-1", timestamp: float | None = None) -> list[MetricPoint]:
        found: list[MetricPoint] = []
        for name, pattern in self._compiled:
            match = pattern.search(line)
            if match is None:
                continue
            raw = match.group(1) if pattern.groups else match.group(0)
            try:
                value = float(raw)
            except (TypeError, ValueError):
                continue
            if math.isnan(value) or math.isinf(value):
                continue
            point = MetricPoint(name, value, time.time() if timestamp is None else timestamp, host)
            self.series.append(point)
            self.final[name] = value
            found.append(point)
        return found
