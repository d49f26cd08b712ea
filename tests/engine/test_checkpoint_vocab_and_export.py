"""Two older cases of issue 58 (class 6): a checkpoint whose vocabulary is a string (read as a list
of its characters, it evaluated: every caption tokenized into nonsense) is refused in one line; and
``train --export-pairs`` into an existing folder is refused before training, not after it."""

import torch

from mispair.cli import main
from tests.cli_errors import one_line_error
from tests.engine.test_resume_other_run import SMALL


def test_a_checkpoint_whose_vocabulary_is_a_string_is_refused(tmp_path, capsys):
    run = tmp_path / "run"
    assert main(["train", *SMALL, "model.embed_dim=16", "--out", str(run), "--quiet"]) == 0
    state = torch.load(run / "best.pt", weights_only=True)
    assert isinstance(state["vocab"], list) and state["vocab"]
    state["vocab"] = "".join(state["vocab"])
    torch.save(state, run / "best.pt")
    capsys.readouterr()
    code = main(["eval", str(run / "best.pt")])
    one_line_error(code, capsys.readouterr().err, "best.pt", "'vocab' is not a list of words")


def test_export_pairs_into_an_existing_folder_is_refused_before_training(tmp_path, capsys):
    folder = tmp_path / "exports"
    folder.mkdir()
    out = tmp_path / "run"
    code = main(["train", *SMALL, "--out", str(out), "--export-pairs", str(folder), "--quiet"])
    one_line_error(code, capsys.readouterr().err, "--export-pairs", "a folder")
    assert not (out / "last.pt").exists() and not (out / "best.pt").exists()  # nothing trained
