"""A 2-rank DCP job (gloo, CPU) killed while it writes a checkpoint resumes, on the task's retry,
from the last complete one, on the local backend.

Each rank saves its own shard with ``torch.distributed.checkpoint`` (distinct keys per rank, as
FSDP's sharded state dict gives each rank its own shards; FSDP itself needs no GPU but adds nothing
to what is checked here). The kill comes where DCP is most fragile: every rank has written its
shard, and rank 0 (the coordinator) is killed in ``finish`` before ``.metadata`` is written. The
script resumes from the newest ``step-*`` folder, as Transformers does: only the relaunch step's
move-aside makes that the newest *complete* one.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

from airflow_dist_training.local.hosts import probe
from airflow_dist_training.operators.training import DistributedTrainingOperator

from .conftest import script_spec

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not probe().namespaces, reason=f"no Linux namespaces here: {probe().why}"),
]

SCRIPT = textwrap.dedent(
    """
    import os, re, signal
    import torch, torch.distributed as dist, torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint import FileSystemWriter

    class KilledWhileSaving(FileSystemWriter):
        def finish(self, metadata, results):  # the coordinator, after every rank wrote its shard
            print("killed while saving step 2 (before .metadata)", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    root = os.environ["SM_CHECKPOINT_DIR"]
    folders = [n for n in os.listdir(root) if re.fullmatch(r"step-\\d+", n)] if os.path.isdir(root) else []
    resume = max(folders, key=lambda n: int(n[5:]), default=None)  # "the newest folder", complete or not
    dist.barrier()  # every rank chose before any rank starts saving
    start = 0
    if resume is not None:
        state = {f"shard{rank}": torch.zeros(4096), "epoch": -1}
        dcp.load(state, checkpoint_id=os.path.join(root, resume))
        start = int(state["epoch"]) + 1
        assert float(state[f"shard{rank}"][0]) == state["epoch"] + rank
        print(f"rank {rank} resumed from {resume} (epoch={state['epoch']})", flush=True)
    for epoch in range(start, 4):
        state = {f"shard{rank}": torch.full((4096,), float(epoch + rank)), "epoch": epoch}
        path = os.path.join(root, f"step-{epoch:012d}")
        kill = epoch == 2 and resume is None
        dcp.save(state, storage_writer=(KilledWhileSaving if kill else FileSystemWriter)(path))
        print(f"rank {rank} saved epoch {epoch}", flush=True)
    """
)


class _TI:
    dag_id, task_id, run_id, map_index, try_number = "dcp", "train", "manual__1", -1, 1

    def __init__(self) -> None:
        self.xcom: dict[str, Any] = {}

    def xcom_push(self, key: str, value: Any) -> None:
        self.xcom[key] = value


def test_killed_mid_save_dcp_job_resumes_from_the_last_complete_checkpoint(
    tmp_path: Path, job_env_python: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    from airflow_dist_training.hooks.checkpoints import CheckpointHook

    spec = script_spec(
        tmp_path,
        SCRIPT,
        distribution={"strategy": "torch_distributed", "processes_per_host": 2},
        checkpoint={"s3_uri": "s3://ckpt-bucket/dcp/", "local_uri": str(tmp_path / "ck"), "layout": "dcp"},
    )

    def attempt(try_number: int) -> Any:
        ti = _TI()
        ti.try_number = try_number
        op = DistributedTrainingOperator(
            task_id="train",
            spec=spec,
            backend="local",
            checkpoint_resume="latest",
            local_hook_kwargs={"root": str(tmp_path / "jobs"), "use_s3": False, "stop_grace_seconds": 5},
            retries=1,
        )
        return op.execute({"ti": ti, "run_id": _TI.run_id})

    with pytest.raises(Exception):  # noqa: B017  the job's failure, whatever the backend calls it
        attempt(1)
    first = capfd.readouterr().out
    assert "killed while saving step 2 (before .metadata)" in first
    [run] = [p for p in (tmp_path / "ck").iterdir() if p.is_dir()]
    assert sorted(p.name for p in run.iterdir() if p.name.startswith("step-")) == [
        "step-000000000000",
        "step-000000000001",
        "step-000000000002",  # both shards, no .metadata
    ]
    attempt(2)  # the task's retry
    second = capfd.readouterr().out
    assert f"Moved the incomplete checkpoint {run}/step-000000000002 aside" in second
    assert "rank 0 resumed from step-000000000001 (epoch=1)" in second
    assert "rank 1 resumed from step-000000000001 (epoch=1)" in second
    hook = CheckpointHook(aws_conn_id=None, layout="dcp")
    assert [(i.step, i.complete) for i in hook.scan(str(run))] == [(3, True), (2, True), (1, True), (0, True)]
    assert (run / "_incomplete" / "step-000000000002" / "__1_0.distcp").is_file()
