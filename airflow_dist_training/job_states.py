"""The states of a SageMaker job (training and processing share them). Pure: no Airflow, no boto3.

One definition for hooks, triggers, sensors, operators and the UI. ``MaxRuntimeExceeded`` is a
``SecondaryStatus`` of a Failed/Stopped job, listed so that a status read from either field
counts as terminal and failed.
"""

from __future__ import annotations

#: A job in these states can still be stopped (``Stopping`` is already on its way out).
STOPPABLE_STATES = frozenset({"InProgress"})
ACTIVE_STATES = STOPPABLE_STATES | {"Stopping"}
SUCCESS_STATES = frozenset({"Completed"})
#: Stopped: by a StopXJob call (ours or the console's); never a success.
STOPPED_STATES = frozenset({"Stopped"})
FAILED_STATES = frozenset({"Failed", "MaxRuntimeExceeded"}) | STOPPED_STATES
TERMINAL_STATES = SUCCESS_STATES | FAILED_STATES


def is_terminal(status: object) -> bool:
    return status in TERMINAL_STATES
