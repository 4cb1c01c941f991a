#!/usr/bin/env bash
# The GPU device check in one command, from any directory, on a node with no network:
#   bash benchmarks/device_check.sh [device_check.py options, e.g. --budget 420]
# Installs mascot without dependencies or downloads (falls back to PYTHONPATH=src if that fails), then runs
# benchmarks/device_check.py, writing device_check.json, device_check.md and device_check.log to $OUT
# (or ./device_check_out). About 7 minutes on one H100/H200-class GPU.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
PY="${PYTHON:-python3}"
OUT_DIR="${OUT:-device_check_out}"
mkdir -p "$OUT_DIR"
if ! "$PY" -m pip install -q --no-deps --no-build-isolation -e . >"$OUT_DIR/pip_install.log" 2>&1; then
    echo "pip install -e . failed (see $OUT_DIR/pip_install.log): using PYTHONPATH=src"
    export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
else
    rm -f "$OUT_DIR/pip_install.log"
fi
PYTHONUNBUFFERED=1 "$PY" benchmarks/device_check.py --out "$OUT_DIR" "$@" 2>&1 | tee "$OUT_DIR/device_check.log"
exit "${PIPESTATUS[0]}"
