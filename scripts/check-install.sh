#!/usr/bin/env bash
# What a user on a managed Airflow does: install the built package (a wheel, not this editable
# checkout) with their Airflow pinned and no constraints file. pip must resolve it without moving
# any Airflow distribution (docs/compatibility.md, "Installing on a managed Airflow").
#
#   scripts/check-install.sh VENV CONSTRAINTS [--fresh]
#       e.g. .venv constraints.txt (3.3), .venv-low constraints-airflow-3.1.txt (3.1)
#
# --fresh also installs the wheel WITHOUT extras into a new venv (VENV's Python; Airflow and the
# rest pinned by CONSTRAINTS), as on MWAA/Astronomer/the Helm chart, and runs
# scripts/check_bare_install.py in it: every operator and trigger imports, the shipped DAGs parse,
# torch, moto and sagemaker_training are absent; prints the install size and what the extras
# local/toolkit/emulator add (measured in VENV). A few minutes: the venv is a full Airflow install.
#
# The Airflow version is the one CONSTRAINTS pins. Builds the wheel: ~10-40 s, plus a dry-run resolve.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=$1
CONSTRAINTS=$2
FRESH=${3:-}
wheels=$(mktemp -d)
trap 'rm -rf "$wheels"' EXIT
pinned=$(sed -n 's/^apache-airflow==//p' "$CONSTRAINTS")
if ! "$VENV"/bin/pip wheel --quiet --no-deps --wheel-dir "$wheels" . > "$wheels/pip.log" 2>&1 \
  || ! "$VENV"/bin/pip install --quiet --dry-run --report "$wheels/report.json" \
    "apache-airflow==$pinned" "$(ls "$wheels"/airflow_dist_training-*.whl)[local,toolkit]" >> "$wheels/pip.log" 2>&1; then
  grep -v "^WARNING: Location" "$wheels/pip.log"
  echo "the package does not build or install with apache-airflow==$pinned"
  exit 1
fi
"$VENV"/bin/python - "$wheels/report.json" "$pinned" <<'PY'
import json, sys
installs = {i["metadata"]["name"]: i["metadata"]["version"] for i in json.load(open(sys.argv[1]))["install"]}
moved = {n: v for n, v in installs.items() if n in ("apache-airflow", "apache-airflow-core", "apache-airflow-task-sdk")}
assert not moved, f"installing the package would change Airflow: {moved}"
print(f"pip install of the wheel with apache-airflow=={sys.argv[2]} pinned keeps Airflow (would install only {sorted(installs)})")
PY
if [ "$FRESH" = "--fresh" ]; then
  "$VENV"/bin/python -m venv "$wheels/bare"
  if ! "$wheels"/bare/bin/pip install --quiet -c "$CONSTRAINTS" "$(ls "$wheels"/airflow_dist_training-*.whl)" \
      > "$wheels/bare-pip.log" 2>&1; then
    grep -v "^WARNING: Location" "$wheels/bare-pip.log"
    echo "the wheel does not install without extras with $CONSTRAINTS"
    exit 1
  fi
  repo=$PWD
  full=$(cd "$VENV" && pwd)
  # from outside the checkout, so that the installed wheel is what imports
  (cd "$wheels" && env -u PYTHONPATH "$wheels"/bare/bin/python "$repo/scripts/check_bare_install.py" --dags "$repo/dags" --full-venv "$full")
fi
