#!/usr/bin/env bash
# The main job on a fresh machine: setup, then the local end-to-end retraining demo
# (stage -> train with 2 torchrun processes on CPU -> checkpoints -> evaluate -> gate -> register),
# ending with a readable summary. No AWS account, no Docker, no GPU.
#
#   scripts/demo.sh              backend=local
#   scripts/demo.sh --emulator   backend=sagemaker, against the SageMaker test endpoint on this
#                                machine (airflow-dist-training emulator), started and stopped here
set -euo pipefail
cd "$(dirname "$0")/.."
EMULATOR=0
[[ "${1:-}" == "--emulator" ]] && EMULATOR=1
scripts/setup.sh
export AIRFLOW_HOME="$PWD/.airflow"
export AIRFLOW__CORE__DAGS_FOLDER="$PWD/dags"
export AIRFLOW__CORE__LOAD_EXAMPLES=False
export ADT_LOCAL_ROOT="$PWD/.adt-demo/jobs"
mkdir -p "$AIRFLOW_HOME" .adt-demo
.venv/bin/airflow db migrate >/dev/null
# The "upstream" dataset: synthetic but learnable (seeded, so re-runs stage incrementally).
.venv/bin/python examples/make_dataset.py --out .adt-demo/source >/dev/null
CONF='{"backend": "local"}'
if [[ $EMULATOR == 1 ]]; then
  # The endpoint runs in the background for this demo only; the trap stops it (and its jobs).
  rm -rf .adt-demo/emulator && mkdir -p .adt-demo/emulator
  .venv/bin/airflow-dist-training emulator --root .adt-demo/emulator \
    > .adt-demo/emulator/endpoint.txt 2> .adt-demo/emulator/emulator.log &
  EMULATOR_PID=$!
  trap 'kill -TERM $EMULATOR_PID 2>/dev/null; wait $EMULATOR_PID 2>/dev/null || true' EXIT
  for _ in $(seq 1 120); do grep -q '^endpoint: ' .adt-demo/emulator/endpoint.txt && break; sleep 0.5; done
  ENDPOINT=$(sed -n 's/^endpoint: //p' .adt-demo/emulator/endpoint.txt)
  [[ -n "$ENDPOINT" ]] || { cat .adt-demo/emulator/emulator.log; echo "the emulator did not start"; exit 1; }
  echo "SageMaker test endpoint: $ENDPOINT"
  # The Airflow AWS connection points at it through its endpoint_url extra.
  export AIRFLOW_CONN_AWS_DEFAULT="{\"conn_type\": \"aws\", \"login\": \"testing\", \"password\": \"testing\", \"extra\": {\"endpoint_url\": \"$ENDPOINT\", \"region_name\": \"us-east-1\"}}"
  # Seed the demo bucket with the training data (the spec's s3://adt-demo-bucket/data/train).
  .venv/bin/python - "$ENDPOINT" <<'PY'
import sys, boto3
s3 = boto3.client("s3", endpoint_url=sys.argv[1], region_name="us-east-1",
                  aws_access_key_id="testing", aws_secret_access_key="testing")
s3.create_bucket(Bucket="adt-demo-bucket")
s3.upload_file(".adt-demo/source/train/data.csv", "adt-demo-bucket", "data/train/data.csv")
PY
  CONF='{"backend": "sagemaker"}'
fi
.venv/bin/airflow dags test distributed_retraining -c "$CONF" > .adt-demo/last-run.log 2>&1 \
  || { tail -n 60 .adt-demo/last-run.log; echo "demo failed; full log: .adt-demo/last-run.log"; exit 1; }
cat .adt-demo/last-run-summary.txt
echo "Full log: .adt-demo/last-run.log"
