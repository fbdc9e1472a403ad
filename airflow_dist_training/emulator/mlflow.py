"""SageMaker managed MLflow on the test endpoint: what a job with ``MlflowConfig`` is given.

SageMaker creates the job's run on the tracking server (``DescribeTrainingJob.MlflowDetails``:
``MlflowExperimentId``, ``MlflowRunId``) and the job's MLflow client logs to it. The endpoint does the
same against a real tracking server standing in for the managed resource: ``ADT_EMULATOR_MLFLOW_URI``
(the endpoint's own setting, never passed to a job) names it. The job gets ``MLFLOW_TRACKING_URI``,
``MLFLOW_EXPERIMENT_NAME``, ``MLFLOW_EXPERIMENT_ID`` and ``MLFLOW_RUN_ID``, which MLflow's client reads,
so a script's ``mlflow.log_metric`` or ``mlflow.autolog()`` logs to that run. Without a server the
job gets the ARN as its tracking URI, which only the ``sagemaker-mlflow`` plugin can resolve.
"""

from __future__ import annotations

import logging
import os
import re
import time
from typing import Any

log = logging.getLogger(__name__)

SERVER_ENV = "ADT_EMULATOR_MLFLOW_URI"


def relay_ports() -> list[int]:
    """The tracking server's port when it is on this machine's loopback: jobs in their own network
    namespace reach it through a relay, as they reach the endpoint."""
    found = re.match(r"https?://(?:127\.0\.0\.1|localhost):(\d+)", os.environ.get(SERVER_ENV, ""))
    return [int(found.group(1))] if found else []


def with_mlflow_environment(request: dict[str, Any]) -> dict[str, Any]:
    """``request`` with the MLflow variables a job with ``MlflowConfig`` gets in its ``Environment``."""
    config = request.get("MlflowConfig")
    if not config:
        return request
    job = str(request["TrainingJobName"])
    experiment = str(config.get("MlflowExperimentName") or job)
    env = {"MLFLOW_TRACKING_URI": str(config["MlflowResourceArn"]), "MLFLOW_EXPERIMENT_NAME": experiment}
    uri = os.environ.get(SERVER_ENV)
    if uri:
        from airflow_dist_training.hooks.mlflow import MlflowRestClient, MlflowTrackingError, experiment_id

        client = MlflowRestClient(uri)
        try:
            exp_id = experiment_id(client, experiment)
            body = {
                "experiment_id": exp_id,
                "run_name": str(config.get("MlflowRunName") or job),
                "start_time": int(time.time() * 1000),
                "tags": [{"key": "sagemaker.training_job", "value": job}],
            }
            run_id = str(client.call("POST", "runs/create", body)["run"]["info"]["run_id"])
            env.update(MLFLOW_TRACKING_URI=uri, MLFLOW_EXPERIMENT_ID=exp_id, MLFLOW_RUN_ID=run_id)
        except MlflowTrackingError as exc:
            log.warning("MLflow: no run for %s on %s (%s); the job gets the ARN", job, uri, exc)
    return {**request, "Environment": {**dict(request.get("Environment") or {}), **env}}
