"""The own_entry_point example's command: what your image's python3 would run (stdlib only).

Reads its arguments (ContainerArguments), the channel and SageMaker's resource config, and writes the
model to /opt/ml/model, which SageMaker (and the local backend) packs as model.tar.gz.
"""

import argparse
import json
import os
import sys
from pathlib import Path

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, required=True)
parser.add_argument("--model-dir", required=True)
args = parser.parse_args()

opt_ml = Path(os.environ.get("ADT_OPT_ML", "/opt/ml"))  # the local backend's relocated /opt/ml, if any
config = json.loads((opt_ml / "input" / "config" / "resourceconfig.json").read_text())
model_dir = Path(args.model_dir)  # the local backend relocates /opt/ml arguments itself
model_dir.mkdir(parents=True, exist_ok=True)
for epoch in range(1, args.epochs + 1):
    print(f"epoch={epoch} loss={1.0 / epoch:.4f}", flush=True)
summary = {"epochs": args.epochs, "host": config["current_host"], "argv": sys.argv[1:]}
(model_dir / "summary.json").write_text(json.dumps(summary))
