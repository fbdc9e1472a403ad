"""Train a causal language model with the Hugging Face Trainer, written as for SageMaker's Hugging
Face estimator: it runs unchanged there, on the local backend and on the SageMaker test endpoint.

- Checkpoints go to ``/opt/ml/checkpoints`` every ``--save-steps`` (``checkpoint-<step>/``), which
  SageMaker syncs with the spec's ``checkpoint.s3_uri``: set ``checkpoint.layout: hf-trainer``.
- A job that finds a checkpoint there (a retry, a spot replacement) resumes from the newest one, as
  Hugging Face's SageMaker spot-instance example does (``get_last_checkpoint``). That picks the
  highest-numbered folder, complete or not; the training operator moves incomplete ones aside
  before the job starts, so it is the newest *complete* one (docs/checkpoints.md).
- The model is built from a config and the data is generated here: nothing is downloaded. Swap in
  ``AutoModelForCausalLM.from_pretrained`` and your dataset for real training.
"""

from __future__ import annotations

import argparse
import os

import datasets
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments
from transformers.trainer_utils import get_last_checkpoint

CHECKPOINTS = "/opt/ml/checkpoints"


def main() -> None:
    parser = argparse.ArgumentParser()
    # SageMaker passes the estimator's hyperparameters as --name value
    parser.add_argument("--max_steps", type=int, default=60)
    parser.add_argument("--save_steps", type=int, default=20)
    parser.add_argument("--per_device_train_batch_size", type=int, default=8)
    parser.add_argument("--learning_rate", type=float, default=5e-4)
    parser.add_argument("--model_dir", default=os.environ.get("SM_MODEL_DIR", "/opt/ml/model"))
    args, _ = parser.parse_known_args()

    config = GPT2Config(vocab_size=128, n_positions=32, n_embd=32, n_layer=2, n_head=2)
    model = GPT2LMHeadModel(config)
    sequences = [[(start + i) % config.vocab_size for i in range(32)] for start in range(256)]
    train = datasets.Dataset.from_dict({"input_ids": sequences, "labels": sequences})

    training_args = TrainingArguments(
        output_dir=CHECKPOINTS,
        max_steps=args.max_steps,
        save_steps=args.save_steps,
        per_device_train_batch_size=args.per_device_train_batch_size,
        learning_rate=args.learning_rate,
        logging_steps=1,
        log_level="info",  # the Trainer says where it resumes ("Continuing training from global step N")
        report_to=[],
        seed=0,
    )
    trainer = Trainer(model=model, args=training_args, train_dataset=train)

    last_checkpoint = get_last_checkpoint(CHECKPOINTS) if os.path.isdir(CHECKPOINTS) else None
    if last_checkpoint is not None:
        print(f"***** resuming from {last_checkpoint} *****", flush=True)
    result = trainer.train(resume_from_checkpoint=last_checkpoint)
    print(f"trained to step {trainer.state.global_step}: train_loss={result.training_loss:.4f}", flush=True)
    trainer.save_model(args.model_dir)


if __name__ == "__main__":
    main()
