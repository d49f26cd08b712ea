"""A run in one process computes exactly what it computed before multi-process training existed.

``single_process_golden.json`` holds, for the tiny run of every recipe (:mod:`tests.engine.tiny_runs`),
the summary and the per-epoch log (every loss term, division score and dev metric) of commit
de72c94, the last one before :mod:`mispair.distributed`; the runs must reproduce them to the last
bit. Regenerate (after a deliberate change of a recipe's numbers) with
``PYTHONPATH=src python tests/engine/test_single_process_unchanged.py``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from mispair.engine.run import train_run
from tests.engine.tiny_runs import RECIPES, log_rows, tiny_config

GOLDEN = Path(__file__).with_name("single_process_golden.json")


def run(recipe: str, out: Path) -> dict:
    summary = train_run(tiny_config(recipe, out), progress=False, log=lambda m: None)
    return {"summary": summary, "log": log_rows(out)}


@pytest.mark.parametrize("recipe", list(RECIPES))
def test_a_single_process_run_is_unchanged(recipe, tmp_path):
    golden = json.loads(GOLDEN.read_text(encoding="utf-8"))[recipe]
    assert json.loads(json.dumps(run(recipe, tmp_path))) == golden


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        found = {r: run(r, Path(folder) / r) for r in RECIPES}
    GOLDEN.write_text(json.dumps(found, indent=1), encoding="utf-8")
    print(f"wrote {GOLDEN}", file=sys.stderr)
