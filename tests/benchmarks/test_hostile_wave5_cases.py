"""The hostile cases of issue 64 (``benchmarks/hostile_wave5.py``) are registered in
``hostile_inputs.py``, at least three per class (the classes 3, 7 and 8 at least), each a command
with an expected outcome and a promise in docs/reliability.md (building them runs nothing: the
work is in each case's setup)."""

import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import hostile_inputs  # noqa: E402
import hostile_wave5  # noqa: E402


def test_every_class_holds_three_cases_each_documented(tmp_path):
    h = hostile_inputs
    built = hostile_wave5.cases(tmp_path, None, h.Case, h.mispair, h.SMALL, h.AUDIT)
    kinds = Counter(case.kind for case in built)
    assert {"64.3 decisions", "64.7 run lock", "64.8 sample view"} <= set(kinds)
    assert all(kind.startswith("64.") and count >= 3 for kind, count in kinds.items())
    assert all(case.expect in ("ok", "warn", "error") and case.argv for case in built)
    assert not any(tmp_path.iterdir())  # nothing made until a case's setup runs
    documented = (ROOT / "docs" / "reliability.md").read_text(encoding="utf-8")
    assert all(f"| {kind} |" in documented for kind in kinds)
    source = (ROOT / "benchmarks" / "hostile_inputs.py").read_text(encoding="utf-8")
    assert "*hostile_wave5.cases(tmp, fixtures, Case, mispair, SMALL, AUDIT)" in source
