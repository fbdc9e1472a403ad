#!/usr/bin/env bash
# Create or refresh the torchvision job environment (default .venv-jobs/torchvision) from
# constraints-job-torchvision.txt: torch 2.14.1 + torchvision 0.29.1 (a pair that loads together)
# and AWS's in-container toolkit. A job uses it when its spec maps local.python to it:
#   local: {python: {default: .venv-jobs/torchvision/bin/python}}
# It is separate from .venv because PyPI's x86_64 torch 2.14.1 is a CUDA build: about 5.7 GB and
# 2.5-7 minutes to install (see docs/local-backend.md, "The job's Python"), a cost the worker's venv,
# the test suite and CI should not pay. Idempotent: reinstalls only when the constraints change.
set -euo pipefail
cd "$(dirname "$0")/.."
ENV=${1:-${ADT_TORCHVISION_ENV:-.venv-jobs/torchvision}}
PINS=constraints-job-torchvision.txt
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null 2>&1 || PY=python3
if [ ! -x "$ENV/bin/python" ]; then
  mkdir -p "$(dirname "$ENV")"
  "$PY" -m venv "$ENV"
fi
stamp=$ENV/.adt-installed
want=$(sha256sum "$PINS" | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  "$ENV/bin/pip" install --quiet -c "$PINS" torch torchvision numpy sagemaker-training sagemaker-pytorch-training
  "$ENV/bin/python" -c "import torch, torchvision.ops; print('torch', torch.__version__, 'torchvision', torchvision.__version__)"
  echo "$want" > "$stamp"
fi
echo "$ENV/bin/python"
