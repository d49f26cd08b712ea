#!/usr/bin/env bash
# One command on a fresh machine: install everything (into .venv), prepare Tux Paint, run the main job (an
# audit of Tux Paint with 40% planted mismatches, beside the same run on the clean pairs).
#   ./setup.sh            install + prepare + audit
#   ./setup.sh --no-run   install + prepare only
set -euo pipefail
cd "$(dirname "$0")"
bash scripts/install.sh --data  # the virtual environment .venv, from requirements/lock.txt
source .venv/bin/activate
collection=data/tuxpaint_precomp
if ! mispair prepare tuxpaint; then
    echo "setup: Tux Paint not prepared; auditing a synthetic collection instead" >&2
    mispair prepare synthetic --out data/synthetic_precomp
    collection=data/synthetic_precomp
fi
if [[ "${1:-}" != "--no-run" ]]; then
    mispair audit "$collection" --plant 0.4 --clean-run --out runs/audit
fi
