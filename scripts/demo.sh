#!/usr/bin/env bash
# The main job on a fresh machine: setup, then the local end-to-end retraining demo
# (stage -> train with 2 torchrun processes on CPU -> checkpoints -> evaluate -> gate -> register),
# ending with a readable summary. No AWS account, no Docker, no GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
export AIRFLOW_HOME="$PWD/.airflow"
export AIRFLOW__CORE__DAGS_FOLDER="$PWD/dags"
export AIRFLOW__CORE__LOAD_EXAMPLES=False
export ADT_LOCAL_ROOT="$PWD/.adt-demo/jobs"
mkdir -p "$AIRFLOW_HOME" .adt-demo
.venv/bin/airflow db migrate >/dev/null
# The "upstream" dataset: synthetic but learnable (seeded, so re-runs stage incrementally).
.venv/bin/python examples/make_dataset.py --out .adt-demo/source >/dev/null
.venv/bin/airflow dags test distributed_retraining -c '{"backend": "local"}' > .adt-demo/last-run.log 2>&1 \
  || { tail -n 60 .adt-demo/last-run.log; echo "demo failed; full log: .adt-demo/last-run.log"; exit 1; }
cat .adt-demo/last-run-summary.txt
echo "Full log: .adt-demo/last-run.log"
