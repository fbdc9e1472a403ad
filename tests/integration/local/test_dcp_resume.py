"""The shipped FSDP2 + DCP example (examples/dcp_fsdp/train.py, 2 ranks, gloo on CPU), killed while it
writes a checkpoint, resumes on the task's retry from the last complete one, on the local backend
(where it is killed: tests/killed_mid_save.py; the test endpoint's run:
tests/integration/emulator/test_training_on_emulator.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from airflow_dist_training.local.hosts import probe
from tests.killed_mid_save import dcp_fsdp_source, run_training_try

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not probe().namespaces, reason=f"no Linux namespaces here: {probe().why}"),
]




def test_killed_mid_save_dcp_job_resumes_from_the_last_complete_checkpoint(
    tmp_path: Path, job_env_python: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    from airflow_dist_training.hooks.checkpoints import CheckpointHook

    spec = {
        "name": "dcp",
        "image": {"framework": "pytorch", "framework_version": "2.8.0"},
        "source": {"entry_point": "killed_mid_save.py", "source_dir": str(dcp_fsdp_source(tmp_path))},
        "compute": {"instance_type": "ml.g5.12xlarge", "instance_count": 1},
        "distribution": {"strategy": "torch_distributed", "processes_per_host": 2},
        "checkpoint": {"s3_uri": "s3://ckpt-bucket/dcp/", "local_uri": str(tmp_path / "ck"), "layout": "dcp"},
        "stopping": {"max_runtime_seconds": 300},
    }

    def attempt(try_number: int) -> Any:
        return run_training_try(spec, tmp_path / "jobs", "dcp", try_number, checkpoint_resume="latest")

    with pytest.raises(Exception):  # noqa: B017  the job's failure, whatever the backend calls it
        attempt(1)
    first = capfd.readouterr().out
    assert "killed while saving step 12 (before .metadata)" in first
    [run] = [p for p in (tmp_path / "ck").iterdir() if p.is_dir()]
    assert sorted(p.name for p in run.iterdir() if p.name.startswith("step-")) == [
        "step-000000000004",
        "step-000000000008",
        "step-000000000012",  # both ranks' shards, no .metadata
    ]
    assert not (run / "step-000000000012" / ".metadata").exists()
    attempt(2)  # the task's retry
    second = capfd.readouterr().out
    assert f"Moved the incomplete checkpoint {run}/step-000000000012 aside" in second
    assert "rank 0 resumed from step-000000000008 (epoch=1, step=8)" in second
    assert "rank 1 resumed from step-000000000008 (epoch=1, step=8)" in second
    assert "epoch=2 step=12 loss=" in second and "epoch=0 step=4 loss=" not in second
    hook = CheckpointHook(aws_conn_id=None, layout="dcp")
    assert [(i.step, i.complete) for i in hook.scan(str(run))] == [
        (16, True),
        (12, True),
        (8, True),
        (4, True),
    ]
    assert (run / "_incomplete" / "step-000000000012" / "__1_0.distcp").is_file()
