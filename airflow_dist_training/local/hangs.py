"""The hangs a local job can get into, told from its hosts' output and its network namespace.

A distributed job that cannot rendezvous does not fail: torch waits 30 minutes. The supervisor
asks :class:`HangWatch` on every pass of its wait loop and fails the job with the cause it names:

* a **name-resolution hang**: a host's recent output says a host name did not resolve;
* a **rendezvous hang**: nothing listens on the master port (7777) after torchrun started there,
  or connection attempts inside the job keep being refused, or a host says it cannot reach it.

:func:`lost_port_race` tells a relaunch apart from a failure: another process bound the master
port between ``free_port()`` and torch's bind (relocated layout only).
"""

from __future__ import annotations

import collections
import subprocess
from collections.abc import Callable, Mapping

from airflow_dist_training.local import hosts as nshosts

Tails = Mapping[str, collections.deque[str]]

_RESOLUTION_MARKS = (
    "Name or service not known",
    "Temporary failure in name resolution",
    "nodename nor servname provided",
    "No address associated with hostname",
)
# torch's TCPStore when the master port was taken between free_port() and the bind
_PORT_TAKEN_MARK = "EADDRINUSE"
_UNREACHABLE_MARKS = ("failed to connect", "Connection refused", "timed out")
_RECENT_LINES = 20


def lost_port_race(tails: Tails, codes: Mapping[str, int], stopped: bool) -> bool:
    """Another process bound the master port first: the hosts never started training."""
    if stopped or all(c == 0 for c in codes.values()):
        return False
    return any(_PORT_TAKEN_MARK in line for tail in tails.values() for line in tail)


def _last_recent(tail: collections.deque[str], match: Callable[[str], bool]) -> str | None:
    """The last of the recent lines that ``match``."""
    return next((line for line in reversed(list(tail)[-_RECENT_LINES:]) if match(line)), None)


def resolution_hang(tails: Tails, hosts: list[str], waited: float) -> str | None:
    """A host's recent output names a name-resolution failure."""
    for host, tail in tails.items():
        mark = _last_recent(tail, lambda line: any(m in line for m in _RESOLUTION_MARKS))
        if mark is not None:
            return (
                f"Name resolution hang on {host} after {waited:.0f} s: {mark.strip()[:300]}. "
                f"Host names that resolve in this job: {', '.join(hosts)}"
            )
    return None


def unreachable_master(tails: Tails, master: str, waited: float) -> str | None:
    """A host's recent output says it cannot connect to the master port."""
    port = str(nshosts.MASTER_PORT)
    for host, tail in tails.items():
        line = _last_recent(tail, lambda text: port in text and any(m in text for m in _UNREACHABLE_MARKS))
        if line is not None:
            return (
                f"Rendezvous hang on {host} after {waited:.0f} s: it cannot reach "
                f"{master}:{nshosts.MASTER_PORT}, where nothing listens ({line.strip()[:300]}). "
                "The master host never opened its rendezvous store."
            )
    return None


class HangWatch:
    """What the hang checks remember between passes of the wait loop (one job, one launch);
    ``hosts`` the master first, ``limit`` the seconds a hang may last (``JobOptions.hang_seconds``)."""

    def __init__(
        self, hosts: list[str], limit: float, *, torch_distributed: bool, builtin_runner: bool
    ) -> None:
        self.hosts = hosts
        self.limit = limit
        self.torch_distributed = torch_distributed
        self.builtin_runner = builtin_runner
        # when the master host started torchrun: a rendezvous hang is measured from there
        self.torchrun_started: float | None = None
        # the master port was seen listening: the rendezvous happened, so a quiet 7777 later (hosts
        # finishing, the toolkit's interpreter exiting) is no rendezvous hang
        self.rendezvous_seen = False
        self._listen_checked = 0.0
        self._refused: list[tuple[float, int]] = []
        self._refused_checked = 0.0

    def saw_line(self, host: str, line: str, now: float) -> None:
        if self.torchrun_started is None and host == self.hosts[0]:
            if "torchrun" in line or "torch.distributed.run" in line:
                self.torchrun_started = now

    def check(
        self,
        now: float,
        training_started: float | None,
        network: nshosts.JobNetwork | None,
        tails: Tails,
        processes: Mapping[str, subprocess.Popen[bytes]],
    ) -> str | None:
        """A rendezvous or name-resolution hang, with its cause (None: no hang seen)."""
        if network is not None and not self.rendezvous_seen and now - self._listen_checked >= 0.5:
            self._listen_checked = now
            self.rendezvous_seen = network.listening(nshosts.MASTER_PORT)
        if training_started is None or now - training_started < self.limit:
            return None
        waited = now - training_started
        resolution = resolution_hang(tails, self.hosts, waited)
        if resolution is not None:
            return resolution
        if network is None or len(self.hosts) < 2 or self.rendezvous_seen:
            return None
        master = self.hosts[0]
        started = training_started if self.builtin_runner else self.torchrun_started
        if (
            self.torch_distributed
            and started is not None
            and now - started >= self.limit
            and all(p.poll() is None for p in processes.values())
        ):
            return (
                f"Rendezvous hang: nothing listens on {master}:{nshosts.MASTER_PORT} {now - started:.0f} s "
                "after torchrun started there, so the other hosts cannot join (the master host did not "
                "start its rendezvous store: check that the script or launcher uses the master address "
                "and port 7777)"
            )
        return self._refused_connections(now, network, master, waited) or unreachable_master(
            tails, master, waited
        )

    def _refused_connections(
        self, now: float, network: nshosts.JobNetwork, master: str, waited: float
    ) -> str | None:
        """A script doing its own rendezvous retries silently (torch reports only after its 30 min
        timeout): refused connection attempts inside the job while nothing listens on 7777."""
        limit = self.limit
        if now - self._refused_checked >= 1.0:
            self._refused_checked = now
            self._refused.append((now, network.refused_connections()))
            self._refused = [(t, n) for t, n in self._refused if now - t <= limit]
        window = [n for t, n in self._refused if now - t <= limit / 2]
        if len(self._refused) > 2 and window and self._refused[0][0] <= now - limit / 2:
            if window[-1] > window[0] and self._refused[-1][1] > self._refused[0][1]:
                return (
                    f"Rendezvous hang after {waited:.0f} s: connection attempts inside the job keep being "
                    f"refused ({self._refused[-1][1] - self._refused[0][1]} in the last {limit:.0f} s) and "
                    f"nothing listens on {master}:{nshosts.MASTER_PORT}: a host waits for a master that never "
                    "opened its rendezvous store (check the master address and port 7777, and that the "
                    "master host reaches init_process_group)"
                )
        return None
