#!/usr/bin/env bash
# The main job on a fresh machine: setup, then the local end-to-end retraining demo
# (stage -> check changes -> train with 2 torchrun processes on CPU -> checkpoints -> evaluate -> gate
# -> register), ending with a readable summary. No AWS account, no Docker, no GPU.
# Run it again: the second run is skipped, saying why (no new data or code since the champion).
# New data (python examples/make_dataset.py --out .adt-demo/source --seed 1) trains again.
#
#   scripts/demo.sh              backend=local
#   scripts/demo.sh --emulator   backend=sagemaker, against the SageMaker test endpoint on this
#                                machine (airflow-dist-training emulator), started and stopped here
#
#   ADT_DEMO_DIR     the demo's workspace (default .adt-demo)
#   ADT_DEMO_CONF    the run's conf (default {"backend": "local"}), e.g. {"backend": "local", "force": true}
#   Setup (scripts/setup.sh) installs only what the demo needs: the provider with [local] and the
#   job environment; --emulator adds [emulator]. scripts/test.sh sets up the rest.
#
#   ADT_SKIP_SETUP=1 skip scripts/setup.sh (already set up; --emulator still adds [emulator] if missing)
#   ADT_VENV         the virtualenv to run in (default .venv; e.g. .venv-low: the lowest supported
#                    Airflow, built by scripts/setup-low.sh); scripts/setup.sh runs only for .venv
set -euo pipefail
cd "$(dirname "$0")/.."
EMULATOR=0
for arg in "$@"; do
  case "$arg" in
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    --emulator) EMULATOR=1 ;;
    *) echo "scripts/demo.sh: unknown option $arg (see --help)" >&2; exit 2 ;;
  esac
done
VENV="${ADT_VENV:-.venv}"
if [ "${ADT_SKIP_SETUP:-0}" != 1 ]; then
  if [ "$VENV" = .venv ]; then
    if [[ $EMULATOR == 1 ]]; then scripts/setup.sh --emulator; else scripts/setup.sh; fi
  elif [ "$VENV" = .venv-low ]; then scripts/setup-low.sh; fi
elif [[ $EMULATOR == 1 && "$VENV" = .venv ]] && ! .venv/bin/python -c "import moto.server" 2>/dev/null; then
  scripts/setup.sh --emulator  # set up, but without the endpoint's extra: add only that
fi
[ -x "$VENV/bin/airflow" ] || { echo "no Airflow in $VENV (ADT_VENV); run scripts/setup.sh"; exit 1; }
export AIRFLOW_HOME="${AIRFLOW_HOME:-$PWD/.airflow}"
export AIRFLOW__CORE__DAGS_FOLDER="$PWD/dags"
export AIRFLOW__CORE__LOAD_EXAMPLES=False
export ADT_DEMO_DIR="${ADT_DEMO_DIR:-$PWD/.adt-demo}"
export ADT_LOCAL_ROOT="$ADT_DEMO_DIR/jobs"
CONF="${ADT_DEMO_CONF:-{\"backend\": \"local\"\}}"
mkdir -p "$AIRFLOW_HOME" "$ADT_DEMO_DIR"
"$VENV"/bin/airflow db migrate >/dev/null
# The "upstream" dataset: synthetic but learnable (seeded: the same seed gives the same data, so
# a second run finds nothing new and is skipped).
"$VENV"/bin/python examples/make_dataset.py --out "$ADT_DEMO_DIR/source" >/dev/null
if [[ $EMULATOR == 1 ]]; then
  # The endpoint runs in the background for this demo only; the trap stops it (and its jobs).
  rm -rf "$ADT_DEMO_DIR/emulator" && mkdir -p "$ADT_DEMO_DIR/emulator"
  "$VENV"/bin/airflow-dist-training emulator --root "$ADT_DEMO_DIR/emulator" \
    > "$ADT_DEMO_DIR/emulator/endpoint.txt" 2> "$ADT_DEMO_DIR/emulator/emulator.log" &
  EMULATOR_PID=$!
  trap 'kill -TERM $EMULATOR_PID 2>/dev/null; wait $EMULATOR_PID 2>/dev/null || true' EXIT
  for _ in $(seq 1 120); do grep -q '^endpoint: ' "$ADT_DEMO_DIR/emulator/endpoint.txt" && break; sleep 0.5; done
  ENDPOINT=$(sed -n 's/^endpoint: //p' "$ADT_DEMO_DIR/emulator/endpoint.txt")
  [[ -n "$ENDPOINT" ]] || { cat "$ADT_DEMO_DIR/emulator/emulator.log"; echo "the emulator did not start"; exit 1; }
  echo "SageMaker test endpoint: $ENDPOINT"
  # The Airflow AWS connection points at it through its endpoint_url extra.
  export AIRFLOW_CONN_AWS_DEFAULT="{\"conn_type\": \"aws\", \"login\": \"testing\", \"password\": \"testing\", \"extra\": {\"endpoint_url\": \"$ENDPOINT\", \"region_name\": \"us-east-1\"}}"
  # Seed the demo bucket with the training data (the spec's s3://adt-demo-bucket/data/train).
  "$VENV"/bin/python - "$ENDPOINT" "$ADT_DEMO_DIR" <<'PY'
import sys, boto3
s3 = boto3.client("s3", endpoint_url=sys.argv[1], region_name="us-east-1",
                  aws_access_key_id="testing", aws_secret_access_key="testing")
s3.create_bucket(Bucket="adt-demo-bucket")
s3.upload_file(f"{sys.argv[2]}/source/train/data.csv", "adt-demo-bucket", "data/train/data.csv")
PY
  CONF="${ADT_DEMO_CONF:-{\"backend\": \"sagemaker\"\}}"
fi
rm -f "$ADT_DEMO_DIR/last-run-summary.txt"
"$VENV"/bin/airflow dags test distributed_retraining -c "$CONF" > "$ADT_DEMO_DIR/last-run.log" 2>&1 \
  || { "$VENV"/bin/python scripts/demo_failure.py "$ADT_DEMO_DIR/last-run.log" || tail -n 30 "$ADT_DEMO_DIR/last-run.log"
       echo "demo failed; full log: $ADT_DEMO_DIR/last-run.log"; exit 1; }
cat "$ADT_DEMO_DIR/last-run-summary.txt"
echo "Full log: $ADT_DEMO_DIR/last-run.log"
