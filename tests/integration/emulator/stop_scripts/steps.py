"""A tiny training loop for the stop-signal tests: a step every ``--step-seconds``, a checkpoint every
``--every`` steps, and one when SageMaker's stop SIGTERM reaches it (checkpointing.StopSignal).

Prints ``resumed from step N`` first, ``step N`` after each step and ``saved step N on SIGTERM`` when
the handler fired (tests/integration/emulator/test_stop_signals_on_emulator.py, bench/stop_signal_loss.py)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from checkpointing import CheckpointWriter, StopSignal, latest_complete_checkpoint, read_manifest

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=100000)
parser.add_argument("--every", type=int, default=100000)
parser.add_argument("--step-seconds", type=float, default=0.05)
args, _ = parser.parse_known_args()

root = os.environ.get("SM_CHECKPOINT_DIR", "/opt/ml/checkpoints")
latest = latest_complete_checkpoint(root)
step = int(read_manifest(latest / "_MANIFEST.json")["step"]) if latest is not None else 0
stop = StopSignal.install()
writer = CheckpointWriter(root, overwrite=True)
print(f"resumed from step {step}", flush=True)
while step < args.steps:
    time.sleep(args.step_seconds)
    step += 1
    print(f"step {step}", flush=True)
    if stop.requested or step % args.every == 0:
        with writer.checkpoint(step) as directory:
            (directory / "state.json").write_text(json.dumps({"step": step}))
        if stop.requested:
            print(f"saved step {step} on SIGTERM", flush=True)
            sys.exit(0)
