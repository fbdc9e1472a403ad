"""Run inside a venv that has the built wheel installed WITHOUT extras (scripts/check-install.sh --fresh).

Checks what a user on MWAA, Astronomer or the Helm chart gets from ``pip install airflow-dist-training``:

- every operator and trigger module imports, and every operator and trigger class in them is listed;
- the shipped DAGs (``dags/`` of the checkout) parse without import errors;
- torch, moto and the SageMaker training toolkit are not installed;
- the install size (this venv's site-packages), next to what the extras ``local``, ``toolkit`` and
  ``emulator`` would add (their distributions' installed size in ``--full-venv``, a venv that has them).

Prints a JSON report; exits 1 with the reason if a check fails.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import importlib.util
import inspect
import json
import os
import pkgutil
import re
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

ABSENT = ("torch", "moto", "sagemaker_training")
EXTRAS = ("local", "toolkit", "emulator")


def tree_size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())


def import_operators_and_triggers() -> dict[str, list[str]]:
    from airflow.sdk import BaseOperator
    from airflow.triggers.base import BaseTrigger

    import airflow_dist_training

    found: dict[str, list[str]] = {"operators": [], "triggers": []}
    for kind, base in (("operators", BaseOperator), ("triggers", BaseTrigger)):
        package = importlib.import_module(f"airflow_dist_training.{kind}")
        for info in pkgutil.walk_packages(package.__path__, f"{package.__name__}."):
            module = importlib.import_module(info.name)
            for name, obj in vars(module).items():
                if inspect.isclass(obj) and issubclass(obj, base) and obj.__module__ == module.__name__:
                    found[kind].append(f"{info.name}.{name}")
    assert airflow_dist_training.__file__ and "site-packages" in airflow_dist_training.__file__, (
        f"imported from {airflow_dist_training.__file__}, not the installed wheel"
    )
    return found


def parse_dags(dags: Path) -> list[str]:
    home = tempfile.mkdtemp(prefix="adt-bare-home-")
    code = (
        "import json, sys\n"
        "from airflow.dag_processing.dagbag import DagBag\n"
        "bag = DagBag(dag_folder=sys.argv[1])\n"
        "print(json.dumps({'dags': sorted(bag.dag_ids), 'errors': bag.import_errors}, default=str))\n"
    )
    env = {**os.environ, "AIRFLOW_HOME": home, "AIRFLOW__CORE__LOAD_EXAMPLES": "False"}
    env.pop("PYTHONPATH", None)  # the installed wheel, not the checkout
    proc = subprocess.run(
        [sys.executable, "-c", code, str(dags)], capture_output=True, text=True, env=env, cwd=home
    )
    if proc.returncode != 0:
        raise AssertionError(f"parsing {dags} failed:\n{proc.stderr[-3000:]}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert not result["errors"], f"import errors in the shipped DAGs: {result['errors']}"
    return list(result["dags"])


def extras_size(full_venv: Path) -> dict[str, int]:
    """Installed bytes of the distributions the extras add on top of this venv, measured in ``full_venv``."""
    here = {d.metadata["Name"].lower().replace("_", "-") for d in importlib.metadata.distributions()}
    code = (
        "import importlib.metadata as m, json, os\n"
        "out = {}\n"
        "for d in m.distributions():\n"
        "    size = 0\n"
        "    for f in d.files or []:\n"
        "        p = d.locate_file(f)\n"
        "        if os.path.isfile(p): size += os.path.getsize(p)\n"
        "    out[d.metadata['Name'].lower().replace('_', '-')] = [size, d.requires or []]\n"
        "print(json.dumps(out))\n"
    )
    python = full_venv / "bin" / "python"
    installed = json.loads(
        subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True).stdout
    )
    # the extras' requirements and everything they pull, closed over full_venv's metadata
    requires = installed.get("airflow-dist-training", [0, []])[1]
    todo = [r for r in requires if any(re.search(rf"extra == [\"']{e}[\"']", r) for e in EXTRAS)]
    added: set[str] = set()
    while todo:
        name = re.split(r"[\s\[<>=!~;(]", todo.pop(), maxsplit=1)[0].lower().replace("_", "-")
        if name in added or name in here or name not in installed:
            continue
        added.add(name)
        todo += [r for r in installed[name][1] if "extra ==" not in r]
    return {name: installed[name][0] for name in sorted(added)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dags", type=Path, required=True)
    parser.add_argument("--full-venv", type=Path, required=True)
    args = parser.parse_args(argv)
    present = [name for name in ABSENT if importlib.util.find_spec(name) is not None]
    if present:
        print(f"installed without extras, yet present: {present}")
        return 1
    classes = import_operators_and_triggers()
    dags = parse_dags(args.dags)
    site = Path(sysconfig.get_paths()["purelib"])
    extras = extras_size(args.full_venv)
    report = {
        "absent": list(ABSENT),
        "operators": classes["operators"],
        "triggers": classes["triggers"],
        "dags": dags,
        "install_mb": round(tree_size(site) / 1e6, 1),
        "extras_add_mb": round(sum(extras.values()) / 1e6, 1),
        "extras_largest": {
            k: round(v / 1e6, 1) for k, v in sorted(extras.items(), key=lambda kv: -kv[1])[:5]
        },
    }
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
