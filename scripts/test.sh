#!/usr/bin/env bash
# The whole test suite on a fresh machine: setup, lint, types, tests (parallel), docs build.
#
#   scripts/test.sh [PYTEST ARGS]   setup with scripts/setup.sh --test (every extra, the install check,
#                                   Chromium, PostgreSQL and Redis), then the suite; the arguments go to pytest
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
esac
scripts/setup.sh --test
.venv/bin/ruff check airflow_dist_training tests bench dags examples
.venv/bin/mypy
.venv/bin/python -m pytest -n 2 --dist loadgroup -q -p no:cacheprovider --durations=25 "$@"
NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict --quiet --site-dir "$(mktemp -d)"
