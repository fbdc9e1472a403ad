"""Run a training spec on this machine with torchrun, under the SageMaker container contract:
the local backend's counterpart of the SageMaker training hook (``hooks/backends.LocalBackend``).
No AWS access unless the spec points at S3 and credentials exist.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from types import FrameType
from typing import Any

from airflow.sdk import BaseHook

from airflow_dist_training.errors import SpecValidationError
from airflow_dist_training.hooks.aws import AwsConnectionMixin, local_region
from airflow_dist_training.local.contract import LocalJobPlan
from airflow_dist_training.local.hosts import available_cpus
from airflow_dist_training.results import TrainingResult
from airflow_dist_training.spec.loading import load_spec
from airflow_dist_training.spec.training import S3Channel, TrainingJobSpec
from airflow_dist_training.storage.location import uri_scheme

#: what a spec may be given as (``spec.loading.load_spec``)
SpecSource = TrainingJobSpec | Mapping[str, Any] | str | Path
_EXECUTORS: dict[str, Any] = {}
_RUNNING_LOCK = threading.Lock()


def default_root() -> Path:
    if os.environ.get("ADT_LOCAL_ROOT"):
        return Path(os.environ["ADT_LOCAL_ROOT"]).expanduser()
    home = os.environ.get("AIRFLOW_HOME") or str(Path("~/airflow").expanduser())
    return Path(home) / "dist-training-local"


def _needs_s3(spec: TrainingJobSpec) -> bool:
    if uri_scheme(spec.source.source_dir) == "s3":
        return True
    for channel in spec.channels.values():
        src = channel.local_source
        if (isinstance(channel, S3Channel) and src is None) or uri_scheme(src) == "s3":
            return True
    if spec.checkpoint is not None and not spec.checkpoint.local_uri:
        return True
    return spec.output is not None and not spec.output.local_uri


def s3_credentials_available(aws_conn_id: str | None, region_name: str | None = None) -> bool:
    """True when the connection's session (boto3's default chain without a connection) has
    credentials (no network call: an assumed role is refreshed on first use)."""
    try:
        from airflow_dist_training.hooks.aws import aws_hook

        session = aws_hook("s3", aws_conn_id=aws_conn_id, region_name=region_name).get_session()
        return session.get_credentials() is not None
    except Exception:
        return False


class LocalTrainingHook(AwsConnectionMixin, BaseHook):
    """Runs training jobs on the Airflow worker with torchrun (gloo on CPU).

    :param root: the per-job root directory (default: ``$ADT_LOCAL_ROOT`` or
        ``$AIRFLOW_HOME/dist-training-local``); each job gets ``<root>/<job name>/``.
    :param base_dir: the directory relative paths in the spec (``source.source_dir``,
        ``local_source``, ``local_uri``) are resolved against (default: the current directory).
    :param use_s3: use S3 for ``s3://`` locations: True, False, or None to use it when the connection
        has credentials (``$ADT_LOCAL_USE_S3=0/1`` overrides None). Without S3, checkpoint and
        output S3 locations are kept in a local mirror under ``<root>/_s3/``.
    :param aws_conn_id: the Airflow AWS connection every S3 call uses (its credentials, role,
        ``endpoint_url``, region); ``None``: boto3's default chain.
    :param region_name: the S3 clients' region (default: the connection's).
    :param python: the interpreter that runs the job (default: ``$ADT_LOCAL_PYTHON``, else the
        default job environment once built, else this one; see ``local/job_env.py``).
    :param checkpoint_sync_seconds: how often the checkpoint directory is synced to its store.
    :param stop_grace_seconds: SIGTERM-to-SIGKILL grace period of :meth:`stop` (default: SageMaker's
        120 s, or ``$ADT_STOP_GRACE_SECONDS``).
    :param job_log: where a job's lines go as they come (default: this hook's log, the task log).
    """

    conn_name_attr = "local_training_conn_id"
    hook_name = "Local distributed training"

    def __init__(
        self,
        root: str | Path | None = None,
        *,
        base_dir: str | Path | None = None,
        use_s3: bool | None = None,
        python: str | None = None,
        checkpoint_sync_seconds: float = 10.0,
        stop_grace_seconds: float | None = None,
        aws_conn_id: str | None = "aws_default",
        region_name: str | None = None,
        job_log: Callable[[str], None] | None = None,
    ) -> None:
        super().__init__()
        self.job_log = job_log
        self._set_aws_connection(aws_conn_id, region_name)
        self._root = Path(root).expanduser() if root is not None else None
        self.base_dir = Path(base_dir) if base_dir is not None else None
        self.use_s3 = use_s3
        self.python = python
        self.checkpoint_sync_seconds = checkpoint_sync_seconds
        from airflow_dist_training.local.request_plan import default_stop_grace_seconds

        self.stop_grace_seconds = (
            default_stop_grace_seconds() if stop_grace_seconds is None else stop_grace_seconds
        )
        self.last_job: Any = None

    def get_conn(self) -> LocalTrainingHook:
        """No connection: the local backend talks to nothing but this machine."""
        return self

    @property
    def root(self) -> Path:
        return (self._root or default_root()).absolute()

    def job_dir(self, job_name: str) -> Path:
        return self.root / job_name

    def _s3_available(self, spec: TrainingJobSpec) -> bool:
        if self.use_s3 is not None:
            return self.use_s3
        if (flag := os.environ.get("ADT_LOCAL_USE_S3")) is not None:
            return flag.strip().lower() in ("1", "true", "yes", "on")
        return _needs_s3(spec) and s3_credentials_available(self.aws_conn_id, self.region_name)

    def plan(self, spec: SpecSource, job_name: str, *, check_paths: bool = True) -> LocalJobPlan:
        """The request executor's plan of the run (nothing staged or launched); ``check_paths=False``
        before the staging step has produced the local sources."""
        sub = self.submission(spec, job_name, check_paths=check_paths, stage=False)
        return self.executor().plan(sub.request, store=sub.store, options=sub.options).plan  # type: ignore[no-any-return]

    def executor(self) -> Any:
        """The request executor of this hook's jobs root (one per root and process)."""
        from airflow_dist_training.local.executor import LocalExecutor
        from airflow_dist_training.local.store import RequestStore

        with _RUNNING_LOCK:
            key = str(self.root)
            if key not in _EXECUTORS:
                _EXECUTORS[key] = LocalExecutor(self.root, RequestStore(self.root / "_s3"))
            return _EXECUTORS[key]

    def object_store(self, spec: TrainingJobSpec) -> Any:
        """The store for the request's s3:// URIs: S3 through the connection when enabled, else ``<root>/_s3``."""
        from airflow_dist_training.local.store import RequestStore
        from airflow_dist_training.storage import StoreOptions

        s3 = StoreOptions(self.aws_conn_id, self.region_name) if self._s3_available(spec) else None
        return RequestStore(self.root / "_s3", s3=s3)

    def submission(
        self,
        spec: SpecSource,
        job_name: str,
        *,
        allow_oversubscribe: bool = False,
        check_paths: bool = True,
        region: str | None = None,
        run_identity: str | None = None,
        stage: bool = True,
        request: Mapping[str, Any] | None = None,
        uploads: Iterable[Any] = (),
    ) -> Any:
        """The exact ``CreateTrainingJob`` request and its store (``stage=False``: nothing written);
        ``request``: the one planned for ``spec`` (the plan task's), checked and staged, not planned again."""
        from airflow_dist_training.local.submit import local_request

        spec_obj = load_spec(spec)
        _validate_job_name(job_name)
        sub = local_request(
            spec_obj,
            job_name,
            jobs_root=self.root,
            base_dir=(self.base_dir or Path.cwd()).absolute(),
            store=self.object_store(spec_obj),
            region=region or local_region(),
            cpu_count=available_cpus(),
            s3_available=self._s3_available(spec_obj),
            run_identity=run_identity,
            allow_oversubscribe=allow_oversubscribe,
            check_paths=check_paths,
            stage=stage,
            request=request,
            uploads=uploads,
        )
        sub.options.python = self.python
        sub.options.checkpoint_sync_seconds = self.checkpoint_sync_seconds
        sub.options.stop_grace_seconds = self.stop_grace_seconds
        if spec_obj.local is not None:
            sub.options.apply(spec_obj.local, spec_obj)
        return sub

    def start_job(
        self,
        spec: SpecSource,
        job_name: str,
        *,
        log: Callable[[str], None] | None = None,
        allow_oversubscribe: bool = False,
        run_identity: str | None = None,
        request: Mapping[str, Any] | None = None,
        uploads: Iterable[Any] = (),
        region: str | None = None,
    ) -> Any:
        """Plan (unless given the ``request``) and start the job; returns the executor's handle at
        once (see ``local/executor.py``)."""
        sub = self.submission(
            spec,
            job_name,
            allow_oversubscribe=allow_oversubscribe,
            run_identity=run_identity,
            request=request,
            uploads=uploads,
            region=region,
        )
        emit = log or self.job_log or self.log.info
        for warning in sub.warnings:
            emit(f"[local] WARNING {warning}")
        job = self.executor().start(sub.request, store=sub.store, options=sub.options, log=emit)
        self.last_job = job
        return job

    def run_job(self, spec: SpecSource, job_name: str, **start: Any) -> TrainingResult:
        """Run the job to the end and return its ``TrainingResult``; re-running a name reuses its
        directory (and so its checkpoints). ``TrainingJobError`` when it ends Failed or Stopped.
        ``start``: the settings of :meth:`start_job`."""
        job = self.start_job(spec, job_name, **start)
        with stop_on_sigterm(job, self.stop_grace_seconds):
            return job.result()  # type: ignore[no-any-return]

    def stop(self, job_name: str) -> bool:
        """SIGTERM to every host, SIGKILL after ``stop_grace_seconds``; False when no job of that name
        runs in this process."""
        job = self.executor().get(job_name)
        if job is None or job.done:
            return False
        job.stop(self.stop_grace_seconds)
        return True


def _validate_job_name(job_name: str) -> None:
    if not job_name or "/" in job_name or job_name in (".", "..") or job_name.startswith("_"):
        raise SpecValidationError(
            [("job_name", f"{job_name!r} must be a non-empty name without '/' that does not start with '_'")]
        )


@contextlib.contextmanager
def stop_on_sigterm(run: Any, grace: float) -> Any:
    """In the main thread: on SIGTERM, stop the job's process groups, then run the previous handler.

    A killed task therefore never leaves training processes behind, even if nobody calls stop()
    (Airflow's own SIGTERM handling, e.g. ``on_kill``, still runs afterwards).
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGTERM)

    def handler(signum: int, frame: FrameType | None) -> None:
        run.stop(min(grace, 10.0), wait=True)
        if callable(previous):
            previous(signum, frame)
        elif previous == signal.SIG_DFL:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)

    try:
        signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main interpreter thread after all
        yield
        return
    try:
        yield
    finally:
        with contextlib.suppress(ValueError):
            signal.signal(signal.SIGTERM, previous)
