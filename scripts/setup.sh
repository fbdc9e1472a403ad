#!/usr/bin/env bash
# Create or refresh the project's virtualenv (.venv) from the committed constraints.
#
#   scripts/setup.sh              what the demo needs: the provider with [local] (Airflow, the Amazon
#                                 provider, torch on CPU) and the local backend's job environment
#   scripts/setup.sh --emulator   also [emulator]: the SageMaker test endpoint (scripts/demo.sh --emulator)
#   scripts/setup.sh --test       what the test suite needs (scripts/test.sh): also the extras test,
#                                 docs, toolkit and emulator, the install check, and, system-wide with
#                                 apt-get, headless Chromium, PostgreSQL and Redis
#
# Idempotent: reinstalls only when pyproject.toml or constraints.txt changed, or an extra is new.
#   ADT_SKIP_JOB_ENV=1        skip the job environment (a SageMaker-only install)
#   ADT_SKIP_INSTALL_CHECK=1  skip the install check of --test
set -euo pipefail
cd "$(dirname "$0")/.."
EXTRAS=local
TEST=0
for arg in "$@"; do
  case "$arg" in
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    --emulator) EXTRAS="$EXTRAS,emulator" ;;
    --test) EXTRAS="local,test,docs,toolkit,emulator"; TEST=1 ;;
    *) echo "scripts/setup.sh: unknown option $arg (see --help)" >&2; exit 2 ;;
  esac
done
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null 2>&1 || PY=python3
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
  .venv/bin/python -m pip install --quiet --upgrade "pip>=24"
fi
# The stamp: the inputs' hash, then the extras installed with them (a later, smaller set keeps them).
stamp=.venv/.adt-installed
want=$(cat pyproject.toml constraints.txt | sha256sum | cut -d' ' -f1)
extras() { tr ',' '\n' | sed '/^$/d' | sort -u | paste -sd, -; }
have="" have_extras=""
[ ! -f "$stamp" ] || read -r have have_extras < "$stamp" || true
[ "$have" = "$want" ] || have_extras=""
have_extras=$(echo "$have_extras" | extras)
all=$(echo "$have_extras,$EXTRAS" | extras)
if [ "$have" != "$want" ] || [ "$all" != "$have_extras" ]; then
  # torch first, pinned: 2.13.0 resolves to a CPU build on these machines.
  .venv/bin/pip install --quiet -c constraints.txt "torch==2.13.0"
  # toolkit: AWS's sagemaker-training(+pytorch) sdists build a small C extension with gcc
  .venv/bin/pip install --quiet -c constraints.txt -e ".[$all]"
  # --test: the built package installs with Airflow pinned and moves no Airflow
  if [ "$TEST" = 1 ] && [ "${ADT_SKIP_INSTALL_CHECK:-0}" != 1 ]; then
    scripts/check-install.sh .venv constraints.txt
  fi
  echo "$want $all" > "$stamp"
fi
# The local backend's default job environment: torch 2.14.1 + torchvision 0.29.1 + numpy + AWS's
# toolkit, nothing of this provider (~5.7 GB, 2-3 minutes the first time, then a stamp check of
# recipe, pins and Python; an outdated one is rebuilt); local/job_env.py says why it is not .venv.
# Without it local jobs are refused, saying how to build it.
[ "${ADT_SKIP_JOB_ENV:-0}" = 1 ] || .venv/bin/airflow-dist-training job-env >/dev/null
[ "$TEST" = 1 ] || exit 0
# The Hugging Face images' job environment, for the tests that run a Trainer script: a layer over the
# one above (transformers, accelerate, datasets; ~0.5 GB, 1-3 minutes the first time, then a stamp check)
if [ "${ADT_SKIP_JOB_ENV:-0}" != 1 ]; then
  started=$SECONDS
  .venv/bin/airflow-dist-training job-env --recipe huggingface >/dev/null
  echo "job environment huggingface: ready in $((SECONDS - started)) s"
fi
# The tests' MLflow tracking server, in an environment of its own (it cannot share .venv's pins).
scripts/mlflow-server-env.sh
# Headless Chromium (Debian package) for the screenshots and their e2e tests. Idempotent.
if ! command -v chromium >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  if ! { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null; }; then
    echo "warning: could not install chromium; the browser tests will be skipped" >&2
  fi
fi
# PostgreSQL and Redis (Debian) for the production-like stack's tests (tests/e2e/prod_stack.py)
scripts/setup-prod-stack.sh || echo "warning: could not install postgresql/redis-server; the prod-stack tests will be skipped" >&2
