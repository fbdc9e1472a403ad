"""The checkpoint layout registry: a toy layout registered here, bad input named, DCP metadata read
from pickle opcodes without unpickling."""

from __future__ import annotations

import json
import pickle
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from airflow_dist_training.checkpoints.dcp_metadata import dcp_references
from airflow_dist_training.checkpoints.layouts import (
    CheckpointLayout,
    Evidence,
    Verdict,
    layout_names,
    register_layout,
    unregister_layout,
)
from airflow_dist_training.errors import SpecValidationError
from airflow_dist_training.hooks.checkpoints import CheckpointHook
from airflow_dist_training.spec.loading import load_spec


# Stand-ins with DCP's class names: pickled here, their bytes are what the reader gets
@dataclass
class _StorageInfo:
    relative_path: str
    offset: int
    length: int


@dataclass(frozen=True)
class MetadataIndex:
    fqn: str
    offset: tuple[int, ...] = ()


@dataclass
class Metadata:
    state_dict_metadata: dict = field(default_factory=dict)
    storage_data: dict = field(default_factory=dict)


class _Boom:
    def __reduce__(self) -> tuple:
        return (Path.write_text, (Path("/nonexistent/owned"), "x"))


def _metadata(**files: tuple[int, int]) -> bytes:
    storage = {
        MetadataIndex(f"t{i}", (0,)): _StorageInfo(p, o, n) for i, (p, (o, n)) in enumerate(files.items())
    }
    return pickle.dumps(Metadata({"x": [1, 2]}, storage), protocol=4)


def test_dcp_references_read_from_opcodes_without_running_anything() -> None:
    raw = _metadata(**{"__0_0.distcp": (0, 100), "__1_0.distcp": (50, 30)})
    assert dcp_references(raw) == {"__0_0.distcp": 100, "__1_0.distcp": 80}
    # a pickle that would call something when unpickled is only read: nothing runs
    evil = pickle.dumps(Metadata({"x": _Boom()}, {MetadataIndex("w"): _StorageInfo("a", 0, 1)}))
    assert dcp_references(evil) == {"a": 1}
    with pytest.raises(ValueError, match="pickle exhausted before seeing STOP"):
        dcp_references(raw[:-1])
    with pytest.raises(ValueError, match="not a DCP Metadata object"):
        dcp_references(pickle.dumps({"storage_data": {}}))


def _judge(
    layout: str, files: Mapping[str, int], contents: Mapping[str, bytes], name: str = "x-7"
) -> Verdict:
    from airflow_dist_training.checkpoints.layouts import LAYOUTS

    return LAYOUTS.get(layout, field="layout").judge(
        Evidence("s3://b/r/" + name + "/", name, 7, files, contents)
    )


def test_bad_input_is_named_with_the_file_and_the_reason() -> None:
    meta = _metadata(**{"__0_0.distcp": (0, 100)})
    assert _judge("dcp", {".metadata": len(meta), "__0_0.distcp": 10}, {".metadata": meta}).problems == (
        "s3://b/r/x-7/__0_0.distcp: 10 bytes, .metadata references 100",
    )
    assert (
        _judge("dcp", {".metadata": 5}, {".metadata": meta[:5]}).unreadable[0][0] == "s3://b/r/x-7/.metadata"
    )
    state = {"trainer_state.json": 9, "model.safetensors.index.json": 9, "optimizer.pt": 1, "scheduler.pt": 1}
    assert _judge("hf-trainer", state, {"trainer_state.json": b"{oops"}).unreadable == (
        (
            "s3://b/r/x-7/trainer_state.json",
            "not valid JSON (Expecting property name enclosed in double quotes: line 1 column 2 (char 1))",
        ),
    )
    index = json.dumps(
        {"weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}
    )
    verdict = _judge(
        "hf-trainer",
        {**state, "model-00001-of-00002.safetensors": 8},
        {"trainer_state.json": b'{"global_step": 7}', "model.safetensors.index.json": index.encode()},
    )
    assert verdict.problems == (
        "s3://b/r/x-7/model-00002-of-00002.safetensors: missing (listed in model.safetensors.index.json)",
    )


@dataclass(frozen=True)
class _Toy:
    """A toy layout: ``run_<n>/`` holding ``weights`` and a ``DONE`` file with the metric in it."""

    @staticmethod
    def judge(evidence: Evidence) -> Verdict:
        if "DONE" not in evidence.contents:
            return Verdict(problems=(f"{evidence.uri}: no DONE",))
        return Verdict(metrics={"score": float(evidence.contents["DONE"])})


@pytest.fixture
def toy_layout() -> Iterator[CheckpointLayout]:
    from airflow_dist_training.checkpoints.layouts import _name_step

    record = register_layout(
        CheckpointLayout(
            name="toy",
            description="run_<n>/ with DONE",
            step_of=_name_step(r"run_(\d+)"),
            looks_like=lambda files: "weights" in files,
            reads=lambda files: ("DONE",),
            judge=_Toy.judge,
            written_last=("DONE",),
        )
    )
    yield record
    unregister_layout("toy")


def test_a_toy_layout_registered_here_is_found_ranked_and_named_in_the_spec(
    toy_layout: CheckpointLayout, tmp_path: Path
) -> None:
    for step, done in [(1, "0.5"), (2, "0.9"), (3, None)]:
        (tmp_path / f"run_{step}").mkdir()
        (tmp_path / f"run_{step}" / "weights").write_bytes(b"w")
        if done:
            (tmp_path / f"run_{step}" / "DONE").write_text(done)
    hook = CheckpointHook(aws_conn_id=None, layout="toy")
    latest = hook.latest_complete(str(tmp_path))
    assert latest is not None and (latest.step, latest.layout, latest.metrics) == (2, "toy", {"score": 0.9})
    assert [m["name"] for m in hook.move_aside_incomplete(str(tmp_path))] == ["run_3"]
    assert (tmp_path / "_incomplete" / "run_3" / "weights").is_file()
    assert "toy" in layout_names()
    spec = _spec_with({"layout": "toy"})
    assert spec.checkpoint is not None and spec.checkpoint.layout == "toy"


def _spec_with(checkpoint: dict) -> object:
    text = Path("examples/specs/heterogeneous_mpi.yaml").read_text()
    import yaml

    data = yaml.safe_load(text)
    data["checkpoint"] = {"s3_uri": "s3://my-bucket/ckpt/", **checkpoint}
    return load_spec(yaml.safe_dump(data))


def test_unknown_layout_and_bad_step_pattern_are_field_path_errors() -> None:
    with pytest.raises(SpecValidationError) as error:
        _spec_with({"layout": "megatron"})
    assert str(error.value) == (
        "<yaml>: checkpoint.layout: unknown checkpoint layout 'megatron'; registered checkpoint layouts: "
        "auto, manifest, dcp, hf-trainer, single-file"
    )
    with pytest.raises(SpecValidationError) as error:
        _spec_with({"layout": "single-file", "step_pattern": "last.ckpt"})
    assert str(error.value) == (
        "<yaml>: checkpoint.step_pattern: 'last.ckpt' has no {step} placeholder (e.g. epoch={epoch}-step={step}.ckpt)"
    )
    with pytest.raises(SpecValidationError, match="checkpoint_layout: unknown checkpoint layout 'x'"):
        from airflow_dist_training.operators.checkpoints import LatestCheckpointOperator

        LatestCheckpointOperator(task_id="t", checkpoint_uri="/tmp/x", checkpoint_layout="x")


def test_single_file_pattern_gives_step_epoch_and_metrics(tmp_path: Path) -> None:
    for name in ("epoch=1-step=10-val_loss=0.50.ckpt", "epoch=2-step=20-val_loss=0.25.ckpt", "last.ckpt"):
        (tmp_path / name).write_bytes(b"weights")
    hook = CheckpointHook(
        aws_conn_id=None,
        layout="single-file",
        step_pattern="epoch={epoch}-step={step}-val_loss={val_loss}.ckpt",
    )
    infos = hook.scan(str(tmp_path))
    assert [(i.step, i.epoch, i.metrics) for i in infos] == [
        (20, 2.0, {"val_loss": 0.25}),
        (10, 1.0, {"val_loss": 0.5}),
    ]
