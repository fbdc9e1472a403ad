"""A SageMaker processing container on this machine: the one the test endpoint's processing jobs
and the local backend's evaluation run in.

With Linux namespaces (:mod:`~airflow_dist_training.local.hosts`) the command runs in a mount
namespace of its own (the machine's network): the job's folder ``<job_dir>/opt/ml`` is its
``/opt/ml``, the job environment is the image's ``/opt/conda`` and ``binds`` (a checkpoint folder,
the output folder) are mounted under ``/opt/ml``, so it sees no path of this machine. Without them
(the fallback, docs/local-backend.md), ``/opt/ml`` is that folder: the ``/opt/ml/`` prefix of the
command, the arguments and the environment values is rewritten to it, ``binds`` are symbolic
links, and :meth:`ProcessingContainer.public` shows the folders as ``/opt/ml`` and ``/opt/conda``
in the output.
"""

from __future__ import annotations

import re
import shlex
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from airflow_dist_training.local import hosts
from airflow_dist_training.local.job_env import IMAGE_PATH

OPT_ML = "/opt/ml"
_OPT_ML = re.compile(r"/opt/ml(?=/|\b|$)")
# the worker shell's state: never an image's
SHELL_STATE = ("PWD", "OLDPWD", "_")


class ProcessingContainer:
    """One processing container: call :meth:`start` once, then run :meth:`command` with
    :meth:`environ` in :attr:`cwd`.

    :param job_dir: the container's folder on this machine (its ``opt/ml``, the overlays' scratch).
    :param python: the job environment's interpreter, what ``python``/``python3`` start.
    """

    def __init__(self, job_dir: Path, python: str = sys.executable) -> None:
        self.job_dir = job_dir
        self.python = python
        self.contained = False  # in a mount namespace with /opt/ml and /opt/conda: nothing to rewrite
        self.wrapper: list[str] = []
        self.python_bin: list[str] = []

    @property
    def opt_ml(self) -> Path:
        return self.job_dir / "opt" / "ml"

    def local(self, value: str) -> str:
        """``/opt/ml/...`` in a command, argument or environment value -> this job's folder (as
        this machine sees it; the job itself, when contained)."""
        return _OPT_ML.sub(lambda _: str(self.opt_ml), value)

    def seen(self, value: str) -> str:
        """A command, argument or environment value as the job gets it."""
        return value if self.contained else self.local(value)

    def public(self, text: str) -> str:
        """``text`` (the job's output, a failure reason) as SageMaker would give it: no path of
        this machine (the job's folder is ``/opt/ml``, a virtualenv interpreter's environment the
        image's ``/opt/conda``)."""
        if self.contained:
            return text
        text = text.replace(str(self.opt_ml), OPT_ML)
        env = Path(self.python).parent.parent
        if (env / "pyvenv.cfg").is_file():
            text = text.replace(str(env), hosts.CONDA)
        return text.replace(self.python, "python3")

    @property
    def cwd(self) -> Path:
        return Path("/") if self.contained else self.job_dir

    def start(self, binds: Mapping[str, Path] | None = None) -> None:
        """Prepare the container: with namespaces, its setup script and ``/opt/conda``; without,
        ``python``/``python3`` shims in its folder (a virtualenv's interpreter must be started by
        its own path, not through a symlink). ``binds``: container path under ``/opt/ml`` -> a
        folder of this machine, that the job sees there."""
        binds = dict(binds or {})
        if bad := [p for p in binds if not p.startswith(OPT_ML + "/")]:
            raise ValueError(f"binds must be under {OPT_ML}/: {bad}")
        self.opt_ml.mkdir(parents=True, exist_ok=True)
        isolation = hosts.probe()
        image = hosts.image_env(self.python, self.job_dir / "conda") if isolation.namespaces else None
        if image is not None:
            self.contained = True
            setup = self.job_dir / "setup.sh"
            setup.write_text(hosts.PROCESSING_SETUP)
            scratch = self.job_dir / "ovl"
            scratch.mkdir(exist_ok=True)
            mounts: list[str] = []
            for inside, source in binds.items():
                Path(self.local(inside)).mkdir(parents=True, exist_ok=True)  # the mount point
                mounts += [str(source), inside]
            self.wrapper = [
                *hosts.unshare_prefix(isolation.user_namespace), "--mount", "--propagation", "private",
                "--", "/bin/sh", str(setup), str(scratch), str(self.opt_ml), ":".join(image.lowers), image.base,
                *mounts, "--",
            ]  # fmt: skip
            self.python_bin = [str(Path(image.python).parent)]
            return
        for inside, source in binds.items():
            link = Path(self.local(inside))
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(source, target_is_directory=True)
        shims = self.job_dir / "bin"
        shims.mkdir(parents=True, exist_ok=True)
        for name in ("python", "python3"):
            shim = shims / name
            shim.write_text(f'#!/bin/sh\nexec {shlex.quote(self.python)} "$@"\n')
            shim.chmod(0o755)
        self.python_bin = [str(shims), str(Path(self.python).parent)]

    def command(self, argv: Sequence[str]) -> list[str]:
        """``argv`` (the container's entrypoint and arguments) as this machine starts it."""
        return [*self.wrapper, *(self.seen(a) for a in argv)]

    def environ(self, base: Mapping[str, str], job: Mapping[str, str]) -> dict[str, str]:
        """The job's environment: ``base`` (what the image gives it) with ``python`` first on
        ``PATH``, then ``job`` (the request's variables). Contained, nothing of this machine: not its
        ``PATH``, its shell's state or Airflow's settings."""
        env = dict(base)
        path = env.get("PATH", IMAGE_PATH)
        if self.contained:
            env = {k: v for k, v in env.items() if not k.startswith("AIRFLOW") and k not in SHELL_STATE}
            path = IMAGE_PATH
        env["PATH"] = ":".join([*self.python_bin, path])
        env["PYTHONUNBUFFERED"] = "1"
        env.update({k: self.seen(str(v)) for k, v in job.items()})
        return env
