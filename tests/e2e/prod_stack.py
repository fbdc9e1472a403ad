"""A production-like Airflow on 127.0.0.1: PostgreSQL, Redis, CeleryExecutor, two workers, two triggerers.

What teams run on MWAA, Astronomer or the official Helm chart, on one machine, started and stopped
by the tests themselves (``tests/e2e/prod/conftest.py``):

- ``PostgresCluster``: Debian's PostgreSQL, a throwaway cluster (``initdb``) in a temporary folder,
  run as the ``postgres`` user on a free port; the metadata database and the Celery result backend;
- ``RedisServer``: Debian's ``redis-server`` on a free port, no persistence; the Celery broker;
- ``ProdStack``: :class:`AirflowServices` (the e2e harness) with ``api-server``, ``scheduler``
  (CeleryExecutor), ``dag-processor``, ``triggerer-1``, ``triggerer-2``, ``worker-1`` and
  ``worker-2`` (``airflow celery worker``). Each triggerer and worker reports its own hostname
  (``127.0.0.1N``: loopback addresses, so log fetches fail fast instead of waiting on DNS), so a
  task instance's ``hostname`` and ``triggerer_job.hostname`` say which one ran it. Each worker has
  its own process group: ``kill_service("worker-1")`` is a lost machine (worker, its pool, the task
  supervisors and task processes die at once).

``scripts/setup-prod-stack.sh`` installs the Debian packages; ``prerequisites_missing()`` says what
is missing (the tests skip with that reason).
"""

from __future__ import annotations

import contextlib
import glob
import importlib.util
import os
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.e2e.airflow_services import AirflowServices, AirflowServicesError, free_port

#: loopback address each triggerer/worker reports as its hostname
HOSTNAMES = {
    "triggerer-1": "127.0.0.11",
    "triggerer-2": "127.0.0.12",
    "worker-1": "127.0.0.21",
    "worker-2": "127.0.0.22",
}
TRIGGERERS = ("triggerer-1", "triggerer-2")
WORKERS = ("worker-1", "worker-2")
#: [triggerer] triggerer_health_check_threshold in the stack (Airflow's default is 30 s): how long
#: after a triggerer's last heartbeat another one takes over its triggers
TRIGGERER_HEALTH_CHECK_THRESHOLD = 10
#: [scheduler] task_instance_heartbeat_timeout (default 300 s): how long after a task's last
#: heartbeat (its worker is gone) the scheduler fails it and schedules the retry
TASK_HEARTBEAT_TIMEOUT = 20

HOSTNAME_MODULE = '''"""[core] hostname_callable of the production-like test stack: the service's own name."""
import os
import socket


def hostname() -> str:
    return os.environ.get("ADT_STACK_HOSTNAME") or socket.getfqdn()
'''


def _postgres_bin(name: str) -> str | None:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return found[-1] if found else shutil.which(name)


def prerequisites_missing() -> str | None:
    """Why the stack cannot start here (None if it can)."""
    missing = []
    if _postgres_bin("initdb") is None or _postgres_bin("postgres") is None:
        missing.append("postgresql (Debian package)")
    if shutil.which("redis-server") is None:
        missing.append("redis-server (Debian package)")
    for module, dist in (
        ("airflow.providers.celery", "apache-airflow-providers-celery"),
        ("psycopg2", "psycopg2-binary"),
        ("asyncpg", "asyncpg"),
    ):
        try:
            found = importlib.util.find_spec(module) is not None
        except ModuleNotFoundError:
            found = False
        if not found:
            missing.append(f"{dist} (pip, the test extra)")
    if missing:
        return f"missing {', '.join(missing)}: run scripts/setup-prod-stack.sh and scripts/setup.sh"
    return None


def _wait_for_port(
    port: int, proc: subprocess.Popen[bytes], what: str, log: Path, timeout: float = 60
) -> None:
    import socket

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AirflowServicesError(
                f"{what} exited with {proc.returncode}:\n{log.read_text(errors='replace')[-3000:]}"
            )
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
            return
        time.sleep(0.2)
    raise AirflowServicesError(f"{what} is not listening on {port} after {timeout:.0f} s")


def _stop(proc: subprocess.Popen[bytes] | None, sig: signal.Signals, timeout: float = 30) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(sig)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@dataclass
class PostgresCluster:
    """A throwaway PostgreSQL cluster owned by the ``postgres`` user, with a database and role ``airflow``."""

    port: int = 0
    root: Path | None = None
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"postgresql+psycopg2://airflow@127.0.0.1:{self.port}/airflow"

    def start(self) -> PostgresCluster:
        import pwd

        self.port = self.port or free_port()
        # not under pytest's tmp_path: the postgres user must be able to reach the folder
        self.root = Path(tempfile.mkdtemp(prefix="adt-pg-"))
        user = pwd.getpwnam("postgres")
        os.chown(self.root, user.pw_uid, user.pw_gid)
        as_postgres = {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []}
        data = self.root / "data"
        log = self.root / "postgres.log"
        subprocess.run(
            [
                _postgres_bin("initdb") or "initdb",
                "-D",
                str(data),
                "-U",
                "postgres",
                "--auth=trust",
                "-E",
                "UTF8",
                "--no-sync",
            ],
            check=True,
            capture_output=True,
            cwd=self.root,
            **as_postgres,  # type: ignore[arg-type]
        )
        with open(log, "wb") as out:
            os.chown(log, user.pw_uid, user.pw_gid)
            self.proc = subprocess.Popen(
                [
                    _postgres_bin("postgres") or "postgres",
                    "-D",
                    str(data),
                    "-p",
                    str(self.port),
                    "-k",
                    str(self.root),
                    "-c",
                    "listen_addresses=127.0.0.1",
                    "-c",
                    "max_connections=300",
                    # a test database: durability does not matter, speed on a loaded 2-core box does
                    "-c",
                    "fsync=off",
                    "-c",
                    "synchronous_commit=off",
                    "-c",
                    "full_page_writes=off",
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=self.root,
                **as_postgres,  # type: ignore[arg-type]
            )
        _wait_for_port(self.port, self.proc, "postgres", log)
        self.psql("CREATE ROLE airflow LOGIN")
        self.psql("CREATE DATABASE airflow OWNER airflow")
        return self

    def psql(self, sql: str, database: str = "postgres") -> str:
        """Run SQL as the superuser; returns psql's unaligned, tuples-only output."""
        for attempt in range(20):  # the server accepts TCP a moment before it accepts logins
            result = subprocess.run(
                [
                    "psql",
                    "-h",
                    "127.0.0.1",
                    "-p",
                    str(self.port),
                    "-U",
                    "postgres",
                    "-d",
                    database,
                    "-v",
                    "ON_ERROR_STOP=1",
                    "-At",
                    "-c",
                    sql,
                ],
                capture_output=True,
                text=True,
            )
            if result.returncode == 0:
                return result.stdout
            if "starting up" not in result.stderr or attempt == 19:
                raise AirflowServicesError(f"psql {sql!r}: {result.stderr}")
            time.sleep(0.5)
        raise AssertionError("unreachable")

    def stop(self) -> None:
        _stop(self.proc, signal.SIGINT)  # "fast" shutdown
        if self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)


@dataclass
class RedisServer:
    """``redis-server`` on 127.0.0.1, nothing saved to disk."""

    port: int = 0
    root: Path | None = None
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        self.port = self.port or free_port()
        self.root = Path(tempfile.mkdtemp(prefix="adt-redis-"))
        log = self.root / "redis.log"
        with open(log, "wb") as out:
            self.proc = subprocess.Popen(
                [
                    "redis-server",
                    "--port",
                    str(self.port),
                    "--bind",
                    "127.0.0.1",
                    "--dir",
                    str(self.root),
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                    "--daemonize",
                    "no",
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        _wait_for_port(self.port, self.proc, "redis-server", log)
        return self

    def stop(self) -> None:
        _stop(self.proc, signal.SIGTERM)
        if self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)


@dataclass
class ProdStack(AirflowServices):
    """Airflow on PostgreSQL with the CeleryExecutor, two Celery workers and two triggerers.

    :param database_url: the metadata database (``PostgresCluster.url``).
    :param broker_url: the Celery broker (``RedisServer.url``).
    :param worker_concurrency: task slots per Celery worker.
    """

    database_url: str = ""
    broker_url: str = ""
    worker_concurrency: int = 8
    worker_env: dict[str, dict[str, str]] = field(default_factory=dict)

    def environment(self) -> dict[str, str]:
        env = super().environment()
        pythonpath = self.home / "pythonpath"
        pythonpath.mkdir(parents=True, exist_ok=True)
        (pythonpath / "adt_stack_hostname.py").write_text(HOSTNAME_MODULE)
        result_backend = "db+" + self.database_url  # the driver named: SQLAlchemy 2.1 defaults to psycopg 3
        env.update(
            {
                "PYTHONPATH": os.pathsep.join(p for p in (str(pythonpath), env.get("PYTHONPATH", "")) if p),
                "AIRFLOW__CORE__HOSTNAME_CALLABLE": "adt_stack_hostname.hostname",
                "AIRFLOW__CORE__EXECUTOR": "CeleryExecutor",
                # the repo's scheduled DAGs would start runs of their own: each test unpauses its DAG
                "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "True",
                "AIRFLOW__CORE__PARALLELISM": "32",
                "AIRFLOW__CORE__MAX_ACTIVE_TASKS_PER_DAG": "64",
                "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": self.database_url,
                "AIRFLOW__CELERY__BROKER_URL": self.broker_url,
                "AIRFLOW__CELERY__RESULT_BACKEND": result_backend,
                "AIRFLOW__CELERY__WORKER_CONCURRENCY": str(self.worker_concurrency),
                "AIRFLOW__TRIGGERER__TRIGGERER_HEALTH_CHECK_THRESHOLD": str(TRIGGERER_HEALTH_CHECK_THRESHOLD),
                "AIRFLOW__TRIGGERER__JOB_HEARTBEAT_SEC": "2",
                "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT": str(TASK_HEARTBEAT_TIMEOUT),
                "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT_DETECTION_INTERVAL": "5",
            }
        )
        return env

    def commands(self) -> dict[str, list[str]]:
        airflow = self._airflow()
        commands = {name: [airflow, name] for name in ("api-server", "scheduler", "dag-processor")}
        for name in TRIGGERERS:
            # logs are read from the shared AIRFLOW_HOME; one log server port per host would clash
            commands[name] = [airflow, "triggerer", "--skip-serve-logs"]
        for name in WORKERS:
            # The worker leads its own process group, so its pid ($$, kept by exec) is the group's
            # id: a fault point (ADT_CRASH_AT) kills the whole worker with it, as a lost machine.
            commands[name] = [
                "sh",
                "-c",
                'export ADT_CRASH_KILL_PGID=$$; exec "$0" "$@"',
                airflow,
                "celery",
                "worker",
                "--celery-hostname",
                f"{name}@%h",
                "--skip-serve-logs",
                "--without-mingle",
                "--without-gossip",
            ]
        return commands

    def service_env(self, name: str) -> dict[str, str]:
        env = {"ADT_STACK_HOSTNAME": HOSTNAMES[name]} if name in HOSTNAMES else {}
        env.update(self.worker_env.get(name, {}))
        return env

    def own_process_group(self, name: str) -> bool:
        return name in WORKERS or name in TRIGGERERS

    def wait_healthy(self, timeout: float = 180.0) -> dict[str, object]:
        health = super().wait_healthy(timeout)
        self.wait_workers(WORKERS, timeout)
        return health

    def wait_workers(self, names: tuple[str, ...] | list[str], timeout: float = 180.0) -> None:
        """Wait until each named Celery worker says ``ready`` in its log."""
        deadline = time.monotonic() + timeout
        for name in names:
            while f"{name}@" not in self._ready_lines(name):
                proc = self.processes[name]
                if proc.poll() is not None:
                    raise AirflowServicesError(
                        f"{name} exited with {proc.returncode}:\n{self.log_tail(name)}"
                    )
                if time.monotonic() > deadline:
                    raise AirflowServicesError(
                        f"{name} not ready after {timeout:.0f} s:\n{self.log_tail(name)}"
                    )
                time.sleep(1)

    def _ready_lines(self, name: str) -> str:
        path = self.log_dir / f"{name}.log"
        text = path.read_text(errors="replace") if path.exists() else ""
        # only the current run of the service (a restart appends to the same log)
        marker = text.rfind("-------------- ")
        return "\n".join(line for line in text[max(0, marker) :].splitlines() if " ready." in line)
