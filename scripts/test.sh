#!/usr/bin/env bash
# The whole test suite on a fresh machine: setup, lint, types, tests (parallel), docs build.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
.venv/bin/ruff check airflow_dist_training tests bench dags examples
.venv/bin/mypy
.venv/bin/python -m pytest -n 2 --dist loadgroup -q -p no:cacheprovider --durations=25 "$@"
NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict --quiet --site-dir "$(mktemp -d)"
