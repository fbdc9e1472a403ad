"""The in-container helper: writer, manifest, latest complete checkpoint."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest

from airflow_dist_training.checkpointing import (
    MANIFEST_NAME,
    CheckpointWriter,
    ManifestError,
    latest_complete_checkpoint,
    read_manifest,
    verify_checkpoint,
)


def _write(root: pathlib.Path, step: int, payload: bytes = b"weights", **kw) -> pathlib.Path:
    writer = CheckpointWriter(root, rank=0)
    with writer.checkpoint(step=step, **kw) as directory:
        (directory / "model.pt").write_bytes(payload)
        (directory / "sub").mkdir()
        (directory / "sub" / "opt.pt").write_bytes(b"opt")
    return directory


def test_writer_produces_layout_and_manifest(tmp_path):
    directory = _write(tmp_path, 120, epoch=3, metrics={"loss": 0.4}, world_size=2)
    assert directory == tmp_path / "step-000000000120"
    manifest = read_manifest(directory)
    assert manifest["step"] == 120 and manifest["epoch"] == 3 and manifest["world_size"] == 2
    assert manifest["metrics"] == {"loss": 0.4}
    assert manifest["format_version"] == 1
    assert manifest["created_at"].endswith("Z")
    assert [f["path"] for f in manifest["files"]] == ["model.pt", "sub/opt.pt"]
    assert manifest["files"][0]["size"] == len(b"weights")
    assert len(manifest["files"][0]["sha256"]) == 64
    # no temporary manifest left behind
    assert sorted(p.name for p in directory.iterdir()) == [MANIFEST_NAME, "model.pt", "sub"]
    assert read_manifest(directory / MANIFEST_NAME) == manifest


def test_exception_inside_block_leaves_checkpoint_incomplete(tmp_path):
    _write(tmp_path, 1)
    writer = CheckpointWriter(tmp_path, rank=0)
    with pytest.raises(RuntimeError), writer.checkpoint(step=2) as directory:
        (directory / "model.pt").write_bytes(b"half")
        raise RuntimeError("preempted")
    assert not (tmp_path / "step-000000000002" / MANIFEST_NAME).exists()
    assert latest_complete_checkpoint(tmp_path) == tmp_path / "step-000000000001"


def test_latest_skips_size_mismatch_and_missing_files(tmp_path):
    _write(tmp_path, 1)
    d2 = _write(tmp_path, 2)
    d3 = _write(tmp_path, 3)
    (d3 / "model.pt").write_bytes(b"trunc")  # upload/download cut short
    (d2 / "sub" / "opt.pt").unlink()
    assert latest_complete_checkpoint(tmp_path) == tmp_path / "step-000000000001"
    assert verify_checkpoint(d3) == [f"{d3 / 'model.pt'}: size 5, manifest says 7"]


def test_checksum_verification_is_opt_in(tmp_path):
    d = _write(tmp_path, 5)
    (d / "model.pt").write_bytes(b"WEIGHTS")  # same size, different bytes
    assert latest_complete_checkpoint(tmp_path) == d
    assert latest_complete_checkpoint(tmp_path, checksums=True) is None


def test_latest_none_for_missing_or_empty_root(tmp_path):
    assert latest_complete_checkpoint(tmp_path / "nope") is None
    assert latest_complete_checkpoint(tmp_path) is None


def test_steps_sort_numerically_not_lexically(tmp_path):
    _write(tmp_path, 99)
    _write(tmp_path, 1000)
    assert latest_complete_checkpoint(tmp_path).name == "step-000000001000"


def test_non_zero_rank_writes_nothing(tmp_path):
    writer = CheckpointWriter(tmp_path, rank=1)
    with writer.checkpoint(step=7) as directory:
        (directory / "model.pt").write_bytes(b"x")
    assert not directory.exists()
    assert list(tmp_path.iterdir()) == []


def test_rank_defaults_from_env(tmp_path, monkeypatch):
    monkeypatch.setenv("RANK", "3")
    assert CheckpointWriter(tmp_path).rank == 3
    monkeypatch.delenv("RANK")
    assert CheckpointWriter(tmp_path).rank == 0


def test_existing_complete_step_is_not_overwritten_by_default(tmp_path):
    _write(tmp_path, 4)
    with pytest.raises(FileExistsError, match="step-000000000004: a complete checkpoint for step 4"):
        _write(tmp_path, 4)
    with CheckpointWriter(tmp_path, rank=0, overwrite=True).checkpoint(step=4) as d:
        (d / "new.pt").write_bytes(b"n")
    assert [f["path"] for f in read_manifest(d)["files"]] == ["new.pt"]


def test_partial_leftover_directory_is_replaced(tmp_path):
    leftover = tmp_path / "step-000000000009"
    leftover.mkdir()
    (leftover / "stale.pt").write_bytes(b"stale")
    d = _write(tmp_path, 9)
    assert not (d / "stale.pt").exists()


def test_non_finite_metric_rejected(tmp_path):
    with pytest.raises(ValueError, match=r"metrics\['loss'\] must be a finite number, got nan"):
        _write(tmp_path, 1, metrics={"loss": float("nan")})


def test_malformed_manifest_error_names_path_and_field(tmp_path):
    d = _write(tmp_path, 1)
    data = json.loads((d / MANIFEST_NAME).read_text())
    data["step"] = "one"
    del data["files"][0]["size"]
    (d / MANIFEST_NAME).write_text(json.dumps(data))
    with pytest.raises(ManifestError) as info:
        latest_complete_checkpoint(tmp_path)
    assert str(info.value) == (
        "malformed checkpoint manifest\n"
        f"{d / MANIFEST_NAME}: field 'step': must be a non-negative integer, got 'one'\n"
        f"{d / MANIFEST_NAME}: field 'files[0].size': must be a non-negative integer, got None"
    )
    assert latest_complete_checkpoint(tmp_path, strict=False) is None


def test_manifest_not_json(tmp_path):
    d = _write(tmp_path, 1)
    (d / MANIFEST_NAME).write_text("{trunc")
    with pytest.raises(ManifestError, match=r"_MANIFEST.json: field '': not valid JSON"):
        read_manifest(d)


def test_module_imports_only_stdlib():
    code = (
        "import sys; import airflow_dist_training.checkpointing as c; "
        "bad = [m for m in ('airflow', 'boto3', 'botocore', 'torch', 'pydantic', 'yaml') if m in sys.modules]; "
        "print(bad)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_torch_round_trip(tmp_path):
    torch = pytest.importorskip("torch")
    writer = CheckpointWriter(tmp_path, rank=0)
    with writer.checkpoint(step=120, epoch=3, metrics={"loss": 0.4}, world_size=2) as directory:
        torch.save({"w": torch.ones(3)}, directory / "model.pt")
    latest = latest_complete_checkpoint(tmp_path)
    assert torch.load(latest / "model.pt")["w"].sum().item() == 3.0


def test_latest_hint_written_after_manifest_and_never_moves_backwards(tmp_path):
    _write(tmp_path, 20)
    assert json.loads((tmp_path / "_LATEST.json").read_text())["step"] == 20
    _write(tmp_path, 5)  # an older step written later does not move the hint back
    hint = json.loads((tmp_path / "_LATEST.json").read_text())
    assert (hint["step"], hint["path"]) == (20, "step-000000000020/")
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "_LATEST.json",
        "step-000000000005",
        "step-000000000020",
    ]


def _rank(root, rank, *, fail=False, **kwargs):
    writer = CheckpointWriter(root, rank=rank, sharded=True, world_size=2, checksums=False, **kwargs)
    with writer.checkpoint(step=5, metrics={"loss": 0.5}) as own:
        (own / f"shard-{rank}.pt").write_bytes(b"x" * (10 + rank))
        (own / "optim").mkdir()
        (own / "optim" / "state.pt").write_bytes(b"o" * 3)
        if fail:
            raise RuntimeError("killed mid-save")


def test_sharded_every_rank_writes_its_files_and_rank0_lists_them_all_last(tmp_path):
    """Two ranks on one node (threads share the directory as processes do): no gather on rank 0."""
    import threading

    other = threading.Thread(target=_rank, args=(tmp_path, 1))
    other.start()
    _rank(tmp_path, 0)
    other.join()
    directory = tmp_path / "step-000000000005"
    manifest = read_manifest(directory)
    assert [(f["path"], f["size"]) for f in manifest["files"]] == [
        ("rank-00000/optim/state.pt", 3),
        ("rank-00000/shard-0.pt", 10),
        ("rank-00001/optim/state.pt", 3),
        ("rank-00001/shard-1.pt", 11),
    ]
    assert manifest["world_size"] == 2 and manifest["metrics"] == {"loss": 0.5}
    assert latest_complete_checkpoint(tmp_path) == directory
    assert sorted(p.name for p in directory.iterdir()) == ["_MANIFEST.json", "rank-00000", "rank-00001"]


def test_sharded_rank_that_dies_mid_save_leaves_no_manifest(tmp_path):
    with pytest.raises(RuntimeError):
        _rank(tmp_path, 1, fail=True)
    with pytest.raises(TimeoutError, match=r"ranks \[1\] did not finish their part within 0s; no manifest written"):
        _rank(tmp_path, 0, wait_seconds=0.2)
    assert latest_complete_checkpoint(tmp_path) is None
    # with a collective instead of the shared directory (one local disk per node)
    gathered = []
    _rank(tmp_path, 0, gather=lambda mine: gathered.append(mine) or [mine, [{"path": "rank-00001/s.pt", "size": 1}]])
    assert read_manifest(tmp_path / "step-000000000005")["files"][-1] == {"path": "rank-00001/s.pt", "size": 1}
    assert latest_complete_checkpoint(tmp_path) is None  # rank 1's file is not on this disk: incomplete here
