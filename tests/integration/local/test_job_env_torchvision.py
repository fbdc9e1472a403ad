"""A job script that imports torchvision runs on the local backend, in the pinned torchvision job
environment (``scripts/setup-job-env.sh``: torch 2.14.1 + torchvision 0.29.1 + AWS's toolkit),
chosen by the spec's ``local.python``. The worker's own venv keeps the CPU build of torch 2.13.0,
beside which PyPI's torchvision cannot load (see docs/local-backend.md, "The job's Python").
"""

from __future__ import annotations

import os
import tarfile
import textwrap
from pathlib import Path

import pytest

from airflow_dist_training.hooks.local_training import LocalTrainingHook
from airflow_dist_training.local.hosts import probe
from tests.paths import REPO

from .conftest import script_spec

VISION_PYTHON = Path(
    os.environ.get("ADT_TORCHVISION_PYTHON") or REPO / ".venv-jobs" / "torchvision" / "bin" / "python"
)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not probe().namespaces, reason=f"no Linux namespaces here: {probe().why}"),
    pytest.mark.skipif(
        not VISION_PYTHON.exists(),
        reason=f"no torchvision job environment at {VISION_PYTHON}: run scripts/setup-job-env.sh",
    ),
]

VISION = textwrap.dedent(
    """
    import os, socket, torch, torch.distributed as dist, torchvision
    from torchvision.ops import nms
    boxes = torch.tensor([[0, 0, 10, 10], [1, 1, 11, 11], [50, 50, 60, 60]], dtype=torch.float)
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


def test_a_script_importing_torchvision_runs_under_the_toolkit_on_two_hosts(tmp_path: Path) -> None:
    spec = script_spec(
        tmp_path,
        VISION,
        compute={"instance_type": "ml.m5.xlarge", "instance_count": 2},
        local={"python": {"pytorch": str(VISION_PYTHON)}},
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
        # both hosts ran torchvision's compiled op (nms) in the job environment, then a gloo all-reduce
        assert text.startswith(f"{host.removesuffix('.txt')} torchvision 0.29.1"), text
        assert "torch 2.14.1" in text and "kept [0, 2] sum 4.0" in text, text
    # AWS's toolkit (installed in that environment) launched it with its own torchrun command
    assert any("toolkit runner" in line for line in lines)
    assert any(f"{VISION_PYTHON} -c" in line for line in lines)  # the hosts' interpreter: local.python
