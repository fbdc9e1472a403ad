"""The built-in evaluation kinds' runners (``spec/evaluations.py``): the ``EvaluationRunner``
protocol of ``operators/evaluation.py`` over the hooks' engines (``hooks/evaluation.py``)."""

from __future__ import annotations

import re
import shutil
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow_dist_training.errors import Problem, SpecValidationError
from airflow_dist_training.evaluation.schema import EVALUATION_FILE_NAME
from airflow_dist_training.hooks.evaluation import (
    ArtifactStore,
    EvaluationScriptError,
    LocalEvaluationRunner,
    SageMakerEvaluationRunner,
    evaluation_code_files,
    evaluation_output_uri,
    join_uri,
    processing_failure,
)
from airflow_dist_training.operators.evaluation import Evaluated
from airflow_dist_training.storage.location import split_uri, uri_scheme

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_dist_training.operators.evaluation import EvaluationOperator

MAX_EVALUATION_JOBS = 10  # generations of one run's evaluation job (after Failed/Stopped ones)


def _safe(part: str) -> str:
    return re.sub(r"[^A-Za-z0-9._=-]+", "_", part).strip("_") or "_"


class ProcessRunner:
    """Kind ``process``: the script runs on the worker, in a processing container
    (``LocalEvaluationRunner``); its ``evaluation.json`` is copied to an ``s3://`` output."""

    def __init__(self, task: EvaluationOperator) -> None:
        self.task = task

    def _default_output_dir(self, context: Context) -> Path:
        from airflow.configuration import AIRFLOW_HOME

        ti = context["ti"]
        return Path(AIRFLOW_HOME) / "evaluation" / _safe(ti.dag_id) / _safe(ti.run_id) / _safe(ti.task_id)

    def evaluate(self, context: Context) -> Evaluated:

        task = self.task
        store = ArtifactStore(task.aws_conn_id, task.region_name)
        remote_output = task.output_uri if uri_scheme(task.output_uri) == "s3" else None
        out_dir = (
            Path(split_uri(task.output_uri)[2])
            if task.output_uri and not remote_output
            else self._default_output_dir(context)
        )
        work = Path(tempfile.mkdtemp(prefix="adt-eval-"))
        try:
            data_dir = task.data_uri
            if data_dir and uri_scheme(data_dir) == "s3":
                data_dir = str(store.download_prefix(data_dir, work / "data"))
            path = LocalEvaluationRunner(store, python=task.python).run(
                script=task.script,
                model_uri=task.model_uri,
                work_dir=work,
                output_dir=out_dir,
                data_dir=data_dir,
                arguments=task.arguments,
                env=task.env,
                timeout=task.timeout,
                dependencies=task.dependencies,
            )
        finally:
            shutil.rmtree(work, ignore_errors=True)
        uri = str(path)
        result = store.load_evaluation(uri)
        if remote_output:
            uri = store.write_bytes(
                join_uri(remote_output, EVALUATION_FILE_NAME), path.read_bytes(), "application/json"
            )
        return Evaluated(result, uri, {})

    def resume(self, event: dict[str, Any], evaluation_uri: str) -> Evaluated:
        raise RuntimeError("a local evaluation never defers")

    def on_kill(self) -> None:
        """Nothing to stop: the script dies with the task process."""


class ProcessingJobRunner:
    """Kind ``processing_job``: a SageMaker processing job (``SageMakerEvaluationRunner``), waited
    for here or in the triggerer (``deferrable``); a local script and data are uploaded first."""

    def __init__(self, task: EvaluationOperator) -> None:

        self.task = task
        self.runner = SageMakerEvaluationRunner(task.aws_conn_id, task.region_name, poll_interval=task.poll_interval)
        self.job: str | None = None  # this try's processing job, once started (on_kill stops it)

    def evaluate(self, context: Context) -> Evaluated:
        from airflow_dist_training.evaluation.processing import build_processing_job_request
        from airflow_dist_training.sagemaker.naming import generation_name, identity_from_context, job_name

        task = self.task
        store = ArtifactStore(task.aws_conn_id, task.region_name)
        # deterministic per task run: a retry attaches to the run's job, or starts the next
        # generation (-r2, ...) only when the earlier one ended Failed or Stopped
        if task.job_name:
            names = [generation_name(task.job_name, g) for g in range(1, MAX_EVALUATION_JOBS + 1)]
        else:
            identity = identity_from_context(context, context["ti"].task_id)
            names = [job_name(f"eval-{task.task_id}", identity, g) for g in range(1, MAX_EVALUATION_JOBS + 1)]
        script_uri, data_uri = self._upload_local_inputs(store)
        request = build_processing_job_request(
            job_name=names[0],
            role_arn=task.role_arn or "",
            image_uri=task.image_uri or "",
            script_uri=script_uri,
            model_uri=task.model_uri,
            output_uri=task.output_uri or "",
            data_uri=data_uri,
            instance_type=task.instance_type,
            instance_count=task.instance_count,
            volume_size_gb=task.volume_size_gb,
            max_runtime_seconds=task.max_runtime_seconds,
            arguments=task.arguments,
            environment=task.env,
            network_config=task.network_config,
            tags=task.tags,
        )
        if task.deferrable:
            self._defer_to_trigger(request, names[1:])
        info, uri = self.runner.run(request, timeout=task.timeout, retry_names=names[1:], on_start=self._started)
        return Evaluated(store.load_evaluation(uri), uri, {"job_name": info["job_name"], "job_arn": info["job_arn"]})

    def _upload_local_inputs(self, store: ArtifactStore) -> tuple[str, str | None]:
        """Put a local script with the code it ships (the ``*.py`` next to it and its
        ``dependencies``) and local data under the run's S3 prefix."""
        from airflow_dist_training.storage import local_files
        from airflow_dist_training.storage.location import file_uri_path

        task = self.task
        script, data = task.script, task.data_uri
        inputs = join_uri(task.output_uri or "", "inputs")
        if uri_scheme(script) != "s3":
            path = file_uri_path(script)
            files = evaluation_code_files(path, task.dependencies)  # every bad entry before any upload
            count = store.upload_files(files, join_uri(inputs, "code"))
            script = join_uri(join_uri(inputs, "code"), path.name)
            task.log.info("Uploaded the evaluation script %s (%d file(s)) to %s", path, count, script)
        if data and "://" not in data.replace("file://", ""):
            folder = file_uri_path(data)
            if not folder.is_dir():
                raise SpecValidationError([Problem("data_uri", f"{data} is not a directory")])
            data = join_uri(inputs, "data")
            count = store.upload_files(local_files(folder), data)
            task.log.info("Uploaded the evaluation data %s (%d file(s)) to %s", folder, count, data)
        return script, data

    def _defer_to_trigger(self, request: Mapping[str, Any], retry_names: Sequence[str]) -> None:

        task = self.task
        name = self.runner.start(request, retry_names)
        self._started(name)
        task.defer(
            trigger=self.runner.jobs.trigger(
                name,
                aws_conn_id=task.aws_conn_id,
                region_name=task.region_name,
                poll_interval=task.poll_interval,
                deadline=time.time() + task.timeout if task.timeout else None,
            ),
            method_name="execute_complete",
            kwargs={"evaluation_uri": evaluation_output_uri(request)},
        )

    def resume(self, event: dict[str, Any], evaluation_uri: str) -> Evaluated:
        from airflow_dist_training.retry import failing_fast_without_retry_policy

        task = self.task
        name = str(event.get("job_name") or "")
        if event.get("status") == "timeout":
            self.runner.stop(name)  # a timed-out task must not leave the job billing
            raise EvaluationScriptError(f"{event.get('message')} The job was stopped.")
        if event.get("status") == "failed":
            with failing_fast_without_retry_policy():
                raise processing_failure(str(event.get("message")), event.get("failure_reason"))
        if event.get("status") != "success":
            raise EvaluationScriptError(str(event.get("message")))
        # the job says where its evaluation.json is: defer kwargs do not survive every resume
        # (dag.test() resumes with the event only)
        job = self.runner.jobs.describe(name)
        evaluation_uri = evaluation_uri or evaluation_output_uri(job)
        result = ArtifactStore(task.aws_conn_id, task.region_name).load_evaluation(evaluation_uri)
        return Evaluated(result, evaluation_uri, {"job_name": name, "job_arn": job.get("ProcessingJobArn")})

    def _started(self, name: str) -> None:
        self.job = name

    def on_kill(self) -> None:
        """Stop the processing job, unless the next try attaches to it."""
        if self.job is None:
            return
        from airflow_dist_training.task_kills import worker_kill_case

        task = self.task
        case = worker_kill_case(task._try)
        if not case.stop:  # the next try attaches to the run's processing job
            task.log.warning("Task killed: %s; %s is left running.", case.why, self.job)
            return
        try:
            self.runner.stop(self.job)
        except Exception as exc:  # on_kill must not raise
            task.log.error("Could not stop processing job %s: %s", self.job, exc)
