"""checkpointing.StopSignal: a flag set by SageMaker's stop SIGTERM, for the loop to save and exit."""

from __future__ import annotations

import os
import signal

import pytest

from airflow_dist_training.checkpointing import StopSignal


@pytest.fixture
def restore_sigterm() -> object:
    previous = signal.getsignal(signal.SIGTERM)
    yield previous
    signal.signal(signal.SIGTERM, previous)


def test_sigterm_sets_the_flag_runs_the_callback_and_the_previous_handler(restore_sigterm: object) -> None:
    earlier: list[int] = []
    signal.signal(signal.SIGTERM, lambda signum, frame: earlier.append(signum))
    seen: list[int] = []
    stop = StopSignal.install(callback=seen.append)
    assert not stop.requested and stop.seconds_left() is None
    os.kill(os.getpid(), signal.SIGTERM)
    assert stop.requested and stop.signum == signal.SIGTERM
    assert seen == [signal.SIGTERM] and earlier == [signal.SIGTERM]
    left = stop.seconds_left()
    assert left is not None and 119.0 < left <= 120.0
    assert stop.seconds_left(grace=0.0) == 0.0
