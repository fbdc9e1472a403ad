"""MaxRuntimeInSeconds on the local backend stops a job as SageMaker does: SIGTERM to each host's
entrypoint, which the toolkit shim (``stopping.forward_sigterm``) passes on to torchrun's workers,
then SIGKILL after the grace; what the job saved in that window is kept (checkpoint and model)."""

from __future__ import annotations

import re
import tarfile
from pathlib import Path

import pytest

from airflow_dist_training.hooks.local_training import LocalTrainingHook
from airflow_dist_training.local.hosts import probe
from tests.paths import REPO

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not probe().namespaces, reason=f"no Linux namespaces here: {probe().why}"),
]
SCRIPTS = REPO / "tests" / "integration" / "emulator" / "stop_scripts"


def test_max_runtime_sigterm_reaches_every_worker_under_the_shim_and_the_save_is_kept(tmp_path: Path) -> None:
    store = tmp_path / "checkpoints"
    spec = {
        "name": "runtime",
        "image": {"framework": "pytorch", "framework_version": "2.8.0"},
        "source": {
            "entry_point": "steps.py",
            "source_dir": str(SCRIPTS),
            "dependencies": [str(REPO / "airflow_dist_training" / "checkpointing.py")],
        },
        "compute": {"instance_type": "ml.m5.xlarge", "instance_count": 1},
        "distribution": {"strategy": "torch_distributed", "processes_per_host": 2},
        "checkpoint": {"s3_uri": "s3://my-ml-bucket/checkpoints/runtime", "local_uri": str(store)},
        "stopping": {"max_runtime_seconds": 12, "forward_sigterm": True},
        "local": {"runner": "builtin"},
    }
    lines: list[str] = []
    hook = LocalTrainingHook(root=tmp_path / "root", use_s3=False, stop_grace_seconds=10)
    job = hook.start_job(spec, "runtime", log=lines.append, allow_oversubscribe=True)
    desc = job.wait(timeout=120)
    assert (desc["TrainingJobStatus"], desc["SecondaryStatus"]) == ("Stopped", "MaxRuntimeExceeded")
    assert any("SIGTERM to algo-1's entrypoint (delivered)" in line for line in lines), lines[-30:]
    assert any(re.search(r"SIGTERM forwarded to 2 training process\(es\)", line) for line in lines), lines[
        -30:
    ]
    saved = [
        int(m.group(1))
        for line in lines
        if (m := re.fullmatch(r"\[algo-1\] saved step (\d+) on SIGTERM", line))
    ]
    assert len(saved) == 2, lines[-30:]  # both workers saw it (each at its own step); rank 0 wrote
    manifests = sorted(p.parent.name for p in store.rglob("_MANIFEST.json"))
    assert manifests and manifests[-1] in {f"step-{step:012d}" for step in saved}, manifests
    # the model and output are uploaded after a stop, as SageMaker does
    [model] = [m.group(1) for line in lines if (m := re.search(r"model artifact: .* \(file://(.+)\)$", line))]
    assert tarfile.is_tarfile(model)
