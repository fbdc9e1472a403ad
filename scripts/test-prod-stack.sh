#!/usr/bin/env bash
# Every scenario on the production-like stack (tests/e2e/prod/, tests/e2e/README.md), the heavy ones
# included: 40 jobs across two triggerers then one (calls per job-hour), the shipped retraining DAG
# three times on the SageMaker backend. One stack (PostgreSQL, Redis, Celery workers, triggerers)
# for all of them. The default suite runs the light scenarios (failover, worker loss, kill, restart).
#
#   scripts/test-prod-stack.sh [pytest args]     e.g. -k failover
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup-prod-stack.sh
ADT_PRODSTACK_HEAVY=1 exec .venv/bin/python -m pytest tests/e2e/prod -s -q -p no:cacheprovider --durations=10 "$@"
