"""A SageMaker test endpoint on this machine that really runs jobs.

``airflow-dist-training emulator`` (or :class:`~airflow_dist_training.emulator.server.Emulator`
as a context manager, or the ``sagemaker_emulator`` pytest fixture) serves S3, SageMaker,
CloudWatch Logs and IAM/STS on 127.0.0.1. The AWS protocol is moto's server; this package only
extends moto's SageMaker backend so that ``CreateTrainingJob`` and ``CreateProcessingJob`` execute
the request on this machine (training through the local backend's request executor), with
SageMaker's statuses, logs, metrics, artifacts, checkpoints and failure reasons.

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
