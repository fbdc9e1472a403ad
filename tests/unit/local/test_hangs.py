"""The hang detectors name the cause a user reads in FailureReason, from the hosts' output alone."""

from __future__ import annotations

import collections
from typing import Any

from airflow_dist_training.local.hangs import HangWatch, lost_port_race, resolution_hang, unreachable_master

HOSTS = ["algo-1", "algo-2"]


def tails(**lines: list[str]) -> dict[str, collections.deque[str]]:
    return {host: collections.deque(lines.get(host.replace("-", "_"), []), maxlen=200) for host in HOSTS}


def test_a_name_that_does_not_resolve_is_named_with_the_hosts_that_do() -> None:
    seen = tails(algo_2=["connecting", "socket.gaierror: [Errno -2] Name or service not known"])
    assert resolution_hang(seen, HOSTS, 61.4) == (
        "Name resolution hang on algo-2 after 61 s: socket.gaierror: [Errno -2] Name or service not known. "
        "Host names that resolve in this job: algo-1, algo-2"
    )
    assert resolution_hang(tails(algo_1=["epoch 1"]), HOSTS, 61.4) is None


def test_a_host_that_cannot_reach_the_master_port_names_it() -> None:
    line = "[W socket.cpp:755] The client socket has failed to connect to algo-1:7777 (Connection refused)"
    reason = unreachable_master(tails(algo_2=[line]), "algo-1", 90)
    assert reason is not None and reason.startswith(
        "Rendezvous hang on algo-2 after 90 s: it cannot reach algo-1:7777"
    )
    assert unreachable_master(tails(algo_2=["Connection refused on 5432"]), "algo-1", 90) is None


def test_a_taken_port_is_a_lost_race_only_when_a_host_failed_and_nobody_stopped_the_job() -> None:
    taken = tails(
        algo_1=[
            "RuntimeError: The server socket has failed to listen on any local network address. EADDRINUSE"
        ]
    )
    assert lost_port_race(taken, {"algo-1": 1, "algo-2": 1}, stopped=False)
    assert not lost_port_race(taken, {"algo-1": 0, "algo-2": 0}, stopped=False)
    assert not lost_port_race(taken, {"algo-1": 1, "algo-2": 1}, stopped=True)


class _SilentMaster:
    """Fault injection: a job network where nothing ever listens on the master port."""

    def listening(self, port: int) -> bool:
        return False

    def refused_connections(self) -> int:
        return 0


class _Running:
    def poll(self) -> None:
        return None


def test_torchrun_started_on_the_master_but_nothing_listens_is_a_rendezvous_hang() -> None:
    watch = HangWatch(HOSTS, 60, torch_distributed=True, builtin_runner=False)
    network: Any = _SilentMaster()
    processes: Any = {h: _Running() for h in HOSTS}
    watch.saw_line("algo-1", "torchrun --nnodes 2 train.py", now=1000.0)
    assert watch.check(1030.0, 1000.0, network, tails(), processes) is None  # before the limit
    reason = watch.check(1061.0, 1000.0, network, tails(), processes)
    assert reason is not None and reason.startswith(
        "Rendezvous hang: nothing listens on algo-1:7777 61 s after torchrun started there"
    )
    # one host: there is no rendezvous to wait for
    single = HangWatch(["algo-1"], 60, torch_distributed=True, builtin_runner=True)
    assert single.check(1061.0, 1000.0, network, tails(), processes) is None
