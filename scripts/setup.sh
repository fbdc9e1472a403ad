#!/usr/bin/env bash
# Create or refresh the project's virtualenv (.venv) from the committed constraints.
# Idempotent: reinstalls only when pyproject.toml or constraints.txt changed.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null 2>&1 || PY=python3
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
  .venv/bin/python -m pip install --quiet --upgrade "pip>=24"
fi
stamp=.venv/.adt-installed
want=$(cat pyproject.toml constraints.txt | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  # torch first, pinned: 2.13.0 resolves to a CPU build on these machines.
  .venv/bin/pip install --quiet -c constraints.txt "torch==2.13.0"
  # toolkit: AWS's sagemaker-training(+pytorch) sdists build a small C extension with gcc
  .venv/bin/pip install --quiet -c constraints.txt -e ".[local,test,docs,toolkit,emulator]"
  # the built package installs with Airflow pinned and moves no Airflow (ADT_SKIP_INSTALL_CHECK=1 skips)
  [ "${ADT_SKIP_INSTALL_CHECK:-0}" = 1 ] || scripts/check-install.sh .venv constraints.txt
  echo "$want" > "$stamp"
fi
# The local backend's default job environment: torch 2.14.1 + torchvision 0.29.1 + numpy + AWS's
# toolkit, nothing of this provider (~5.7 GB, 2-3 minutes the first time, then a stamp check of
# recipe, pins and Python; an outdated one is rebuilt); local/job_env.py says why it is not .venv.
# ADT_SKIP_JOB_ENV=1 skips it (a SageMaker-only install): local jobs are then refused, saying how to build it.
[ "${ADT_SKIP_JOB_ENV:-0}" = 1 ] || .venv/bin/airflow-dist-training job-env >/dev/null
# The tests' MLflow tracking server, in an environment of its own (it cannot share .venv's pins).
scripts/mlflow-server-env.sh
# Headless Chromium (Debian package) for the trigger-form screenshot and its e2e test. Idempotent.
if ! command -v chromium >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  if ! { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null; }; then
    echo "warning: could not install chromium; the trigger-form screenshot test will be skipped" >&2
  fi
fi
# PostgreSQL and Redis (Debian) for the production-like stack's tests (tests/e2e/prod_stack.py)
scripts/setup-prod-stack.sh || echo "warning: could not install postgresql/redis-server; the prod-stack tests will be skipped" >&2
export AIRFLOW_HOME="${AIRFLOW_HOME:-$PWD/.airflow}"
