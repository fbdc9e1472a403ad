#!/usr/bin/env bash
# Debian packages for the production-like test stack (tests/e2e/prod_stack.py, tests/e2e/README.md):
# PostgreSQL (the metadata database, a throwaway cluster per session run as the `postgres` user)
# and Redis (the Celery broker). The Python side (apache-airflow-providers-celery, psycopg2-binary)
# comes with the `test` extra (scripts/setup.sh). Idempotent: installs only what is missing.
set -euo pipefail
missing=()
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing+=(postgresql)
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
$SUDO apt-get update -qq
# the packages' own services are not used: the tests start their own clusters on free ports
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
echo "installed: ${missing[*]}"
