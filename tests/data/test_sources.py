"""Parsers and image loading of the offline sources, on fixture files written by the tests."""

from __future__ import annotations

import struct
import time
import zlib
from pathlib import Path

import numpy as np
import pytest

from mispair.data.pictures.images import (
    ImageTooLarge,
    load_picture,
    load_raster,
    on_white,
    render_svg,
)
from mispair.data.sources import openclipart as oc
from mispair.data.sources.tuxpaint import parse_stamp_text
from mispair.errors import DataError

Image = pytest.importorskip("PIL.Image")

RDF_SVG = """<?xml version="1.0" encoding="UTF-8"?>
<svg xmlns="http://www.w3.org/2000/svg" xmlns:dc="http://purl.org/dc/elements/1.1/"
     xmlns:cc="http://web.resource.org/cc/" xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#"
     width="40" height="20" viewBox="0 0 40 20">
  <metadata><rdf:RDF><cc:Work rdf:about="">
    <dc:title>{title}</dc:title>
    <dc:description>{description}</dc:description>
    <dc:subject><rdf:Bag><rdf:li>{keyword}</rdf:li><rdf:li></rdf:li><rdf:li>red</rdf:li></rdf:Bag></dc:subject>
    <dc:publisher><cc:Agent><dc:title>Open Clip Art Library</dc:title></cc:Agent></dc:publisher>
    <dc:creator><cc:Agent><dc:title>{creator}</dc:title></cc:Agent></dc:creator>
  </cc:Work></rdf:RDF></metadata>
  <rect x="0" y="0" width="40" height="20" fill="#ff0000"/>
</svg>
"""

ENTITY_BOMB = """<?xml version="1.0"?>
<!DOCTYPE svg [
  <!ENTITY a "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa">
  <!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">
  <!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;">
  <!ENTITY d "&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;">
]>
<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10">
  <metadata><title>&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;</title></metadata>
  <text>&d;</text>
</svg>
"""

BENIGN_ENTITY = """<?xml version="1.0"?>
<!DOCTYPE svg [ <!ENTITY ns_svg "http://www.w3.org/2000/svg"> ]>
<svg xmlns="&ns_svg;" width="10" height="10"><rect width="10" height="10" fill="#0000ff"/></svg>
"""


def write_svg(path: Path, **fields: str) -> Path:
    values = {"title": "A red box", "description": "", "keyword": "box", "creator": "Ann Artist"}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(RDF_SVG.format(**{**values, **fields}), encoding="utf-8")
    return path


def write_bomb_png(path: Path, width: int, height: int) -> Path:
    """A valid PNG header declaring ``width × height`` pixels, with almost no pixel data."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    idat = zlib.compress(b"\0" * 64)
    path.write_bytes(
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")
    )
    return path


# --- Tux Paint descriptions -------------------------------------------------------------------


def test_stamp_text_first_line_and_translations(tmp_path):
    path = tmp_path / "frog.txt"
    path.write_text(
        "A  frog.\nfr.utf8=Une grenouille.\npt_BR.utf8=Um sapo.\nca@valencia.utf8=Una granota.\n"
        "de.utf8=\nnot a translation\n",
        encoding="utf-8",
    )
    assert parse_stamp_text(path) == {
        "en": "A frog.",
        "fr": "Une grenouille.",
        "pt_BR": "Um sapo.",
        "ca@valencia": "Una granota.",
    }


def test_stamp_text_keeps_equals_signs_in_the_english_line(tmp_path):
    path = tmp_path / "calculator.txt"
    path.write_text("A calculator.  6x7=42\nfr.utf8=Une calculatrice. 6x7=42\n", encoding="utf-8")
    assert parse_stamp_text(path) == {
        "en": "A calculator. 6x7=42",
        "fr": "Une calculatrice. 6x7=42",
    }


@pytest.mark.parametrize("content", [b"\nfr.utf8=Vide\n", b"\xff\xfe bad"])
def test_stamp_text_errors_name_the_file(tmp_path, content):
    path = tmp_path / "bad.txt"
    path.write_bytes(content)
    with pytest.raises(DataError, match=r"bad\.txt"):
        parse_stamp_text(path)


# --- OpenClipart metadata, captions and the natural-noise rule ----------------------------------


def test_svg_metadata_first_title_description_keywords_creator(tmp_path):
    svg = write_svg(tmp_path / "box.svg", description="A box  drawn\n in red &amp; white")
    meta = oc.parse_svg_metadata(svg)
    assert meta == oc.ClipMeta("A red box", "A box drawn in red & white", ("box", "red"), "Ann Artist")


def test_svg_metadata_refuses_entity_bomb_when_untrusted(tmp_path):
    bomb = tmp_path / "bomb.svg"
    bomb.write_text(ENTITY_BOMB, encoding="utf-8")
    with pytest.raises(DataError, match=r"bomb\.svg"):
        oc.parse_svg_metadata(bomb, trusted=False)


def test_svg_metadata_allows_entities_when_trusted(tmp_path):
    svg = tmp_path / "trusted.svg"
    svg.write_text(BENIGN_ENTITY, encoding="utf-8")
    assert oc.parse_svg_metadata(svg, trusted=True) == oc.ClipMeta()


def clip(title: str, description: str = "", creator: str = "Ann", name: str = "x_01") -> oc.Clip:
    meta = oc.ClipMeta(title, description, ("kw", "Kw", "other"), creator)
    return oc.Clip(f"animals/{name}.png", Path("a.png"), Path("a.svg"), meta)


@pytest.mark.parametrize(
    ("description", "kept"),
    [
        ("", False),
        ("a red box", False),  # repeats the title
        ("Red", False),  # contained in the title
        ("see http://example.org", False),
        ("ann@example.org", False),
        ("Ann", False),  # the author
        ("Part of Hotel Icons Collection", False),
        ("A box full of apples", True),
    ],
)
def test_informative_description(description, kept):
    meta = oc.ClipMeta("A red box", description, (), "Ann")
    assert bool(oc.informative_description(meta)) is kept


def test_caption_sources():
    c = clip("A red box.", "A box full of apples", name="2_dead_frogs_lumen_01")
    assert oc.make_caption(c, "title") == "A red box. A box full of apples"
    assert oc.make_caption(c, "title+desc+keywords") == "A red box. A box full of apples. kw, other"
    assert oc.make_caption(c, "filename") == "dead frogs lumen"
    assert oc.make_caption(clip(""), "title") == "x"  # no title, no description: file name words


def test_natural_noise_needs_boilerplate_and_a_large_group():
    clips = (
        [clip("gramastar") for _ in range(5)]
        + [clip(f"Part of the Flat Icon Collection (Wed Aug 25 23:{m}:46 2004)") for m in range(10, 15)]
        + [clip(f"Clipart by Nicu Buculei - arrow{k}") for k in range(5)]
        + [clip("Ann") for _ in range(5)]  # the author's name
        + [clip("card") for _ in range(6)]  # shared but describes the picture
        + [clip("Lemon SVG theme") for _ in range(4)]  # boilerplate, group too small
        + [clip("A lemon")]
    )
    noise = oc.natural_noise(clips)
    assert noise.tolist() == [True] * 20 + [False] * 11


def test_eval_eligible_only_unique_content_bearing_titles():
    clips = [
        clip("A red box"),
        clip("A red box"),
        clip("A green box"),
        clip("ab"),
        clip("arrow_08"),
    ]
    clips += [clip("gramastar") for _ in range(5)]
    noise = oc.natural_noise(clips)
    assert oc.eval_eligible(clips, noise).tolist() == [False, False, True] + [False] * 7


def test_openclipart_splits_draw_dev_and_test_from_eligible_only():
    ids = [f"c{i}" for i in range(30)]
    eligible = np.arange(30) % 2 == 0
    splits = oc.split_indices(ids, eligible, seed=3)
    assert sorted(np.concatenate(list(splits.values())).tolist()) == list(range(30))
    assert eligible[splits["test"]].all() and eligible[splits["dev"]].all()
    assert len(splits["test"]) == 5 and len(splits["dev"]) == 2
    assert all(np.array_equal(splits[k], oc.split_indices(ids, eligible, 3)[k]) for k in splits)


# --- images ------------------------------------------------------------------------------------


def test_render_svg_refuses_entity_bomb_from_untrusted_file_quickly(tmp_path):
    pytest.importorskip("cairosvg")
    bomb = tmp_path / "bomb.svg"
    bomb.write_text(ENTITY_BOMB, encoding="utf-8")
    start = time.perf_counter()
    with pytest.raises(DataError, match=r"bomb\.svg.*entit"):
        render_svg(bomb, 32)
    assert time.perf_counter() - start < 2


def test_render_svg_trusted_entities_and_bounded_size(tmp_path):
    pytest.importorskip("cairosvg")
    svg = tmp_path / "blue.svg"
    svg.write_text(BENIGN_ENTITY, encoding="utf-8")
    with pytest.raises(DataError):
        render_svg(svg, 16, trusted=False)
    assert np.asarray(render_svg(svg, 16, trusted=True))[8, 8].tolist() == [0, 0, 255]
    text = write_svg(tmp_path / "huge.svg").read_text()
    (tmp_path / "huge.svg").write_text(text.replace('width="40"', 'width="4e7"', 1))
    picture = np.asarray(render_svg(tmp_path / "huge.svg", 32))
    assert picture.shape == (32, 32, 3)
    assert picture[16, 16].tolist() == [255, 0, 0] and picture[2, 16].tolist() == [255, 255, 255]


def test_oversized_png_is_refused_before_decoding_and_rendered_from_svg(tmp_path):
    pytest.importorskip("cairosvg")
    big = write_bomb_png(tmp_path / "big.png", 30_000, 30_000)  # 900 Mpx, beyond Pillow's limit
    with pytest.raises(ImageTooLarge, match=r"big\.png"):
        load_raster(big)
    medium = write_bomb_png(tmp_path / "medium.png", 5_000, 5_000)  # 25 Mpx, under Pillow's limit
    with pytest.raises(ImageTooLarge, match=r"medium\.png"):
        load_raster(medium)
    svg = write_svg(tmp_path / "big.svg")
    picture = load_picture(big, 32, svg=svg)
    assert picture.size == (32, 32) and np.asarray(picture)[16, 16].tolist() == [255, 0, 0]


def test_corrupt_png_raises_data_error(tmp_path):
    path = tmp_path / "broken.png"
    path.write_bytes(b"\x89PNG\r\n\x1a\nnot really")
    with pytest.raises(DataError, match=r"broken\.png"):
        load_raster(path)


@pytest.mark.parametrize("mode", ["RGBA", "LA", "P"])
def test_transparency_is_composited_on_white(mode):
    image = Image.new("RGBA", (4, 4), (255, 0, 0, 0))
    image.putpixel((0, 0), (0, 0, 0, 255))
    if mode == "LA":
        image = image.convert("LA")
    elif mode == "P":
        image = image.convert("P")
        image.info["transparency"] = image.getpixel((1, 1))
    rgb = np.asarray(on_white(image))
    assert rgb[0, 0].tolist() == [0, 0, 0] and rgb[2, 2].tolist() == [255, 255, 255]


def test_load_picture_fits_a_square_on_white(tmp_path):
    Image.new("RGB", (40, 10), (0, 128, 0)).save(tmp_path / "wide.png")
    picture = np.asarray(load_picture(tmp_path / "wide.png", 20))
    assert picture.shape == (20, 20, 3)
    assert picture[10, 10].tolist() == [0, 128, 0] and picture[0, 10].tolist() == [255, 255, 255]
