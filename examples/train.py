"""Demo training script: a small MLP with DDP, written for SageMaker, runs unchanged locally.

It reads the SageMaker contract (``SM_CHANNEL_TRAIN``, ``SM_MODEL_DIR``, ``SM_CHECKPOINT_DIR``,
hyperparameters as ``--key value``), trains with ``DistributedDataParallel`` (NCCL on GPUs, gloo
on CPU) and a ``DistributedSampler``, prints one line per epoch that metric definitions match::

    epoch=2 loss=0.4100 accuracy=0.8800

saves a complete checkpoint every epoch (``airflow_dist_training.checkpointing``), resumes from the
latest complete one, and saves the final model (``model.pt`` + ``model_config.json``) into
``SM_MODEL_DIR``. Launch it with torchrun (the local backend does that for you).

When SageMaker stops the job (``StopTrainingJob``, a spot interruption, ``MaxRuntimeInSeconds``)
and the SIGTERM reaches the script (the ``launcher`` strategy or ``stopping.forward_sigterm``), it
saves a complete checkpoint at the step it is at, mid-epoch too, and exits within the grace
period; the run's next job continues that epoch from there::

    saved step 6 on SIGTERM (epoch=1, batch 2 of 4)
    resumed from this run's checkpoint step-000000000006 (epoch=1, batch 2 of 4), continuing epoch=1 at batch 3

Epochs are counted **per run**: the checkpoint directory (``SM_CHECKPOINT_DIR``) holds only this
run's checkpoints (the operator scopes it to the run), so a checkpoint found there means "this
run was interrupted: continue at the next epoch". Weights from an earlier run arrive differently,
as the input channel ``warm_start`` (``SM_CHANNEL_WARM_START``: a ``model.tar.gz``, a ``model.pt``
or a checkpoint's ``state.pt``): they initialise the model and the run still trains all its
epochs. The last line says what this run trained, for the metric definitions and the gate::

    run_summary epochs_trained=2 steps_trained=126 job_epochs=2 warm_started=0
"""

from __future__ import annotations

import argparse
import csv
import gc
import io
import json
import os
import signal
import sys
import tarfile
import time
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

try:  # shipped beside this script (the spec's source.dependencies): AWS's stock images lack it
    from checkpointing import CheckpointWriter, StopSignal, latest_complete_checkpoint
except ModuleNotFoundError:  # run where the provider is installed
    from airflow_dist_training.checkpointing import CheckpointWriter, StopSignal, latest_complete_checkpoint


def load_csv(directory: str) -> tuple[torch.Tensor, torch.Tensor]:
    files = sorted(p for p in Path(directory).rglob("*.csv"))
    if not files:
        raise FileNotFoundError(f"no .csv files in channel directory {directory}")
    features: list[list[float]] = []
    labels: list[int] = []
    for path in files:
        with path.open() as fh:
            reader = csv.reader(fh)
            next(reader)  # header
            for row in reader:
                labels.append(int(row[0]))
                features.append([float(v) for v in row[1:]])
    return torch.tensor(features, dtype=torch.float32), torch.tensor(labels, dtype=torch.long)


def build_model(in_features: int, hidden: int, classes: int) -> nn.Module:
    return nn.Sequential(
        nn.Linear(in_features, hidden),
        nn.ReLU(),
        nn.Linear(hidden, hidden),
        nn.ReLU(),
        nn.Linear(hidden, classes),
    )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--hidden", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--epoch-sleep", type=float, default=0.0, help="test hook: seconds to sleep per epoch"
    )
    parser.add_argument(
        "--step-sleep", type=float, default=0.0, help="test hook: seconds to sleep per training step"
    )
    parser.add_argument("--fail-at-epoch", type=int, default=-1, help="test hook: raise at this epoch")
    parser.add_argument(
        "--checkpoint-until-epoch",
        type=int,
        default=-1,
        help="test hook: write no checkpoint after this epoch, training on (a silent checkpoint stall)",
    )
    parser.add_argument("--train", default=os.environ.get("SM_CHANNEL_TRAIN", "data/train"))
    parser.add_argument("--model-dir", default=os.environ.get("SM_MODEL_DIR", "model"))
    parser.add_argument(
        "--checkpoint-dir", default=os.environ.get("SM_CHECKPOINT_DIR", "/opt/ml/checkpoints")
    )
    parser.add_argument("--warm-start", default=os.environ.get("SM_CHANNEL_WARM_START", ""))
    # SageMaker passes every hyperparameter as --name value: a spec's other ones (e.g. model_name)
    # are not this demo's, so they are reported and ignored rather than failing the job
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        print(f"ignoring hyperparameters this script does not use: {' '.join(unknown)}", flush=True)
    return args


def warm_start_weights(channel: str, device: torch.device) -> dict[str, torch.Tensor] | None:
    """The model weights in the ``warm_start`` channel: a model.tar.gz, model.pt or a checkpoint."""
    root = Path(channel) if channel else None
    if root is None or not root.is_dir():
        return None
    for archive in sorted(root.rglob("model.tar.gz")):
        with tarfile.open(archive) as tar:
            member = next((m for m in tar.getmembers() if m.name.endswith("model.pt")), None)
            if member is not None and (fh := tar.extractfile(member)) is not None:
                return torch.load(io.BytesIO(fh.read()), map_location=device)
    for model in sorted(root.rglob("model.pt")):
        return torch.load(model, map_location=device)
    for state in sorted(root.rglob("state.pt")):
        return torch.load(state, map_location=device)["model"]
    return None


def restore(
    resume: Path,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    steps_per_epoch: int,
    device: torch.device,
    rank: int,
) -> tuple[int, int, torch.Tensor]:
    """Continue this run from its checkpoint ``resume``: (epoch to start at, batches of it already
    trained, their loss sum / correct / count). A checkpoint saved at a stop is mid-epoch."""
    state = torch.load(resume / "state.pt", map_location=device)
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    done = int(state.get("batch", steps_per_epoch))  # batches of its epoch it had trained
    if done < steps_per_epoch:  # saved mid-epoch, at a stop: continue that epoch
        epoch = int(state["epoch"])
        if rank == 0:
            print(
                f"resumed from this run's checkpoint {resume.name} (epoch={epoch}, batch {done} of "
                f"{steps_per_epoch}), continuing epoch={epoch} at batch {done + 1}",
                flush=True,
            )
        return epoch, done, torch.tensor(state["totals"])
    if rank == 0:
        print(
            f"resumed from this run's checkpoint {resume.name} (epoch={state['epoch']}), "
            f"starting at epoch={int(state['epoch']) + 1}",
            flush=True,
        )
    return int(state["epoch"]) + 1, 0, torch.zeros(3)


def stop_requested(stop: StopSignal, distributed: bool) -> bool:
    """Whether any rank got the stop signal: the ranks save the same step together (each gets the
    forwarded SIGTERM, though not at the same step), so the flag is reduced across them every step."""
    if not distributed:
        return stop.requested
    flag = torch.tensor([int(stop.requested)])
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    return bool(flag.item())


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    stop = StopSignal.install()  # before anything slow: a stop may come at any time
    distributed = "WORLD_SIZE" in os.environ
    use_cuda = torch.cuda.is_available()
    if distributed:
        dist.init_process_group(backend="nccl" if use_cuda else "gloo")
    rank = dist.get_rank() if distributed else 0
    world_size = dist.get_world_size() if distributed else 1
    device = torch.device(f"cuda:{int(os.environ.get('LOCAL_RANK', 0))}" if use_cuda else "cpu")
    torch.manual_seed(args.seed)

    x, y = load_csv(args.train)
    if rank == 0:  # what the job read from its channel (the tests compare it with the source data)
        print(f"train data: {len(y)} rows from {args.train}", flush=True)
    classes = int(y.max().item()) + 1
    dataset = TensorDataset(x, y)
    sampler = DistributedSampler(dataset, num_replicas=world_size, rank=rank, shuffle=True, seed=args.seed)
    loader = DataLoader(dataset, batch_size=args.batch_size, sampler=sampler)

    model = build_model(x.shape[1], args.hidden, classes).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    steps_per_epoch = len(loader)
    start_epoch, skip = 0, 0  # skip: batches of start_epoch trained before a mid-epoch stop
    carried = torch.zeros(3)  # loss sum, correct, count of those batches (all ranks')
    warm_started = False
    resume = latest_complete_checkpoint(args.checkpoint_dir)
    if resume is not None:
        start_epoch, skip, totals = restore(resume, model, optimizer, steps_per_epoch, device, rank)
        if rank == 0:  # the others start the epoch's sums at 0: the all_reduce adds them up
            carried = totals
    elif (weights := warm_start_weights(args.warm_start, device)) is not None:
        model.load_state_dict(weights)  # weights only: a fresh optimizer, all epochs to train
        warm_started = True
        if rank == 0:
            print(
                f"warm start: initialised from {args.warm_start}; training all {args.epochs} epochs",
                flush=True,
            )
    elif rank == 0:
        print("no checkpoint found: starting from scratch", flush=True)
    ddp = DistributedDataParallel(model) if distributed else model
    loss_fn = nn.CrossEntropyLoss()
    writer = CheckpointWriter(args.checkpoint_dir, rank=rank)

    kill_at = int(os.environ.get("ADT_DEMO_KILL_AT_EPOCH", "-1"))  # test hook: a spot reclaim, an OOM kill
    stopping = False
    for epoch in range(start_epoch, args.epochs):
        if epoch == args.fail_at_epoch:
            raise RuntimeError(f"deliberate failure at epoch {epoch} (--fail-at-epoch)")
        if epoch == kill_at and resume is None and rank == 0:
            print(f"killing this job at epoch={epoch} (ADT_DEMO_KILL_AT_EPOCH)", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
        sampler.set_epoch(epoch)  # the same order as before a stop: skipping its first batches continues it
        ddp.train()
        started = time.time()
        totals = carried if epoch == start_epoch else torch.zeros(3)
        batch = 0
        for batch, (features, labels) in enumerate(loader, start=1):
            if epoch == start_epoch and batch <= skip:
                continue
            features, labels = features.to(device), labels.to(device)
            optimizer.zero_grad()
            logits = ddp(features)
            loss = loss_fn(logits, labels)
            loss.backward()
            optimizer.step()
            totals += torch.tensor(
                [loss.item() * len(labels), (logits.argmax(1) == labels).sum().item(), len(labels)]
            )
            if args.step_sleep:
                time.sleep(args.step_sleep)
            stopping = stop_requested(stop, distributed)
            if stopping:
                break
        if distributed:
            dist.all_reduce(totals)  # rank 0 holds what a mid-epoch stop carried over; the others none
        epoch_loss = (totals[0] / totals[2]).item()
        accuracy = (totals[1] / totals[2]).item()
        samples_per_second = totals[2].item() / max(time.time() - started, 1e-9)
        if rank == 0 and batch == steps_per_epoch:
            print(
                f"epoch={epoch} loss={epoch_loss:.4f} accuracy={accuracy:.4f} "
                f"samples_per_second={samples_per_second:.1f}",
                flush=True,
            )
        step = epoch * steps_per_epoch + batch
        # the stall test hook writes nothing after its epoch, but a save at SIGTERM is never skipped
        stalled = 0 <= args.checkpoint_until_epoch < epoch and not stopping
        if not stalled:
            with writer.checkpoint(
                step=step, epoch=epoch, metrics={"loss": epoch_loss, "accuracy": accuracy}, world_size=world_size
            ) as directory:
                if rank == 0:
                    torch.save(
                        {
                            "model": model.state_dict(),
                            "optimizer": optimizer.state_dict(),
                            "epoch": epoch,
                            "batch": batch,
                            "totals": totals.tolist(),
                        },
                        directory / "state.pt",
                    )
        if stopping:  # saved within SageMaker's 120 s: the run's next job continues from this step
            if rank == 0:
                print(
                    f"saved step {step} on SIGTERM (epoch={epoch}, batch {batch} of {steps_per_epoch})",
                    flush=True,
                )
            break
        if args.epoch_sleep:
            time.sleep(args.epoch_sleep)

    if rank == 0 and not stopping:  # a stopped job trained only part of its epochs: no model
        # what this run trained (its checkpoints are its own, so resumed epochs count too)
        print(
            f"run_summary epochs_trained={max(args.epochs, start_epoch)} "
            f"steps_trained={max(args.epochs, start_epoch) * steps_per_epoch} "
            f"job_epochs={max(args.epochs - start_epoch, 0)} warm_started={int(warm_started)}",
            flush=True,
        )
        model_dir = Path(args.model_dir)
        model_dir.mkdir(parents=True, exist_ok=True)
        torch.save(model.state_dict(), model_dir / "model.pt")
        (model_dir / "model_config.json").write_text(
            json.dumps({"in_features": x.shape[1], "hidden": args.hidden, "classes": classes})
        )
        print(f"saved model to {model_dir}", flush=True)
    if distributed:
        dist.barrier()
        # DDP's reducer holds the process group: free it first, so that gloo's worker threads are
        # joined here and not during interpreter shutdown (an intermittent SIGABRT,
        # "terminate called without an active exception").
        del ddp, model, optimizer
        gc.collect()
        dist.destroy_process_group()


if __name__ == "__main__":
    try:
        main()
    except Exception:
        sys.stdout.flush()
        raise
