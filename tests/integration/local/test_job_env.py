"""A job script that imports torchvision and numpy runs on the local backend with nothing choosing
its Python: the default job environment (``airflow-dist-training job-env``, built by
scripts/setup.sh: torch 2.14.1 + torchvision 0.29.1 + numpy + AWS's toolkit). The worker's own
venv keeps the CPU build of torch 2.13.0, beside which PyPI's torchvision cannot load
(docs/local-backend.md, "The job's Python")."""

from __future__ import annotations

import json
import os
import tarfile
import textwrap
from pathlib import Path

import pytest

from airflow_dist_training.hooks.local_training import LocalTrainingHook
from airflow_dist_training.local.hosts import probe
from tests.paths import REPO

from .conftest import script_spec

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not probe().namespaces, reason=f"no Linux namespaces here: {probe().why}"),
]

VISION = textwrap.dedent(
    """
    import os, socket, numpy, torch, torch.distributed as dist, torchvision
    from torchvision.ops import nms
    boxes = torch.from_numpy(numpy.array([[0, 0, 10, 10], [1, 1, 11, 11], [50, 50, 60, 60]], dtype="float32"))
    kept = nms(boxes, torch.tensor([0.9, 0.8, 0.7]), 0.5).tolist()
    dist.init_process_group("gloo")
    total = torch.tensor([float(len(kept))]); dist.all_reduce(total)
    host = socket.gethostname()
    open(f"/opt/ml/model/{host}.txt", "w").write(
        f"{host} torchvision {torchvision.__version__} torch {torch.__version__} kept {kept} sum {total.item()}"
    )
    dist.destroy_process_group()
    """
)


def test_a_script_importing_torchvision_runs_with_the_default_job_python(
    tmp_path: Path, job_env_python: Path
) -> None:
    spec = script_spec(
        tmp_path,
        VISION,
        compute={"instance_type": "ml.m5.xlarge", "instance_count": 2},
        stopping={"max_runtime_seconds": 900},
    )
    lines: list[str] = []
    result = LocalTrainingHook(root=tmp_path / "root", use_s3=False, stop_grace_seconds=5).run_job(
        spec, "torchvision-2", log=lines.append
    )
    assert result["status"] == "Completed"
    with tarfile.open(result["model_artifact_uri"].removeprefix("file://")) as tar:
        files = {m.name: tar.extractfile(m).read().decode() for m in tar.getmembers() if m.isfile()}  # type: ignore[union-attr]
    assert sorted(files) == ["algo-1.txt", "algo-2.txt"]
    for host, text in files.items():
        # both hosts ran torchvision's compiled op (nms) on numpy data, then a gloo all-reduce
        assert text.startswith(f"{host.removesuffix('.txt')} torchvision 0.29.1"), text
        assert "torch 2.14.1" in text and "kept [0, 2] sum 4.0" in text, text
    assert f"[local] job Python: {job_env_python} (the pytorch job environment" in "\n".join(lines)
    # AWS's toolkit, installed in that environment, launched it with its own torchrun command
    assert any("toolkit runner" in line for line in lines)
    assert any(f"{job_env_python} -c" in line for line in lines)


PROVIDER_PROBE = textwrap.dedent(
    """
    import importlib.util, json, os, sys
    json.dump(
        {"python": sys.executable, "provider": importlib.util.find_spec("airflow_dist_training") is not None,
         "pythonpath": os.environ.get("PYTHONPATH", "")},
        open("/opt/ml/model/probe.json", "w"),
    )
    """
)


def test_a_job_cannot_import_this_provider_even_when_the_worker_can(
    tmp_path: Path, job_env_python: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As on an AWS image: the provider reaches a job only by being shipped. The worker's
    PYTHONPATH (here pointing at the repository) does not leak into the job."""
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    spec = script_spec(tmp_path, PROVIDER_PROBE)
    result = LocalTrainingHook(root=tmp_path / "root", use_s3=False, stop_grace_seconds=5).run_job(
        spec, "no-provider", log=lambda _: None
    )
    assert result["status"] == "Completed"
    with tarfile.open(result["model_artifact_uri"].removeprefix("file://")) as tar:
        probe_file = tar.extractfile("probe.json")
        assert probe_file is not None
        seen = json.loads(probe_file.read())
    assert seen["provider"] is False, seen
    assert str(REPO) not in seen["pythonpath"].split(os.pathsep), seen
    assert Path(seen["python"]).parent.parent == job_env_python.parent.parent, seen
