"""Run a :class:`~airflow_dist_training.local.contract.LocalJobPlan` on this machine.

One launcher process per simulated host, each in its own session (process group), so a stop
kills the whole tree:

* torchrun hosts: ``python -m torch.distributed.run --nnodes=N --nproc-per-node=P --node-rank=i``.
  One host uses a c10d rendezvous on ``127.0.0.1:<free port>`` (what torchrun itself does for one
  node). Several hosts use the ``static`` rendezvous with ``--master-addr=127.0.0.1
  --master-port=<free port>``, which is what SageMaker runs (``algo-1:7777``): ranks then follow
  the host order (algo-1 gets ranks 0..P-1), which a c10d rendezvous does not guarantee.
* other hosts (strategy ``none``, or outside the distribution instance group): ``python <entry>
  <args>`` once, as the toolkit's Process runner does.

Output lines of every host are streamed to a log callback with a ``[algo-N]`` prefix, and metric
regexes are applied to them. The checkpoint directory is restored from the checkpoint store
before the run and synced back periodically and at the end; the model directories are packed
into ``model.tar.gz`` (and ``output/data`` into ``output.tar.gz``) in the output store. A failing
host gets ``output/failure`` (toolkit format, unless the script wrote its own) and the run raises
:class:`~airflow_dist_training.errors.TrainingJobError` with the last lines and that file.
"""

from __future__ import annotations

import collections
import contextlib
import datetime as dt
import json
import os
import signal
import socket
import subprocess
import sys
import tarfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from airflow_dist_training.errors import KILLED_BY_SIGKILL, TrainingJobError, training_job_error
from airflow_dist_training.local.contract import (
    HostPlan,
    LocalJobPlan,
    error_excerpt,
    failure_reason_text,
    failure_text,
    script_lines,
)
from airflow_dist_training.local.metrics import MetricParser
from airflow_dist_training.results import StatusTransition, TrainingResult
from airflow_dist_training.storage import StoreOptions, Stores, copy_between
from airflow_dist_training.storage.location import Location, local_location

LogFn = Callable[[str], None]
_TAIL_LINES = 200
_SKIP_SYNC_PREFIXES = ("._MANIFEST.json.tmp",)
# torch's TCPStore when the master port was taken between free_port() and the bind
_PORT_TAKEN_MARK = "EADDRINUSE"
_LAUNCH_ATTEMPTS = 3


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _utc_iso(ts: float | None = None) -> str:
    moment = dt.datetime.fromtimestamp(time.time() if ts is None else ts, dt.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _set_parent_death_signal() -> None:  # pragma: no cover - runs in the child before exec
    """Linux: the launcher gets SIGTERM if the process that started it dies (even by SIGKILL)."""
    if sys.platform.startswith("linux"):
        import ctypes

        with contextlib.suppress(Exception):
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def host_command(plan: LocalJobPlan, host: HostPlan, port: int, python: str = sys.executable) -> list[str]:
    """The argv that starts one simulated host."""
    entry = plan.entry_point
    if host.launch == "torchrun":
        nnodes = len(plan.torchrun_hosts)
        cmd = [
            python,
            "-m",
            "torch.distributed.run",
            f"--nnodes={nnodes}",
            f"--nproc-per-node={plan.processes_per_host}",
            f"--node-rank={host.node_rank}",
        ]
        if nnodes == 1:
            # port 0: the agent's store binds a free port itself (torchrun --standalone), so no race
            cmd += ["--rdzv-backend=c10d", "--rdzv-endpoint=127.0.0.1:0", f"--rdzv-id={plan.job_name}"]
        else:
            cmd += ["--rdzv-backend=static", "--master-addr=127.0.0.1", f"--master-port={port}"]
        cmd += ["--max-restarts=0", entry, *plan.user_args]
        return cmd
    if entry.endswith(".py"):
        return [python, entry, *plan.user_args]
    import shlex

    return ["/bin/sh", "-c", " ".join(["./" + entry, *(shlex.quote(a) for a in plan.user_args)])]


# --------------------------------------------------------------------------- stores


def _manifest_last(rel: str) -> tuple[int, str]:
    return (1 if rel.rsplit("/", 1)[-1] == "_MANIFEST.json" else 0, rel)


# what a sync last copied, per local path (or target URI): (size, modified); a run keeps one across its syncs
SyncState = dict[str, tuple[int, float]]


def sync_dir(src: Location, dst: Location, state: SyncState | None = None, stores: Stores | None = None) -> int:
    """Copy files that are missing, differ in size, or were rewritten from ``src`` to ``dst`` (never deletes).

    Either side may be in any store. "Rewritten" matters: a script that overwrites ``last.pt`` every
    epoch writes the same size each time, so each copy is remembered in ``state`` by its local path
    with the source's size and modified time. Without a memory of a file, a target that is as large
    and not older counts as the same (S3 times have second resolution, so they cannot tell a rewrite
    within the same second). A local target gets the source's modified time, so a restored file is
    not pushed back. Checkpoint manifests are copied last, so a checkpoint never looks complete
    before its files. Returns the number of files copied.
    """
    state = {} if state is None else state
    stores = stores or Stores(StoreOptions(aws_conn_id=None))
    src, dst = src.as_dir(), dst.as_dir()
    src_store, dst_store = stores(src), stores(dst)
    existing = dst_store.list_tree(dst)
    copied = 0
    for rel, (size, modified) in sorted(src_store.list_tree(src).items(), key=lambda kv: _manifest_last(kv[0])):
        if not rel or ".." in rel.split("/") or rel.rsplit("/", 1)[-1].startswith(_SKIP_SYNC_PREFIXES):
            continue
        target = dst.join(rel)
        source_path, target_path = src_store.local_path(src.join(rel)), dst_store.local_path(target)
        memory = str(source_path or target_path or target.uri)
        remembered = state.get(memory)
        if remembered == (size, modified):
            continue
        there_size, there_modified = existing.get(rel, (-1, 0.0))
        if remembered is None and there_size == size and there_modified >= modified:
            state[memory] = (size, modified)
            continue
        copy_between(src_store, src.join(rel), dst_store, target, size)
        if target_path is not None and source_path is None:  # a local copy keeps its time already
            os.utime(target_path, (modified, modified))
        state[memory] = (size, modified)
        copied += 1
    return copied


def pack_dirs(dirs: list[Path], archive: Path) -> None:
    """One ``tar.gz`` of several directories merged, files at the archive root; later dirs win."""
    merged: dict[str, Path] = {}
    for directory in dirs:
        if directory.is_dir():
            for child in sorted(directory.iterdir()):
                merged[child.name] = child
    archive.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive, "w:gz", compresslevel=6) as tar:
        for name, path in sorted(merged.items()):
            tar.add(path, arcname=name)


# --------------------------------------------------------------------------- the run


class LocalJobRun:
    """One local training job: prepare, launch, stream, wait, upload. Thread-safe ``stop()``."""

    def __init__(
        self,
        plan: LocalJobPlan,
        *,
        log: LogFn | None = None,
        python: str = sys.executable,
        checkpoint_sync_seconds: float = 10.0,
        stop_grace_seconds: float = 30.0,
        failure_grace_seconds: float = 5.0,
        max_runtime_seconds: float | None = None,
    ) -> None:
        self.plan = plan
        self._log = log or (lambda line: print(line, flush=True))
        self.python = python
        self.checkpoint_sync_seconds = checkpoint_sync_seconds
        self.stop_grace_seconds = stop_grace_seconds
        self.failure_grace_seconds = failure_grace_seconds
        self.max_runtime_seconds = max_runtime_seconds
        self.metrics = MetricParser(plan.metric_definitions)
        self.timeline: list[StatusTransition] = []
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self.commands: dict[str, list[str]] = {}
        # each host's command as the job sees it (no namespace wrapper): what output/failure names
        self.job_commands: dict[str, list[str]] = {}
        self.tails: dict[str, collections.deque[str]] = {
            h.host: collections.deque(maxlen=_TAIL_LINES) for h in plan.host_plans
        }
        self.stop_requested = threading.Event()
        self._log_lock = threading.Lock()
        self._sync_lock = threading.Lock()
        self._proc_lock = threading.Lock()
        self._readers: list[threading.Thread] = []
        self._synced: SyncState = {}
        self.training_started: float | None = None
        self.training_ended: float | None = None

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

    # -- preparation
    def prepare(self) -> None:
        """Lay out every host's ``/opt/ml`` and stage code, channels and checkpoints.

        The request executor's run (``local/executor.py``) does it from the CreateTrainingJob request.
        """
        raise NotImplementedError

    def launch(self) -> None:
        """Start every host (``_spawn``); the request executor's run knows the commands."""
        raise NotImplementedError

    def _spawn(
        self,
        host: str,
        cmd: list[str],
        env: dict[str, str],
        cwd: str | Path,
        shown: str,
        job_cmd: list[str] | None = None,
    ) -> subprocess.Popen[bytes] | None:
        """Start one host's process, log its pid and ``shown`` (its command), then read its
        output (None once stopped). ``job_cmd``: the command as the job sees it (default ``cmd``)."""
        self.commands[host] = cmd
        self.job_commands[host] = job_cmd or cmd
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
        """One output line of a host: its tail, its metrics (live in metrics.jsonl) and the log."""
        self.tails[host].append(line)
        points = self.metrics.feed(line, host=host)
        if points:
            self.append_metric_log(points)
        self.log(f"[{host}] {line}")

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
                # the host that failed first is the one SageMaker reports
                self.first_failed = next(h for h, c in codes.items() if c not in (None, 0))
            if failed_at is not None and now - failed_at > self.failure_grace_seconds:
                self.log("[local] a host failed: stopping the other hosts")
                self._signal_all(signal.SIGTERM)
                self._reap(self.stop_grace_seconds)
                failed_at = float("inf")
            self._watch(now)
            if (
                self.max_runtime_seconds is not None
                and self.training_started is not None
                and now - self.training_started > self.max_runtime_seconds
                and not self.stop_requested.is_set()
            ):
                self.log(f"[local] MaxRuntimeExceeded: stopping after {self.max_runtime_seconds:.0f} s")
                self.max_runtime_exceeded = True
                self.stop()
            if self.plan.checkpoint_store is not None and now - last_sync >= self.checkpoint_sync_seconds:
                self.sync_checkpoints()
                last_sync = now
            time.sleep(0.05)
        self.training_ended = time.time()
        for t in self._readers:
            t.join(timeout=5)
        return {h: int(p.returncode) for h, p in self.processes.items()}

    max_runtime_exceeded = False
    first_failed: str | None = None
    checkpoint_stores: Stores | None = None  # how to reach the checkpoint store (None: boto3's defaults)

    def _watch(self, now: float) -> None:
        """A subclass's extra check on each pass of the wait loop (the request executor's hang watchdog)."""

    def lost_port_race(self, codes: dict[str, int]) -> bool:
        """Another process bound the master port first: the hosts never started training."""
        if self.stop_requested.is_set() or all(c == 0 for c in codes.values()):
            return False
        return any(_PORT_TAKEN_MARK in line for tail in self.tails.values() for line in tail)

    def _forget_hosts(self) -> None:
        with self._proc_lock:
            self.processes.clear()
        self._readers.clear()
        for tail in self.tails.values():
            tail.clear()

    def sync_checkpoints(self) -> int:
        store = self.plan.checkpoint_store
        if store is None:
            return 0
        copied = 0
        with self._sync_lock:
            for hp in self.plan.host_plans:
                try:
                    copied += sync_dir(local_location(hp.layout.checkpoint_dir), store, self._synced, self.checkpoint_stores)
                except Exception as exc:  # a failed periodic sync must not kill the run
                    self.log(f"[local] WARNING checkpoint sync to {store.uri} failed: {exc}")
        return copied

    # -- stopping
    def _signal_all(self, sig: int) -> None:
        for proc in list(self.processes.values()):
            if proc.poll() is None:
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

    def stop(self, grace: float | None = None) -> None:
        """SIGTERM every host's process group, then SIGKILL after the grace period."""
        with self._proc_lock:
            self.stop_requested.set()
        self.log("[local] stop requested: SIGTERM to every host's process group")
        self._signal_all(signal.SIGTERM)
        self._reap(self.stop_grace_seconds if grace is None else grace)

    # -- finishing
    def fail(self, codes: dict[str, int]) -> TrainingJobError:
        plan = self.plan
        if self.stop_requested.is_set() and not self.max_runtime_exceeded:
            return TrainingJobError(
                f"Local training job {plan.job_name} was stopped.",
                job_name=plan.job_name,
                status="Stopped",
                failure_reason="Stopped by request",
            )
        failed = [hp for hp in plan.host_plans if codes.get(hp.host, 0) != 0]
        first = getattr(self, "first_failed", None)  # the host seen failing first, if known
        failed.sort(key=lambda h: h.host != first)
        hp = failed[0] if failed else plan.host_plans[0]
        code = codes.get(hp.host, 1)
        tail = list(self.tails[hp.host])
        lay = hp.layout
        for other in failed:
            ofile = other.layout.failure_file
            if not ofile.exists():  # the toolkit's rule: a script's (or the toolkit's) own file stays
                excerpt = error_excerpt(script_lines(list(self.tails[other.host])))
                command = self.job_commands.get(other.host) or self.commands.get(other.host, [])
                ofile.parent.mkdir(parents=True, exist_ok=True)
                ofile.write_text(failure_text(codes[other.host], excerpt, command))
        failure = lay.failure_file.read_text(errors="replace") if lay.failure_file.exists() else ""
        if self.max_runtime_exceeded:
            reason = f"MaxRuntimeExceeded: Training job timed out after {self.max_runtime_seconds:.0f} s"
        else:
            # torchrun exits 1 when one of its workers was SIGKILLed: its report says "exitcode: -9"
            killed = code in (137, -9) or any(
                "(exitcode: -9)" in line for other in failed for line in self.tails[other.host]
            )
            text = failure_reason_text(hp.host, failure, tail)
            if killed and KILLED_BY_SIGKILL not in text:
                text = f"{hp.host}: {KILLED_BY_SIGKILL}\n{text}"
            reason = ("AlgorithmError: " + text)[:1024]
        # the script's own last lines: stop where torchrun's agent starts its failure report
        last = "\n".join(f"  {line}" for line in script_lines(tail)[-25:])
        message = (
            f"Local training job {plan.job_name} failed on host {hp.host} (exit code {code}).\n"
            f"Last lines of {hp.host}'s output:\n{last}\n"
            f"Failure file {lay.failure_file}:\n{failure}"
        )
        return training_job_error(message, job_name=plan.job_name, status="Failed", failure_reason=reason)

    def finish(self) -> tuple[str, str]:
        """Final checkpoint sync, success files, ``model.tar.gz`` and ``output.tar.gz``: the
        request executor's run puts them where the request says."""
        raise NotImplementedError

    # -- live state for the Training view (it reads these files while the job runs)
    def append_metric_log(self, points: list[Any]) -> None:
        """Append metric points to ``<job dir>/metrics.jsonl`` as they are parsed (one JSON a line)."""
        with contextlib.suppress(OSError), self._log_lock:
            self.plan.job_dir.mkdir(parents=True, exist_ok=True)
            with open(self.plan.job_dir / "metrics.jsonl", "a", encoding="utf-8") as out:
                out.writelines(json.dumps(p.to_dict()) + "\n" for p in points)

    def write_status(self) -> None:
        """``<job dir>/status.json``: the status timeline and hosts, replaced atomically."""
        with contextlib.suppress(OSError):
            self.plan.job_dir.mkdir(parents=True, exist_ok=True)
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
            tmp = self.plan.job_dir / ".status.json.tmp"
            tmp.write_text(json.dumps(status, indent=1))
            tmp.replace(self.plan.job_dir / "status.json")

    def write_metrics(self) -> None:
        path = self.plan.job_dir / "metrics.json"
        path.write_text(
            json.dumps(
                {"final": self.metrics.final, "series": [p.to_dict() for p in self.metrics.series]}, indent=1
            )
        )

    def run(self) -> TrainingResult:
        """prepare -> launch -> wait -> finish; returns the result or raises ``TrainingJobError``."""
        plan = self.plan
        started = time.time()
        with contextlib.suppress(OSError):  # a re-run of the name starts a fresh metric log
            (plan.job_dir / "metrics.jsonl").unlink(missing_ok=True)
        try:
            self.prepare()
            codes: dict[str, int] = {}
            for attempt in range(1, _LAUNCH_ATTEMPTS + 1):
                if self.stop_requested.is_set():
                    break
                self.launch()
                codes = self.wait()
                if attempt == _LAUNCH_ATTEMPTS or not self.lost_port_race(codes):
                    break
                self.log(
                    "[local] the rendezvous port was taken by another process: relaunching on a new port"
                )
                self._forget_hosts()
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
            status = error.status
            self.transition(status, error.failure_reason or status)
            self.timeline[-1]["end"] = self.timeline[-1]["start"]
            raise error
        model_uri, output_uri = self.finish()
        self.transition("Completed", "Training job completed")
        self.timeline[-1]["end"] = self.timeline[-1]["start"]
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
