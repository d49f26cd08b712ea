"""`mispair train PATH` on a user's collection: no config needed, no noise planted unless asked,
planted noise announced first and recorded; a config pointed at other data plants nothing."""

import json

import numpy as np
import pytest

from mispair.api import training_config
from mispair.cli import main
from tests.cli_errors import one_line_error

TINY = [
    "recipe=vse",
    "model.text_encoder=bigru",
    "model.image_pooling=fragments",
    "model.embed_dim=32",
    "model.word_dim=16",
    "train.epochs=1",
    "train.batch_size=16",
    "train.threads=1",
    "data.min_word_count=1",
]
WORDS = ["red", "blue", "green", "small", "large", "round", "square", "bright"]


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """40 images (feature files) with one caption each, no split column."""
    root = tmp_path_factory.mktemp("icons")
    rng = np.random.default_rng(0)
    rows = ["image,caption"]
    for i in range(40):
        np.save(root / f"icon{i}.npy", rng.normal(size=(4, 8)).astype(np.float32))
        rows.append(f"icon{i}.npy,{WORDS[i % 8]} {WORDS[(i // 8) % 8]} icon")
    (root / "captions.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    return root


def test_a_config_pointed_at_other_data_plants_no_noise_unless_asked(folder):
    notes = []
    config = training_config("configs/holdout/tuxpaint.yaml", [], data=str(folder), log=notes.append)
    assert config.data.noise.rate == 0 and config.data.root == str(folder) and config.data.source == "auto"
    assert len(notes) == 1 and "none is planted" in notes[0]
    config = training_config("configs/holdout/tuxpaint.yaml", [f"data.root={folder}"], log=notes.append)
    assert config.data.noise.rate == 0 and config.data.source == "auto"
    asked = training_config("configs/holdout/tuxpaint.yaml", ["data.noise.rate=0.2"], data=str(folder))
    assert asked.data.noise.rate == 0.2
    own = training_config("configs/holdout/tuxpaint.yaml", [])  # its own collection: planted as written
    assert own.data.noise.rate == 0.4


def test_a_collection_without_a_config_trains_the_robust_recipe(folder):
    config = training_config(None, [], data=str(folder))
    assert config.recipe == "holdout" and config.division.scored_by == "out_of_fold"
    assert config.data.noise.rate == 0


def test_train_path_trains_on_the_collection(folder, tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["train", str(folder), "--out", str(out), "--quiet", *TINY]) == 0
    saved = json.loads((out / "config.json").read_text())
    assert saved["data"]["root"] == str(folder) and saved["data"]["noise"]["rate"] == 0
    assert "planted_noise" not in json.loads((out / "metrics.json").read_text())
    assert "note: planting" not in capsys.readouterr().err


def test_planted_noise_is_announced_first_and_recorded(folder, tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["train", str(folder), "--out", str(out), "--quiet", *TINY, "data.noise.rate=0.5"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("note: planting mismatched pairs") and "rate 0.5" in err[0]
    assert json.loads((out / "metrics.json").read_text())["planted_noise"]["rate"] == 0.5


def test_usage_mistakes_of_train_are_one_line_errors(folder, capsys):
    code = main(["train", "no-such-folder"])
    one_line_error(code, capsys.readouterr().err, "no-such-folder: no such config file or collection")
    code = main(["train", str(folder), "--data", str(folder)])
    one_line_error(code, capsys.readouterr().err, "two collections")


def test_the_help_page_is_for_users(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    page = capsys.readouterr().out
    assert "mispair audit photos/ --out" in page and "mispair train photos/" in page
    assert "No logic lives here" not in page
