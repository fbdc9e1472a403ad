#!/usr/bin/env bash
# The main job on a fresh machine: setup, then the local end-to-end retraining demo
# (stage -> check changes -> train with 2 torchrun processes on CPU -> checkpoints -> evaluate -> gate
# -> register), ending with a readable summary. No AWS account, no Docker, no GPU.
# Run it again: the second run is skipped, saying why (no new data or code since the champion).
# New data (python examples/make_dataset.py --out .adt-demo/source --seed 1) trains again.
#   ADT_DEMO_DIR     the demo's workspace (default .adt-demo)
#   ADT_DEMO_CONF    the run's conf (default {"backend": "local"}), e.g. {"backend": "local", "force": true}
#   ADT_SKIP_SETUP=1 skip scripts/setup.sh (already set up)
set -euo pipefail
cd "$(dirname "$0")/.."
[ "${ADT_SKIP_SETUP:-0}" = 1 ] || scripts/setup.sh
export AIRFLOW_HOME="${AIRFLOW_HOME:-$PWD/.airflow}"
export AIRFLOW__CORE__DAGS_FOLDER="$PWD/dags"
export AIRFLOW__CORE__LOAD_EXAMPLES=False
export ADT_DEMO_DIR="${ADT_DEMO_DIR:-$PWD/.adt-demo}"
export ADT_LOCAL_ROOT="$ADT_DEMO_DIR/jobs"
CONF="${ADT_DEMO_CONF:-{\"backend\": \"local\"\}}"
mkdir -p "$AIRFLOW_HOME" "$ADT_DEMO_DIR"
.venv/bin/airflow db migrate >/dev/null
# The "upstream" dataset: synthetic but learnable (seeded: the same seed gives the same data, so
# a second run finds nothing new and is skipped).
.venv/bin/python examples/make_dataset.py --out "$ADT_DEMO_DIR/source" >/dev/null
rm -f "$ADT_DEMO_DIR/last-run-summary.txt"
.venv/bin/airflow dags test distributed_retraining -c "$CONF" > "$ADT_DEMO_DIR/last-run.log" 2>&1 \
  || { tail -n 60 "$ADT_DEMO_DIR/last-run.log"; echo "demo failed; full log: $ADT_DEMO_DIR/last-run.log"; exit 1; }
cat "$ADT_DEMO_DIR/last-run-summary.txt"
echo "Full log: $ADT_DEMO_DIR/last-run.log"
