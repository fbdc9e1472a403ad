"""The shipped FSDP2 + DCP pipeline (dags/pipelines/dcp_fsdp_local.yaml) runs twice in a row with
dag.test(): each run trains examples/dcp_fsdp/train.py (torchrun, 2 processes, gloo) in the pytorch
job environment, then prunes its own ``step-N/`` DCP folders and promotes the best one; the second
run warm-starts from the first run's promoted checkpoint.

Fault injection: while the first run's job trains, a step folder cut short by a kill mid-save
(real DCP shards, no ``.metadata``, and a ``metrics.json`` claiming the best loss) appears in its
``/opt/ml/checkpoints``; it must be neither kept, nor promoted, nor warm-started from.

The file is copied unchanged into a scratch tree shaped like the repository
(``tests/dag_bundles.shipped_pipeline_copy``), so its relative paths resolve as they do there.
"""

from __future__ import annotations

import json
import re
import shutil
import threading
import time
from pathlib import Path

import pytest

from airflow_dist_training.local import job_env
from tests.dag_bundles import shipped_pipeline_copy

PARTIAL = "step-000000000010"

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("yaml-pipeline-dag")]


def _plant_partial_step(jobs: Path, stop: threading.Event, planted: list[Path]) -> None:
    """Once the job has saved its first step, leave a step folder as a kill mid-save does."""
    while not stop.is_set():
        for first in jobs.glob("**/checkpoints/step-000000000004/.metadata"):
            partial = first.parent.with_name(PARTIAL)
            partial.mkdir()
            for shard in first.parent.glob("*.distcp"):
                shutil.copy(shard, partial / shard.name)
            (partial / "metrics.json").write_text(json.dumps({"loss": 0.0}))
            planted.append(partial)
            return
        time.sleep(0.05)


def test_dcp_pipeline_prunes_promotes_and_warm_starts_from_the_promoted_checkpoint(
    tmp_path, monkeypatch, airflow_db, capfd
):
    root, dag = shipped_pipeline_copy(tmp_path, "dcp_fsdp_local", monkeypatch)
    jobs = tmp_path / "jobs"
    checkpoints = root / ".adt-demo" / "dcp-fsdp" / "checkpoints"
    promoted = root / ".adt-demo" / "dcp-fsdp" / "promoted"

    seen: set[str] = set()
    first_losses: list[float] = []
    for run_number in (1, 2):
        stop, planted = threading.Event(), []
        planter = threading.Thread(target=_plant_partial_step, args=(jobs, stop, planted), daemon=True)
        if run_number == 1:
            planter.start()
        run = dag.test()
        stop.set()
        captured = capfd.readouterr()
        out = captured.out + captured.err  # the task logs, the job's output among them
        states = {ti.task_id.split(".")[-1]: str(ti.state) for ti in run.get_task_instances()}
        assert str(run.state) == "success", states
        assert states["checkpoint_retention"] == states["promote_checkpoint"] == "success", states
        losses = [float(x) for x in re.findall(r"epoch=\d step=\d+ loss=([0-9.]+)", out)]
        assert len(losses) == 4, out[-3000:]
        [mine] = [p for p in checkpoints.iterdir() if p.is_dir() and p.name not in seen]
        seen.add(mine.name)
        kept = sorted(p.name for p in mine.iterdir() if p.name.startswith("step-"))
        record = json.loads((mine / "_PROMOTED.json").read_text())
        if run_number == 1:
            assert planted, "the partial step was never planted"
            assert "Warm start: promoted requested, but nothing was promoted yet: from scratch" in out
            assert "warm start: initialised from" not in out
            first_losses = losses
        else:
            # the job got run 1's promoted checkpoint as its warm_start channel and loaded its weights
            [chosen] = [line for line in out.splitlines() if "Warm start: the promoted checkpoint" in line]
            assert str(promoted) in chosen, chosen
            assert "warm start: initialised from /opt/ml/input/data/warm_start; training all 4 epochs" in out
            assert losses[0] < first_losses[0] - 0.3, (first_losses, losses)
        assert "resumed from" not in out  # each run's first job: nothing of its own to resume
        python = job_env.default_env_dir() / "bin" / "python"  # ADT_JOB_ENVS may put it anywhere
        assert f"{python} (the pytorch job environment: " in out  # what the image has
        # 4 steps written (4, 8, 12, 16) and losses fall: keep_last 1 and keep_best 1 keep step 16; the
        # partial step (run 1) claims loss 0.0 but is incomplete and older than step 16: deleted
        assert kept == ["step-000000000016"], kept
        deleted = "[12, 10, 8, 4]" if run_number == 1 else "[12, 8, 4]"
        assert re.search(
            rf"Deleted {deleted.count(',') + 1} checkpoints under \S+{mine.name}: {re.escape(deleted)}", out
        )
        assert record["current"]["layout"] == "dcp" and record["current"]["step"] == 16, record
        assert record["current"]["metrics"]["loss"] == pytest.approx(losses[-1], abs=1e-4)
        # the copy at promote_to is this run's step 16, complete
        assert (promoted / ".metadata").read_bytes() == (
            mine / "step-000000000016" / ".metadata"
        ).read_bytes()
        assert sorted(p.name for p in promoted.glob("*.distcp")) == ["__0_0.distcp", "__1_0.distcp"]
