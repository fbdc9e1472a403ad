"""Is the newest complete checkpoint fresh enough? Pure (times are epoch seconds)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Freshness:
    stale: bool
    age_seconds: float
    max_age_seconds: float
    checkpoint_uri: str | None  # newest complete checkpoint, None when there is none yet
    step: int | None
    root: str

    @property
    def message(self) -> str:
        if self.checkpoint_uri is None:
            what = f"no complete checkpoint under {self.root} for {self.age_seconds:.0f}s (since the run started)"
        else:
            what = (
                f"newest complete checkpoint under {self.root} is step {self.step} "
                f"({self.checkpoint_uri}), written {self.age_seconds:.0f}s ago"
            )
        verdict = "exceeds" if self.stale else "within"
        return f"{what}; {verdict} max_age={self.max_age_seconds:.0f}s"

    def to_xcom(self) -> dict[str, Any]:
        return {**asdict(self), "age_seconds": round(self.age_seconds, 3)}


def assess_freshness(
    *,
    root: str,
    now: float,
    max_age_seconds: float,
    started_at: float,
    latest_modified: float | None,
    latest_uri: str | None = None,
    latest_step: int | None = None,
) -> Freshness:
    """Stale when the newest complete checkpoint (or, with none, the watch start) is older than max_age.

    A checkpoint written before the watch started still counts (a resumed job's seed), but the
    baseline is never earlier than ``started_at``: the first checkpoint gets ``max_age`` from the start.
    """
    baseline = started_at if latest_modified is None else max(latest_modified, started_at)
    age = max(0.0, now - baseline)
    return Freshness(
        stale=age > max_age_seconds,
        age_seconds=age,
        max_age_seconds=float(max_age_seconds),
        checkpoint_uri=latest_uri,
        step=latest_step,
        root=root,
    )
