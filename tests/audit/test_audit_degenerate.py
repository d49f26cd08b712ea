"""An audit whose model scores NaN writes no result at all."""

from __future__ import annotations

import numpy as np

import mispair.audit.run as audit_run
from mispair.cli import main
from tests.audit.test_audit_errors import TINY, _collection, _good_rows
from tests.cli_errors import one_line_error


def test_non_finite_scores_stop_the_audit_before_any_result(tmp_path, capsys, monkeypatch):
    real = audit_run.audited_pairs

    def degenerate(run, **kwargs):
        audited = real(run, **kwargs)
        audited.score = np.where(np.arange(len(audited.score)) % 2, np.nan, audited.score)
        return audited

    monkeypatch.setattr(audit_run, "audited_pairs", degenerate)
    data, out = _collection(tmp_path / "c", _good_rows()), tmp_path / "out"
    code = main(["audit", str(data), "--out", str(out), "--quiet", *TINY])
    last = capsys.readouterr().err.strip().splitlines()[-1]  # after the training's progress lines
    one_line_error(code, last, "4 of 8 held-out pair scores are NaN or infinite")
    assert not any((out / name).exists() for name in ("report.html", "pairs.csv", "summary.json"))
