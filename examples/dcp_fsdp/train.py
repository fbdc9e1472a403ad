"""Train a small transformer with FSDP2 (``fully_shard``) and checkpoint it with PyTorch Distributed
Checkpoint (DCP), as a team would for SageMaker's PyTorch estimator: launched with torchrun (the
``torch_distributed`` strategy, or the local backend), NCCL on GPUs, gloo on CPU.

- Every epoch, every rank saves its own shards of the model and optimizer state with
  ``torch.distributed.checkpoint.save`` into ``/opt/ml/checkpoints/step-<12 digit step>/``; no
  rank gathers the full state. DCP writes ``.metadata`` last, once every rank is done: a step
  folder without it was cut short. SageMaker syncs the folder with the spec's
  ``checkpoint.s3_uri``: set ``checkpoint.layout: dcp``.
- Rank 0 writes ``metrics.json`` (``{"loss": ...}``) into the step folder before the save, for
  retention (``keep_best``) and promotion to rank by.
- A job that finds a complete step there (a retry, a spot replacement) resumes from the newest
  one; otherwise the input channel ``warm_start`` (``SM_CHANNEL_WARM_START``, a promoted DCP
  checkpoint) initialises the model weights; otherwise it starts from scratch.
- The model is built from a config and the data is generated here: nothing is downloaded.
- At the end rank 0 saves the full model (``model.pt``) into ``SM_MODEL_DIR``.

It prints one line per epoch for the spec's metric definitions::

    epoch=2 step=12 loss=0.8123
"""

from __future__ import annotations

import argparse
import json
import os
import re
from dataclasses import dataclass

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch import nn
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_state_dict,
    set_model_state_dict,
    set_state_dict,
)
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

CHECKPOINTS = os.environ.get("SM_CHECKPOINT_DIR", "/opt/ml/checkpoints")


@dataclass(frozen=True)
class ModelConfig:
    vocab_size: int = 64
    seq_len: int = 16
    dim: int = 32
    heads: int = 2
    layers: int = 2


class TinyLM(nn.Module):
    """A decoder-only transformer; each block is its own FSDP unit, as in real FSDP setups."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.embed = nn.Embedding(config.vocab_size, config.dim)
        self.position = nn.Parameter(torch.zeros(config.seq_len, config.dim))
        self.blocks = nn.ModuleList(
            nn.TransformerEncoderLayer(
                config.dim, config.heads, 2 * config.dim, dropout=0.0, batch_first=True
            )
            for _ in range(config.layers)
        )
        self.head = nn.Linear(config.dim, config.vocab_size)
        self.register_buffer(
            "mask", nn.Transformer.generate_square_subsequent_mask(config.seq_len), persistent=False
        )

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens) + self.position
        for block in self.blocks:
            x = block(x, src_mask=self.mask, is_causal=True)
        return self.head(x.flatten(0, 1))  # (batch * seq, vocab): a fresh tensor, not a view, for FSDP


def newest_complete_step(root: str) -> str | None:
    """The newest step-<n>/ holding a .metadata (DCP writes it last). A folder without one was cut
    short; the training operator also moves such folders aside (to _incomplete/) before a relaunch."""
    steps = [n for n in os.listdir(root) if re.fullmatch(r"step-\d+", n)] if os.path.isdir(root) else []
    complete = [n for n in steps if os.path.isfile(os.path.join(root, n, ".metadata"))]
    return os.path.join(root, max(complete, key=lambda n: int(n[5:]))) if complete else None


def save(model: nn.Module, optimizer: torch.optim.Optimizer, step: int, epoch: int, loss: float) -> None:
    folder = os.path.join(CHECKPOINTS, f"step-{step:012d}")
    if dist.get_rank() == 0:  # before the save: .metadata stays the last file written
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, "metrics.json"), "w") as f:
            json.dump({"loss": loss}, f)
    model_state, optim_state = get_state_dict(model, optimizer)  # this rank's shards: no gather
    dcp.save({"model": model_state, "optim": optim_state, "step": step, "epoch": epoch}, checkpoint_id=folder)


def resume(model: nn.Module, optimizer: torch.optim.Optimizer, folder: str) -> tuple[int, int]:
    model_state, optim_state = get_state_dict(model, optimizer)
    state = {"model": model_state, "optim": optim_state, "step": 0, "epoch": 0}
    dcp.load(state, checkpoint_id=folder)  # each rank reads the shards it owns
    set_state_dict(model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optim"])
    return int(state["step"]), int(state["epoch"])


def warm_start(model: nn.Module, folder: str) -> None:
    """Only the weights of an earlier run's checkpoint: this run trains all its epochs."""
    state = {"model": get_model_state_dict(model)}
    dcp.load(state, checkpoint_id=folder)
    set_model_state_dict(model, state["model"])


def batches(config: ModelConfig, epoch: int, count: int, size: int) -> list[torch.Tensor]:
    """This rank's batches of seq_len + 1 tokens (inputs and next-token targets): arithmetic
    sequences modulo the vocabulary, a pattern the model learns."""
    g = torch.Generator().manual_seed(1000 * epoch + dist.get_rank())
    out = []
    for _ in range(count):
        start = torch.randint(0, config.vocab_size, (size, 1), generator=g)
        stride = torch.randint(1, 4, (size, 1), generator=g)
        out.append((start + stride * torch.arange(config.seq_len + 1)) % config.vocab_size)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    # SageMaker passes the estimator's hyperparameters as --name value
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--steps_per_epoch", type=int, default=4)
    parser.add_argument("--batch_size", type=int, default=8)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--dim", type=int, default=32)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--model_dir", default=os.environ.get("SM_MODEL_DIR", "/opt/ml/model"))
    parser.add_argument("--warm_start", default=os.environ.get("SM_CHANNEL_WARM_START", ""))
    args, _ = parser.parse_known_args()

    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo")
    rank = dist.get_rank()
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0))) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    mesh = init_device_mesh(device.type, (dist.get_world_size(),))

    torch.manual_seed(0)
    config = ModelConfig(dim=args.dim, layers=args.layers)
    model = TinyLM(config).to(device)
    for block in model.blocks:
        fully_shard(block, mesh=mesh)
    fully_shard(model, mesh=mesh)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)

    step, start_epoch = 0, 0
    found = newest_complete_step(CHECKPOINTS)
    if found is not None:
        step, last_epoch = resume(model, optimizer, found)
        start_epoch = last_epoch + 1
        print(
            f"rank {rank} resumed from {os.path.basename(found)} (epoch={last_epoch}, step={step})",
            flush=True,
        )
    elif args.warm_start and os.path.isfile(os.path.join(args.warm_start, ".metadata")):
        warm_start(model, args.warm_start)
        if rank == 0:
            print(
                f"warm start: initialised from {args.warm_start}; training all {args.epochs} epochs",
                flush=True,
            )

    for epoch in range(start_epoch, args.epochs):
        total = torch.zeros(2)
        for tokens in batches(config, epoch, args.steps_per_epoch, args.batch_size):
            tokens = tokens.to(device)
            logits = model(tokens[:, :-1].contiguous())
            loss = nn.functional.cross_entropy(logits, tokens[:, 1:].reshape(-1))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            step += 1
            total += torch.tensor([loss.item(), 1.0])
        dist.all_reduce(total)
        mean = float(total[0] / total[1])
        if rank == 0:
            print(f"epoch={epoch} step={step} loss={mean:.4f}", flush=True)
        save(model, optimizer, step, epoch, mean)
        if rank == 0:
            print(f"saved step-{step:012d}", flush=True)

    full = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    if rank == 0:
        os.makedirs(args.model_dir, exist_ok=True)
        torch.save(full, os.path.join(args.model_dir, "model.pt"))
        print(f"trained to step {step}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
