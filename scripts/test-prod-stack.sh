#!/usr/bin/env bash
# Every scenario on the production-like stack (tests/e2e/prod/, tests/e2e/README.md), the heavy ones
# at full scale: 40 jobs across two triggerers then one (calls per job-hour), the shipped retraining
# DAG three times on the SageMaker backend. One stack (PostgreSQL, Redis, Celery workers, triggerers)
# for all of them. The default suite (and CI) runs every scenario too, the heavy ones at reduced scale.
# Sets up what the tests need first (scripts/setup.sh --test), so it runs on a fresh clone.
#
#   scripts/test-prod-stack.sh [pytest args]     e.g. -k failover
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
  -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
esac
scripts/setup.sh --test
ADT_PRODSTACK_HEAVY=1 exec .venv/bin/python -m pytest tests/e2e/prod -s -q -p no:cacheprovider --durations=10 "$@"
