"""The demo trains with two processes on CPU, the loss decreases, and a second run resumes."""

from __future__ import annotations

import json
import sys
import tarfile
from pathlib import Path

import pytest

from airflow_dist_training.hooks.local_training import LocalTrainingHook
from airflow_dist_training.spec.loading import load_spec

from .conftest import EXAMPLES


def demo_spec(demo_data: Path, tmp_path: Path, epochs: int) -> object:
    spec = load_spec(EXAMPLES / "specs" / "local_demo.yaml")
    data = spec.model_dump(mode="json", exclude_none=True)
    data["source"]["source_dir"] = str(EXAMPLES)
    data["channels"]["train"]["local_source"] = str(demo_data / "train")
    data["checkpoint"]["local_uri"] = str(tmp_path / "checkpoints")
    data["output"]["local_uri"] = str(tmp_path / "models")
    data["hyperparameters"]["epochs"] = epochs
    return load_spec(data)


@pytest.mark.slow
def test_demo_trains_with_two_processes_then_resumes_from_the_checkpoint(
    demo_data: Path, tmp_path: Path
) -> None:
    hook = LocalTrainingHook(root=tmp_path / "root", use_s3=False)
    lines: list[str] = []
    first = hook.run_job(demo_spec(demo_data, tmp_path, epochs=2), "demo-run-1", log=lines.append)

    assert first["status"] == "Completed"
    assert first["backend"] == "local"
    assert "--nproc-per-node=2" in "\n".join(lines)
    assert "[algo-1] no checkpoint found: starting from scratch" in lines
    series = json.loads((tmp_path / "root" / "demo-run-1" / "metrics.json").read_text())["series"]
    losses = [p["value"] for p in series if p["name"] == "train:loss"]
    assert len(losses) == 2
    assert losses[-1] < losses[0]
    assert first["final_metrics"]["train:loss"] == losses[-1]
    assert first["final_metrics"]["train:accuracy"] > 0.8
    assert [t["status"] for t in first["timeline"]] == [
        "Starting",
        "Downloading",
        "Training",
        "Uploading",
        "Completed",
    ]
    model_tar = Path(first["model_artifact_uri"].removeprefix("file://"))
    assert model_tar == tmp_path / "models" / "demo-run-1" / "output" / "model.tar.gz"
    with tarfile.open(model_tar) as tar:
        assert sorted(tar.getnames()) == ["model.pt", "model_config.json"]
    assert first["checkpoint_uri"] == (tmp_path / "checkpoints").as_uri()
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir())[-1].startswith("step-")

    # A new job (new job directory) with the same checkpoint store resumes instead of starting over.
    lines2: list[str] = []
    second = hook.run_job(demo_spec(demo_data, tmp_path, epochs=4), "demo-run-2", log=lines2.append)
    text = "\n".join(lines2)
    assert "resumed from this run's checkpoint step-" in text
    assert "(epoch=1), starting at epoch=2" in text
    assert "no checkpoint found" not in text
    epochs = [
        p["value"]
        for p in json.loads((tmp_path / "root" / "demo-run-2" / "metrics.json").read_text())["series"]
        if p["name"] == "train:epoch"
    ]
    assert epochs == [2.0, 3.0]
    assert second["final_metrics"]["train:epoch"] == 3.0

    # evaluate.py writes evaluation.json for the gate (run in-process: one torch import less)
    sys.path.insert(0, str(EXAMPLES))
    try:
        import evaluate
    finally:
        sys.path.remove(str(EXAMPLES))
    out = tmp_path / "eval"
    evaluate.main(
        ["--model", second["model_artifact_uri"], "--data", str(demo_data / "test"), "--output", str(out)]
    )
    report = json.loads((out / "evaluation.json").read_text())
    assert report["metrics"]["accuracy"] > 0.8
    assert report["evaluation_set_hash"].startswith("sha256:")
