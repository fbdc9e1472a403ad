"""Checkpoints as real writers leave them, complete or cut short, in a local directory.

``dcp`` is written by ``torch.distributed.checkpoint.save`` itself (one process: DCP needs no
process group to save); ``hf-trainer`` folders have the files Transformers' Trainer writes
(``trainer_state.json`` shaped as ``TrainerState.save_to_json`` writes it, safetensors weights with a
real header, ``torch.save``d optimizer and scheduler state); ``single-file`` is ``torch.save`` under
Lightning's default name; ``manifest`` is the provider's ``CheckpointWriter``.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

from airflow_dist_training.checkpointing import CheckpointWriter


def _torch():  # imported on use: collecting the tests stays fast
    import torch

    return torch


def state(step: int) -> dict:
    torch = _torch()
    return {"model": {"w": torch.full((8, 8), float(step)), "b": torch.zeros(8)}, "step": step}


def write_dcp(root: Path, step: int, *, loss: float | None = None, complete: bool = True) -> Path:
    """``step-<12 digits>/`` as DCP writes it; incomplete: the shard cut short (``.metadata`` is there)."""
    import torch.distributed.checkpoint as dcp

    where = root / f"step-{step:012d}"
    dcp.save(state(step), checkpoint_id=str(where))
    if loss is not None:
        (where / "metrics.json").write_text(json.dumps({"loss": loss}))
    if not complete:
        shard = where / "__0_0.distcp"
        shard.write_bytes(shard.read_bytes()[:100])
    return where


def _safetensors(tensors: dict[str, int]) -> bytes:
    """A safetensors file: 8-byte little-endian header length, JSON header, then the data."""
    header, offset = {}, 0
    for name, count in tensors.items():
        header[name] = {"dtype": "F32", "shape": [count], "data_offsets": [offset, offset + 4 * count]}
        offset += 4 * count
    raw = json.dumps(header).encode()
    return struct.pack("<Q", len(raw)) + raw + b"\0" * offset


def write_hf(
    root: Path,
    step: int,
    *,
    loss: float = 1.0,
    sharded: bool = False,
    drop: tuple[str, ...] = (),
) -> Path:
    """``checkpoint-<step>/`` as Trainer.save_model + _save_optimizer_and_scheduler + _save_rng_state write it."""
    torch = _torch()
    where = root / f"checkpoint-{step}"
    where.mkdir(parents=True)
    if sharded:
        shards = {"model-00001-of-00002.safetensors": ["w"], "model-00002-of-00002.safetensors": ["b"]}
        for name, tensors in shards.items():
            (where / name).write_bytes(_safetensors(dict.fromkeys(tensors, 8)))
        index = {"metadata": {"total_size": 64}, "weight_map": {t: n for n, ts in shards.items() for t in ts}}
        (where / "model.safetensors.index.json").write_text(json.dumps(index, indent=2))
    else:
        (where / "model.safetensors").write_bytes(_safetensors({"w": 64, "b": 8}))
    (where / "config.json").write_text(json.dumps({"model_type": "gpt2", "n_layer": 1}))
    torch.save({"state": {}, "param_groups": [{"lr": 0.1}]}, where / "optimizer.pt")
    torch.save({"last_epoch": step}, where / "scheduler.pt")
    torch.save({"python": 1}, where / "rng_state.pth")
    (where / "training_args.bin").write_bytes(b"\x80\x04N.")
    trainer_state = {
        "best_global_step": step,
        "best_metric": loss,
        "best_model_checkpoint": str(where),
        "epoch": step / 100,
        "eval_steps": 500,
        "global_step": step,
        "is_hyper_param_search": False,
        "is_local_process_zero": True,
        "is_world_process_zero": True,
        "log_history": [
            {
                "epoch": step / 200,
                "grad_norm": 1.5,
                "learning_rate": 0.1,
                "loss": loss + 0.5,
                "step": step // 2,
            },
            {"epoch": step / 100, "eval_loss": loss, "eval_runtime": 0.1, "step": step},
        ],
        "logging_steps": 500,
        "max_steps": 1000,
        "num_train_epochs": 10,
        "save_steps": 500,
        "total_flos": 1.0,
        "train_batch_size": 8,
        "trial_name": None,
        "trial_params": None,
    }
    (where / "trainer_state.json").write_text(json.dumps(trainer_state, indent=2, sort_keys=True) + "\n")
    for name in drop:
        (where / name).unlink()
    return where


def write_single(root: Path, step: int, *, epoch: int = 0, complete: bool = True) -> Path:
    """Lightning's default ``epoch={epoch}-step={step}.ckpt``; incomplete: an empty file."""
    where = root / f"epoch={epoch}-step={step}.ckpt"
    root.mkdir(parents=True, exist_ok=True)
    if complete:
        _torch().save(state(step), where)
    else:
        where.write_bytes(b"")
    return where


def write_manifest(root: Path, step: int, *, loss: float = 1.0, complete: bool = True) -> Path:
    with CheckpointWriter(root, rank=0, checksums=False, fsync=False).checkpoint(
        step=step, metrics={"loss": loss}
    ) as directory:
        (directory / "model.pt").write_bytes(b"m" * 32)
    if not complete:
        (directory / "_MANIFEST.json").unlink()
    return directory
