"""A SageMaker test endpoint on this machine that really runs jobs (docs/emulator.md).

moto's server speaks the AWS protocol; this package extends its SageMaker backend so that jobs
execute their request on this machine (training through the local backend's request executor).
Nothing here is imported at DAG-parse time; moto is needed only when an emulator starts
(``pip install 'airflow-dist-training[emulator]'``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow_dist_training.emulator.server import Emulator

__all__ = ["Emulator"]


def __getattr__(name: str) -> Any:
    if name == "Emulator":
        from airflow_dist_training.emulator.server import Emulator

        return Emulator
    raise AttributeError(name)
