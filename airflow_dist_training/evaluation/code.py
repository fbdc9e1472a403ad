"""The code an evaluation ships: the script, the ``*.py`` beside it and its ``dependencies``.

One list for both backends (the SageMaker SDK's ``FrameworkProcessor`` idea): uploaded as the
processing job's code input on SageMaker, copied into the run's code folder locally, and checked
by the plan task before anything launches. Reads only the local file tree: no Airflow, no boto3.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from airflow_dist_training.errors import Problem, SpecValidationError
from airflow_dist_training.storage.location import file_uri_path

_SKIPPED_PARTS = frozenset({"__pycache__", ".git", ".venv"})


def evaluation_code_files(
    script: Path, dependencies: Sequence[str] = (), field_prefix: str = ""
) -> list[tuple[Path, str]]:
    """The files an evaluation ships, with their paths in the job's code folder: the ``*.py``
    beside the script (helper modules) and each of ``dependencies`` under its own name (a directory
    with everything in it). Every missing or shadowing entry is named, at once
    (``field_prefix`` + ``dependencies[i]``)."""
    if not script.is_file():
        raise SpecValidationError([Problem(f"{field_prefix}script", f"{script} does not exist")])
    files = [(p, p.name) for p in sorted(script.parent.glob("*.py")) if p.is_file()]
    problems: list[Problem] = []
    for index, dependency in enumerate(dependencies):
        dep = file_uri_path(dependency)
        field = f"{field_prefix}dependencies[{index}]"
        if not dep.exists():
            problems.append(Problem(field, f"{dep} does not exist"))
        elif any(rel.split("/", 1)[0] == dep.name for _, rel in files):
            problems.append(
                Problem(field, f"{dep.name} is beside the script {script} too: one would hide the other")
            )
        elif dep.is_dir():
            files += [
                (p, f"{dep.name}/{p.relative_to(dep).as_posix()}")
                for p in sorted(dep.rglob("*"))
                if p.is_file() and not _SKIPPED_PARTS.intersection(p.relative_to(dep).parts)
            ]
        else:
            files.append((dep, dep.name))
    if problems:
        raise SpecValidationError(problems)
    return files
