"""The shipped Hugging Face Trainer pipeline (dags/pipelines/hf_trainer_local.yaml) runs twice in a
row with dag.test(): each run trains examples/hf_trainer/train.py in the huggingface job environment,
then prunes its own ``checkpoint-N`` folders (hf-trainer layout) and promotes the best one.

The file is copied unchanged into a scratch tree shaped like the repository
(``tests/dag_bundles.shipped_pipeline_copy``), so its relative paths resolve as they do there.
"""

from __future__ import annotations

import json

import pytest

from tests.dag_bundles import shipped_pipeline_copy

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("yaml-pipeline-dag")]


def test_hf_trainer_pipeline_prunes_and_promotes_trainer_checkpoints_twice(tmp_path, monkeypatch, airflow_db):
    root, dag = shipped_pipeline_copy(tmp_path, "hf_trainer_local", monkeypatch)
    checkpoints = root / ".adt-demo" / "hf-trainer" / "checkpoints"
    promoted = root / ".adt-demo" / "hf-trainer" / "promoted"
    seen: set[str] = set()
    for _ in (1, 2):
        run = dag.test()
        states = {ti.task_id.split(".")[-1]: str(ti.state) for ti in run.get_task_instances()}
        assert str(run.state) == "success", states
        assert states["checkpoint_retention"] == states["promote_checkpoint"] == "success", states
        # each run has its own checkpoint location
        [mine] = [p for p in checkpoints.iterdir() if p.is_dir() and p.name not in seen]
        seen.add(mine.name)
        kept = sorted(p.name for p in mine.iterdir() if p.name.startswith("checkpoint-"))
        losses = {
            name: json.loads((mine / name / "trainer_state.json").read_text())["log_history"][-1]["loss"]
            for name in kept
        }
        record = json.loads((mine / "_PROMOTED.json").read_text())
        best = f"checkpoint-{record['current']['step']}"
        # of the 4 written (save_steps 2, max_steps 8): keep_last 1 and keep_best 1, by the loss
        # trainer_state.json logs (the promoted one, never deleted)
        assert set(kept) == {"checkpoint-8", best}, kept
        assert record["current"]["layout"] == "hf-trainer" and len(record["history"]) == 1
        assert record["current"]["metrics"]["loss"] == min(losses.values()) == losses[best]
        # the copy at promote_to is a complete Trainer checkpoint of this run's best step
        state = json.loads((promoted / "trainer_state.json").read_text())
        assert state["global_step"] == record["current"]["step"]
        assert (promoted / "model.safetensors").is_file() and (promoted / "optimizer.pt").is_file()
