"""Pictures are decoded by content through an allow-list, and SVGs are bounded with what they embed."""

from __future__ import annotations

import base64
import gzip
import io
import time

import numpy as np
import pytest

from mispair.data.pictures import svg_fetch
from mispair.data.pictures.images import RASTER_FORMATS, ImageTooLarge, load_picture, render_svg
from mispair.errors import ConfigError, DataError
from mispair.limits import DEFAULTS, limit

Image = pytest.importorskip("PIL.Image")
pytest.importorskip("cairosvg")

EPS = b"%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 10 10\n{ } loop\nshowpage\n"


def _encoded(image, fmt: str) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format=fmt)
    return buffer.getvalue()


def _svg_with(href: str, copies: int = 1) -> str:
    images = "".join(
        f'<image x="0" y="0" width="10" height="10" xlink:href="{href}"/>' for _ in range(copies)
    )
    return (
        '<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" '
        f'width="10" height="10">{images}</svg>'
    )


def _uri(data: bytes, mime: str = "image/png") -> str:
    return f"data:{mime};base64," + base64.b64encode(data).decode("ascii")


@pytest.fixture
def no_postscript(monkeypatch):
    """Pillow's EPS decoder fails the test if it is even asked whether it recognises a file."""
    Image.init()

    def called(*_args):
        raise AssertionError("the EPS decoder was consulted")

    monkeypatch.setitem(Image.OPEN, "EPS", (called, called))


@pytest.mark.parametrize("fmt", RASTER_FORMATS)
def test_every_allowed_format_loads_whatever_its_name(tmp_path, fmt, no_postscript):
    path = tmp_path / "picture.weird"
    path.write_bytes(_encoded(Image.new("RGB", (8, 8), (0, 0, 255)), fmt))
    assert np.asarray(load_picture(path, 8))[4, 4].tolist()[2] > 200


@pytest.mark.parametrize("content", [EPS, b"\xc5\xd0\xd3\xc6" + EPS, b"%!PS-Adobe-3.0\n"])
def test_postscript_named_png_is_refused_without_ghostscript(tmp_path, content, no_postscript):
    path = tmp_path / "photo.png"
    path.write_bytes(content)
    start = time.perf_counter()
    with pytest.raises(DataError, match=r"photo\.png: not a PNG, JPEG, WebP, GIF or BMP picture"):
        load_picture(path)
    assert time.perf_counter() - start < 1


def test_other_pillow_formats_are_refused(tmp_path):
    path = tmp_path / "image.png"
    path.write_bytes(_encoded(Image.new("RGB", (8, 8)), "TIFF"))
    with pytest.raises(DataError, match="not a PNG, JPEG"):
        load_picture(path)


def test_embedded_allowed_raster_is_drawn(tmp_path, no_postscript):
    jpeg = _encoded(Image.new("RGB", (40, 30), (255, 0, 0)), "JPEG")
    (tmp_path / "a.svg").write_text(_svg_with(_uri(jpeg, "image/jpeg")))
    red, green, blue = np.asarray(load_picture(tmp_path / "a.svg", 32))[16, 16].tolist()
    assert red > 240 and green < 20 and blue < 20


def test_embedded_postscript_is_refused(tmp_path, no_postscript):
    (tmp_path / "a.svg").write_text(_svg_with(_uri(EPS)))
    with pytest.raises(DataError, match=r"a\.svg \(embedded image 1\): not a PNG"):
        render_svg(tmp_path / "a.svg")


def test_embedded_huge_raster_is_refused_before_decoding(tmp_path):
    huge = _encoded(Image.new("1", (20_000, 20_000)), "PNG")  # 400 Mpx in 48 kB
    (tmp_path / "a.svg").write_text(_svg_with(_uri(huge)))
    start = time.perf_counter()
    with pytest.raises(ImageTooLarge, match=r"a\.svg \(embedded image 1\): .*pixels"):
        render_svg(tmp_path / "a.svg")
    assert time.perf_counter() - start < 2


def test_embedded_rasters_share_one_pixel_budget(tmp_path, monkeypatch):
    png = _encoded(Image.new("RGB", (100, 100)), "PNG")  # 10,000 pixels each
    monkeypatch.setenv("MISPAIR_LIMIT_MAX_NESTED_PIXELS", "25000")
    (tmp_path / "two.svg").write_text(_svg_with(_uri(png), copies=2))
    render_svg(tmp_path / "two.svg")
    (tmp_path / "three.svg").write_text(_svg_with(_uri(png), copies=3))
    with pytest.raises(ImageTooLarge, match=r"embedded image 3"):
        render_svg(tmp_path / "three.svg")


def test_embedded_image_count_is_bounded(tmp_path, monkeypatch):
    monkeypatch.setenv("MISPAIR_LIMIT_MAX_NESTED_IMAGES", "4")
    png = _encoded(Image.new("RGB", (2, 2)), "PNG")
    (tmp_path / "a.svg").write_text(_svg_with(_uri(png), copies=5))
    with pytest.raises(DataError, match=r"embeds more than 4 images.*MISPAIR_LIMIT_MAX_NESTED_IMAGES"):
        render_svg(tmp_path / "a.svg")


def test_rendering_time_is_bounded(tmp_path, monkeypatch):
    clock = iter(range(0, 10_000, 10))  # every look at the clock is 10 s later
    monkeypatch.setattr(svg_fetch.time, "monotonic", lambda: next(clock))
    png = _encoded(Image.new("RGB", (2, 2)), "PNG")
    (tmp_path / "a.svg").write_text(_svg_with(_uri(png), copies=5))
    with pytest.raises(DataError, match=f"more than {DEFAULTS['SVG_SECONDS']} s to render"):
        render_svg(tmp_path / "a.svg")


def test_gzip_svg_is_bounded_after_decompression(tmp_path, monkeypatch):
    monkeypatch.setenv("MISPAIR_LIMIT_MAX_SVG_BYTES", "1000000")
    small = _svg_with(_uri(_encoded(Image.new("RGB", (4, 4), (0, 255, 0)), "PNG")))
    (tmp_path / "ok.svgz.svg").write_bytes(gzip.compress(small.encode()))
    assert np.asarray(load_picture(tmp_path / "ok.svgz.svg", 8))[4, 4].tolist() == [0, 255, 0]
    bomb = b"<svg xmlns='http://www.w3.org/2000/svg'>" + b" " * 50_000_000 + b"</svg>"
    (tmp_path / "bomb.svg").write_bytes(gzip.compress(bomb))  # 50 MB in 50 kB
    start = time.perf_counter()
    with pytest.raises(DataError, match=r"bomb\.svg: SVG larger than 1,000,000 bytes after decompression"):
        render_svg(tmp_path / "bomb.svg")
    assert time.perf_counter() - start < 1


def test_nested_gzip_svg_in_a_data_uri_is_bounded(tmp_path, monkeypatch):
    monkeypatch.setenv("MISPAIR_LIMIT_MAX_SVG_BYTES", "1000000")
    inner = gzip.compress(b"<svg xmlns='http://www.w3.org/2000/svg'>" + b" " * 5_000_000 + b"</svg>")
    (tmp_path / "a.svg").write_text(_svg_with(_uri(inner, "image/svg+xml")))
    with pytest.raises(DataError, match="after decompression"):
        render_svg(tmp_path / "a.svg")


def test_untrusted_svg_never_reads_other_files(tmp_path):
    secret = tmp_path / "secret.png"
    secret.write_bytes(_encoded(Image.new("RGB", (4, 4), (0, 0, 0)), "PNG"))
    (tmp_path / "a.svg").write_text(_svg_with(secret.as_uri()))
    assert np.asarray(render_svg(tmp_path / "a.svg", 8))[4, 4].tolist() == [255, 255, 255]
    assert np.asarray(render_svg(tmp_path / "a.svg", 8, trusted=True))[4, 4].tolist() == [0, 0, 0]


def test_a_limit_is_raised_by_its_environment_variable(monkeypatch):
    assert limit("MAX_PIXELS") == DEFAULTS["MAX_PIXELS"]
    monkeypatch.setenv("MISPAIR_LIMIT_MAX_PIXELS", "100_000_000")
    assert limit("MAX_PIXELS") == 100_000_000
    monkeypatch.setenv("MISPAIR_LIMIT_MAX_PIXELS", "-3")
    with pytest.raises(ConfigError, match="MISPAIR_LIMIT_MAX_PIXELS='-3': expected a positive integer"):
        limit("MAX_PIXELS")
