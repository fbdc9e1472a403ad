"""I/O for evaluation: artifact storage (local paths, ``file://``, ``s3://``), the local script
runner, and the SageMaker processing-job runner.
"""

from __future__ import annotations

import collections
import logging
import posixpath
import shutil
import subprocess
import tarfile
import threading
from collections.abc import Callable, Mapping, Sequence
from functools import cached_property
from pathlib import Path
from typing import IO, Any

from airflow_dist_training.aws_errors import describe_error
from airflow_dist_training.errors import Problem, ScriptFailure, SpecValidationError, is_script_failure_reason
from airflow_dist_training.evaluation.code import evaluation_code_files
from airflow_dist_training.evaluation.processing import (
    CODE_DIR,
    DATA_DIR,
    MODEL_DIR,
    OUTPUT_DIR,
    script_arguments,
    script_environment,
)
from airflow_dist_training.evaluation.schema import (
    EVALUATION_FILE_NAME,
    EvaluationResult,
    load_evaluation_file,
    parse_evaluation_text,
)
from airflow_dist_training.hooks.aws import AwsConnectionMixin
from airflow_dist_training.hooks.sagemaker_jobs import DurableJob, SageMakerApi
from airflow_dist_training.job_states import STOPPED_STATES
from airflow_dist_training.local.contract import last_error_line
from airflow_dist_training.local.job_env import inherited_environ, job_python
from airflow_dist_training.local.processing import ProcessingContainer
from airflow_dist_training.retry import PollTimeout
from airflow_dist_training.sagemaker.job_kinds import PROCESSING
from airflow_dist_training.storage import ObjectStore, StoreOptions, Stores, get_tree, put_tree
from airflow_dist_training.storage.location import Location, file_uri_path
from airflow_dist_training.storage.location import join_uri as join_uri
from airflow_dist_training.storage.location import parent_uri as parent_uri

log = logging.getLogger(__name__)


class EvaluationScriptError(RuntimeError):
    """The evaluation script (local process or processing job) did not succeed."""


class EvaluationScriptFailure(EvaluationScriptError, ScriptFailure):
    """The evaluation script itself failed (non-zero exit, a missing module, ``AlgorithmError``):
    the task fails at once, a retry would run the same code on the same model.

    ``failure_reason`` is what SageMaker's ``FailureReason`` says (locally: the same form)."""

    def __init__(self, message: str, failure_reason: str | None = None) -> None:
        super().__init__(message)
        self.failure_reason = failure_reason


def processing_failure(message: str, failure_reason: str | None) -> EvaluationScriptError:
    """The error for a processing job that ended Failed: a script failure when SageMaker blames
    the algorithm (``AlgorithmError: ...``), else (infrastructure) one the task may retry."""
    if is_script_failure_reason(failure_reason):
        return EvaluationScriptFailure(message, failure_reason)
    return EvaluationScriptError(message)


class ArtifactStore(AwsConnectionMixin):
    """Read and write small files by URI in any store: a local path, ``file://...``, ``s3://bucket/key``.

    :param aws_conn_id: Airflow connection for S3 (used only for ``s3://`` URIs).
    :param region_name: AWS region; defaults to the connection's.
    """

    def __init__(self, aws_conn_id: str | None = "aws_default", region_name: str | None = None) -> None:
        self._set_aws_connection(aws_conn_id, region_name)
        self.stores = Stores(StoreOptions(aws_conn_id, region_name))

    def _file(self, uri: str) -> tuple[ObjectStore, Location]:
        return self.stores.parse(uri, directory=False)

    def read_bytes(self, uri: str) -> bytes:
        store, loc = self._file(uri)
        found = store.read(loc)
        if found is None:
            raise FileNotFoundError(f"{uri}: no such file")
        return found[0]

    def write_bytes(self, uri: str, data: bytes, content_type: str = "application/octet-stream") -> str:
        store, loc = self._file(uri)
        store.write(loc, data, content_type)
        return uri

    def write_text(self, uri: str, text: str, content_type: str = "text/plain; charset=utf-8") -> str:
        return self.write_bytes(uri, text.encode("utf-8"), content_type)

    def upload_files(self, files: Sequence[tuple[Path, str]], prefix: str) -> int:
        """Upload ``(local file, relative name)`` pairs under ``prefix``; returns the count."""
        store, loc = self.stores.parse(prefix)
        return put_tree(store, loc, files)

    def download(self, uri: str, dest: Path) -> Path:
        """Copy one file to ``dest``."""
        store, loc = self._file(uri)
        store.get_file(loc, dest)
        return dest

    def download_prefix(self, uri: str, dest: Path) -> Path:
        """Copy every file under a prefix into ``dest``."""
        store, loc = self.stores.parse(uri)
        if not get_tree(store, loc, dest):
            raise SpecValidationError([Problem("model_uri", f"no objects under {uri}")])
        return dest

    def local_file(self, uri: str) -> Path | None:
        """The path of ``uri`` when it is on this machine's file system, else None."""
        store, loc = self._file(uri)
        return store.local_path(loc)

    def load_evaluation(self, uri: str) -> EvaluationResult:
        """Read and validate an ``evaluation.json`` from any supported URI."""
        store, loc = self._file(uri)
        if store.local_path(loc) is not None:
            return load_evaluation_file(uri)
        try:
            found = store.read(loc)
        except Exception as exc:  # botocore ClientError, NoCredentials, ...
            raise SpecValidationError(
                [Problem("", f"cannot read: {describe_error(exc)}")], source=uri
            ) from None
        if found is None:
            raise SpecValidationError([Problem("", "cannot read: no such file")], source=uri)
        return parse_evaluation_text(found[0], source=uri)


def evaluation_output_uri(job: Mapping[str, Any]) -> str:
    """Where a processing job (its request or description) writes ``evaluation.json``."""
    return join_uri(job["ProcessingOutputConfig"]["Outputs"][0]["S3Output"]["S3Uri"], EVALUATION_FILE_NAME)


def extract_archive(archive: Path, dest: Path) -> None:
    """Extract a model archive safely (no absolute paths, no ``..``, no device files)."""
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive) as tar:
        tar.extractall(dest, filter="data")


class LocalEvaluationRunner:
    """Run the evaluation script on this machine as a SageMaker processing job runs it.

    It runs in a processing container (``local/processing.py``, the one of the test endpoint's
    processing jobs): ``python3 /opt/ml/processing/input/code/<script> --model-dir /opt/ml/processing/model
    --output-dir /opt/ml/processing/evaluation``, the image's ``/opt/conda``, no path of this machine
    (without Linux namespaces, the fallback of docs/local-backend.md: ``/opt/ml`` is a folder of
    ``work_dir``).

    The model is prepared the way a processing job would see it: a ``model.tar.gz`` (local path,
    ``file://`` or ``s3://``) is extracted; a local directory (a checkpoint) is mounted as it is; an
    ``s3://`` prefix is downloaded. The output directory and a local data directory are mounted.
    Output lines are streamed to the task log as they come; a failure names the exit code and the
    last stderr lines.

    :param store: where to fetch ``s3://`` models from.
    :param python: interpreter for the script; default: a local training job's (``local/job_env.py``).
    :param stderr_tail: how many last stderr lines a failure message carries.
    """

    def __init__(
        self, store: ArtifactStore | None = None, python: str | None = None, stderr_tail: int = 20
    ) -> None:
        self.store = store or ArtifactStore()
        self.python = python  # None: the job environment, resolved when a script runs
        self.stderr_tail = stderr_tail

    def prepare_model(self, model_uri: str, model_dir: Path) -> Path | None:
        """Extract or download the model into ``model_dir``; a local directory (returned) is
        used as it is."""
        path = self.store.local_file(model_uri)
        if path is None:  # in a remote store
            if model_uri.endswith((".tar.gz", ".tgz", ".tar")):
                archive = self.store.download(
                    model_uri, model_dir.parent / "download" / posixpath.basename(model_uri)
                )
                extract_archive(archive, model_dir)
                archive.unlink()
            else:
                self.store.download_prefix(model_uri, model_dir)
            return None
        if path.is_dir():
            return path
        if path.is_file() and tarfile.is_tarfile(path):
            extract_archive(path, model_dir)
            return None
        if path.is_file():
            raise SpecValidationError([Problem("model_uri", f"{model_uri} is a file but not a tar archive")])
        raise SpecValidationError([Problem("model_uri", f"{model_uri} does not exist")])

    def stage_code(self, script: str, dependencies: Sequence[str], code: Path) -> Path:
        """Copy the code the evaluation ships (``evaluation_code_files``) into ``code``, as a
        processing job gets it; return the script's path there."""
        script_path = file_uri_path(script)
        for source, rel in evaluation_code_files(script_path, dependencies):
            (code / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, code / rel)
        return code / script_path.name

    def run(
        self,
        *,
        script: str,
        model_uri: str,
        work_dir: Path,
        output_dir: Path | None = None,
        data_dir: str | None = None,
        arguments: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,
        dependencies: Sequence[str] = (),
    ) -> Path:
        """Run the script over its shipped code (the ``*.py`` beside it and ``dependencies``, as on
        SageMaker: nothing else of its folder); return the path of the ``evaluation.json`` it wrote."""
        if not file_uri_path(script).is_file():
            raise SpecValidationError([Problem("script", f"{script} does not exist")])
        data = Path(data_dir) if data_dir else None
        if data is not None and not data.exists():
            raise SpecValidationError([Problem("data_uri", f"{data_dir} does not exist")])
        python, why = job_python(self.python)  # before anything is staged: a missing environment's error
        log.info("Evaluation Python: %s (%s)", python, why)
        box = ProcessingContainer(work_dir / "container", python)
        shutil.rmtree(box.job_dir, ignore_errors=True)  # a fresh container for every run
        box.opt_ml.mkdir(parents=True)
        shipped = self.stage_code(script, dependencies, Path(box.local(CODE_DIR)))
        binds: dict[str, Path] = {}
        if (checkpoint := self.prepare_model(model_uri, Path(box.local(MODEL_DIR)))) is not None:
            binds[MODEL_DIR] = checkpoint
        out = output_dir or work_dir / "evaluation"
        out.mkdir(parents=True, exist_ok=True)
        result = out / EVALUATION_FILE_NAME
        result.unlink(missing_ok=True)  # never read a previous run's result
        binds[OUTPUT_DIR] = out
        if data is not None and data.is_dir():
            binds[DATA_DIR] = data
        elif data is not None:  # one file: as SageMaker downloads a single object
            Path(box.local(DATA_DIR)).mkdir(parents=True)
            shutil.copyfile(data, Path(box.local(DATA_DIR)) / data.name)
        box.start(binds)
        # as a local training job: the worker's environment without this provider's or Airflow's
        # settings, then the evaluation contract and the task's variables
        job_env = {**script_environment(MODEL_DIR, OUTPUT_DIR, DATA_DIR if data else None), **(env or {})}
        full_env = box.environ(inherited_environ(), job_env)
        argv = ["python3", f"{CODE_DIR}/{shipped.name}", *script_arguments(MODEL_DIR, OUTPUT_DIR, arguments)]
        log.info("Running evaluation: %s", box.public(" ".join(box.seen(a) for a in argv)))
        self._run_process(script, box, box.command(argv), full_env, timeout)
        if not result.is_file():
            why = f"the evaluation script {script} exited 0 but did not write {EVALUATION_FILE_NAME}"
            raise SpecValidationError([("", why)], source=str(result))
        return result

    def _run_process(
        self,
        script: str,
        box: ProcessingContainer,
        cmd: list[str],
        env: Mapping[str, str],
        timeout: float | None,
    ) -> None:
        """Run the script, streaming its output; a non-zero exit is an ``EvaluationScriptFailure``."""
        tail: collections.deque[str] = collections.deque(maxlen=self.stderr_tail)
        proc = subprocess.Popen(
            cmd,
            cwd=str(box.cwd),
            env=dict(env),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            bufsize=1,
        )
        readers = [
            threading.Thread(target=_pump, args=(proc.stdout, logging.INFO, None, box.public), daemon=True),
            threading.Thread(
                target=_pump, args=(proc.stderr, logging.WARNING, tail, box.public), daemon=True
            ),
        ]
        for t in readers:
            t.start()
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            for t in readers:
                t.join(5)
            raise EvaluationScriptError(
                f"evaluation script {script} timed out after {timeout:g}s" + _tail_text(tail)
            ) from None
        except BaseException:
            proc.kill()
            raise
        for t in readers:
            t.join(5)
        if rc != 0:
            reason = (
                f"AlgorithmError: {Path(script).name} exited with code {rc}: {last_error_line(list(tail))}"
            )
            raise EvaluationScriptFailure(
                f"evaluation script {script} exited with code {rc}" + _tail_text(tail), reason[:1024]
            )


def _pump(
    stream: IO[str] | None, level: int, tail: collections.deque[str] | None, public: Callable[[str], str]
) -> None:
    if stream is None:
        return
    for line in stream:
        line = public(line.rstrip("\n"))
        log.log(level, "[evaluate] %s", line)
        if tail is not None:
            tail.append(line)
    stream.close()


def _tail_text(tail: collections.deque[str]) -> str:
    if not tail:
        return " (no stderr output)"
    return f"; last {len(tail)} stderr line(s):\n" + "\n".join(f"  {line}" for line in tail)


class SageMakerEvaluationRunner(SageMakerApi, AwsConnectionMixin):
    """Run the evaluation script as a SageMaker processing job and read its ``evaluation.json``.

    The job is a ``DurableJob`` of kind ``processing`` (``hooks/sagemaker_jobs.py``): throttled,
    error-translating calls, describe before create over the run's names, one wait with a deadline.

    :param aws_conn_id: Airflow AWS connection.
    :param region_name: AWS region; defaults to the connection's.
    :param poll_interval: seconds between ``DescribeProcessingJob`` calls.
    """

    log = log

    def __init__(
        self,
        aws_conn_id: str | None = "aws_default",
        region_name: str | None = None,
        poll_interval: float = 30,
    ) -> None:
        self._set_aws_connection(aws_conn_id, region_name)
        self.poll_interval = poll_interval
        self.store = ArtifactStore(aws_conn_id, region_name)
        self.stopped: set[str] = set()  # jobs this runner stopped (on_kill, timeout)

    @cached_property
    def client(self) -> Any:
        return self.aws_client("sagemaker")

    @property
    def sagemaker_client(self) -> Any:
        return self.client

    @cached_property
    def jobs(self) -> DurableJob:
        return DurableJob(self, PROCESSING)

    def start(self, request: Mapping[str, Any], retry_names: Sequence[str] = ()) -> str:
        """Create the job, or attach to this run's job when a retry finds it running or completed.

        A job of the run that ended Failed or Stopped is never attached to: the next name of
        ``retry_names`` (the run's next generations) is created instead.
        """
        names = [str(request["ProcessingJobName"]), *retry_names]

        def ended(name: str, desc: Mapping[str, Any], _next: int) -> None:
            status = desc.get("ProcessingJobStatus")
            log.warning("This run's evaluation job %s ended %s: trying the next one", name, status)

        ref = self.jobs.find_or_create(
            names,
            lambda name, _ended: {**request, "ProcessingJobName": name},
            exhausted=lambda: EvaluationScriptError(
                f"every evaluation job of this run ended Failed or Stopped ({', '.join(names)}); "
                "not starting another"
            ),
            on_ended=ended,
        )
        return ref.name

    def stop(self, name: str) -> bool:
        """Stop the job; False when it had already ended."""
        # recorded before the call: a waiting thread may see "Stopped" before the call returns
        self.stopped.add(name)
        try:
            sent = self.jobs.stop(name, reason="evaluation task killed or timed out")
        except BaseException:
            self.stopped.discard(name)
            raise
        if not sent:
            self.stopped.discard(name)
            log.info("Processing job %s was not running", name)
        return sent

    def wait(self, name: str, timeout: float | None = None) -> dict[str, Any]:
        last: list[object] = [None]

        def report(desc: Mapping[str, Any]) -> None:
            if desc.get("ProcessingJobStatus") != last[0]:
                last[0] = desc.get("ProcessingJobStatus")
                log.info("Processing job %s: %s", name, last[0])

        try:
            desc = self.jobs.wait(name, poll_interval=self.poll_interval, timeout=timeout, on_poll=report)
        except PollTimeout as exc:
            self.stop(name)  # a timed-out task must not leave the job billing
            raise EvaluationScriptError(f"{exc}; the job was stopped") from None
        status = desc["ProcessingJobStatus"]
        if status in STOPPED_STATES and name in self.stopped:
            raise EvaluationScriptError(
                f"evaluation processing job {name} was stopped on request (task killed, cleared or timed out)"
            )
        if not self.jobs.kind.succeeded(desc):
            reason = desc.get("FailureReason") or desc.get("ExitMessage") or "no reason given"
            raise processing_failure(
                f"evaluation processing job {name} ended {status}: {reason}", desc.get("FailureReason")
            )
        return {"job_name": name, "job_arn": desc.get("ProcessingJobArn"), "status": status}

    def run(
        self,
        request: Mapping[str, Any],
        timeout: float | None = None,
        *,
        retry_names: Sequence[str] = (),
        on_start: Callable[[str], None] | None = None,
    ) -> tuple[dict[str, Any], str]:
        """Start (or attach to) the job, wait, and return its info and its ``evaluation.json`` URI.

        ``on_start`` gets the job name before the wait (the operator's ``on_kill`` needs it).
        """
        name = self.start(request, retry_names)
        if on_start is not None:
            on_start(name)
        return self.wait(name, timeout), evaluation_output_uri(request)
