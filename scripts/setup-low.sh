#!/usr/bin/env bash
# Create or refresh the lowest-supported-Airflow virtualenv (.venv-low) from
# constraints-airflow-3.1.txt (Airflow 3.1.8; see docs/compatibility.md).
# Idempotent: reinstalls only when pyproject.toml or that constraints file changed.
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
esac
LOW=constraints-airflow-3.1.txt
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null 2>&1 || PY=python3
if [ ! -x .venv-low/bin/python ]; then
  "$PY" -m venv .venv-low
  .venv-low/bin/python -m pip install --quiet --upgrade "pip>=24"
fi
stamp=.venv-low/.adt-installed
want=$(cat pyproject.toml "$LOW" | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  # torch first, pinned: 2.13.0 resolves to a CPU build on these machines.
  .venv-low/bin/pip install --quiet -c "$LOW" "torch==2.13.0"
  .venv-low/bin/pip install --quiet -c "$LOW" -e ".[local,test,toolkit,emulator]"
  # the install must not have moved Airflow off the floor
  .venv-low/bin/python - "$LOW" <<'PY'
import re, sys
from importlib.metadata import version
pinned = re.search(r"^apache-airflow==(\S+)$", open(sys.argv[1]).read(), re.M).group(1)
assert version("apache-airflow") == pinned, (version("apache-airflow"), pinned)
print(f"lowest supported Airflow: apache-airflow=={pinned}")
PY
  # the built package installs with Airflow pinned and moves no Airflow (ADT_SKIP_INSTALL_CHECK=1 skips)
  [ "${ADT_SKIP_INSTALL_CHECK:-0}" = 1 ] || scripts/check-install.sh .venv-low "$LOW"
  echo "$want" > "$stamp"
fi
