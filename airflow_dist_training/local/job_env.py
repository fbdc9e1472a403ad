"""The job's environment: what a SageMaker image gives a job, and nothing of this provider.

A virtualenv built from a **recipe** (pinned packages and an import check), as an image brings its
own Python: provider code reaches a job only by being shipped with it. A missing or outdated one
is refused, never replaced by the worker's interpreter (docs/local-backend.md).

A recipe may be a **layer** over another (``base``), as AWS builds its Hugging Face image on its
PyTorch image: its venv sees the base environment's packages through a ``.pth`` file and installs
only its own, so torch (~5 GB with its CUDA wheels) is downloaded and stored once. The base lives
beside it (same parent folder) and is built first; rebuilding the base makes the layer outdated.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from airflow_dist_training.errors import Problem, SpecValidationError
from airflow_dist_training.spec.records import Records

STAMP = ".adt-job-env"
STAMP_FORMAT = 2
BUILD_COMMAND = "airflow-dist-training job-env"


@dataclass(frozen=True)
class JobEnvRecipe:
    """How to build the environment a family of images gives its jobs."""

    name: str  # the folder under $ADT_JOB_ENVS
    constraints: str  # a file in airflow_dist_training.local: every installed package pinned
    packages: tuple[str, ...]
    import_check: str  # run once built: an install whose compiled ops do not load is not done
    frameworks: frozenset[str]  # the spec's image.framework values it stands for
    image_repositories: tuple[str, ...]  # ECR repository names (or their prefixes) it stands for
    base: str | None = None  # the recipe this one is a layer over (its packages are shared, not copied)

    def constraints_text(self) -> str:
        return (resources.files("airflow_dist_training.local") / self.constraints).read_text()

    def base_recipe(self) -> JobEnvRecipe | None:
        return RECIPES.get(self.base, field="base") if self.base else None

    def pins_text(self) -> str:
        """Every pin the install is constrained by: a layer's own, then its base's for the packages the
        layer does not pin (so pip never replaces a base package, torch above all, unless told to)."""
        base = self.base_recipe()
        if base is None:
            return self.constraints_text()
        own = self.constraints_text()
        mine = {_pin_name(line) for line in own.splitlines()} - {None}
        kept = [line for line in base.pins_text().splitlines() if _pin_name(line) not in mine]
        return (
            own.rstrip("\n")
            + f"\n# the {base.name} environment's pins, for what this layer does not pin\n"
            + ("\n".join(line for line in kept if _pin_name(line)) + "\n")
        )

    def digest(self) -> str:
        """What defines the environment apart from its Python: recipe and pins (a layer's: its base's too)."""
        base = self.base_recipe()
        parts = [self.name, self.constraints_text(), "\n".join(self.packages), self.import_check]
        parts += [base.digest()] if base is not None else []
        return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def _pin_name(line: str) -> str | None:
    """The normalised package name a constraints line pins (None: a comment or a blank line)."""
    line = line.split("#", 1)[0].strip()
    if "==" not in line:
        return None
    return line.split("==", 1)[0].strip().lower().replace("_", "-").replace(".", "-")


# Checked in every environment: like AWS's images, it must not see this provider.
_NO_PROVIDER = (
    "import importlib.util as u;"
    "assert u.find_spec('airflow_dist_training') is None, 'the job environment can import airflow_dist_training';"
)

PYTORCH = JobEnvRecipe(
    name="pytorch",
    constraints="job_env_constraints.txt",
    packages=("torch", "torchvision", "numpy", "sagemaker-training", "sagemaker-pytorch-training"),
    import_check=(
        _NO_PROVIDER
        + "import numpy, sagemaker_training, sagemaker_pytorch_container, torch, torchvision, torchvision.ops;"
        "torchvision.ops.nms(torch.zeros(1, 4), torch.ones(1), 0.5);"
        "print('torch', torch.__version__, 'torchvision', torchvision.__version__)"
    ),
    frameworks=frozenset({"pytorch"}),
    image_repositories=("pytorch-",),
)

# AWS's Hugging Face training image is its PyTorch image plus these (the constraints file names the
# image and version pairing it follows): a layer over the pytorch environment.
HUGGINGFACE = JobEnvRecipe(
    name="huggingface",
    constraints="job_env_huggingface_constraints.txt",
    packages=("transformers", "accelerate", "datasets", "huggingface-hub", "safetensors", "tokenizers"),
    import_check=(
        _NO_PROVIDER + "import sys, accelerate, datasets, safetensors, tokenizers, torch, transformers;"
        # torch is the base environment's, shared: never a second copy in the layer
        "assert not torch.__file__.startswith(sys.prefix), 'torch was installed into the layer: ' + torch.__file__;"
        "print('transformers', transformers.__version__, 'accelerate', accelerate.__version__,"
        " 'datasets', datasets.__version__, 'torch', torch.__version__)"
    ),
    frameworks=frozenset({"huggingface"}),
    image_repositories=("huggingface-pytorch-",),
    base="pytorch",
)

RECIPES = Records(JobEnvRecipe, "job environment recipe", "recipes", builtin=[PYTORCH, HUGGINGFACE])
register_recipe = RECIPES.register
# An image no recipe claims (your own image, a custom entry point) gets this one: the local
# backend runs PyTorch only.
DEFAULT_RECIPE = PYTORCH.name


def recipe_for(image_uri: str | None = None, framework: str | None = None) -> JobEnvRecipe:
    """The recipe of the environment this image (or framework) gives its jobs."""
    repository = (image_uri or "").rsplit("/", 1)[-1].split(":", 1)[0].split("@", 1)[0]
    for recipe in RECIPES.records():
        if framework in recipe.frameworks:
            return recipe
        if repository and any(repository.startswith(prefix) for prefix in recipe.image_repositories):
            return recipe
    return RECIPES.by_name[DEFAULT_RECIPE]


def default_env_dir(environ: Mapping[str, str] | None = None, recipe: JobEnvRecipe = PYTORCH) -> Path:
    environ = os.environ if environ is None else environ
    if environ.get("ADT_JOB_ENVS"):
        return Path(environ["ADT_JOB_ENVS"]).expanduser() / recipe.name
    cache = environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache).expanduser() / "airflow-dist-training" / "job-envs" / recipe.name


def _venv_python_version(env_dir: Path) -> str | None:
    """The Python version the venv was created with (pyvenv.cfg; no interpreter started)."""
    try:
        for line in (env_dir / "pyvenv.cfg").read_text().splitlines():
            key, _, value = line.partition("=")
            if key.strip() in ("version_info", "version"):
                return value.strip()
    except OSError:
        return None
    return None


def _wanted_stamp(recipe: JobEnvRecipe, python_version: str | None) -> dict[str, object]:
    return {
        "format": STAMP_FORMAT,
        "recipe": recipe.name,
        "digest": recipe.digest(),
        "python": python_version,
    }


def why_not_ready(env_dir: Path, recipe: JobEnvRecipe = PYTORCH) -> str | None:
    """None when the environment at ``env_dir`` is built from this recipe, else what is wrong."""
    python = env_dir / "bin" / "python"
    try:
        stamp = json.loads((env_dir / STAMP).read_text())
    except (OSError, ValueError):
        return "not built" if not python.exists() else "built by an older release (no readable stamp)"
    if not isinstance(stamp, dict) or stamp.get("format") != STAMP_FORMAT:
        return "built by an older release (stamp format)"
    wanted = _wanted_stamp(recipe, _venv_python_version(env_dir))
    if stamp.get("recipe") != wanted["recipe"] or stamp.get("digest") != wanted["digest"]:
        return "built from other pins or another recipe"
    if stamp.get("python") != wanted["python"]:
        return f"built with Python {stamp.get('python')}, now {wanted['python']}"
    if not python.exists() or not Path(os.path.realpath(python)).exists():
        return "its interpreter is gone (the Python it was built with was removed)"
    base = recipe.base_recipe()
    if base is not None:
        base_dir = env_dir.parent / base.name
        problem = why_not_ready(base_dir, base)
        if problem is not None:
            return f"a layer over the {base.name} job environment at {base_dir}, which is {problem}"
        if stamp.get("base_stamp") != json.loads((base_dir / STAMP).read_text()):
            return f"a layer over an earlier build of the {base.name} job environment"
    return None


def job_python(
    explicit: str | None,
    environ: Mapping[str, str] | None = None,
    *,
    image_uri: str | None = None,
    framework: str | None = None,
    recipe_name: str | None = None,
) -> tuple[str, str]:
    """(interpreter, why) for a job; ``explicit`` is the spec's or the hook's choice.

    Raises :class:`SpecValidationError` (``local.python``) when the image's job environment is
    missing or outdated: nothing has run yet, and the message says how to build it."""
    environ = os.environ if environ is None else environ
    if explicit:
        return explicit, "chosen by the spec's local.python or the hook's python"
    if environ.get("ADT_LOCAL_PYTHON"):
        return str(Path(environ["ADT_LOCAL_PYTHON"]).expanduser()), "$ADT_LOCAL_PYTHON"
    recipe = RECIPES.get(recipe_name, field="recipe") if recipe_name else recipe_for(image_uri, framework)
    env_dir = default_env_dir(environ, recipe)
    problem = why_not_ready(env_dir, recipe)
    if problem is None:
        return str(env_dir / "bin" / "python"), (
            f"the {recipe.name} job environment: {', '.join(recipe.packages)}; nothing of this provider"
        )
    raise SpecValidationError(
        [
            Problem(
                "local.python",
                f"the {recipe.name} job environment at {env_dir} is {problem}: run `{build_command(recipe)}` "
                "to build it (minutes the first time), or name an interpreter in local.python or "
                "$ADT_LOCAL_PYTHON",
            )
        ],
        source="job environment",
    )


def build_command(recipe: JobEnvRecipe) -> str:
    """The command that builds ``recipe``'s environment."""
    return BUILD_COMMAND if recipe.name == DEFAULT_RECIPE else f"{BUILD_COMMAND} --recipe {recipe.name}"


def inherited_environ(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """What a job (training host or processing container) inherits from the process that starts it:
    its environment without its Python search path (the job's interpreter sees its own environment
    and what the job ships, as in an image), torch's and SageMaker's per-job variables, and the
    worker's own ``ADT_*`` settings (``ADT_DEMO_*`` are the demo script's test hooks)."""
    environ = os.environ if environ is None else environ
    return {
        k: v
        for k, v in environ.items()
        if not k.startswith(("PET_", "TORCHELASTIC_", "SM_", "SAGEMAKER_"))
        and (not k.startswith("ADT_") or k.startswith("ADT_DEMO_"))
        and k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")
        and k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONUSERBASE", "VIRTUAL_ENV")
    }


# what an image's environment has that does not depend on the job: the shell basics, and the
# OpenBLAS core settings some processors here need for correct results (docs/local-backend.md)
IMAGE_VARIABLES = (
    "HOME",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TZ",
    "OPENBLAS_CORETYPE",
    "OPENBLAS_L2_SIZE",
)


# an image's PATH without its interpreter's folder (the launcher puts the job's first): the system
# folders, as in the Deep Learning Containers; never this machine's own PATH (its tools, its venvs)
IMAGE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def image_environ(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a job that sees only what its image and SageMaker give it (the test
    endpoint's jobs): :data:`IMAGE_VARIABLES` of ``environ`` and :data:`IMAGE_PATH`, nothing of the
    process that runs it."""
    environ = os.environ if environ is None else environ
    return {"PATH": IMAGE_PATH, **{k: environ[k] for k in IMAGE_VARIABLES if k in environ}}


def build(
    env_dir: Path | None = None,
    *,
    base_python: str | None = None,
    recipe: JobEnvRecipe = PYTORCH,
    log: Callable[[str], None] = print,
) -> Path:
    """Create, or rebuild when outdated, the job environment at ``env_dir``; return its interpreter.

    Idempotent: a second call with the same recipe and Python does nothing. Two concurrent builds
    take turns. Raises ``RuntimeError`` with pip's last lines when the install fails."""
    env_dir = (env_dir or default_env_dir(recipe=recipe)).absolute()
    env_dir.parent.mkdir(parents=True, exist_ok=True)
    with open(env_dir.parent / f".{env_dir.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        problem = why_not_ready(env_dir, recipe)
        python = env_dir / "bin" / "python"
        if problem is None:
            log(f"job environment up to date: {python}")
            return python
        if env_dir.exists():
            log(f"job environment at {env_dir} is {problem}: rebuilding it from scratch")
            shutil.rmtree(env_dir)
        base = recipe.base_recipe()
        base_dir = env_dir.parent / base.name if base is not None else None
        if base is not None and base_dir is not None:  # the base first (its own lock), then the layer
            build(base_dir, base_python=base_python, recipe=base, log=log)
        # a venv of its own interpreter: never --system-site-packages (the worker's has the provider);
        # a layer runs its base's pip (seen through the .pth file), so it needs none of its own
        run_checked(
            [base_python or sys.executable, "-m", "venv", *(["--without-pip"] if base else []), str(env_dir)],
            "creating the venv",
            cwd=env_dir.parent,
        )
        if base_dir is not None:
            _share_base(env_dir, base_dir)
        pins = env_dir / recipe.constraints
        pins.write_text(recipe.pins_text())
        log(
            f"installing {', '.join(recipe.packages)} into {env_dir} "
            f"(pinned by {recipe.constraints}; minutes the first time)"
        )
        pip = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
        run_checked([*pip, "-c", str(pins), *recipe.packages], "pip install", cwd=env_dir)
        # from inside the environment's folder: the current directory must not lend it a package
        log(run_checked([str(python), "-c", recipe.import_check], "the import check", cwd=env_dir).strip())
        stamp = _wanted_stamp(recipe, _venv_python_version(env_dir))
        if base_dir is not None:  # which build of the base this layer was installed over
            stamp["base_stamp"] = json.loads((base_dir / STAMP).read_text())
        (env_dir / STAMP).write_text(json.dumps(stamp, indent=1) + "\n")
        return python


def _site_packages(env_dir: Path) -> Path:
    """A venv's site-packages (``lib/pythonX.Y/site-packages`` on Linux and macOS)."""
    found = sorted(env_dir.glob("lib/python*/site-packages"))
    if len(found) != 1:
        raise RuntimeError(f"no single site-packages folder under {env_dir}: {[str(f) for f in found]}")
    return found[0]


def _share_base(env_dir: Path, base_dir: Path) -> None:
    """Let the layer's venv see its base's packages, after its own (a layer's pin wins): a ``.pth``
    line appends the base's site-packages to ``sys.path``, and pip counts what it finds there as
    installed. Both venvs have the same Python, so the same ``lib/pythonX.Y`` folder name."""
    mine, theirs = _site_packages(env_dir), _site_packages(base_dir)
    if mine.relative_to(env_dir) != theirs.relative_to(base_dir):
        raise RuntimeError(f"{env_dir} and its base {base_dir} were made with different Pythons")
    (mine / "_adt_base_environment.pth").write_text(f"{theirs}\n")


def run_checked(argv: list[str], what: str, *, cwd: Path, environ: Mapping[str, str] | None = None) -> str:
    """``argv``'s stdout; ``RuntimeError`` with its last lines when it fails. ``environ``: default
    this process's without its Python search path."""
    if environ is None:
        environ = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    done = subprocess.run(argv, capture_output=True, text=True, check=False, cwd=cwd, env=environ)
    if done.returncode != 0:
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-15:])
        raise RuntimeError(f"{what} failed (exit code {done.returncode})" + (f":\n{tail}" if tail else ""))
    return done.stdout
