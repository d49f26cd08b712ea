"""--export-pairs: one row per training pair with the recipe's clean probability and the truth."""

import csv

import numpy as np
import pytest

from mispair.cli import main
from mispair.config import load_config
from mispair.engine.assembly import load_run_data


def test_export_pairs_after_a_noisy_ncr_run(tmp_path, capsys):
    out, table = tmp_path / "run", tmp_path / "pairs.csv"
    overrides = [
        "recipe=ncr",
        "data.source=synthetic",
        "data.synthetic_images=120",
        "data.noise.rate=0.5",
        "model.embed_dim=32",
        "model.word_dim=16",
        "train.epochs=2",
        "train.batch_size=32",
        "train.threads=1",
        "method.warmup_epochs=1",
    ]
    assert main(["train", *overrides, "--out", str(out), "--quiet", "--export-pairs", str(table)]) == 0
    rows = list(csv.DictReader(table.open()))
    noise = load_run_data(load_config(None, overrides)).noise
    assert len(rows) == len(noise.is_noisy) == 600
    assert [r["truly_mismatched"] == "True" for r in rows] == noise.is_noisy.tolist()
    clean_prob = np.array([float(r["clean_prob"]) for r in rows])
    assert ((clean_prob >= 0) & (clean_prob <= 1)).all()
    paired = [f"syn0_{i}" for i in noise.image_of_caption]
    assert [r["image_id"] for r in rows] == paired
    assert not list(tmp_path.glob("*.tmp"))


def test_export_into_a_missing_folder_fails_before_training(tmp_path, capsys):
    out = tmp_path / "run"
    table = tmp_path / "no" / "such" / "pairs.csv"
    args = ["train", "data.source=synthetic", "--out", str(out), "--quiet", "--export-pairs", str(table)]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("mispair: error: --export-pairs") and "no such directory" in err
    assert "\n" not in err and not out.exists()  # nothing was trained


def test_export_to_an_unwritable_path_is_a_one_line_error_before_training(tmp_path, capsys):
    out, table = tmp_path / "run", tmp_path / "pairs.csv"
    table.mkdir()  # a folder where the file should go: refused before anything trains (issue 58)
    overrides = [
        "data.source=synthetic",
        "data.synthetic_images=60",
        "model.embed_dim=16",
        "model.word_dim=8",
        "train.epochs=1",
        "train.batch_size=30",
        "train.threads=1",
    ]
    assert main(["train", *overrides, "--out", str(out), "--quiet", "--export-pairs", str(table)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"mispair: error: --export-pairs {table}: a folder")
    assert not list(tmp_path.glob("*.tmp")) and not (out / "best.pt").exists()  # nothing was trained


@pytest.mark.parametrize("text", ['=HYPERLINK("http://x")', "+1+2", "-2+3", "@SUM(A1)", "\tx", "\rx"])
def test_exported_text_cannot_run_as_a_spreadsheet_formula(text):
    import csv
    import io

    from mispair.engine.export import pairs_csv

    rows = [{"caption_index": 0, "image_id": text, "caption": text, "similarity": -0.5}]
    read = next(csv.DictReader(io.StringIO(pairs_csv(rows))))
    assert read["caption"] == "'" + text and read["image_id"] == "'" + text
    assert read["similarity"] == "-0.5"  # numbers stay numbers
    safe = next(csv.DictReader(io.StringIO(pairs_csv([{"caption": "a red bicycle"}]))))
    assert safe["caption"] == "a red bicycle"
