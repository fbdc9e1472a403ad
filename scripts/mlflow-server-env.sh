#!/usr/bin/env bash
# The tests' MLflow tracking server (`mlflow server`) and MLflow's own client, in a virtualenv of its
# own: mlflow cannot be installed into .venv beside the pinned Airflow (cachetools; docs/mlflow.md).
# Idempotent: rebuilt only when tests/mlflow-server-constraints.txt changed. ~1 minute the first time.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null 2>&1 || PY=python3
env_dir=${ADT_MLFLOW_SERVER_ENV:-$HOME/.cache/airflow-dist-training/mlflow-server-env}
stamp="$env_dir/.adt-mlflow-server-env"
want=$(sha256sum tests/mlflow-server-constraints.txt | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  [ -x "$env_dir/bin/python" ] || "$PY" -m venv "$env_dir"
  "$env_dir/bin/pip" install --quiet -c tests/mlflow-server-constraints.txt mlflow
  "$env_dir/bin/python" -c "import mlflow.server, mlflow.tracking"
  echo "$want" > "$stamp"
fi
