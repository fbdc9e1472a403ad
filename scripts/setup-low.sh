#!/usr/bin/env bash
# Create or refresh the lowest-supported-Airflow virtualenv (.venv-low) from
# constraints-airflow-3.1.txt (Airflow 3.1.8; see docs/compatibility.md).
# Idempotent: reinstalls only when pyproject.toml or that constraints file changed.
set -euo pipefail
cd "$(dirname "$0")/.."
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
  # What a user on a managed Airflow does: install the built package (a wheel, not this editable
  # checkout) with their Airflow pinned and no constraints file. pip must resolve it without moving
  # any Airflow distribution (docs/compatibility.md, "Installing on a managed Airflow").
  # ADT_SKIP_INSTALL_CHECK=1 skips it (it builds the wheel: ~10-40 s).
  if [ "${ADT_SKIP_INSTALL_CHECK:-0}" != 1 ]; then
    wheels=$(mktemp -d)
    pinned=$(sed -n 's/^apache-airflow==//p' "$LOW")
    if ! .venv-low/bin/pip wheel --quiet --no-deps --wheel-dir "$wheels" . > "$wheels/pip.log" 2>&1 \
      || ! .venv-low/bin/pip install --quiet --dry-run --report "$wheels/report.json" \
        "apache-airflow==$pinned" "$(ls "$wheels"/airflow_dist_training-*.whl)[local,toolkit]" >> "$wheels/pip.log" 2>&1; then
      grep -v "^WARNING: Location" "$wheels/pip.log"; echo "the package does not build or install with apache-airflow==$pinned"; exit 1
    fi
    .venv-low/bin/python - "$wheels/report.json" <<'PY'
import json, sys
installs = {i["metadata"]["name"]: i["metadata"]["version"] for i in json.load(open(sys.argv[1]))["install"]}
moved = {n: v for n, v in installs.items() if n in ("apache-airflow", "apache-airflow-core", "apache-airflow-task-sdk")}
assert not moved, f"installing the package would change Airflow: {moved}"
print(f"pip install of the wheel with Airflow pinned keeps Airflow (would install only {sorted(installs)})")
PY
    rm -rf "$wheels"
  fi
  echo "$want" > "$stamp"
fi
