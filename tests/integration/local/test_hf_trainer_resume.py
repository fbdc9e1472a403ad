"""A Hugging Face Trainer script (examples/hf_trainer/train.py, unchanged) runs on the local backend
in the huggingface job environment; killed while it writes a checkpoint, the task's retry resumes
from the last complete ``checkpoint-N``, never the partial one.

The kill is the only thing added (fault injection): a wrapper entry point makes the Trainer's
checkpoint writer die after the weights, optimizer and scheduler of ``checkpoint-6`` are on disk
and before ``trainer_state.json``, then runs the example as it is. Transformers'
``get_last_checkpoint`` would pick ``checkpoint-6``, and the Trainer would fail loading its
missing ``trainer_state.json`` (as every retry would): only the relaunch step's move-aside makes the
script resume from ``checkpoint-4``.

The operator runs with its default resume policy (none set): the job checkpoints at the spec's own
location, shared by every run of the spec, and the retry restores that location, so the move-aside
happens there too.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from airflow_dist_training.local.hosts import probe
from tests.killed_mid_save import HF_IMAGE, HYPERPARAMETERS, hf_trainer_source, run_training_try

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not probe().namespaces, reason=f"no Linux namespaces here: {probe().why}"),
]



def test_a_trainer_killed_mid_save_resumes_from_the_last_complete_checkpoint(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    from airflow_dist_training.hooks.checkpoints import CheckpointHook

    spec = {
        "name": "hf",
        "image": HF_IMAGE,
        "source": {
            "entry_point": "killed_mid_save.py",
            "source_dir": str(hf_trainer_source(tmp_path, "os.kill(os.getpid(), signal.SIGKILL)")),
        },
        # Hugging Face images are GPU images (the SDK refuses a CPU instance); the job runs on CPU here
        "compute": {"instance_type": "ml.g5.xlarge", "instance_count": 1},
        "hyperparameters": HYPERPARAMETERS,
        "checkpoint": {
            "s3_uri": "s3://ckpt-bucket/hf/",
            "local_uri": str(tmp_path / "ck"),
            "layout": "hf-trainer",
        },
        "stopping": {"max_runtime_seconds": 600},
    }

    def attempt(try_number: int) -> Any:  # the default resume policy: the spec's own checkpoint location
        return run_training_try(spec, tmp_path / "jobs", "hf", try_number)

    with pytest.raises(Exception):  # noqa: B017  the job's failure, whatever the backend calls it
        attempt(1)
    first = capfd.readouterr().out
    from airflow_dist_training.local.job_env import HUGGINGFACE, default_env_dir

    assert f"{default_env_dir(recipe=HUGGINGFACE)}/bin/python (the huggingface job environment" in first
    assert "fault: checkpoint-6 half written" in first
    run = tmp_path / "ck"
    assert sorted(p.name for p in run.iterdir()) == ["checkpoint-2", "checkpoint-4", "checkpoint-6"]
    assert not (run / "checkpoint-6" / "trainer_state.json").exists()
    assert (run / "checkpoint-6" / "optimizer.pt").is_file()  # what makes it look resumable

    result = attempt(2)  # the task's retry
    second = capfd.readouterr().out
    assert result["status"] == "Completed"
    assert (
        f"Moved the incomplete checkpoint {run}/checkpoint-6 aside to {run}/_incomplete/checkpoint-6 "
        f"({run}/checkpoint-6: no trainer_state.json" in second
    )
    assert (
        f"Resuming from the checkpoint {run}/checkpoint-4 (hf-trainer, step 4) in the spec's checkpoint "
        "location, which every run of the spec shares (checkpoint_resume is not set)"
    ) in second
    # the script chose it, and the Trainer restored its state from it
    assert "***** resuming from /opt/ml/checkpoints/checkpoint-4 *****" in second
    assert "Continuing training from global step 4" in second
    assert "trained to step 8" in second
    state = json.loads((run / "checkpoint-8" / "trainer_state.json").read_text())
    assert state["global_step"] == 8
    assert [e["step"] for e in state["log_history"] if "loss" in e] == list(range(1, 9))
    assert second.count("{'loss': ") == 4  # the retry trained steps 5-8 only (the Trainer logs each)
    hook = CheckpointHook(aws_conn_id=None, layout="hf-trainer")
    assert [(i.step, i.complete) for i in hook.scan(str(run))] == [(8, True), (6, True), (4, True), (2, True)]
    assert not (run / "_incomplete" / "checkpoint-6" / "trainer_state.json").exists()
