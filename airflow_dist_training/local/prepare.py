"""Lay out every simulated host's ``/opt/ml`` and stage what the request names into it.

Code (``sagemaker_submit_directory``), channels and checkpoints come from the store under the
URIs the request names; the config files are the toolkit's (``local/contract.py``); a
``requirements.txt`` in the code is installed before the hosts start (they have no network).
"""

from __future__ import annotations

import json
import shutil
import tarfile
import tempfile
from collections.abc import Callable
from pathlib import Path

from airflow_dist_training.local.contract import HostLayout, HostPlan, config_files
from airflow_dist_training.local.launcher import SyncState, sync_dir
from airflow_dist_training.local.request_plan import RequestPlan
from airflow_dist_training.local.store import RequestStore
from airflow_dist_training.storage.location import local_location, split_uri, uri_scheme

LogFn = Callable[[str], None]


def stage_job(rp: RequestPlan, store: RequestStore, log: LogFn, synced: SyncState) -> str | None:
    """Stage code, channels, config files and checkpoints on every host; returns the folder of the
    code's installed requirements (``PYTHONPATH``), or None when the code has none."""
    plan = rp.plan
    first = plan.host_plans[0].layout
    code = first.code_dir
    _remove(code)
    code.mkdir(parents=True)
    if rp.code_uri:
        _fetch_code(store, rp.code_uri, code)
    for hp in plan.host_plans:
        _lay_out_host(rp, hp, first)
    for cname, uri in rp.channel_uris.items():
        target = first.channel_dir(cname)
        _remove(target)
        n = store.get_prefix(uri, target)
        log(f"[local] channel {cname}: {n} file(s) from {uri}")
    if plan.checkpoint_store is not None:
        for hp in plan.host_plans:
            # a job starts with what the checkpoint location holds, as on SageMaker: not with files a
            # run of the same name left here (a partial checkpoint moved aside since, for one)
            _remove(hp.layout.checkpoint_dir)
            hp.layout.checkpoint_dir.mkdir(parents=True)
            n = sync_dir(
                plan.checkpoint_store, local_location(hp.layout.checkpoint_dir), synced, store.stores
            )
            if n and hp.index == 0:
                log(f"[local] restored {n} checkpoint file(s) from {rp.checkpoint_uri} ({plan.checkpoint_store.as_uri()})")
    return _install_requirements(rp, log)


def _remove(path: Path) -> None:
    """Remove a file, symlink or directory tree (nothing when absent)."""
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path)


def _lay_out_host(rp: RequestPlan, hp: HostPlan, first: HostLayout) -> None:
    """One host's /opt/ml tree: directories, its own code copy, shared input data, config files."""
    lay = hp.layout
    for d in (
        lay.input_config_dir,
        lay.model_dir,
        lay.output_data_dir,
        lay.checkpoint_dir,
        lay.output_intermediate_dir,
    ):
        d.mkdir(parents=True, exist_ok=True)
    for stale in (lay.failure_file, lay.success_file):
        stale.unlink(missing_ok=True)
    if hp.index > 0:  # the first host's tree is the job directory: it owns the code and input data
        _share_with_first_host(lay, first, rp.isolation.namespaces)
    files = config_files(rp.plan, hp, "/opt/ml/checkpoints/" if rp.isolation.namespaces else None)
    for fname, content in files.items():
        (lay.input_config_dir / fname).write_text(json.dumps(content))


def _share_with_first_host(lay: HostLayout, first: HostLayout, namespaces: bool) -> None:
    """Each host has its own /opt/ml/code (a launcher unpacks the code on every host); the input
    data is the first host's (a bind mount with namespaces, a symlink otherwise)."""
    _remove(lay.code_dir)
    shutil.copytree(first.code_dir, lay.code_dir, symlinks=True)
    link, target = lay.input_data_dir, first.input_data_dir
    target.mkdir(parents=True, exist_ok=True)
    _remove(link)
    if namespaces:
        link.mkdir(parents=True)  # a mount point: the host bind-mounts the shared data
    else:
        link.symlink_to(target, target_is_directory=True)


def _fetch_code(store: RequestStore, uri: str, code: Path) -> None:
    """The code: a tarball (in the store, or a local file) or a local directory."""
    with tempfile.TemporaryDirectory() as tmp:
        remote = uri_scheme(uri) == "s3"
        src = Path(tmp) / "sourcedir.tar.gz" if remote else Path(split_uri(uri)[2])
        if remote:
            store.get_file(uri, src)
        if src.is_file():
            with tarfile.open(src, "r:*") as tar:
                tar.extractall(code, filter="data")
        else:
            shutil.copytree(src, code, dirs_exist_ok=True, symlinks=True)


def _install_requirements(rp: RequestPlan, log: LogFn) -> str | None:
    """``requirements.txt`` in the code: installed before the hosts start (they have no network)."""
    from airflow_dist_training.local.pythons import install_requirements

    first = rp.plan.host_plans[0].layout
    requirements = first.code_dir / "requirements.txt"
    if rp.mode == "container":
        # launcher mode ships the code as a tarball channel: look inside it
        tarball = first.channel_dir("code") / "sourcedir.tar.gz"
        if tarball.is_file():
            with tarfile.open(tarball, "r:*") as tar:
                member = next(
                    (m for m in tar.getmembers() if m.name.lstrip("./") == "requirements.txt"), None
                )
                if member is not None:
                    extracted = tar.extractfile(member)
                    assert extracted is not None
                    requirements = rp.plan.job_dir / ".requirements.txt"
                    requirements.write_bytes(extracted.read())
    if not requirements.is_file():
        return None
    envs = rp.plan.root / "_envs"
    return str(install_requirements(requirements, rp.python, envs, log=log, code_dir=first.code_dir))
