"""A rerun reuses a run only when its collection and mispair are unchanged, and says why not."""

from __future__ import annotations

import pandas as pd

from mispair.cli import main
from tests.audit.test_audit_errors import TINY, _collection

ROWS = [(f"im{n}.npy", f"caption {n}") for n in range(8)]


def _audit(data, out, capsys) -> tuple[pd.DataFrame, str]:
    assert main(["audit", str(data), "--out", str(out), *TINY]) == 0
    err = capsys.readouterr().err
    return pd.read_csv(out / "pairs.csv", dtype=str, keep_default_na=False), err


def test_changed_captions_train_the_run_again(tmp_path, capsys):
    data, out = _collection(tmp_path / "c", ROWS), tmp_path / "out"
    first, _ = _audit(data, out, capsys)
    again, err = _audit(data, out, capsys)
    assert "training it again" not in err and "epoch 1/1" not in err  # unchanged: the run is reused
    pd.testing.assert_frame_equal(first, again)
    _collection(data, [(image, f"a new caption {n}") for n, (image, _) in enumerate(ROWS)])
    changed, err = _audit(data, out, capsys)
    assert "the collection's captions, pictures or pairing changed since its run; training it again" in err
    assert "epoch 1/1" in err
    assert set(changed["caption"]) == {f"a new caption {n}" for n in range(8)}
    assert changed["held_out_score"].tolist() != first["held_out_score"].tolist()


def test_a_run_without_a_digest_is_reused_with_a_note(tmp_path, capsys):
    data, out = _collection(tmp_path / "c", ROWS), tmp_path / "out"
    _audit(data, out, capsys)
    (out / "run" / "inputs.json").unlink()  # as an older mispair wrote it
    _, err = _audit(data, out, capsys)
    assert "note: reusing the run in" in err and "records no digest of its inputs" in err
