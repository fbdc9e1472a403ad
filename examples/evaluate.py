"""Evaluate the demo model on the held-out split and write ``evaluation.json``.

    python examples/evaluate.py --model <model.tar.gz | model dir | file://...> \
        --data <test channel dir> --output <dir or .json path>

``evaluation.json``::

    {"metrics": {"accuracy": 0.93, "loss": 0.21},
     "evaluation_set_hash": "sha256:<hex of the sorted data files' names and bytes>"}
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tarfile
import tempfile
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from train import build_model, load_csv


def dataset_hash(directory: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(p for p in directory.rglob("*.csv")):
        digest.update(path.relative_to(directory).as_posix().encode() + b"\0")
        digest.update(path.read_bytes())
    return "sha256:" + digest.hexdigest()


def _model_dir(model: str, scratch: Path) -> Path:
    path = Path(model[len("file://") :] if model.startswith("file://") else model)
    if path.is_dir():
        return path
    with tarfile.open(path, "r:*") as tar:
        tar.extractall(scratch, filter="data")
    return scratch


def evaluate(model: str, data: str) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as tmp:
        directory = _model_dir(model, Path(tmp))
        config = json.loads((directory / "model_config.json").read_text())
        net = build_model(config["in_features"], config["hidden"], config["classes"])
        net.load_state_dict(torch.load(directory / "model.pt", map_location="cpu"))
    net.eval()
    x, y = load_csv(data)
    with torch.no_grad():
        logits = net(x)
        loss = nn.CrossEntropyLoss()(logits, y).item()
        accuracy = (logits.argmax(1) == y).float().mean().item()
    return {
        "metrics": {"accuracy": round(accuracy, 6), "loss": round(loss, 6)},
        "evaluation_set_hash": dataset_hash(Path(data)),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    # --model-dir/--output-dir and ADT_DATA_DIR are how EvaluationOperator calls the script.
    parser.add_argument(
        "--model", "--model-dir", required=True, help="model.tar.gz, a model directory or file://"
    )
    parser.add_argument(
        "--data", default=os.environ.get("ADT_DATA_DIR"), help="the held-out split (a directory of CSV files)"
    )
    parser.add_argument(
        "--output", "--output-dir", required=True, help="a directory (gets evaluation.json) or a .json path"
    )
    args = parser.parse_args(argv)
    if not args.data:
        parser.error("--data (or ADT_DATA_DIR) is required")
    report = evaluate(args.model, args.data)
    out = Path(args.output)
    if out.suffix != ".json":
        out = out / "evaluation.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2, sort_keys=True))
    print(json.dumps(report, sort_keys=True))


if __name__ == "__main__":
    main()
