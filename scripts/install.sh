#!/usr/bin/env bash
# Idempotent installation of mispair and what it needs (used by setup.sh and .ci/run).
#   --data   also the Debian data packages (Tux Paint stamps, OpenClipart)
set -euo pipefail
cd "$(dirname "$0")/.."
as_root() { if [[ $(id -u) -eq 0 ]]; then "$@"; else sudo "$@"; fi; }

apt_packages=(libcairo2 chromium)  # chromium: the tests of the audit report (driven by playwright)
[[ "${1:-}" == "--data" ]] && apt_packages+=(tuxpaint-stamps-default openclipart-png openclipart-svg)
missing=()
for pkg in "${apt_packages[@]}"; do
    dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
done
if ((${#missing[@]})) && command -v apt-get >/dev/null; then
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# The CPU build of torch that lies on disk first, so the range in pyproject installs nothing more.
python -c "import torch" 2>/dev/null || python -m pip install -q torch==2.13.0
python -m pip install -q -e '.[dev,features,minilm,audit,search,onnx]'
# playwright (in the audit extra) drives Debian's chromium above: its own browser download
# (`playwright install`) is never run.
