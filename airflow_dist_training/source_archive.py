"""How a local source folder becomes the ``sourcedir.tar.gz`` a job's code is read from.

Reads the disk, nothing else: the SageMaker hook uploads these bytes, the local backend puts them
in its store, under the URI the planner's :class:`~airflow_dist_training.sagemaker.uploads.Upload`
names.
"""

from __future__ import annotations

import gzip
import io
import os
import tarfile
from collections.abc import Sequence
from pathlib import Path

from airflow_dist_training.errors import SpecValidationError


def pack_source_dir(source_dir: str | os.PathLike[str], dependencies: Sequence[str] = ()) -> bytes:
    """A reproducible ``sourcedir.tar.gz`` of a local directory (files at the archive root), for
    SageMaker and the local backend alike. Each of ``dependencies`` (spec ``source.dependencies``)
    goes in at the root under its own name, as the SageMaker SDK packs them.

    Sorted entries, zeroed mtimes and owners: the same directory always gives the same bytes, so a
    retry re-uploads an identical object.
    """
    root = Path(source_dir)
    if not root.is_dir():
        raise SpecValidationError([("source.source_dir", f"{root} is not a directory")])
    entries = [(path, path.relative_to(root)) for path in sorted(root.rglob("*"))]
    for index, dependency in enumerate(dependencies):
        dep = Path(dependency)
        field = f"source.dependencies[{index}]"
        if not dep.exists():
            raise SpecValidationError([(field, f"{dep} does not exist")])
        if (root / dep.name).exists():
            raise SpecValidationError(
                [(field, f"{dep.name} is in source_dir {root} too: one would hide the other")]
            )
        entries.append((dep, Path(dep.name)))
        if dep.is_dir():
            entries += [(path, Path(dep.name) / path.relative_to(dep)) for path in sorted(dep.rglob("*"))]
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path, rel in entries:
            if any(part in {"__pycache__", ".git", ".venv"} for part in rel.parts):
                continue
            info = tar.gettarinfo(str(path), arcname=rel.as_posix())
            info.mtime = 0
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            if path.is_file():
                with path.open("rb") as fh:
                    tar.addfile(info, fh)
            else:
                tar.addfile(info)
    return gzip.compress(raw.getvalue(), mtime=0)
