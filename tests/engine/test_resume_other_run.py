"""Resuming in a folder that holds another run's ``last.pt`` (copied there, or left by a run of
other sizes) is one error line saying what differs and what to do, not a size-mismatch traceback
(issue 58, class 6); ``--no-resume`` then trains from the start."""

import shutil

from mispair.cli import main
from tests.cli_errors import one_line_error

SMALL = [
    "data.source=synthetic",
    "data.synthetic_images=40",
    "model.text_encoder=bigru",
    "model.image_pooling=fragments",
    "model.word_dim=8",
    "train.epochs=1",
    "train.batch_size=20",
    "train.threads=1",
]


def test_another_run_s_last_pt_is_one_line_naming_the_difference(tmp_path, capsys):
    small, large = tmp_path / "small", tmp_path / "large"
    assert main(["train", *SMALL, "model.embed_dim=16", "--out", str(small), "--quiet"]) == 0
    assert main(["train", *SMALL, "model.embed_dim=32", "--out", str(large), "--quiet"]) == 0
    shutil.copy(small / "last.pt", large / "last.pt")  # the same config.json: only the weights differ
    capsys.readouterr()
    code = main(["train", *SMALL, "model.embed_dim=32", "--out", str(large), "--quiet"])
    last = capsys.readouterr().err.strip().splitlines()[-1]  # after the run's opening line
    one_line_error(code, last, "last.pt: a checkpoint of another run", "size mismatch", "--no-resume")
    again = ["train", *SMALL, "model.embed_dim=32", "--out", str(large), "--quiet", "--no-resume"]
    assert main(again) == 0


def test_out_spelled_absolute_then_relative_is_the_same_run_resumed(tmp_path, monkeypatch, capsys):
    """Issue 58, class 7: the folder is the run's identity, not how ``--out`` was spelled (it was
    refused, "differs in: output", with advice that threw the finished run away)."""
    monkeypatch.chdir(tmp_path)
    assert main(["train", *SMALL, "model.embed_dim=16", "--out", "runs/x", "--quiet"]) == 0
    finished = (tmp_path / "runs" / "x" / "last.pt").stat().st_mtime_ns
    again = ["train", *SMALL, "model.embed_dim=16", "--out", str(tmp_path / "runs" / "x"), "--quiet"]
    assert main(again) == 0, capsys.readouterr().err
    assert (tmp_path / "runs" / "x" / "last.pt").stat().st_mtime_ns == finished  # resumed, not retrained
    changed = ["train", *SMALL, "model.embed_dim=32", "--out", str(tmp_path / "runs" / "x"), "--quiet"]
    capsys.readouterr()
    code = main(changed)  # a real difference is still refused, and named
    one_line_error(code, capsys.readouterr().err.strip().splitlines()[-1], "differs in: model")
