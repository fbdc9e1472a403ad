"""Jobs that stop while they write a checkpoint, on a job's first run only, for the tests that prove
the next job resumes from the last complete one (local backend and test endpoint).

- ``DCP_KILLED_MID_SAVE`` (with ``dcp_fsdp_source``): examples/dcp_fsdp/train.py (FSDP2, 2 ranks,
  gloo on CPU), run unchanged by a wrapper entry point. Rank 0 (DCP's coordinator) is killed in
  ``finish`` while saving step 12, after every rank wrote its shards and before ``.metadata``:
  where DCP is most fragile.
- ``KILLED_MID_SAVE`` (with ``hf_trainer_source``): examples/hf_trainer/train.py, run unchanged by a
  wrapper entry point that makes the Trainer's checkpoint writer stop after the weights, optimizer
  and scheduler of ``checkpoint-6`` are on disk and before ``trainer_state.json``.
"""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path
from typing import Any

from tests.paths import REPO

# examples/dcp_fsdp/train.py, unchanged, run by this entry point on a job's first run only: rank 0
# (DCP's coordinator) is SIGKILLed in FileSystemWriter.finish for step 12, after every rank wrote
# its shards and before .metadata
DCP_KILLED_MID_SAVE = textwrap.dedent(
    """
    import os, re, runpy, signal
    from torch.distributed.checkpoint import FileSystemWriter

    root = os.environ.get("SM_CHECKPOINT_DIR", "/opt/ml/checkpoints")
    fresh = not (os.path.isdir(root) and any(re.fullmatch(r"step-\\d+", n) for n in os.listdir(root)))
    write_metadata = FileSystemWriter.finish

    def finish(self, metadata, results):
        if fresh and str(self.path).endswith("step-000000000012"):
            print("killed while saving step 12 (before .metadata)", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
        return write_metadata(self, metadata, results)

    FileSystemWriter.finish = finish
    runpy.run_path("train.py", run_name="__main__")
    """
)


def dcp_fsdp_source(tmp_path: Path) -> Path:
    """examples/dcp_fsdp/train.py, unchanged, beside the fault's entry point (killed_mid_save.py)."""
    code = tmp_path / "code"
    code.mkdir()
    shutil.copy(REPO / "examples" / "dcp_fsdp" / "train.py", code / "train.py")
    (code / "killed_mid_save.py").write_text(DCP_KILLED_MID_SAVE)
    return code


# {action}: what the fault does once checkpoint-6 is half written (the endpoint's test stalls instead)
KILLED_MID_SAVE = textwrap.dedent(
    """
    import os, re, runpy, signal, time
    from transformers import Trainer

    fresh = not any(re.fullmatch(r"checkpoint-\\d+", n) for n in os.listdir("/opt/ml/checkpoints"))
    write_rng_state = Trainer._save_rng_state

    def save_rng_state(self, output_dir):  # after weights, optimizer, scheduler; before trainer_state.json
        if fresh and self.state.global_step == 6:
            print("fault: checkpoint-6 half written (no rng state, no trainer_state.json)", flush=True)
            {action}
        return write_rng_state(self, output_dir)

    Trainer._save_rng_state = save_rng_state
    runpy.run_path("train.py", run_name="__main__")
    """
)
HYPERPARAMETERS = {"max_steps": 8, "save_steps": 2, "per_device_train_batch_size": 4}


def hf_trainer_source(tmp_path: Path, action: str) -> Path:
    """The example script, unchanged, beside the fault's entry point."""
    code = tmp_path / "code"
    code.mkdir()
    shutil.copy(REPO / "examples" / "hf_trainer" / "train.py", code / "train.py")
    (code / "killed_mid_save.py").write_text(KILLED_MID_SAVE.replace("{action}", action))
    return code


HF_IMAGE = {
    "framework": "huggingface",
    "transformers_version": "4.56.2",
    "pytorch_version": "2.8.0",
    "py_version": "py312",
}


class _TaskInstance:
    """What the training operator reads of its try: its identity, and the XComs it pushes."""

    task_id, run_id, map_index = "train", "manual__1", -1

    def __init__(self, dag_id: str, try_number: int) -> None:
        self.dag_id, self.try_number = dag_id, try_number
        self.xcom: dict[str, Any] = {}

    def xcom_push(self, key: str, value: Any) -> None:
        self.xcom[key] = value


def run_training_try(spec: dict[str, Any], jobs_root: Path, dag_id: str, try_number: int, **kwargs: Any) -> Any:
    """One try of a local-backend training task (``retries=1``), as the task runner calls it."""
    from airflow_dist_training.operators.training import DistributedTrainingOperator

    ti = _TaskInstance(dag_id, try_number)
    op = DistributedTrainingOperator(
        task_id="train",
        spec=spec,
        backend="local",
        local_hook_kwargs={"root": str(jobs_root), "use_s3": False, "stop_grace_seconds": 5},
        retries=1,
        **kwargs,
    )
    return op.execute({"ti": ti, "run_id": ti.run_id})  # type: ignore[arg-type]
