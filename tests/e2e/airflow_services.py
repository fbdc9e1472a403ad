"""Real Airflow services on 127.0.0.1 for end-to-end tests, and a small REST API v2 client.

``AirflowServices`` runs ``airflow db migrate`` in a temporary ``AIRFLOW_HOME`` and then starts
Airflow's own four services - ``api-server``, ``scheduler`` (LocalExecutor), ``dag-processor`` and
``triggerer`` - as separate commands in ONE process group, so that ``stop()`` can end all of them
(and the task processes the LocalExecutor forks) with a single ``killpg``. Authentication is the
SimpleAuthManager with one admin user whose password is written to the AIRFLOW_HOME's
``simple_auth_manager_passwords.json.generated`` before start (the file Airflow itself would
generate), so tests and scripts read it from there.

DAGs come from two local DAG bundles: ``dags-folder`` = the repository's ``dags/`` and ``e2e-dags``
= ``tests/e2e/dags/`` (the harness's own tiny DAG), so an import error in one never hides the other.

``AirflowApi`` is what a browser's trigger form does, as HTTP: ``POST /auth/token`` for a JWT,
then ``/api/v2/...`` with ``Authorization: Bearer``. It uses only ``httpx`` (installed with Airflow).

This module does not import Airflow, so ``scripts/screenshot_trigger_form.py`` can use it too.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests.paths import REPO

REPO_ROOT = REPO
E2E_DAGS = Path(__file__).resolve().parent / "dags"
SERVICES = ("api-server", "scheduler", "dag-processor", "triggerer")
TERMINAL_RUN_STATES = {"success", "failed"}
ADMIN_USER = "admin"


class AirflowServicesError(RuntimeError):
    """The services did not come up, or a run did not reach the expected state."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _fernet_key() -> str:
    return base64.urlsafe_b64encode(os.urandom(32)).decode()


@dataclass
class AirflowServices:
    """Airflow's api-server, scheduler, dag-processor and triggerer on 127.0.0.1.

    :param home: the (empty, temporary) AIRFLOW_HOME to use.
    :param dags_folder: the ``dags-folder`` bundle (``[core] dags_folder``); default the repo's ``dags/``.
    :param extra_bundles: more local DAG bundles, name -> path; default ``{"e2e-dags": tests/e2e/dags}``.
    :param extra_env: extra environment for every service (``AIRFLOW_CONN_*``, ``AWS_ENDPOINT_URL``, ...).
    :param port: the api-server port; default a free one.
    """

    home: Path
    dags_folder: Path = REPO_ROOT / "dags"
    extra_bundles: dict[str, Path] = field(default_factory=lambda: {"e2e-dags": E2E_DAGS})
    extra_env: dict[str, str] = field(default_factory=dict)
    port: int = 0
    password: str = field(default_factory=lambda: secrets.token_urlsafe(12))
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    pgid: int | None = None
    own_groups: dict[str, int] = field(default_factory=dict)  # services with their own process group
    startup_seconds: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.home = Path(self.home)
        if not self.port:
            self.port = free_port()

    # -- configuration -------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def passwords_file(self) -> Path:
        return self.home / "simple_auth_manager_passwords.json.generated"

    @property
    def log_dir(self) -> Path:
        return self.home / "service-logs"

    def environment(self) -> dict[str, str]:
        """The services' environment: inherited minus any ``AIRFLOW__*``, plus the test config."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW__") and k != "AIRFLOW_HOME"}
        bundles = [
            {
                "name": "dags-folder",
                "classpath": "airflow.dag_processing.bundles.local.LocalDagBundle",
                "kwargs": {},
            },
            *(
                {
                    "name": name,
                    "classpath": "airflow.dag_processing.bundles.local.LocalDagBundle",
                    "kwargs": {"path": str(path)},
                }
                for name, path in self.extra_bundles.items()
            ),
        ]
        env.update(
            {
                "AIRFLOW_HOME": str(self.home),
                "AIRFLOW__CORE__DAGS_FOLDER": str(self.dags_folder),
                "AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST": json.dumps(bundles),
                "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
                "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
                "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
                "AIRFLOW__CORE__PARALLELISM": "4",
                # paused: a scheduled DAG of dags/ must not run by itself (the YAML demo pipeline would
                # write its data and registry under the repository's .adt-demo); tests unpause theirs
                "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "True",
                "AIRFLOW__CORE__FERNET_KEY": _fernet_key(),
                "AIRFLOW__CORE__AUTH_MANAGER": (
                    "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager"
                ),
                "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{ADMIN_USER}:admin",
                "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(self.passwords_file),
                "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{self.base_url}/execution/",
                "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{self.home}/airflow.db",
                "AIRFLOW__API__HOST": "127.0.0.1",
                "AIRFLOW__API__PORT": str(self.port),
                "AIRFLOW__API__BASE_URL": self.base_url,
                "AIRFLOW__API__WORKERS": "1",
                "AIRFLOW__API__SECRET_KEY": secrets.token_hex(16),
                "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_hex(32),
                "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(free_port()),
                "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(free_port()),
                "PYTHONUNBUFFERED": "1",
            }
        )
        env.update(self.extra_env)
        return env

    # -- lifecycle -----------------------------------------------------------------------------

    def _airflow(self) -> str:
        candidate = Path(sys.executable).parent / "airflow"
        return str(candidate) if candidate.exists() else "airflow"

    def commands(self) -> dict[str, list[str]]:
        """The services to start, name -> command line (subclasses add triggerers and workers)."""
        return {name: [self._airflow(), name] for name in SERVICES}

    def service_env(self, name: str) -> dict[str, str]:
        """Extra environment for one service (subclasses: a hostname per triggerer and worker)."""
        return {}

    def own_process_group(self, name: str) -> bool:
        """Whether ``name`` runs in its own process group, so that it can be killed with its
        children (a lost machine) while the others keep running."""
        return False

    def start(self, timeout: float = 180.0) -> AirflowServices:
        """Migrate the DB, start the services, and wait until ``/api/v2/monitor/health`` is all healthy."""
        t0 = time.monotonic()
        self.home.mkdir(parents=True, exist_ok=True)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.passwords_file.write_text(json.dumps({ADMIN_USER: self.password}) + "\n")
        env = self.environment()
        self._env = env
        with open(self.log_dir / "db-migrate.log", "wb") as out:
            rc = subprocess.run(
                [self._airflow(), "db", "migrate"], env=env, stdout=out, stderr=subprocess.STDOUT, timeout=300
            ).returncode
        if rc != 0:
            raise AirflowServicesError(f"airflow db migrate failed:\n{self.log_tail('db-migrate')}")
        self.startup_seconds["db_migrate"] = time.monotonic() - t0
        t1 = time.monotonic()
        try:
            for name in self.commands():
                self.start_service(name)
            self.wait_healthy(timeout=timeout)
        except BaseException:
            self.stop()
            raise
        self.startup_seconds["services"] = time.monotonic() - t1
        self.startup_seconds["total"] = time.monotonic() - t0
        return self

    def start_service(self, name: str, extra_env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        """Start (or restart) one service; its output is appended to ``service-logs/<name>.log``."""
        env = {**self._env, **self.service_env(name), **(extra_env or {})}
        # The first service leads a new process group; the others join it (same session, which
        # setpgid requires), so one killpg reaches all of them and their children.
        own = self.pgid is None or self.own_process_group(name)
        with open(self.log_dir / f"{name}.log", "ab") as out:
            proc = subprocess.Popen(
                self.commands()[name],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=str(self.home),
                process_group=0 if own else self.pgid,
            )
        self.processes[name] = proc
        if self.pgid is None:
            self.pgid = os.getpgid(proc.pid)
        elif own:
            self.own_groups[name] = os.getpgid(proc.pid)
        return proc

    def kill_service(self, name: str, sig: signal.Signals = signal.SIGKILL, timeout: float = 60.0) -> None:
        """Send ``sig`` to one service (to its whole process group if it has its own) and wait
        until its main process has exited. A service still running ``timeout`` seconds after a
        catchable signal gets SIGKILL, as Kubernetes does after a pod's grace period: Airflow's
        scheduler can swallow its own SIGTERM exit (its handler's ``sys.exit`` raised inside a
        garbage-collector callback is "Exception ignored in: <function _collection_gced>")."""
        proc = self.processes[name]
        group = self.own_groups.pop(name, None)

        def send(signal_: signal.Signals) -> None:
            if group is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(group, signal_)
            else:
                proc.send_signal(signal_)

        send(sig)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            if sig == signal.SIGKILL:
                raise
            print(f"\n{name} still running {timeout:.0f} s after {sig.name}: SIGKILL (the grace period is over)")
            send(signal.SIGKILL)
            proc.wait(timeout=timeout)

    def health(self) -> dict[str, Any] | None:
        try:
            response = httpx.get(f"{self.base_url}/api/v2/monitor/health", timeout=5)
        except httpx.HTTPError:
            return None
        return response.json() if response.status_code == 200 else None

    def wait_healthy(self, timeout: float = 180.0) -> dict[str, Any]:
        """Wait until the metadatabase, scheduler, triggerer and dag-processor all report healthy."""
        deadline = time.monotonic() + timeout
        last: dict[str, Any] | None = None
        while time.monotonic() < deadline:
            for name, proc in self.processes.items():
                if proc.poll() is not None:
                    raise AirflowServicesError(
                        f"airflow {name} exited with {proc.returncode}:\n{self.log_tail(name)}"
                    )
            last = self.health()
            if last and all(
                (last.get(part) or {}).get("status") == "healthy"
                for part in ("metadatabase", "scheduler", "triggerer", "dag_processor")
            ):
                return last
            time.sleep(1)
        raise AirflowServicesError(
            f"services not healthy after {timeout:.0f} s: {last}\n{self.all_log_tails()}"
        )

    def stop(self, grace: float = 20.0) -> None:
        """SIGTERM every process group, then SIGKILL whatever is left after ``grace`` seconds."""
        if self.pgid is None:
            return
        groups = [self.pgid, *self.own_groups.values()]
        self.pgid = None
        self.own_groups.clear()
        for group in groups:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(group, signal.SIGTERM)
        deadline = time.monotonic() + grace
        for proc in self.processes.values():
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        for group in groups:  # stragglers: task runners, gunicorn/uvicorn workers, Celery pool processes
            with contextlib.suppress(ProcessLookupError):
                os.killpg(group, signal.SIGKILL)
        for proc in self.processes.values():
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass

    def __enter__(self) -> AirflowServices:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- diagnostics ---------------------------------------------------------------------------

    def log_tail(self, name: str, lines: int = 60) -> str:
        path = self.log_dir / f"{name}.log"
        if not path.exists():
            return f"({path} missing)"
        text = path.read_text(errors="replace").splitlines()
        return "\n".join(text[-lines:])

    def all_log_tails(self, lines: int = 30) -> str:
        return "\n".join(f"--- {name} ---\n{self.log_tail(name, lines)}" for name in self.commands())

    def api(self) -> AirflowApi:
        """A REST client logged in as the admin user."""
        return AirflowApi(self.base_url, ADMIN_USER, self.password)

    def screenshot_trigger_form(self, dag_id: str, out: Path) -> int:
        """``scripts/screenshot_trigger_form.py`` against these services (Debian ``chromium``)."""
        from scripts.screenshot_trigger_form import main as screenshot

        # ``--password=``: a generated password may start with "-"
        args = [
            "--dag-id",
            dag_id,
            "--out",
            str(out),
            "--base-url",
            self.base_url,
            f"--password={self.password}",
        ]
        return int(screenshot(args))


class AirflowApi:
    """The Airflow REST API v2 as the UI uses it: a JWT from ``POST /auth/token``, then ``/api/v2``.

    :param base_url: e.g. ``http://127.0.0.1:8080``.
    :param username: a SimpleAuthManager user.
    :param password: that user's password.
    """

    def __init__(self, base_url: str, username: str, password: str) -> None:
        self.base_url = base_url.rstrip("/")
        self.username = username
        self.password = password
        self._token: str | None = None
        self.client = httpx.Client(base_url=self.base_url, timeout=30)

    @property
    def token(self) -> str:
        """A JWT for the user (``POST /auth/token``), fetched once and reused."""
        if self._token is None:
            response = self.client.post(
                "/auth/token", json={"username": self.username, "password": self.password}
            )
            if response.status_code not in (200, 201):
                raise AirflowServicesError(f"POST /auth/token: {response.status_code} {response.text}")
            self._token = str(response.json()["access_token"])
        return self._token

    def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """Any ``/api/v2`` call with the bearer token; returns the response whatever its status."""
        headers = {"Authorization": f"Bearer {self.token}", **kwargs.pop("headers", {})}
        # SQLite under four services and running tasks: "database is locked" surfaces as a 500
        # "Database error"; retry those a few times (a real deployment uses PostgreSQL).
        for attempt in range(6):
            response = self.client.request(method, f"/api/v2{path}", headers=headers, **kwargs)
            if response.status_code != 500 or "Database error" not in response.text:
                return response
            time.sleep(0.5 * (attempt + 1))
        return response

    def get(self, path: str, **kwargs: Any) -> Any:
        response = self.request("GET", path, **kwargs)
        if response.status_code != 200:
            raise AirflowServicesError(f"GET {path}: {response.status_code} {response.text}")
        return response.json()

    def wait_for_dag(self, dag_id: str, timeout: float = 120.0) -> dict[str, Any]:
        """Wait until the dag-processor has parsed ``dag_id``; fail early with its import error."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            response = self.request("GET", f"/dags/{dag_id}")
            if response.status_code == 200:
                return dict(response.json())
            errors = self.import_errors()
            mine = [
                e for e in errors if dag_id in e.get("stack_trace", "") or dag_id in e.get("filename", "")
            ]
            if mine:
                raise AirflowServicesError(f"{dag_id} has an import error: {mine[0]['stack_trace']}")
            time.sleep(1)
        raise AirflowServicesError(
            f"DAG {dag_id} not parsed after {timeout:.0f} s; import errors: {self.import_errors()}"
        )

    def import_errors(self) -> list[dict[str, Any]]:
        return list(self.get("/importErrors").get("import_errors", []))

    def unpause(self, dag_id: str) -> None:
        response = self.request("PATCH", f"/dags/{dag_id}", json={"is_paused": False})
        if response.status_code != 200:
            raise AirflowServicesError(f"unpause {dag_id}: {response.status_code} {response.text}")

    def trigger(self, dag_id: str, conf: dict[str, Any] | None = None, **body: Any) -> httpx.Response:
        """``POST /api/v2/dags/{dag_id}/dagRuns`` as the trigger form sends it; returns the raw response.

        A 200 response's JSON is the new run (``dag_run_id``, ``state``, ``conf``); an invalid conf
        gives HTTP 400 with the Param's validation message in ``detail``.
        """
        payload: dict[str, Any] = {"logical_date": None, "conf": conf or {}, **body}
        return self.request("POST", f"/dags/{dag_id}/dagRuns", json=payload)

    def trigger_run(self, dag_id: str, conf: dict[str, Any] | None = None, **body: Any) -> str:
        """Trigger and return the ``dag_run_id``; raise on any non-200 response."""
        response = self.trigger(dag_id, conf, **body)
        if response.status_code != 200:
            raise AirflowServicesError(f"trigger {dag_id}: {response.status_code} {response.text}")
        return str(response.json()["dag_run_id"])

    def dag_run(self, dag_id: str, run_id: str) -> dict[str, Any]:
        return dict(self.get(f"/dags/{dag_id}/dagRuns/{run_id}"))

    def task_instances(self, dag_id: str, run_id: str) -> list[dict[str, Any]]:
        return list(self.get(f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances").get("task_instances", []))

    def task_log(
        self, dag_id: str, run_id: str, task_id: str, try_number: int = 1, map_index: int = -1
    ) -> str:
        """A task try's log as text, one line per structured log event (what the UI's log view shows)."""
        response = self.request(
            "GET",
            f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/logs/{try_number}",
            params={"full_content": "true", "map_index": map_index},
            headers={"Accept": "application/json"},
        )
        if response.status_code != 200:
            return f"(no log: {response.status_code} {response.text})"
        lines = []
        for entry in response.json().get("content", []):
            if isinstance(entry, dict):
                extra = {k: v for k, v in entry.items() if k not in ("event", "timestamp", "level", "logger")}
                line = f"{entry.get('timestamp', '')} {entry.get('level', '')} {entry.get('event', '')}"
                lines.append(f"{line} {extra}" if extra else line)
            else:
                lines.append(str(entry))
        return "\n".join(lines)

    def failure_report(self, dag_id: str, run_id: str) -> str:
        """States of every task, plus the logs of the tasks that did not succeed."""
        parts = []
        for ti in self.task_instances(dag_id, run_id):
            parts.append(f"{ti['task_id']}[{ti.get('map_index', -1)}]: {ti['state']}")
            if ti["state"] not in ("success", "skipped") and ti.get("try_number"):
                log = self.task_log(dag_id, run_id, ti["task_id"], ti["try_number"], ti.get("map_index", -1))
                parts.append(log[-6000:])
        return "\n".join(parts)

    def xcom(self, dag_id: str, run_id: str, task_id: str, key: str = "return_value") -> Any:
        """A task's XCom value (deserialised JSON)."""
        data = self.get(
            f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/xcomEntries/{key}",
            params={"deserialize": "true", "stringify": "false"},
        )
        return data["value"]

    def wait_for_run(
        self,
        dag_id: str,
        run_id: str,
        timeout: float = 300.0,
        expect: str | None = "success",
        poll: float = 2.0,
    ) -> dict[str, Any]:
        """Poll until the run is ``success`` or ``failed``; if ``expect`` differs, raise with task logs."""
        deadline = time.monotonic() + timeout
        run = self.dag_run(dag_id, run_id)
        while run["state"] not in TERMINAL_RUN_STATES:
            if time.monotonic() > deadline:
                raise AirflowServicesError(
                    f"{dag_id}/{run_id} still {run['state']} after {timeout:.0f} s\n"
                    f"{self.failure_report(dag_id, run_id)}"
                )
            time.sleep(poll)
            try:
                run = self.dag_run(dag_id, run_id)
            except httpx.TimeoutException:  # a starved api-server (loaded box) answers a poll late
                continue
        if expect is not None and run["state"] != expect:
            raise AirflowServicesError(
                f"{dag_id}/{run_id} ended {run['state']}, expected {expect}\n{self.failure_report(dag_id, run_id)}"
            )
        return run

    def close(self) -> None:
        self.client.close()
