#!/usr/bin/env bash
# The encoder-plugin tests (open_clip and timm, `pytest -m plugins`) in an environment of their
# own: mispair with its `clip` and `timm` extras beside a torch that has a matching torchvision.
# PyPI's torchvision does not load beside the CPU build of torch 2.13 the main environment uses
# ('operator torchvision::nms does not exist'), so this environment takes the pair that lies on
# this machine's disk (x86_64: torch 2.14.1 + torchvision 0.29.1; aarch64: 2.9.1 + 0.24.1).
# Idempotent: the environment (.venv-plugins, about 5.6 GB) is made once and reused.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=.venv-plugins
if [[ $(uname -m) == aarch64 ]]; then pins=(torch==2.9.1 torchvision==0.24.1); else pins=(torch==2.14.1 torchvision==0.29.1); fi
if ! "$venv/bin/python" -c "import open_clip, timm, matplotlib, faiss, mispair" 2>/dev/null; then
    python -m venv "$venv"
    "$venv/bin/python" -m pip install -q "${pins[@]}"
    # every other package at the lock's version (requirements/lock.txt, less its torch pin)
    grep -vE '^(torch|torchvision)==' requirements/lock.txt >"$venv/constraints.txt"
    "$venv/bin/python" -m pip install -q -c "$venv/constraints.txt" -e '.[dev,features,minilm,audit,search,clip,timm]'
    "$venv/bin/python" -c "import open_clip, timm, matplotlib, faiss, mispair"
fi
MISPAIR_REQUIRE_PLUGINS=1 HF_HUB_OFFLINE=1 "$venv/bin/python" -m pytest -m plugins "$@"
