#!/usr/bin/env bash
# Idempotent installation of mispair into a virtual environment of its own (.venv, or $MISPAIR_VENV),
# from the committed lock (requirements/lock.txt): what a fresh machine gets, setup.sh and .ci/run
# alike. Refresh the lock with scripts/lock.sh.
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

venv=${MISPAIR_VENV:-.venv}
stamp="$venv/.mispair-lock.sha256"
want=$(cat requirements/lock.txt pyproject.toml | sha256sum | cut -d' ' -f1)
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]] && "$venv/bin/python" -c "import mispair" 2>/dev/null; then
    exit 0  # this lock is installed already
fi
[[ -x "$venv/bin/python" ]] || python3 -m venv "$venv"
# The lock pins every package, torch to the CPU build that lies on disk (found through pip's
# find-links; elsewhere add PyTorch's CPU wheel index with --extra-index-url).
"$venv/bin/python" -m pip install -q --upgrade pip
"$venv/bin/python" -m pip install -q -r requirements/lock.txt
"$venv/bin/python" -m pip install -q --no-deps -e .
"$venv/bin/python" -m pip check
echo "$want" >"$stamp"
# playwright (in the audit extra) drives Debian's chromium above: its own browser download
# (`playwright install`) is never run.
