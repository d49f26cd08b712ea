#!/usr/bin/env bash
# The FiftyOne and Label Studio tests (`pytest -m integrations`) in an environment of their own:
# mispair from the lock with its `fiftyone` and `labelstudio` extras (fiftyone with its bundled
# MongoDB, label-studio-sdk). The Label Studio server itself pins versions the lock cannot meet
# (pyarrow<25, requests<2.33), so it lives in a second environment inside the first,
# .venv-integrations/server, and the tests start its `label-studio` executable on loopback.
# Idempotent: both environments (about 2 GB) are made once and reused.
#   bash scripts/integrations_env.sh              the integration tests, slow ones included
#   bash scripts/integrations_env.sh -k fiftyone  pytest's options pass through
set -euo pipefail
cd "$(dirname "$0")/.."
venv=.venv-integrations
server=$venv/server
if ! "$venv/bin/python" -c "import fiftyone, label_studio_sdk, mispair" 2>/dev/null; then
    python -m venv "$venv"
    "$venv/bin/python" -m pip install -q --upgrade pip
    "$venv/bin/python" -m pip install -q -r requirements/lock.txt
    # every package at the lock's version where the lock has it, the two extras' own beside them
    "$venv/bin/python" -m pip install -q -c requirements/lock.txt -e '.[fiftyone,labelstudio]'
    "$venv/bin/python" -c "import fiftyone, label_studio_sdk, mispair"
fi
if ! "$server/bin/label-studio" --version >/dev/null 2>&1; then
    python -m venv "$server"
    "$server/bin/python" -m pip install -q label-studio
fi
export MISPAIR_LABEL_STUDIO="$PWD/$server/bin/label-studio"
export FIFTYONE_DATABASE_DIR="${FIFTYONE_DATABASE_DIR:-$(mktemp -d)}"  # the bundled MongoDB's files
export FIFTYONE_DO_NOT_TRACK=true
MISPAIR_REQUIRE_INTEGRATIONS=1 "$venv/bin/python" -m pytest -m integrations -p no:cacheprovider "$@"
