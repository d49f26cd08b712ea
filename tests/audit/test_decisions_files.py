"""Issue 64.3: what ``apply --decisions`` takes. The audit's own ``pairs.csv`` (its score-only cut,
checked by no one) is refused with a hint; ``estimate_pairs.csv``'s ``suspected`` is true, false, 1
or 0 in any case, and any other value (``yes``, ``no``, empty) is one line naming the row, where it
used to drop nothing."""

from __future__ import annotations

import csv

import pandas as pd
import pytest

from mispair.audit.apply import read_decisions
from mispair.audit.synthetic import synthetic_audit
from mispair.cli import main
from mispair.errors import DataError
from tests.cli_errors import one_line_error


@pytest.fixture(scope="module")
def audit(tmp_path_factory):
    folder = tmp_path_factory.mktemp("decisions")
    return folder / "audit", synthetic_audit(folder, pairs=30, images=10, seed=2)


def _estimate_pairs(path, ids, suspected, audit_id):
    """An ``estimate_pairs.csv`` as ``mispair estimate`` writes it, with ``suspected`` as given."""
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["pair_id", "mismatch_probability", "suspected", "label", "audit_id"])
        writer.writerows([pid, "0.5", flag, "", audit_id] for pid, flag in zip(ids, suspected))
    return path


def test_the_audits_pairs_csv_as_decisions_is_refused_with_a_hint(audit, tmp_path, capsys):
    out, result = audit
    clean = tmp_path / "clean"
    code = main(["apply", str(out), "--decisions", str(out / "pairs.csv"), "--out", str(clean)])
    one_line_error(code, capsys.readouterr().err, "pairs.csv, not decisions", "--fdr", "review page")
    assert not clean.exists()
    with pytest.raises(DataError, match=r"the audit's pairs\.csv, not decisions"):
        read_decisions(result.pairs, result.summary.audit_id)  # the API's table too


@pytest.mark.parametrize("value", ["yes", "no", "", "2", "drop", "suspected"])
def test_a_suspected_value_but_true_false_1_0_is_refused_naming_its_row(audit, tmp_path, capsys, value):
    out, result = audit
    ids = result.pairs["pair_id"].tolist()[:4]
    path = _estimate_pairs(
        tmp_path / "estimate_pairs.csv", ids, ["true", "false", value, "0"], result.summary.audit_id
    )
    clean = tmp_path / "clean"
    code = main(["apply", str(out), "--decisions", str(path), "--out", str(clean)])
    one_line_error(code, capsys.readouterr().err, f"row 4 (pair {ids[2]!r}) has suspected {value!r}")
    assert not clean.exists()


def test_true_false_1_0_in_any_case_drop_and_keep(audit, tmp_path, capsys):
    out, result = audit
    ids = result.pairs["pair_id"].tolist()[:6]
    flags = ["TRUE", " True ", "1", "FALSE", "false", "0"]
    path = _estimate_pairs(tmp_path / "estimate_pairs.csv", ids, flags, result.summary.audit_id)
    decisions = read_decisions(path, result.summary.audit_id)
    assert decisions["decision"].tolist() == ["drop"] * 3 + ["keep"] * 3
    clean = tmp_path / "clean"
    assert main(["apply", str(out), "--decisions", str(path), "--out", str(clean)]) in (0, None)
    assert "3 removed" in capsys.readouterr().out
    removed = pd.read_csv(clean / "removed.csv", dtype=str)
    assert sorted(removed["pair_id"]) == sorted(ids[:3])
