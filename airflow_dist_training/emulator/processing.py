"""Processing jobs of the emulator, run under SageMaker's processing contract.

As SageMaker: the ``S3Input`` objects are downloaded to their ``LocalPath``; the container
entrypoint runs with the request's environment, ``python`` being the job environment's
(:func:`job_interpreter`), which does not see the emulator's own ``PYTHONPATH``, so a script runs
only with what the job ships; output goes to CloudWatch Logs; on exit 0 the ``S3Output`` paths are
uploaded, else the job fails with its ``/opt/ml/output/failure`` text or its last error line (no
path of this machine). Stop and ``MaxRuntimeInSeconds`` are honoured.

The job runs in a processing container of this machine (local/processing.py, the same one as the
local backend's evaluation): with Linux namespaces its folder ``<root>/processing/<job>/opt/ml`` is
its ``/opt/ml`` and the job environment is the image's ``/opt/conda``, so it sees no path of this
machine; without them its output is rewritten instead. One host runs, whatever ``InstanceCount``
says.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import os
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from airflow_dist_training.emulator.logs import PROCESSING_LOG_GROUP, JobLogs
from airflow_dist_training.emulator.training import MotoRun, moto_now
from airflow_dist_training.local.processing import ProcessingContainer
from airflow_dist_training.storage import StoreOptions, Stores, get_tree, local_files, put_tree

log = logging.getLogger(__name__)
STOP_GRACE_SECONDS = 5.0


class ProcessingRun(MotoRun):
    def __init__(self, record: Any, request: dict[str, Any], job_dir: Path, logs: JobLogs) -> None:
        super().__init__(record, request, "ProcessingJobName")
        self.job_dir = job_dir
        self.logs = logs
        self.proc: subprocess.Popen[bytes] | None = None
        self.stop_requested = threading.Event()
        self.tail: collections.deque[str] = collections.deque(maxlen=40)
        # where it runs; its python (what python/python3 start) is set when the job starts
        self.container = ProcessingContainer(job_dir)


class ProcessingJobs:
    """Runs the emulator's processing jobs (thread-safe)."""

    def __init__(self, root: Path, clients: Any) -> None:
        self.root = root
        self.clients = clients
        self.runs: dict[str, ProcessingRun] = {}
        self._lock = threading.Lock()

    def start(self, record: Any, request: dict[str, Any]) -> None:
        name = str(request["ProcessingJobName"])
        run = ProcessingRun(
            record,
            request,
            self.root / "processing" / name,
            JobLogs(self.clients("logs"), PROCESSING_LOG_GROUP, name),
        )
        shutil.rmtree(run.job_dir, ignore_errors=True)  # a fresh "container" for every job
        record.environment = request.get("Environment")
        record.processing_resources = request.get("ProcessingResources")
        run.set(processing_job_status="InProgress", processing_end_time=None, processing_start_time=None)
        with self._lock:
            self.runs[name] = run
        threading.Thread(
            target=self._main, args=(run,), name=f"emulator-processing-{name}", daemon=True
        ).start()

    def check(self, request: dict[str, Any]) -> None:
        """Raise when the request cannot run here (before moto records it): no job environment for
        its image, with how to build it."""
        job_interpreter(request)

    def get(self, name: str) -> ProcessingRun | None:
        with self._lock:
            return self.runs.get(name)

    # -- the job
    def _main(self, run: ProcessingRun) -> None:
        try:
            self._download_inputs(run)
            code = self._run(run)
            if run.stop_requested.is_set():
                run.set(
                    processing_job_status="Stopped", exit_message="Stopped on request (StopProcessingJob)"
                )
            elif code == 0:
                self._upload_outputs(run)
                run.set(processing_job_status="Completed", exit_message=None)
            else:
                reason = failure_reason(run, code)
                run.set(processing_job_status="Failed", failure_reason=reason, exit_message=reason)
        except Exception as exc:
            log.exception("emulator: processing job %s crashed", run.name)
            run.set(
                processing_job_status="Failed",
                failure_reason=f"ClientError: {type(exc).__name__}: {exc}"[:1024],
            )
        finally:
            with contextlib.suppress(Exception):
                run.logs.flush()
            run.set(processing_end_time=moto_now())
            run.done.set()

    def _stores(self) -> Stores:
        return Stores(StoreOptions(aws_conn_id=None, s3_client=self.clients("s3")))

    def _download_inputs(self, run: ProcessingRun) -> None:
        stores = self._stores()
        for item in run.request.get("ProcessingInputs") or []:
            source = item.get("S3Input")
            if not source:
                continue
            dest = Path(run.container.local(source["LocalPath"]))
            dest.mkdir(parents=True, exist_ok=True)
            count = get_tree(*stores.parse(source["S3Uri"], directory=False), dest)
            if count == 0:
                raise ValueError(
                    f"ProcessingInput {item.get('InputName')}: no objects under {source['S3Uri']}"
                )
            run.logs.add(
                f"[algo-1] [emulator] input {item.get('InputName')}: {count} object(s) from {source['S3Uri']}"
            )

    def _run(self, run: ProcessingRun) -> int:
        app = run.request.get("AppSpecification") or {}
        command = [*(app.get("ContainerEntrypoint") or []), *(app.get("ContainerArguments") or [])]
        if not command:
            raise ValueError(
                "AppSpecification has no ContainerEntrypoint (the image's entrypoint cannot run here)"
            )
        box = run.container
        box.python, why = job_interpreter(run.request)
        # the executor's own line (a path of this machine): the endpoint's log, not the job's
        run.logs.add(f"[emulator] python3: {box.python} ({why})")
        for item in (run.request.get("ProcessingOutputConfig") or {}).get("Outputs") or []:
            if item.get("S3Output"):
                Path(box.local(item["S3Output"]["LocalPath"])).mkdir(parents=True, exist_ok=True)
        from airflow_dist_training.local.job_env import image_environ

        box.start()
        region = str(run.record.arn).split(":")[3]
        # what the image and SageMaker give the container, never the endpoint's own environment
        env = box.environ(
            {
                **image_environ(),
                "AWS_REGION": region,
                "AWS_DEFAULT_REGION": region,
                "PROCESSING_JOB_NAME": run.name,
            },
            {str(k): str(v) for k, v in (run.request.get("Environment") or {}).items()},
        )
        max_runtime = float((run.request.get("StoppingCondition") or {}).get("MaxRuntimeInSeconds") or 86400)
        run.set(processing_start_time=moto_now())
        run.proc = subprocess.Popen(
            box.command(command),
            cwd=box.cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        reader = threading.Thread(target=self._pump, args=(run,), daemon=True)
        reader.start()
        deadline = time.monotonic() + max_runtime
        while run.proc.poll() is None:
            if time.monotonic() > deadline and not run.stop_requested.is_set():
                run.logs.add(f"[algo-1] [emulator] MaxRuntimeInSeconds={max_runtime:.0f} exceeded: stopping")
                run.tail.append(f"MaxRuntimeExceeded after {max_runtime:.0f} s")
                self._terminate(run)
            run.logs.flush()
            time.sleep(0.2)
        reader.join(5)
        run.logs.flush()
        return int(run.proc.returncode)

    @staticmethod
    def _pump(run: ProcessingRun) -> None:
        assert run.proc is not None and run.proc.stdout is not None
        for raw in iter(run.proc.stdout.readline, b""):
            line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
            run.tail.append(line)
            run.logs.add(f"[algo-1] {run.container.public(line)}")

    @staticmethod
    def _terminate(run: ProcessingRun) -> None:
        proc = run.proc
        if proc is None or proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(STOP_GRACE_SECONDS)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()

    def _upload_outputs(self, run: ProcessingRun) -> None:
        stores = self._stores()
        for item in (run.request.get("ProcessingOutputConfig") or {}).get("Outputs") or []:
            target = item.get("S3Output")
            if not target:
                continue
            local = Path(run.container.local(target["LocalPath"]))
            put_tree(*stores.parse(target["S3Uri"]), local_files(local))

    # -- API
    def stop(self, name: str) -> bool:
        run = self.get(name)
        if run is None or run.done.is_set():
            return False
        run.stop_requested.set()
        run.set(processing_job_status="Stopping")
        threading.Thread(target=self._terminate, args=(run,), daemon=True).start()
        return True

    def shutdown(self, timeout: float = 15.0) -> None:
        with self._lock:
            runs = list(self.runs.values())
        for run in runs:
            if not run.done.is_set():
                run.stop_requested.set()
                self._terminate(run)
        deadline = time.monotonic() + timeout
        for run in runs:
            run.done.wait(max(0.0, deadline - time.monotonic()))


def job_interpreter(request: dict[str, Any]) -> tuple[str, str]:
    """(interpreter, why) that ``python``/``python3`` start in a processing job. On SageMaker it is
    the image's (``AppSpecification.ImageUri``); here the job environment of that image's recipe,
    chosen as for the local backend's jobs (local/job_env.py)."""
    from airflow_dist_training.local.job_env import job_python

    image = str((request.get("AppSpecification") or {}).get("ImageUri") or "")
    python, why = job_python(None, image_uri=image)
    if os.sep not in python:  # a command name: the one on PATH
        python = shutil.which(python) or python
    return python, why


def failure_reason(run: ProcessingRun, code: int) -> str:
    """``FailureReason`` of a failed job: the script's own ``/opt/ml/output/failure`` text, else
    the exit code, the host and its last error line (as SageMaker, at most 1,024 characters)."""
    from airflow_dist_training.local.contract import last_error_line

    failure = run.container.opt_ml / "output" / "failure"
    text = failure.read_text(errors="replace").strip() if failure.is_file() else ""
    if not text:
        text = (
            f"the processing container exited with code {code} on algo-1: {last_error_line(list(run.tail))}"
        )
    return run.container.public(f"AlgorithmError: {text}")[:1024]
