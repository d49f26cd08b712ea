"""The hostile cases of issue 58, classes 3, 4, 6 and 7 (``benchmarks/hostile_apply.py``) are
registered in ``hostile_inputs.py``, at least three per class, each a command with an expected
outcome and a promise in docs/reliability.md (building them runs nothing: the work is in each
case's setup)."""

import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import hostile_apply  # noqa: E402
import hostile_inputs  # noqa: E402


def test_every_class_holds_at_least_three_cases_each_documented(tmp_path):
    h = hostile_inputs
    built = hostile_apply.cases(tmp_path, None, h.Case, h.mispair, h.SMALL, h.AUDIT)
    kinds = Counter(case.kind for case in built)
    assert set(kinds) == {"58.3 nproc", "58.4 apply", "58.6 older", "58.7 new user"}
    assert min(kinds.values()) >= 3
    assert all(case.expect in ("ok", "warn", "error") and case.argv for case in built)
    assert not any(tmp_path.iterdir())  # nothing made until a case's setup runs
    documented = (ROOT / "docs" / "reliability.md").read_text(encoding="utf-8")
    assert all(f"| {kind} |" in documented for kind in kinds)
    source = (ROOT / "benchmarks" / "hostile_inputs.py").read_text(encoding="utf-8")
    assert "*hostile_apply.cases(tmp, fixtures, Case, mispair, SMALL, AUDIT)" in source


def test_the_catalogues_own_overrides_make_valid_runs():
    """The catalogue's audits and trainings run under the defaults of the day: its overrides are
    refused by no configuration check (nested trust's folds once turned 24 of its audit cases
    into a configuration error instead of the refusal each case expects)."""
    from mispair.audit.collection import AUDIT_RUN
    from mispair.config import load_config

    audit = load_config(None, list(hostile_inputs.AUDIT), default=AUDIT_RUN)
    assert audit.train.epochs == 1 and audit.division.folds == 2
    assert load_config(None, list(hostile_inputs.SMALL)).train.epochs == 1
