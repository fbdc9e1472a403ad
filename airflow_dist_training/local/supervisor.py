"""Supervise one local training job: prepare, launch, stream, wait, stop, fail or upload.

One launcher process per simulated host, each in its own session (process group). A stop is
SageMaker's: SIGTERM to each host's entrypoint only, then SIGKILL to the whole tree. What the job sees and how it fails: docs/local-backend.md.
"""

from __future__ import annotations

import collections
import contextlib
import datetime as dt
import functools
import json
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import IO

import psutil

from airflow_dist_training.errors import KILLED_BY_SIGKILL, TrainingJobError, training_job_error
from airflow_dist_training.local import hosts as nshosts
from airflow_dist_training.local import launcher
from airflow_dist_training.local.contract import (
    HostPlan,
    error_excerpt,
    failure_reason_text,
    failure_text,
    script_lines,
)
from airflow_dist_training.local.hangs import HangWatch, lost_port_race
from airflow_dist_training.local.metrics import MetricParser, MetricPoint
from airflow_dist_training.local.prepare import stage_job
from airflow_dist_training.local.request_plan import JobOptions, RequestPlan
from airflow_dist_training.local.store import RequestStore
from airflow_dist_training.results import StatusTransition, TrainingResult
from airflow_dist_training.storage import atomic_write
from airflow_dist_training.storage.location import join_uri, local_location, parent_uri

LogFn = Callable[[str], None]
FAILURE_REASON_LIMIT = 1024  # SageMaker truncates FailureReason to 1,024 characters
_TAIL_LINES = 200
_LAUNCH_ATTEMPTS = 3
_FAILURE_GRACE_SECONDS = 5.0  # after a host fails, the others may still finish before they are stopped


def _utc_iso(ts: float | None = None) -> str:
    moment = dt.datetime.fromtimestamp(time.time() if ts is None else ts, dt.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _set_parent_death_signal() -> None:  # pragma: no cover - runs in the child before exec
    """Linux: the launcher gets SIGTERM if the process that started it dies (even by SIGKILL)."""
    if sys.platform.startswith("linux"):
        import ctypes

        with contextlib.suppress(Exception):
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def handles_signal(pid: int, sig: int) -> bool:
    """Whether process ``pid`` has a handler for ``sig`` (its ``SigCgt`` mask; without /proc: assumed)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return not Path("/proc/self/status").exists()
    except OSError:
        return False
    caught = next((line.split()[1] for line in status.splitlines() if line.startswith("SigCgt:")), "0")
    return bool(int(caught, 16) >> (sig - 1) & 1)


def without_cut_path(text: str, local: str, public: str) -> str:
    """``text`` whose end is the start of ``local`` (a reason capped mid-path) with that start
    replaced by ``public``: the cap must not leave a piece of this machine's path."""
    start = text.rfind(local[:2]) if len(local) > 1 else -1
    while start != -1:
        tail = text[start:]
        if len(tail) < len(local) and local.startswith(tail) and "/" in tail[1:]:
            return text[:start] + public
        start = text.rfind(local[:2], 0, start)
    return text


class RunSupervisor:
    """One local training job from its :class:`RequestPlan`. Thread-safe ``stop()``."""

    def __init__(self, rp: RequestPlan, store: RequestStore, options: JobOptions, log: LogFn) -> None:
        self.rp = rp
        self.plan = plan = rp.plan
        self.store = store
        self.options = options
        self._log = log
        self.stop_grace_seconds = options.stop_grace_seconds
        stopping = rp.request.get("StoppingCondition") or {}
        self.max_runtime_seconds = float(stopping.get("MaxRuntimeInSeconds", 86400))
        self.max_runtime_exceeded = False
        self.killed = False  # stopped with no grace (a lost instance): nothing is uploaded
        self.metrics = MetricParser(plan.metric_definitions)
        self.timeline: list[StatusTransition] = []
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        # each host's command as the job sees it (no namespace wrapper): what output/failure names
        self.job_commands: dict[str, list[str]] = {}
        self.tails: dict[str, collections.deque[str]] = {
            h.host: collections.deque(maxlen=_TAIL_LINES) for h in plan.host_plans
        }
        self.stop_requested = threading.Event()
        self.first_failed: str | None = None  # the host seen failing first: the one SageMaker reports
        self.training_started: float | None = None
        self.training_ended: float | None = None
        self.hang_reason: str | None = None
        self.hangs = HangWatch(
            plan.hosts,
            options.hang_seconds,
            torch_distributed=rp.torch_distributed,
            builtin_runner=rp.mode == "builtin",
        )
        self.network: nshosts.JobNetwork | None = None
        self.image: nshosts.ImageEnv | None = None  # the job environment at /opt/conda (namespaces)
        self.python_path: str | None = None
        self._log_lock = threading.Lock()
        self._sync_lock = threading.Lock()
        self._proc_lock = threading.Lock()
        self._readers: list[threading.Thread] = []
        # the launchers' descendants seen when they were signalled (what their process groups miss)
        self._descendants: set[psutil.Process] = set()
        self._synced: launcher.SyncState = {}
        self._network_ready: threading.Thread | None = None
        self._network_error: BaseException | None = None

    # -- logging and timeline
    def log(self, line: str) -> None:
        with self._log_lock:
            self._log(line)

    def transition(self, status: str, message: str) -> None:
        now = _utc_iso()
        if self.timeline and self.timeline[-1]["end"] is None:
            self.timeline[-1]["end"] = now
        self.timeline.append(StatusTransition(status=status, start=now, end=None, message=message))
        self.log(f"[local] {status}: {message}")
        self.write_status()

    # -- the whole run
    def run(self) -> TrainingResult:
        """prepare -> launch -> wait -> finish; returns the result or raises ``TrainingJobError``."""
        plan = self.plan
        started = time.time()
        with contextlib.suppress(OSError):  # a re-run of the name starts a fresh metric log
            (plan.job_dir / "metrics.jsonl").unlink(missing_ok=True)
        try:
            self.prepare()
            codes = self._launch_and_wait()
        except BaseException:
            self._signal_all(signal.SIGTERM)
            self._reap(min(self.stop_grace_seconds, 10.0))
            raise
        finally:
            with contextlib.suppress(OSError):
                self.write_metrics()
        if self.stop_requested.is_set() or any(c != 0 for c in codes.values()) or not codes:
            error = self.fail(codes)
            if plan.checkpoint_store is not None:
                self.sync_checkpoints()  # keep what was written: the next run resumes from it
            if error.status == "Stopped" and not self.killed:
                self.upload_after_stop()
            self._end(error.status, error.failure_reason or error.status)
            raise error
        model_uri, output_uri = self.finish()
        self._end("Completed", "Training job completed")
        training = (self.training_ended or time.time()) - (self.training_started or started)
        return TrainingResult(
            backend="local",
            job_name=plan.job_name,
            job_arn=plan.job_arn,
            status="Completed",
            model_artifact_uri=model_uri,
            output_uri=output_uri,
            checkpoint_uri=plan.checkpoint_store.as_uri() if plan.checkpoint_store is not None else None,
            final_metrics=dict(self.metrics.final),
            billable_seconds=None,
            training_seconds=round(training),
            timeline=list(self.timeline),
        )

    def _end(self, status: str, message: str) -> None:
        self.transition(status, message)
        self.timeline[-1]["end"] = self.timeline[-1]["start"]

    def _launch_and_wait(self) -> dict[str, int]:
        """Launch and wait; relaunch on a new port when another process took the master port."""
        codes: dict[str, int] = {}
        for attempt in range(1, _LAUNCH_ATTEMPTS + 1):
            if self.stop_requested.is_set():
                break
            self.launch()
            codes = self.wait()
            stopped = self.stop_requested.is_set()
            if attempt == _LAUNCH_ATTEMPTS or not lost_port_race(self.tails, codes, stopped):
                break
            self.log("[local] the rendezvous port was taken by another process: relaunching on a new port")
            with self._proc_lock:
                self.processes.clear()
            self._readers.clear()
            for tail in self.tails.values():
                tail.clear()
        return codes

    # -- preparation: code, channels, config files, checkpoints, the job's Python
    def prepare(self) -> None:
        plan = self.plan
        self.transition("Starting", "Preparing the instances for training")  # SageMaker's words
        self.log(f"[local] preparing {len(plan.hosts)} simulated host(s) under {plan.job_dir}")
        if self.rp.isolation.namespaces and self.network is None:
            # the job's network namespace comes up while the files are staged (it needs none of them)
            self._network_ready = threading.Thread(target=self._start_network, daemon=True)
            self._network_ready.start()
        for warning in plan.warnings:
            self.log(f"[local] WARNING {warning}")
        self.log(f"[local] job Python: {self.rp.python} ({self.rp.python_why})")
        self.transition("Downloading", "Downloading input data")
        self.python_path = stage_job(self.rp, self.store, self.log, self._synced)

    # -- launch
    def _start_network(self) -> None:
        plan = self.plan
        ports = list(self.options.relay_ports) + nshosts.loopback_ports(os.environ)
        network = nshosts.JobNetwork(plan.job_dir, plan.hosts, self.rp.isolation, ports)
        self.network = network  # before start: close() cleans up whatever start() got to
        try:
            network.start()
        except BaseException as exc:
            self._network_error = exc
            return
        self.log(
            f"[local] job network namespace ready in {network.setup_seconds * 1000:.0f} ms (hosts: {', '.join(plan.hosts)}, master port {nshosts.MASTER_PORT})"
        )

    def _wait_network(self) -> None:
        if self._network_ready is not None:
            self._network_ready.join()
            self._network_ready = None

    def launch(self) -> None:
        plan = self.plan
        namespaces = self.rp.isolation.namespaces
        if namespaces:  # prepare() started the network
            self._wait_network()
            if self._network_error is not None:
                raise self._network_error
        port = nshosts.MASTER_PORT if namespaces else launcher.free_port()
        if self.network is not None and self.image is None:
            self.image = nshosts.image_env(self.rp.python, self.network.net_dir / "conda")
        image = self.image
        # the code's requirements, as the hosts see them (mounted beside the job environment)
        python_path = nshosts.CONDA_REQUIREMENTS if image and self.python_path else self.python_path
        if self.training_started is None:
            self.transition("Training", "Training image download completed. Training in progress.")
            layout = "namespaces" if namespaces else "relocated layout"
            self.log(f"[local] launching {len(plan.hosts)} host(s) ({self.rp.mode} runner, {layout})")
            self.training_started = time.time()
        for hp in plan.host_plans:
            cmd, env, cwd = launcher.host_process(
                self.rp, hp, port, python_path, self.options.extra_env, image.python if image else None
            )
            job_cmd = list(cmd)
            if self.network is not None:
                shared = str(plan.host_plans[0].layout.input_data_dir)
                cmd = self.network.host_command(
                    hp.host,
                    hp.layout.base,
                    cmd,
                    workdir=str(cwd),
                    shared_data=shared,
                    image=image,
                    requirements=self.python_path if image and self.python_path else "",
                )
                cwd = "/"
            if self._spawn(hp.host, cmd, env, cwd, job_cmd) is None:
                return

    def _spawn(
        self, host: str, cmd: list[str], env: dict[str, str], cwd: str | Path, job_cmd: list[str]
    ) -> subprocess.Popen[bytes] | None:
        """Start one host's process, log its pid and command (the job's end of a namespace wrapper),
        then read its output (None once stopped). ``job_cmd``: the command as the job sees it."""
        self.job_commands[host] = job_cmd
        with self._proc_lock:
            if self.stop_requested.is_set():
                return None
            proc = subprocess.Popen(
                cmd,
                cwd=cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
                preexec_fn=_set_parent_death_signal,  # only a prctl call, no locks
            )
            self.processes[host] = proc
        shown = " ".join(shlex.quote(c) for c in cmd[-8:]) if self.network else " ".join(cmd)
        self.log(f"[local] {host}: pid {proc.pid}: {shown}")
        for stream in (proc.stdout, proc.stderr):
            assert stream is not None
            t = threading.Thread(target=self._pump, args=(host, stream), daemon=True)
            t.start()
            self._readers.append(t)
        return proc

    def _pump(self, host: str, stream: IO[bytes]) -> None:
        for raw in iter(stream.readline, b""):
            self._on_line(host, raw.decode("utf-8", errors="replace").rstrip("\r\n"))
        stream.close()

    def _on_line(self, host: str, line: str) -> None:
        """One output line of a host: the hang watch, its tail, its metrics (live in metrics.jsonl), the log."""
        self.hangs.saw_line(host, line, time.time())
        self.tails[host].append(line)
        points = self.metrics.feed(line, host=host)
        if points:
            self.append_metric_log(points)
        self.log(f"[{host}] {self.public_text(line)}")

    # -- waiting
    def wait(self) -> dict[str, int]:
        """Wait for every host; on the first failure give the others a short grace, then stop them."""
        last_sync = time.time()
        failed_at: float | None = None
        while True:
            codes = {h: p.poll() for h, p in self.processes.items()}
            if all(c is not None for c in codes.values()):
                break
            now = time.time()
            if failed_at is None and any(c not in (None, 0) for c in codes.values()):
                failed_at = now
                self.first_failed = next(h for h, c in codes.items() if c not in (None, 0))
            if failed_at is not None and now - failed_at > _FAILURE_GRACE_SECONDS:
                self.log("[local] a host failed: stopping the other hosts")
                self._signal_all(signal.SIGTERM)
                self._reap(self.stop_grace_seconds)
                failed_at = float("inf")
            self._watch_hangs(now)
            self._watch_runtime(now)
            if (
                self.plan.checkpoint_store is not None
                and now - last_sync >= self.options.checkpoint_sync_seconds
            ):
                self.sync_checkpoints()
                last_sync = now
            time.sleep(0.05)
        self.training_ended = time.time()
        for t in self._readers:
            t.join(timeout=5)
        return {h: int(p.returncode) for h, p in self.processes.items()}

    def _watch_hangs(self, now: float) -> None:
        if self.hang_reason is None and not self.stop_requested.is_set():
            reason = self.hangs.check(now, self.training_started, self.network, self.tails, self.processes)
            if reason is not None:
                self.hang_reason = reason
                self.log(f"[local] {reason}")
                self.stop(min(self.stop_grace_seconds, 5.0))

    def _watch_runtime(self, now: float) -> None:
        if (
            self.training_started is not None
            and now - self.training_started > self.max_runtime_seconds
            and not self.stop_requested.is_set()
        ):
            self.log(f"[local] MaxRuntimeExceeded: stopping after {self.max_runtime_seconds:.0f} s")
            self.max_runtime_exceeded = True
            self.stop()

    def sync_checkpoints(self) -> int:
        store = self.plan.checkpoint_store
        if store is None:
            return 0
        copied = 0
        with self._sync_lock:
            for hp in self.plan.host_plans:
                local = local_location(hp.layout.checkpoint_dir)
                try:
                    copied += launcher.sync_dir(local, store, self._synced, self.store.stores)
                except Exception as exc:  # a failed periodic sync must not kill the run
                    self.log(f"[local] WARNING checkpoint sync to {store.uri} failed: {exc}")
        return copied

    # -- stopping
    def _signal_all(self, sig: int) -> None:
        for proc in list(self.processes.values()):
            if proc.poll() is None:
                # torchrun starts each worker in a session of its own: a signal to the launcher's
                # group misses them, and a worker that outlives its killed torchrun is orphaned
                with contextlib.suppress(psutil.Error):
                    self._descendants.update(psutil.Process(proc.pid).children(recursive=True))
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, sig)

    def _reap(self, grace: float) -> None:
        deadline = time.time() + grace
        for proc in list(self.processes.values()):
            remaining = max(0.0, deadline - time.time())
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=remaining)
        if any(p.poll() is None for p in self.processes.values()):
            self._signal_all(signal.SIGKILL)
        # the launchers are gone; kill whatever they left in their process groups
        for proc in list(self.processes.values()):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
        for child in list(self._descendants):  # psutil checks the pid still names the same process
            with contextlib.suppress(psutil.Error):
                child.kill()

    def _entrypoint_pid(self, proc: subprocess.Popen[bytes]) -> int | None:
        """The host's entrypoint process: its container's PID 1, what SageMaker's stop signals."""
        if self.network is None:
            return proc.pid
        # nsenter execs unshare, whose one child is the host's PID 1 (the setup shell execs the entrypoint)
        with contextlib.suppress(psutil.Error):
            children = psutil.Process(proc.pid).children()
            if children:
                return int(children[0].pid)
        return None

    def _terminate_entrypoints(self, grace: float) -> None:
        """``docker stop``'s SIGTERM: to each host's entrypoint only. As PID 1 of its container, an
        entrypoint without a SIGTERM handler ignores it (the kernel's rule, applied here in the
        relocated layout too); the builtin runner stands in for AWS's toolkit, which has none."""
        for host, proc in list(self.processes.items()):
            if proc.poll() is not None:
                continue
            with contextlib.suppress(psutil.Error):  # what SIGKILL must reach after the grace
                self._descendants.update(psutil.Process(proc.pid).children(recursive=True))
            pid = self._entrypoint_pid(proc)
            toolkit = self.rp.mode == "builtin" and not self.rp.toolkit_shim
            deaf = toolkit or pid is None or not handles_signal(pid, signal.SIGTERM)
            if pid is not None and not deaf:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGTERM)
            what = "ignored: no SIGTERM handler in PID 1, as with AWS's toolkit" if deaf else "delivered"
            self.log(f"[local] stop: SIGTERM to {host}'s entrypoint ({what}); SIGKILL in {grace:g} s")

    def stop(self, grace: float | None = None) -> None:
        """Stop as SageMaker does (StopTrainingJob, a spot interruption, MaxRuntimeInSeconds): SIGTERM to
        each host's entrypoint, SIGKILL to everything after the grace period; then the checkpoints, the
        model and the output are uploaded. ``grace`` 0: killed at once, nothing uploaded (a lost instance)."""
        grace = self.stop_grace_seconds if grace is None else grace
        with self._proc_lock:
            self.stop_requested.set()
            self.killed = grace <= 0
        if not self.killed:
            self._terminate_entrypoints(grace)
        self._reap(grace)

    def close(self) -> None:
        self._wait_network()  # a failed preparation still closes the namespace started beside it
        if self.network is not None:
            self.network.close()

    # -- failures like SageMaker's
    def fail(self, codes: dict[str, int]) -> TrainingJobError:
        plan = self.plan
        if self.hang_reason is not None:
            return training_job_error(
                f"Local training job {plan.job_name} failed: {self.hang_reason}",
                job_name=plan.job_name,
                status="Failed",
                failure_reason=f"AlgorithmError: {self.hang_reason}"[:FAILURE_REASON_LIMIT],
            )
        if self.max_runtime_exceeded:
            self._write_failure_files(codes)
            tail_host = next((h for h, c in codes.items() if c != 0), plan.hosts[0])
            limit = f"{self.max_runtime_seconds:.0f} s"
            last = f"Last lines of {tail_host}:\n" + "\n".join(list(self.tails[tail_host])[-10:])
            reason = f"MaxRuntimeExceeded: Training job timed out after {limit}. {last}"
            return TrainingJobError(
                f"Local training job {plan.job_name} exceeded MaxRuntimeInSeconds ({limit}). {last}",
                job_name=plan.job_name,
                status="Stopped",
                failure_reason=reason[:FAILURE_REASON_LIMIT],
            )
        if self.stop_requested.is_set():
            return TrainingJobError(
                f"Local training job {plan.job_name} was stopped.",
                job_name=plan.job_name,
                status="Stopped",
                failure_reason="Stopped by request",
            )
        return self._host_failure(codes)

    def _write_failure_files(self, codes: dict[str, int]) -> list[HostPlan]:
        """Every failing host gets ``output/failure``; returns them, the one seen failing first first."""
        failed = [hp for hp in self.plan.host_plans if codes.get(hp.host, 0) != 0]
        failed.sort(key=lambda h: h.host != self.first_failed)
        for hp in failed:
            path = hp.layout.failure_file
            if not path.exists():  # the toolkit's rule: a script's (or the toolkit's) own file stays
                excerpt = error_excerpt(script_lines(list(self.tails[hp.host])))
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(failure_text(codes[hp.host], excerpt, self.job_commands.get(hp.host, [])))
        return failed

    def _host_failure(self, codes: dict[str, int]) -> TrainingJobError:
        """The error of the host that failed first, its reason as SageMaker gives it."""
        plan = self.plan
        failed = self._write_failure_files(codes)
        hp = failed[0] if failed else plan.host_plans[0]
        code = codes.get(hp.host, 1)
        tail = list(self.tails[hp.host])
        lay = hp.layout
        failure = lay.failure_file.read_text(errors="replace") if lay.failure_file.exists() else ""
        # torchrun exits 1 when one of its workers was SIGKILLed: its report says "exitcode: -9"
        killed = code in (137, -9) or any(
            "(exitcode: -9)" in line for other in failed for line in self.tails[other.host]
        )
        text = failure_reason_text(hp.host, failure, tail)
        if killed and KILLED_BY_SIGKILL not in text:
            text = f"{hp.host}: {KILLED_BY_SIGKILL}\n{text}"
        reason = self.public_text(("AlgorithmError: " + text)[:FAILURE_REASON_LIMIT])
        # the script's own last lines: stop where torchrun's agent starts its failure report
        last = "\n".join(f"  {line}" for line in script_lines(tail)[-25:])
        message = (
            f"Local training job {plan.job_name} failed on host {hp.host} (exit code {code}).\n"
            f"Last lines of {hp.host}'s output:\n{last}\n"
            f"Failure file {lay.failure_file}:\n{failure}"
        )
        return training_job_error(
            message, job_name=plan.job_name, status="Failed", failure_reason=reason[:FAILURE_REASON_LIMIT]
        )

    @functools.cached_property
    def _public_paths(self) -> list[tuple[str, str]]:
        """(this machine's path, what SageMaker shows), longest first (every output line uses them).
        None with namespaces and the job environment at /opt/conda: the job sees no path of this machine."""
        if self.image is not None:
            return []
        replacements = [(str(hp.layout.base), "/opt/ml") for hp in self.plan.host_plans]
        python = Path(self.rp.python)
        if (python.parent.parent / "pyvenv.cfg").is_file():  # a virtualenv: the job environment
            replacements.append((str(python.parent.parent), "/opt/conda"))
        else:
            replacements.append((str(python), "python3"))
        return sorted(replacements, key=lambda r: -len(r[0]))

    def public_text(self, text: str) -> str:
        """``text`` as SageMaker would give it: no path of this machine. In the relocated layout
        (or with an interpreter that is not a venv) the hosts' folders are shown as ``/opt/ml`` and
        the job's environment as the image's ``/opt/conda``."""
        for local, public in self._public_paths:
            text = text.replace(local, public)
            text = without_cut_path(text, local, public)
        return text

    # -- artifacts through the store
    def finish(self) -> tuple[str, str]:
        """Final checkpoint sync, success files, ``model.tar.gz`` and ``output.tar.gz`` where the request says."""
        plan, rp = self.plan, self.rp
        self.transition("Uploading", "Uploading generated training model")
        self.log(f"[local] uploading to {rp.output_path}")
        if plan.checkpoint_store is not None:
            n = self.sync_checkpoints()
            self.log(f"[local] synced {n} checkpoint file(s) to {rp.checkpoint_uri} ({plan.checkpoint_store.as_uri()})")
        for hp in plan.host_plans:
            hp.layout.success_file.write_text("")
        return self.upload_artifacts()

    def upload_after_stop(self) -> None:
        """SageMaker keeps what a stopped job saved in its window: the model and output are uploaded
        (API_StopTrainingJob, StoppingCondition). A failed upload is logged; the job is still Stopped."""
        try:
            self.upload_artifacts()
        except Exception as exc:
            self.log(f"[local] WARNING uploading the stopped job's model and output failed: {exc}")

    def upload_artifacts(self) -> tuple[str, str]:
        """``model.tar.gz`` (or the model files) and ``output.tar.gz`` where the request says."""
        plan, rp = self.plan, self.rp
        with tempfile.TemporaryDirectory() as tmp:
            if plan.output_compression == "NONE":
                model_prefix = join_uri(parent_uri(rp.model_uri), "model")
                for hp in plan.host_plans:
                    for path in sorted(hp.layout.model_dir.rglob("*")):
                        if path.is_file():
                            rel = path.relative_to(hp.layout.model_dir).as_posix()
                            self.store.put_file(path, f"{model_prefix}/{rel}")
                model = self.store.local_uri(model_prefix)
            else:
                launcher.pack_dirs(
                    [hp.layout.model_dir for hp in plan.host_plans], Path(tmp) / "model.tar.gz"
                )
                model = self.store.put_file(Path(tmp) / "model.tar.gz", rp.model_uri)
            launcher.pack_dirs(
                [hp.layout.output_data_dir for hp in plan.host_plans], Path(tmp) / "output.tar.gz"
            )
            output = self.store.put_file(Path(tmp) / "output.tar.gz", rp.output_uri)
        self.log(f"[local] model artifact: {rp.model_uri} ({model})")
        return model, output

    # -- live state for the Training view (it reads these files while the job runs)
    def append_metric_log(self, points: list[MetricPoint]) -> None:
        """Append metric points to ``<job dir>/metrics.jsonl`` as they are parsed (one JSON a line)."""
        with contextlib.suppress(OSError), self._log_lock:
            self.plan.job_dir.mkdir(parents=True, exist_ok=True)
            with open(self.plan.job_dir / "metrics.jsonl", "a", encoding="utf-8") as out:
                out.writelines(json.dumps(asdict(p)) + "\n" for p in points)

    def write_status(self) -> None:
        """``<job dir>/status.json``: the status timeline and hosts, replaced atomically."""
        with contextlib.suppress(OSError):
            last = self.timeline[-1]["status"] if self.timeline else None
            status = {
                "job_name": self.plan.job_name,
                # TrainingJobStatus; the timeline holds the SecondaryStatus history
                "status": last if last in ("Completed", "Failed", "Stopped") else "InProgress",
                "hosts": list(self.plan.hosts),
                "processes_per_host": self.plan.processes_per_host,
                "timeline": list(self.timeline),
                "metric_definitions": [list(d) for d in self.plan.metric_definitions],
            }
            atomic_write(self.plan.job_dir / "status.json", json.dumps(status, indent=1).encode())

    def write_metrics(self) -> None:
        metrics = {"final": self.metrics.final, "series": [asdict(p) for p in self.metrics.series]}
        (self.plan.job_dir / "metrics.json").write_text(json.dumps(metrics, indent=1))
