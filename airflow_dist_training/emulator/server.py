"""The emulator: moto's server, with a SageMaker backend whose jobs really run.

moto keeps the AWS protocol (every request and error shape), S3, CloudWatch Logs, IAM, STS, and
SageMaker's job records, Describe/List and the model registry calls. The emulator wraps moto's
SageMaker and FSx response handlers so that training, processing and tuning jobs really run
(``training.py``, ``processing.py``, ``tuning.py``) and FSx file systems hold real data
(``fsx.py``); a WSGI layer in front of moto serves the admin calls (``/_emulator/...``) and the
throttling fault. One emulator per process (moto's backends are process-wide); see docs/emulator.md.
"""

from __future__ import annotations

import collections
import contextlib
import io
import json
import logging
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from airflow_dist_training.emulator import records
from airflow_dist_training.emulator.aws import (
    error_response,
    install_iam_patches,
    not_implemented,
    service_of,
)
from airflow_dist_training.emulator.faults import Faults
from airflow_dist_training.emulator.fsx import FileSystems, FSxError
from airflow_dist_training.emulator.processing import ProcessingJobs
from airflow_dist_training.emulator.training import TrainingJobs
from airflow_dist_training.emulator.tuning import TuningJobs
from airflow_dist_training.sagemaker.tuning_jobs import (
    sample_configurations,
    training_job_name,
    training_request,
)

log = logging.getLogger(__name__)
REGION = "us-east-1"
ACCOUNT = "123456789012"  # moto's default account
_ACTIVE: Emulator | None = None
_PATCH_LOCK = threading.Lock()
_PATCHED = False
# the user agent of the emulator's own SageMaker calls (a tuning job's training jobs): neither
# counted in ``sagemaker_calls`` nor throttled, as SageMaker's own calls are not the user's
INTERNAL_AGENT = "adt-emulator-internal"


class Emulator:
    """A SageMaker test endpoint on 127.0.0.1.

    :param port: TCP port; 0 picks a free one (see :attr:`endpoint`).
    :param root: folder for job files (each job's ``/opt/ml``, the executor's store); default: a
        temporary folder removed on :meth:`stop`.
    :param throttle_share: share of SageMaker API calls answered with ``ThrottlingException``.
    :param capacity_failures: the next N training jobs fail with ``InsufficientCapacityError``.
    :param region: the region of the endpoint's own calls and of the clients it is meant for (a job
        runs in the region of the request that created it, as its ARN says).
    :param account: the account every request acts in (ARNs, ``GetCallerIdentity``, jobs' ARNs).
    :param debug_stream: also write the executor's own lines (which go to the endpoint's log) to a
        ``<job>/emulator-debug-<epoch>`` stream beside the hosts' streams.
    """

    def __init__(
        self,
        port: int = 0,
        root: str | Path | None = None,
        *,
        throttle_share: float = 0.0,
        capacity_failures: int = 0,
        region: str = REGION,
        account: str = ACCOUNT,
        debug_stream: bool = False,
    ) -> None:
        if not (len(account) == 12 and account.isdigit()):
            raise ValueError(f"account: {account!r} is not a 12-digit AWS account id")
        self.port = port
        self.region = region
        self.account = account
        self.debug_stream = debug_stream
        self._own_root = root is None
        # absolute: jobs run with their own folder as the working directory
        self.root = (
            Path(root).absolute() if root is not None else Path(tempfile.mkdtemp(prefix="adt-emulator-"))
        )
        self.faults = Faults(throttle_share=throttle_share, capacity_failures=capacity_failures)
        self.sagemaker_calls: collections.Counter[str] = collections.Counter()
        self._calls_lock = threading.Lock()
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self._clients: dict[str, Any] = {}
        self._clients_lock = threading.Lock()
        self.training: TrainingJobs | None = None
        self.processing: ProcessingJobs | None = None
        self.fsx: FileSystems | None = None
        self.tuning: TuningJobs | None = None

    # -- lifecycle
    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Emulator:
        global _ACTIVE
        from moto.moto_server.werkzeug_app import (
            DomainDispatcherApplication,
            MotoRequestHandler,
            create_backend_app,
        )
        from werkzeug.serving import make_server

        with _PATCH_LOCK:
            if _ACTIVE is not None:
                raise RuntimeError("an emulator already runs in this process (moto's state is process-wide)")
            _install_patches()
            _ACTIVE = self
        self.root.mkdir(parents=True, exist_ok=True)
        app = _EmulatorApp(self, DomainDispatcherApplication(create_backend_app))
        self._server = make_server(
            "127.0.0.1", self.port, app, threaded=True, request_handler=MotoRequestHandler
        )
        self.port = int(self._server.server_port)
        self._new_jobs()
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="emulator-server", daemon=True
        )
        self._thread.start()
        self._warm_up()
        return self

    def _warm_up(self) -> None:
        """moto imports a service's backend on its first call: do that now, not in a job's first second."""
        with contextlib.suppress(Exception):
            self.client("s3").list_buckets()
            self.client("logs").describe_log_groups(limit=1)
            self.client("sagemaker").list_training_jobs(MaxResults=1)

    def stop(self) -> None:
        """Stop every job (their processes are gone when this returns), then the server."""
        global _ACTIVE
        self._stop_jobs()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(10)
        with _PATCH_LOCK:
            if _ACTIVE is self:
                _ACTIVE = None
        if self._own_root:
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> Emulator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def reset(self) -> None:
        """Stop every job and clear all state (moto's ``/moto-api/reset`` plus the emulator's)."""
        from moto.moto_api._internal.models import moto_api_backend

        started = self.training is not None
        self._stop_jobs()
        if self.fsx is not None:
            shutil.rmtree(self.fsx.root, ignore_errors=True)
        if started:
            self._new_jobs()
        self.sagemaker_calls.clear()
        self.faults.throttle_share = 0.0
        self.faults.capacity_failures = 0
        self.faults.host_failures = 0
        self.faults.spot_interruptions = 0
        self.faults.spot_capacity_wait_seconds = 0.0
        moto_api_backend.reset()

    # -- clients of the endpoint itself (logs, S3 for the jobs)
    def client(self, service: str, *, internal: bool = False) -> Any:
        """A client of this endpoint; ``internal``: the emulator's own calls (``INTERNAL_AGENT``)."""
        key = f"{service}:internal" if internal else service
        with self._clients_lock:
            if key not in self._clients:
                import boto3
                from botocore.config import Config

                self._clients[key] = boto3.session.Session().client(
                    service,
                    region_name=self.region,
                    endpoint_url=self.endpoint,
                    aws_access_key_id="emulator",
                    aws_secret_access_key="emulator",
                    config=Config(
                        retries={"mode": "standard", "max_attempts": 5},
                        user_agent_extra=INTERNAL_AGENT if internal else None,
                    ),
                )
            return self._clients[key]

    def _new_jobs(self) -> None:
        from airflow_dist_training.emulator.mlflow import relay_ports as mlflow_ports

        self.training = TrainingJobs(
            self.root,
            self.client,
            self.faults,
            relay_ports=[self.port, *mlflow_ports()],
            debug_stream=self.debug_stream,
        )
        self.processing = ProcessingJobs(self.root, self.client)
        self.fsx = FileSystems(self.root, self.client, self.region, self.account)
        self.tuning = self._tuning_jobs()

    def _stop_jobs(self) -> None:
        """Every job's processes are gone when this returns."""
        for jobs in (self.tuning, self.training, self.processing, self.fsx):
            if jobs is not None:
                jobs.shutdown()

    def _tuning_jobs(self) -> TuningJobs:
        """Tuning jobs launch their training jobs through this endpoint's own CreateTrainingJob."""

        def record(name: str) -> Any:
            run = self.training.get(name) if self.training is not None else None
            return run.record if run is not None else None

        def sagemaker() -> Any:
            return self.client("sagemaker", internal=True)

        return TuningJobs(
            create_training_job=lambda request: sagemaker().create_training_job(**request),
            stop_training_job=lambda name: sagemaker().stop_training_job(TrainingJobName=name),
            training_record=record,
        )

    # -- faults and state
    def inject(self, fault: str, **params: Any) -> dict[str, Any]:
        """Arm a fault (see :mod:`airflow_dist_training.emulator.faults`)."""
        if fault == "throttle":
            self.faults.throttle_share = float(params.get("share", 0.0))
            return {"throttle_share": self.faults.throttle_share}
        if fault == "insufficient_capacity":
            self.faults.capacity_failures = int(params.get("count", 1))
            return {"capacity_failures": self.faults.capacity_failures}
        if fault == "spot_capacity_wait":
            self.faults.spot_capacity_wait_seconds = float(params.get("seconds", 0.0))
            return {"spot_capacity_wait_seconds": self.faults.spot_capacity_wait_seconds}
        name = str(params.get("job_name") or "")
        if fault == "host_failure" and not name:
            self.faults.host_failures = int(params.get("count", 1))
            return {"host_failures": self.faults.host_failures}
        if fault == "spot_interruption" and not name:
            self.faults.spot_interruptions = int(params.get("count", 1))
            return {"spot_interruptions": self.faults.spot_interruptions}
        if fault in ("spot_interruption", "host_failure"):
            assert self.training is not None
            spot = fault == "spot_interruption"
            if not (self.training.interrupt if spot else self.training.fail_hosts)(name):
                raise KeyError(f"no running training job {name!r}")
            return {"interrupted" if spot else "failed": name}
        raise KeyError(
            f"unknown fault {fault!r}: use spot_interruption, spot_capacity_wait, host_failure, "
            "insufficient_capacity or throttle"
        )

    def state(self) -> dict[str, Any]:
        training = self.training.runs if self.training else {}
        processing = self.processing.runs if self.processing else {}
        tuning = self.tuning.runs if self.tuning else {}
        return {
            "endpoint": self.endpoint,
            "training_jobs": {n: r.record.training_job_status for n, r in training.items()},
            "processing_jobs": {n: r.record.processing_job_status for n, r in processing.items()},
            # per tuning job: its status, training jobs, and the most of them seen running at once
            "tuning_jobs": {
                n: {
                    "status": r.record.hyper_parameter_tuning_job_status,
                    "training_jobs": [name for name, _ in r.jobs],
                    "max_running": r.max_running,
                }
                for n, r in tuning.items()
            },
            "fsx_tasks": {t: v["Lifecycle"] for t, v in (self.fsx.tasks.items() if self.fsx else ())},
            "throttled_calls": self.faults.throttled_calls,
            # every SageMaker API request received since the last reset (throttled ones too), by
            # operation: calls per job-hour, what a deployment spends of its API rate limits
            "sagemaker_calls": dict(self.sagemaker_calls.copy()),
        }


class _EmulatorApp:
    """WSGI in front of moto: the admin calls and the throttling fault; everything else is moto's."""

    def __init__(self, emulator: Emulator, inner: Callable[..., Iterable[bytes]]) -> None:
        self.emulator = emulator
        self.inner = inner

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = str(environ.get("PATH_INFO", ""))
        if path.startswith("/_emulator/"):
            return self._admin(path, environ, start_response)
        target = str(environ.get("HTTP_X_AMZ_TARGET", ""))
        if INTERNAL_AGENT in str(environ.get("HTTP_USER_AGENT", "")):
            return self._moto(environ, start_response)
        if target.startswith("SageMaker."):
            with self.emulator._calls_lock:
                self.emulator.sagemaker_calls[target.removeprefix("SageMaker.")] += 1
        if target.startswith("SageMaker.") and self.emulator.faults.should_throttle():
            body = json.dumps({"__type": "ThrottlingException", "message": "Rate exceeded"}).encode()
            start_response(
                "400 Bad Request",
                [
                    ("Content-Type", "application/x-amz-json-1.1"),
                    ("x-amzn-ErrorType", "ThrottlingException"),
                    ("Content-Length", str(len(body))),
                ],
            )
            return [body]
        return self._moto(environ, start_response)

    def _moto(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        """moto's answer; an AWS error in the client's protocol where moto raises (never an HTML page)."""
        body = b""
        if "form-urlencoded" in str(environ.get("CONTENT_TYPE") or ""):  # query protocol: Action is in it
            body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
            environ["wsgi.input"] = io.BytesIO(body)
        try:
            return self.inner(environ, start_response)
        except Exception as exc:
            # moto's S3 dispatches by hand and fails on a subresource it lacks (KeyError, ...): for a
            # client that is an S3 action this endpoint does not implement, as NotImplementedError is
            if isinstance(exc, NotImplementedError) or service_of(environ) == "s3":
                log.info(
                    "emulator: not implemented: %s %s (%r)",
                    environ.get("REQUEST_METHOD"),
                    environ.get("PATH_INFO"),
                    exc,
                )
                status, headers, payload = not_implemented(environ, body)
            else:
                log.exception("emulator: internal error answering %s", environ.get("PATH_INFO"))
                status, headers, payload = error_response(
                    environ,
                    "InternalFailure",
                    f"the SageMaker test endpoint failed: {type(exc).__name__}: {exc}",
                    500,
                )
        start_response(status, headers)
        return [payload]

    def _admin(
        self, path: str, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        status, payload = "200 OK", {}
        try:
            length = int(environ.get("CONTENT_LENGTH") or 0)
            data = json.loads(environ["wsgi.input"].read(length) or b"{}") if length else {}
            if path == "/_emulator/faults":
                payload = self.emulator.inject(str(data.pop("fault", "")), **data)
            elif path == "/_emulator/state":
                payload = self.emulator.state()
            elif path == "/_emulator/reset":
                self.emulator.reset()
                payload = {"reset": True}
            else:
                status, payload = "404 Not Found", {"error": f"unknown admin call {path}"}
        except KeyError as exc:
            status, payload = "400 Bad Request", {"error": str(exc.args[0] if exc.args else exc)}
        body = json.dumps(payload).encode()
        start_response(status, [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
        return [body]


# moto's own handlers, wrapped by the ones below (filled by _install_patches)
_ORIGINALS: dict[str, Callable[[Any], Any]] = {}


def stopping_condition_problem(request: dict[str, Any]) -> str | None:
    """CreateTrainingJob's check of MaxWaitTimeInSeconds, in SageMaker's words (``None``: fine)."""
    stopping = request.get("StoppingCondition") or {}
    max_wait = stopping.get("MaxWaitTimeInSeconds")
    if not request.get("EnableManagedSpotTraining"):
        if max_wait is not None:
            return "Invalid MaxWaitTimeInSeconds. It is only supported when EnableManagedSpotTraining is set to true"
        return None
    if max_wait is None or int(max_wait) < int(stopping.get("MaxRuntimeInSeconds", 86400)):
        return "Invalid MaxWaitTimeInSeconds. It must be present and be greater than or equal to MaxRuntimeInSeconds"
    return None


def _sagemaker_create_training_job(self: Any) -> Any:
    from moto.sagemaker.exceptions import ResourceInUseException, ValidationError

    emu = _ACTIVE
    if emu is None or emu.training is None:
        return _ORIGINALS["create_training"](self)
    request = json.loads(self.body)
    name = request["TrainingJobName"]
    backend = self.sagemaker_backend
    if name in backend.training_jobs:
        arn = backend.training_jobs[name].arn
        raise ResourceInUseException(
            "Training job names must be unique within an AWS account and region, and a training "
            f"job with this name already exists ({arn})"
        )
    problem = stopping_condition_problem(request)
    if problem is not None:
        raise ValidationError(problem)
    try:
        emu.training.check(request)
        mounts = emu.fsx.channel_mounts(request) if emu.fsx is not None else {}
    except FSxError as exc:
        raise ValidationError(exc.message) from None
    except Exception as exc:  # LocalRequestError: the request cannot run on this machine
        raise ValidationError(f"the emulator cannot run this request: {exc}") from None
    result = _ORIGINALS["create_training"](self)
    emu.training.start(backend.training_jobs[name], request, mounts=mounts)
    return result


def _stop_job(
    jobs: str, param: str, records: str, what: str, defer: str | None = None
) -> Callable[[Any], Any]:
    """A Stop...Job handler: ``jobs`` is the emulator's runner, ``records`` moto's table; ``defer``:
    moto's own handler while no emulator runs (else a stop without one is rejected)."""

    def handler(self: Any) -> Any:
        from moto.core.responses import EmptyResult
        from moto.sagemaker.exceptions import ValidationError

        runner = getattr(_ACTIVE, jobs, None)
        if runner is None and defer is not None:
            return _ORIGINALS[defer](self)
        name = self._get_param(param)
        found = getattr(self.sagemaker_backend, records)
        if name not in found:
            raise ValidationError(f"Requested resource not found: {what} {name}")
        if runner is None or not runner.stop(name):
            status = getattr(found[name], f"{records[:-1]}_status")  # e.g. training_job_status
            short = what.removeprefix("hyperparameter ")  # SageMaker: "the tuning job is in status"
            raise ValidationError(f"The request was rejected because the {short} is in status {status}.")
        return EmptyResult()

    return handler


def _sagemaker_create_processing_job(self: Any) -> Any:
    from moto.sagemaker.exceptions import ResourceInUseException, ValidationError

    emu = _ACTIVE
    if emu is None or emu.processing is None:
        return _ORIGINALS["create_processing"](self)
    request = json.loads(self.body)
    name = request["ProcessingJobName"]
    backend = self.sagemaker_backend
    if name in backend.processing_jobs:
        raise ResourceInUseException(f"Processing job {name} already exists")
    try:
        emu.processing.check(request)
    except Exception as exc:  # SpecValidationError: no job environment for the image yet
        raise ValidationError(f"the emulator cannot run this request: {exc}") from None
    result = _ORIGINALS["create_processing"](self)
    emu.processing.start(backend.processing_jobs[name], request)
    return result


def _sagemaker_create_tuning_job(self: Any) -> Any:
    from moto.sagemaker.exceptions import ValidationError

    emu = _ACTIVE
    if emu is None or emu.tuning is None or emu.training is None:
        return _ORIGINALS["create_tuning"](self)
    request = json.loads(self.body)
    name = str(request.get("HyperParameterTuningJobName"))
    if "TrainingJobDefinition" not in request:
        raise ValidationError("the emulator runs tuning jobs with one TrainingJobDefinition")
    config = request.get("HyperParameterTuningJobConfig") or {}
    objective = (config.get("HyperParameterTuningJobObjective") or {}).get("MetricName")
    metrics = (
        request["TrainingJobDefinition"].get("AlgorithmSpecification", {}).get("MetricDefinitions") or []
    )
    if objective not in {m.get("Name") for m in metrics}:  # SageMaker's own answer
        raise ValidationError(
            "A metric is required for this hyperparameter tuning job objective. "
            "Provide a metric in the metric definitions."
        )
    first = sample_configurations(config.get("ParameterRanges") or {}, str(config.get("Strategy")), 1, 0)
    if not first:
        raise ValidationError("ParameterRanges: Grid needs at least one categorical range")
    try:  # the training jobs must be able to run here, before anything is recorded
        emu.training.check(training_request(request, training_job_name(name, 1), first[0]))
    except Exception as exc:  # LocalRequestError
        raise ValidationError(f"the emulator cannot run this tuning job's training jobs: {exc}") from None
    result = _ORIGINALS["create_tuning"](self)  # ResourceInUse for a duplicate name (moto's)
    emu.tuning.start(self.sagemaker_backend.hyper_parameter_tuning_jobs[name], request)
    return result


def _sagemaker_list_tuning_training_jobs(self: Any) -> Any:
    from moto.core.responses import ActionResult
    from moto.sagemaker.exceptions import ValidationError

    emu = _ACTIVE
    name = self._get_param("HyperParameterTuningJobName")
    if emu is None or emu.tuning is None or emu.tuning.get(name) is None:
        raise ValidationError(f"Requested resource not found: hyperparameter tuning job {name}")
    return ActionResult(emu.tuning.list_training_jobs(name, json.loads(self.body or "{}")))


def _fsx_state() -> FileSystems | None:
    return _ACTIVE.fsx if _ACTIVE is not None else None


# the data repository calls moto lacks: operation -> (the answer's key, None: the whole answer; method)
_FSX_CALLS: dict[str, tuple[str | None, Callable[[FileSystems, dict[str, Any]], Any]]] = {
    "create_data_repository_association": ("Association", FileSystems.create_association),
    "describe_data_repository_associations": ("Associations", FileSystems.describe_associations),
    "delete_data_repository_association": (None, FileSystems.delete_association),
    "create_data_repository_task": ("DataRepositoryTask", FileSystems.create_task),
    "describe_data_repository_tasks": ("DataRepositoryTasks", FileSystems.describe_tasks),
    "cancel_data_repository_task": (None, FileSystems.cancel_task),
}


def _fsx_call(key: str | None, method: Callable[[FileSystems, dict[str, Any]], Any]) -> Callable[[Any], str]:
    from moto.core.exceptions import JsonRESTError

    def handler(self: Any) -> str:
        fsx = _fsx_state()
        if fsx is None:
            raise NotImplementedError("the FSx data repository calls need a running emulator")
        try:
            answer = method(fsx, json.loads(self.body or "{}"))
            return json.dumps(answer if key is None else {key: answer})
        except FSxError as exc:
            raise JsonRESTError(exc.code, exc.message) from None

    return handler


def _fsx_create_file_system(self: Any) -> str:
    from moto.core.exceptions import JsonRESTError

    fsx = _fsx_state()
    answer = json.loads(_ORIGINALS["fsx_create"](self))
    if fsx is not None:
        try:
            fsx.created(answer["FileSystem"], json.loads(self.body))
        except FSxError as exc:
            raise JsonRESTError(exc.code, exc.message) from None
        answer["FileSystem"] = fsx.complete(answer["FileSystem"])
    return json.dumps(answer)


def _fsx_describe_file_systems(self: Any) -> str:
    from moto.core.exceptions import JsonRESTError

    fsx = _fsx_state()
    answer = json.loads(_ORIGINALS["fsx_describe"](self))
    if fsx is not None:
        wanted = json.loads(self.body or "{}").get("FileSystemIds") or []
        found = {f["FileSystemId"] for f in answer["FileSystems"]}
        missing = [f for f in wanted if f not in found]
        if missing:  # AWS answers an unknown id with FileSystemNotFound (moto: an empty list)
            raise JsonRESTError("FileSystemNotFound", f"File system '{missing[0]}' does not exist.")
        answer["FileSystems"] = [fsx.complete(f) for f in answer["FileSystems"]]
    return json.dumps(answer)


def _fsx_delete_file_system(self: Any) -> Any:
    fsx = _fsx_state()
    result = _ORIGINALS["fsx_delete"](self)
    if fsx is not None:
        fsx.deleted(str(json.loads(self.body).get("FileSystemId")))
    return result


def _install_patches() -> None:
    """Wrap moto's SageMaker handlers once per process; they defer to moto when no emulator runs."""
    global _PATCHED
    if _PATCHED:
        return
    from moto.sagemaker.responses import SageMakerResponse

    _ORIGINALS["create_training"] = SageMakerResponse.create_training_job
    _ORIGINALS["create_processing"] = SageMakerResponse.create_processing_job
    _ORIGINALS["stop_processing"] = SageMakerResponse.stop_processing_job
    _ORIGINALS["create_tuning"] = SageMakerResponse.create_hyper_parameter_tuning_job
    _install_fsx_patches()
    install_iam_patches(_ORIGINALS)
    _one_account()
    _jobs_start_in_progress()
    SageMakerResponse.list_training_jobs = records.list_training_jobs  # type: ignore[method-assign]
    SageMakerResponse.search = records.search(SageMakerResponse.search)  # type: ignore[method-assign]
    SageMakerResponse.update_model_package = records.update_model_package(  # type: ignore[method-assign]
        SageMakerResponse.update_model_package
    )
    SageMakerResponse.create_training_job = _sagemaker_create_training_job  # type: ignore[method-assign]
    SageMakerResponse.stop_training_job = _stop_job(  # type: ignore[attr-defined]
        "training", "TrainingJobName", "training_jobs", "training job"
    )
    SageMakerResponse.create_processing_job = _sagemaker_create_processing_job  # type: ignore[method-assign]
    SageMakerResponse.stop_processing_job = _stop_job(  # type: ignore[method-assign,assignment]
        "processing", "ProcessingJobName", "processing_jobs", "processing job", "stop_processing"
    )
    SageMakerResponse.create_hyper_parameter_tuning_job = _sagemaker_create_tuning_job  # type: ignore[method-assign]
    SageMakerResponse.stop_hyper_parameter_tuning_job = _stop_job(  # type: ignore[attr-defined]
        "tuning", "HyperParameterTuningJobName", "hyper_parameter_tuning_jobs", "hyperparameter tuning job"
    )
    SageMakerResponse.list_training_jobs_for_hyper_parameter_tuning_job = (  # type: ignore[attr-defined]
        _sagemaker_list_tuning_training_jobs
    )
    _PATCHED = True


def _one_account() -> None:
    """Every request acts in the emulator's account (moto: an environment variable, which a job
    would inherit, or a per-access-key table)."""
    from moto.core.responses import BaseResponse

    original = BaseResponse.get_current_account

    def current_account(self: Any) -> str:
        return _ACTIVE.account if _ACTIVE is not None else original(self)

    BaseResponse.get_current_account = current_account  # type: ignore[method-assign]


def _jobs_start_in_progress() -> None:
    """moto makes every job record ``Completed`` at creation. The emulator then runs it, but a
    describe between moto's insert and the run's first update would see a job that never ran end
    ``Completed`` (a poller would take it for a finished job). Records start ``InProgress``."""
    from moto.sagemaker.models import FakeProcessingJob, FakeTrainingJob

    training_init, processing_init = FakeTrainingJob.__init__, FakeProcessingJob.__init__

    def training(self: Any, *args: Any, **kwargs: Any) -> None:
        training_init(self, *args, **kwargs)
        if _ACTIVE is not None:
            self.training_job_status, self.secondary_status = "InProgress", "Starting"
            prefix, _, name = self.arn.rpartition("/")
            self.arn = f"{prefix}/{name.lower()}"  # SageMaker's ARN has the name in lower case

    def processing(self: Any, *args: Any, **kwargs: Any) -> None:
        processing_init(self, *args, **kwargs)
        if _ACTIVE is not None:
            self.processing_job_status = "InProgress"

    FakeTrainingJob.__init__ = training  # type: ignore[method-assign]
    FakeProcessingJob.__init__ = processing  # type: ignore[method-assign]


def _install_fsx_patches() -> None:
    """moto's FSx file system handlers completed, and the data repository calls moto lacks."""
    from moto.fsx.responses import FSxResponse

    _ORIGINALS["fsx_create"] = FSxResponse.create_file_system
    _ORIGINALS["fsx_describe"] = FSxResponse.describe_file_systems
    _ORIGINALS["fsx_delete"] = FSxResponse.delete_file_system
    FSxResponse.create_file_system = _fsx_create_file_system  # type: ignore[method-assign]
    FSxResponse.describe_file_systems = _fsx_describe_file_systems  # type: ignore[method-assign]
    FSxResponse.delete_file_system = _fsx_delete_file_system  # type: ignore[method-assign]
    for operation, (key, method) in _FSX_CALLS.items():
        setattr(FSxResponse, operation, _fsx_call(key, method))


def serve_forever(
    port: int = 0, root: str | Path | None = None, region: str = REGION, account: str = ACCOUNT, **faults: Any
) -> int:
    """Run in the foreground until SIGINT/SIGTERM; print ``endpoint: <url>`` when ready."""
    import signal
    import sys

    stop = threading.Event()
    # the endpoint's log (stderr): its requests and the executor's own lines about each job. Own
    # handlers: Airflow, once a job imports it, reconfigures the root logger to stdout.
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    for name in ("airflow_dist_training.emulator", "werkzeug"):
        logger = logging.getLogger(name)
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        logger.propagate = False
    emu = Emulator(port=port, root=root, region=region, account=account, **faults)
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    emu.start()
    print(f"endpoint: {emu.endpoint}", flush=True)
    print(
        f"  export AWS_ENDPOINT_URL={emu.endpoint} AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing "
        f"AWS_DEFAULT_REGION={emu.region}",
        file=sys.stderr,
        flush=True,
    )
    try:
        while not stop.wait(0.5):
            pass
    finally:
        print("emulator: stopping jobs and the server", file=sys.stderr, flush=True)
        with contextlib.suppress(Exception):
            emu.stop()
    return 0
