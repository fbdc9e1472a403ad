"""The job's Python when nothing chooses one: the default job environment.

A SageMaker PyTorch image brings its own Python with torch, torchvision, numpy and AWS's toolkit,
apart from whatever runs the orchestrator. The local backend does the same: a virtualenv pinned by
``job_env_constraints.txt`` (torch 2.14.1 + torchvision 0.29.1, a pair that loads together),
built once by ``airflow-dist-training job-env`` under ``$ADT_JOB_ENVS`` (default
``~/.cache/airflow-dist-training/job-envs``). Like AWS's stock images it has nothing of this
provider: a script that imports the checkpoint helper ships it (``source.dependencies``).
The worker's own environment is left as it is: on x86_64 PyPI's torchvision is a CUDA build
that cannot load beside a CPU torch, and the pair that does load is a ~5.7 GB install that only
the jobs need.

Which interpreter runs a job, first match wins:

1. the spec's ``local.python`` (per image URI, framework-version, framework or ``default``);
2. the hook's ``python`` argument;
3. ``$ADT_LOCAL_PYTHON``;
4. the default job environment, once built;
5. the worker's own interpreter (the job log says what it lacks and how to build the default).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import subprocess
import sys
import venv
from collections.abc import Callable, Mapping
from importlib import resources
from pathlib import Path

CONSTRAINTS = "job_env_constraints.txt"
PACKAGES = ("torch", "torchvision", "numpy", "sagemaker-training", "sagemaker-pytorch-training")
# imported once the environment is built: an install whose compiled ops do not load is not done
IMPORT_CHECK = (
    "import numpy, sagemaker_training, sagemaker_pytorch_container, torch, torchvision, torchvision.ops;"
    "torchvision.ops.nms(torch.zeros(1, 4), torch.ones(1), 0.5);"
    "print('torch', torch.__version__, 'torchvision', torchvision.__version__)"
)
STAMP = ".adt-job-env"


def envs_home(environ: Mapping[str, str] | None = None) -> Path:
    environ = os.environ if environ is None else environ
    if environ.get("ADT_JOB_ENVS"):
        return Path(environ["ADT_JOB_ENVS"]).expanduser()
    cache = environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache).expanduser() / "airflow-dist-training" / "job-envs"


def default_env_dir(environ: Mapping[str, str] | None = None) -> Path:
    return envs_home(environ) / "pytorch"


def constraints_text() -> str:
    return (resources.files("airflow_dist_training.local") / CONSTRAINTS).read_text()


def _wanted_stamp() -> str:
    return hashlib.sha256(constraints_text().encode()).hexdigest()


def built_python(env_dir: Path) -> Path | None:
    """The environment's interpreter when it is built from the current pins, else None."""
    python = env_dir / "bin" / "python"
    try:
        ready = (env_dir / STAMP).read_text().strip() == _wanted_stamp()
    except OSError:
        return None
    return python if ready and python.exists() else None


def job_python(explicit: str | None, environ: Mapping[str, str] | None = None) -> tuple[str, str]:
    """(interpreter, why) for a job; ``explicit`` is the spec's or the hook's choice."""
    environ = os.environ if environ is None else environ
    if explicit:
        return explicit, "chosen by the spec's local.python or the hook's python"
    if environ.get("ADT_LOCAL_PYTHON"):
        return str(Path(environ["ADT_LOCAL_PYTHON"]).expanduser()), "$ADT_LOCAL_PYTHON"
    env_dir = default_env_dir(environ)
    built = built_python(env_dir)
    if built is not None:
        return str(built), "the default job environment: torch, torchvision, numpy, AWS's toolkit"
    return sys.executable, (
        f"the worker's own interpreter: no default job environment at {env_dir}, so a script "
        "importing torchvision or numpy may fail here; `airflow-dist-training job-env` builds it"
    )


def build(
    env_dir: Path | None = None,
    *,
    base_python: str | None = None,
    log: Callable[[str], None] = print,
) -> Path:
    """Create or refresh the job environment at ``env_dir``; return its interpreter.

    Idempotent: a second call with the same pins does nothing. Two concurrent builds take turns.
    Raises ``RuntimeError`` with pip's last lines when the install fails."""
    env_dir = (env_dir or default_env_dir()).absolute()
    env_dir.parent.mkdir(parents=True, exist_ok=True)
    with open(env_dir.parent / f".{env_dir.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        ready = built_python(env_dir)
        if ready is not None:
            log(f"job environment up to date: {ready}")
            return ready
        python = env_dir / "bin" / "python"
        if not python.exists():
            if base_python:
                _run([base_python, "-m", "venv", str(env_dir)], "creating the venv")
            else:
                venv.EnvBuilder(with_pip=True).create(env_dir)
        pins = env_dir / CONSTRAINTS
        pins.write_text(constraints_text())
        log(
            f"installing {', '.join(PACKAGES)} into {env_dir} (pinned by {CONSTRAINTS}; minutes the first time)"
        )
        _run(
            [
                str(python),
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "-c",
                str(pins),
                *PACKAGES,
            ],
            "pip install",
        )
        log(_run([str(python), "-c", IMPORT_CHECK], "the import check").strip())
        (env_dir / STAMP).write_text(_wanted_stamp())
        return python


def _run(argv: list[str], what: str) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-15:])
        raise RuntimeError(f"{what} failed (exit code {done.returncode})" + (f":\n{tail}" if tail else ""))
    return done.stdout
