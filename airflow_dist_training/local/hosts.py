"""Simulated SageMaker hosts in Linux namespaces (see ``docs/local-backend.md``).

One network namespace per job, so two jobs never clash; in it every host gets its own mount
(``/opt/ml`` through an overlay on ``/opt``), UTS (``algo-N``) and PID namespace (a stop leaves no
process behind). A tiny stdlib-only process (:data:`HOLDER`) holds the job's namespace and runs the
inside end of the relays that make services on the machine's ``127.0.0.1:<port>`` reachable from
the job at the same address. Where :func:`probe` finds namespaces unavailable, the executor falls
back to the relocated layout and warns once (``ADT_LOCAL_ISOLATION``: ``none`` or ``namespaces``).
With namespaces the job environment (a virtualenv, and those it is a layer over) is the image's
``/opt/conda`` (:func:`image_env`): no path of this machine in what the job's Python sees.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import logging
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

MASTER_PORT = 7777
ISOLATION_ENV = "ADT_LOCAL_ISOLATION"
FALLBACK_WARNING = (
    "Linux namespaces are not available here ({why}): the local backend runs every simulated host "
    "in a relocated layout under the job folder. What will not work: scripts that open fixed "
    "/opt/ml/... paths, and scripts that use host names (algo-1, SM_HOSTS, SM_MASTER_ADDR) as "
    "network addresses; read paths from the SM_* variables instead."
)


def _pipe(a: socket.socket, b: socket.socket) -> None:
    try:
        with contextlib.suppress(OSError):
            while data := a.recv(65536):
                b.sendall(data)
    finally:
        for s in (a, b):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)


def _relay(srv: socket.socket, connect: Callable[[], socket.socket]) -> None:
    """Until ``srv`` is closed: pipe each connection it accepts both ways to a new ``connect()``."""
    while True:
        try:
            conn, _ = srv.accept()
        except OSError:
            return
        try:
            out = connect()
        except OSError:
            conn.close()
            continue
        for a, b in ((conn, out), (out, conn)):
            threading.Thread(target=_pipe, args=(a, b), daemon=True).start()


# Inside the job's network namespace: bring loopback up, serve the relays, live until stdin closes.
# Stdlib only, with the two functions above (the relays' other ends use them too).
HOLDER = (
    "from __future__ import annotations\nimport contextlib, os, socket, subprocess, sys, threading\n"
    + inspect.getsource(_pipe)
    + inspect.getsource(_relay)
    + r"""
def lo_up():
    try:
        subprocess.run(["ip", "link", "set", "lo", "up"], check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError):
        import fcntl, struct
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        ifr = struct.pack("16sH14s", b"lo", 0, b"")
        flags = struct.unpack("16sH14s", fcntl.ioctl(s, 0x8913, ifr))[1]
        fcntl.ioctl(s, 0x8914, struct.pack("16sH14s", b"lo", flags | 1, b""))
def unix(path):
    out = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    out.connect(path)
    return out
def serve(port, path):
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", port))
    srv.listen(64)
    _relay(srv, lambda: unix(path))
lo_up()
for spec in sys.argv[1:]:
    port, path = spec.split("=", 1)
    threading.Thread(target=serve, args=(int(port), path), daemon=True).start()
print("ready", flush=True)
sys.stdin.read()
"""
)

CONDA = "/opt/conda"  # where a SageMaker framework image has its Python environment
CONDA_BASE = f"{CONDA}/.base"  # the job environment's base interpreter (its venv's ``home``)
CONDA_REQUIREMENTS = f"{CONDA}/.requirements"  # the code's installed requirements.txt

# After /opt is an overlay on the tmpfs $1: the job environment at /opt/conda (an overlay of its
# folders under a writable layer that vanishes with the host, as a container's), its base
# interpreter at /opt/conda/.base, the code's requirements at /opt/conda/.requirements.
MOUNT_CONDA = r"""
# /opt as the image has it, writable into a tmpfs at $1, with the job's /opt/ml ($2) bound in
mount_opt() {
  mount -t tmpfs tmpfs "$1"
  mkdir -p "$1/upper" "$1/work"
  mount -t overlay overlay -o "lowerdir=/opt,upperdir=$1/upper,workdir=$1/work" /opt
  mkdir -p /opt/ml
  mount --bind "$2" /opt/ml
}
mount_conda() {
  [ -n "$2" ] || return 0
  mkdir -p "$1/conda-upper" "$1/conda-work" /opt/conda
  mount -t overlay overlay -o "lowerdir=$2,upperdir=$1/conda-upper,workdir=$1/conda-work" /opt/conda
  mkdir -p /opt/conda/.base
  mount --bind "$3" /opt/conda/.base
  if [ -n "$4" ]; then
    mkdir -p /opt/conda/.requirements
    mount --bind "$4" /opt/conda/.requirements
  fi
}
"""

# Inside a host's own mount/UTS/PID namespaces. The entrypoint replaces this shell as PID 1, as in
# a container: a stop's SIGTERM reaches it only if it handles SIGTERM (the kernel's rule for PID 1).
HOST_SETUP = (
    MOUNT_CONDA
    + r"""
set -e
host=$1; optml=$2; ovl=$3; hostsfile=$4; workdir=$5; shared=$6; conda=$7; base=$8; reqs=$9; shift 9
hostname "$host"
mount --bind "$hostsfile" /etc/hosts
mount_opt "$ovl" "$optml"
mount_conda "$ovl" "$conda" "$base" "$reqs"
# File-mode channels are the same on every host: one copy, mounted read-write as on SageMaker
if [ -n "$shared" ] && [ "$shared" != "$optml/input/data" ]; then
  mkdir -p /opt/ml/input/data
  mount --bind "$shared" /opt/ml/input/data
fi
cd "$workdir"
exec "$@"
"""
)

# A processing container (local/processing.py): its own mount namespace (the machine's network),
# /opt/ml and /opt/conda.
PROCESSING_SETUP = (
    MOUNT_CONDA
    + r"""
set -e
scratch=$1; optml=$2; conda=$3; base=$4; shift 4
mount_opt "$scratch" "$optml"
mount_conda "$scratch" "$conda" "$base" ""
# then "<folder> <path under /opt/ml>" pairs up to "--": folders of this machine the job sees there
while [ "$1" != "--" ]; do
  mount --bind "$1" "$2"
  shift 2
done
shift
cd /
exec "$@"
"""
)


@dataclass(frozen=True)
class ImageEnv:
    """A job environment as the image's ``/opt/conda``: the overlay's folders, top first (a shadow
    of the files that name this machine, the venv, the venvs it is a layer over), and its base
    interpreter's installation (mounted at :data:`CONDA_BASE`)."""

    lowers: tuple[str, ...]
    base: str
    python: str = f"{CONDA}/bin/python"


def _venv_config(env: Path) -> dict[str, str]:
    lines = (env / "pyvenv.cfg").read_text().splitlines()
    return {k.strip(): v.strip() for k, sep, v in (line.partition("=") for line in lines) if sep}


def _layer_bases(env: Path) -> tuple[list[Path], Path | None]:
    """The ``.pth`` files of ``env`` that put another venv's site-packages on ``sys.path`` (a layer,
    local/job_env.py), and that venv."""
    found: list[Path] = []
    base: Path | None = None
    for pth in sorted(env.glob("lib/python*/site-packages/*.pth")):
        lines = [line.strip() for line in pth.read_text(errors="replace").splitlines() if line.strip()]
        if len(lines) != 1 or not lines[0].startswith("/"):
            continue
        other = Path(lines[0]).parent.parent.parent
        if (other / "pyvenv.cfg").is_file() and other != env:
            found.append(pth.relative_to(env))
            base = other
    return found, base


def image_env(python: str, shadow: Path) -> ImageEnv | None:
    """``python``'s virtualenv as the image's ``/opt/conda`` (None: not a venv, or one that cannot be
    mounted). Writes ``shadow``: its ``pyvenv.cfg`` naming the base interpreter at
    :data:`CONDA_BASE`, its layers' ``.pth`` files emptied (the bases are merged into the same
    folders) and the scripts whose first line names the venv's folder (``#!<venv>/bin/python``)."""
    env = Path(python).parent.parent
    if Path(python).parent.name != "bin" or not (env / "pyvenv.cfg").is_file():
        return None
    chain = [env]
    emptied: list[Path] = []
    while True:
        pths, base = _layer_bases(chain[-1])
        emptied += pths
        if base is None or base in chain:
            break
        chain.append(base)
    home = Path(_venv_config(env).get("home", ""))
    if home.name != "bin" or not home.is_absolute() or any(c in str(p) for p in [*chain, home] for c in ":,"):
        return None
    shutil.rmtree(shadow, ignore_errors=True)
    shadow.mkdir(parents=True)
    config = {**_venv_config(env), "home": f"{CONDA_BASE}/bin"}
    config.pop("command", None)  # how it was created: this machine's paths
    if "executable" in config:
        config["executable"] = f"{CONDA_BASE}/bin/{Path(config['executable']).name}"
    (shadow / "pyvenv.cfg").write_text("".join(f"{k} = {v}\n" for k, v in config.items()))
    for rel in emptied:
        (shadow / rel).parent.mkdir(parents=True, exist_ok=True)
        (shadow / rel).write_text("")
    _shadow_scripts(chain, shadow / "bin")
    return ImageEnv(lowers=(str(shadow), *map(str, chain)), base=str(home.parent))


def _shadow_scripts(chain: list[Path], out: Path) -> None:
    """Copies in ``out`` of the venvs' scripts that name their venv's folder (console scripts'
    ``#!<venv>/bin/python``, ``activate``), naming ``/opt/conda`` instead."""
    seen: set[str] = set()
    for venv in chain:  # the top venv's script wins, as in the overlay
        folder = venv / "bin"
        for script in sorted(folder.iterdir()) if folder.is_dir() else []:
            if script.name in seen or script.is_symlink() or not script.is_file():
                continue
            seen.add(script.name)
            text = script.read_bytes() if script.stat().st_size <= 1 << 16 else b""
            if str(venv).encode() in text:
                out.mkdir(exist_ok=True)
                (out / script.name).write_bytes(text.replace(str(venv).encode(), CONDA.encode()))
                (out / script.name).chmod(script.stat().st_mode & 0o7777)


@dataclass(frozen=True)
class Isolation:
    """The outcome of :func:`probe`: ``mode`` is ``namespaces`` or ``none``."""

    mode: str
    user_namespace: bool = False  # not root: everything runs in an unprivileged user namespace
    why: str = ""

    @property
    def namespaces(self) -> bool:
        return self.mode == "namespaces"


def unshare_prefix(user: bool) -> list[str]:
    return ["unshare", "--user", "--map-root-user"] if user else ["unshare"]


@functools.lru_cache(maxsize=4)
def _probe(requested: str) -> Isolation:
    if requested == "none":
        return Isolation("none", why=f"{ISOLATION_ENV}=none")
    if not sys.platform.startswith("linux"):
        return Isolation("none", why=f"{sys.platform} has no Linux namespaces")
    missing = [tool for tool in ("unshare", "nsenter", "hostname", "mount") if shutil.which(tool) is None]
    if missing or not Path("/opt").is_dir():
        return Isolation("none", why=f"missing {', '.join(missing) or '/opt'}")
    user = os.geteuid() != 0
    with tempfile.TemporaryDirectory(prefix="adt-probe-") as tmp:
        script = (
            f"hostname algo-probe && mount -t tmpfs tmpfs {tmp} && mkdir {tmp}/u {tmp}/w && "
            f"mount -t overlay overlay -o lowerdir=/opt,upperdir={tmp}/u,workdir={tmp}/w /opt"
        )
        cmd = [
            *unshare_prefix(user),
            "--net", "--mount", "--uts", "--pid", "--fork", "--kill-child", "--mount-proc",
            "--propagation", "private", "--", "/bin/sh", "-c", script,
        ]  # fmt: skip
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=20, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return Isolation("none", why=f"unshare failed: {exc}")
    if done.returncode != 0:
        why = (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1]
        return Isolation("none", why=f"unshare refused: {why}")
    return Isolation("namespaces", user_namespace=user)


def probe(requested: str | None = None) -> Isolation:
    """Whether simulated hosts can run in namespaces here (probed once per process and setting)."""
    value = (requested or os.environ.get(ISOLATION_ENV) or "auto").strip().lower()
    if value not in ("auto", "namespaces", "none"):
        raise ValueError(f"{ISOLATION_ENV} must be auto, namespaces or none, got {value!r}")
    result = _probe("none" if value == "none" else "auto")
    if value == "namespaces" and not result.namespaces:
        raise RuntimeError(f"namespaces were required ({ISOLATION_ENV}=namespaces) but {result.why}")
    return result


_WARNED: set[str] = set()
_WARN_LOCK = threading.Lock()


def warn_fallback_once(isolation: Isolation) -> str | None:
    """The fallback warning, the first time only (per process); None afterwards."""
    with _WARN_LOCK:
        if isolation.namespaces or "fallback" in _WARNED:
            return None
        _WARNED.add("fallback")
    return FALLBACK_WARNING.format(why=isolation.why)


def loopback_ports(environ: Mapping[str, str]) -> list[int]:
    """Ports of endpoint URLs on 127.0.0.1/localhost (the S3 endpoint, the SageMaker test endpoint)."""
    keys = ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "S3_ENDPOINT_URL", "AWS_ENDPOINT_URL_SAGEMAKER")
    loopback = re.compile(r"https?://(?:127\.0\.0\.1|localhost):(\d+)")
    return [int(m.group(1)) for key in keys if (m := loopback.match(environ.get(key, "")))]


def available_cpus() -> int:
    """The cores this process may run on (its affinity), as a host's ``SM_NUM_CPUS``."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def hosts_file(hosts: list[str]) -> str:
    lines = ["127.0.0.1\tlocalhost", "::1\tlocalhost ip6-localhost ip6-loopback"]
    # one loopback address per host: algo-1 is 127.0.0.2, algo-2 127.0.0.3, ...
    lines += [f"127.0.0.{i + 2}\t{h}" for i, h in enumerate(hosts)]
    return "\n".join(lines) + "\n"


class JobNetwork:
    """The job's network namespace (held by a small process) and its relays to host services."""

    def __init__(self, job_dir: Path, hosts: list[str], isolation: Isolation, relay_ports: list[int]) -> None:
        self.isolation = isolation
        self.relay_ports = sorted(set(relay_ports))
        self.net_dir = job_dir / ".net"
        self.hosts_path = self.net_dir / "hosts"
        self.holder: subprocess.Popen[str] | None = None
        self._servers: list[socket.socket] = []
        self.hosts = hosts
        self.setup_seconds = 0.0

    def start(self) -> None:
        started = time.perf_counter()
        self.net_dir.mkdir(parents=True, exist_ok=True)
        self.hosts_path.write_text(hosts_file(self.hosts))
        specs = []
        # unix socket paths are limited to ~107 bytes: keep them in a short temporary directory
        self._sock_dir = Path(tempfile.mkdtemp(prefix="adt-relay-"))
        for port in self.relay_ports:
            path = str(self._sock_dir / f"{port}.sock")
            srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            srv.bind(path)
            srv.listen(64)
            self._servers.append(srv)
            connect = functools.partial(_connect_tcp, port)
            threading.Thread(target=_relay, args=(srv, connect), daemon=True).start()
            specs.append(f"{port}={path}")
        self.holder = subprocess.Popen(
            [
                *unshare_prefix(self.isolation.user_namespace),
                "--net",
                "--",
                sys.executable,
                "-c",
                HOLDER,
                *specs,
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        assert self.holder.stdout is not None
        line = self.holder.stdout.readline().strip()
        if line != "ready":
            err = self.holder.stderr.read() if self.holder.stderr else ""
            self.close()
            raise RuntimeError(f"could not create the job's network namespace: {line} {err}".strip())
        self.setup_seconds = time.perf_counter() - started

    def host_command(
        self,
        host: str,
        opt_ml: Path,
        command: list[str],
        *,
        workdir: str = "/",
        shared_data: str = "",
        image: ImageEnv | None = None,
        requirements: str = "",
    ) -> list[str]:
        """Run ``command`` as host ``host`` (own mount/UTS/PID namespaces) inside the job's network,
        in ``workdir``; ``shared_data``: the one copy of the File-mode channels, mounted at
        ``/opt/ml/input/data``; ``image``: the job environment, mounted at ``/opt/conda`` (with
        ``requirements`` at :data:`CONDA_REQUIREMENTS`). Arguments of the wrapper, not variables:
        the job's environment is the image's and SageMaker's only."""
        assert self.holder is not None
        ovl = self.net_dir / "ovl" / host
        ovl.mkdir(parents=True, exist_ok=True)
        setup = self.net_dir / "host-setup.sh"
        if not setup.exists():
            setup.write_text(HOST_SETUP)
        enter = ["nsenter", f"--target={self.holder.pid}", "--net"]
        if self.isolation.user_namespace:
            enter += ["--user", "--preserve-credentials"]
        return [
            *enter, "--",
            "unshare", "--mount", "--uts", "--pid", "--fork", "--kill-child", "--mount-proc",
            "--propagation", "private", "--",
            "/bin/sh", str(setup), host, str(opt_ml), str(ovl), str(self.hosts_path), workdir, shared_data,
            ":".join(image.lowers) if image else "", image.base if image else "", requirements,
            *command,
        ]  # fmt: skip

    def listening(self, port: int) -> bool:
        """Whether something listens on ``port`` inside the job's network namespace."""
        if self.holder is None:
            return False
        for table in ("tcp", "tcp6"):
            with contextlib.suppress(OSError):
                for line in Path(f"/proc/{self.holder.pid}/net/{table}").read_text().splitlines()[1:]:
                    fields = line.split()
                    if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                        return True
        return False

    def refused_connections(self) -> int:
        """TCP connection attempts refused inside the job so far (``Tcp: AttemptFails``)."""
        if self.holder is None:
            return 0
        try:
            lines = [
                line.split() for line in Path(f"/proc/{self.holder.pid}/net/snmp").read_text().splitlines()
            ]
        except OSError:
            return 0
        tcp = [fields for fields in lines if fields and fields[0] == "Tcp:"]
        if len(tcp) < 2 or "AttemptFails" not in tcp[0]:
            return 0
        return int(tcp[1][tcp[0].index("AttemptFails")])

    def close(self) -> None:
        for srv in self._servers:
            with contextlib.suppress(OSError):
                srv.close()
        if self.holder is not None and self.holder.poll() is None:
            with contextlib.suppress(OSError):
                assert self.holder.stdin is not None
                self.holder.stdin.close()
            try:
                self.holder.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.holder.kill()
                self.holder.wait()
        if getattr(self, "_sock_dir", None) is not None:
            shutil.rmtree(self._sock_dir, ignore_errors=True)


def _connect_tcp(port: int) -> socket.socket:
    out = socket.create_connection(("127.0.0.1", port), timeout=10)
    out.settimeout(None)
    return out
