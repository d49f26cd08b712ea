"""Turning image files into square RGB pictures for a CNN, safely.

- Raster files are decoded by their content, never their name, and only by the decoders of
  :data:`RASTER_FORMATS` (PNG, JPEG, WebP, GIF, BMP): a ``.png`` holding PostScript is refused
  and never reaches Ghostscript. Pillow decodes only after the header says the picture is at most
  ``MAX_PIXELS`` large (a 623-megapixel PNG would need 2.5 GB); bigger files raise
  :class:`ImageTooLarge`, so the caller can render the same picture from its SVG instead.
- SVG files are rendered with CairoSVG straight at the output size (the rendering size never
  depends on the file). Untrusted SVGs (a user's own folder) are parsed with XML entity
  declarations and external resources refused, which stops "billion laughs" entity bombs;
  trusted ones (installed by a Debian package) may declare entities. Every SVG, gzip-compressed
  or not, is bounded in bytes after decompression, and the images it embeds (``data:`` URIs,
  nested SVGs) go through :class:`mispair.data.pictures.svg_fetch.BoundedFetcher`: the same
  allow-list, a pixel budget, a count and a time limit (see :mod:`mispair.limits`).
- Transparency is composited on white, and the picture is scaled to fit a ``size × size``
  square (aspect ratio kept, centred, white padding).
"""

from __future__ import annotations

import io
import logging
from pathlib import Path

from mispair.data.pictures.raster import RASTER_FORMATS, ImageTooLarge, open_raster, require
from mispair.data.pictures.svg_fetch import BoundedFetcher, read_svg_bytes
from mispair.errors import DataError

logger = logging.getLogger(__name__)

__all__ = [
    "RASTER_FORMATS",
    "ImageTooLarge",
    "load_picture",
    "load_raster",
    "open_raster",
    "render_svg",
    "require",
]


def load_raster(path: Path, size: int = 224, max_pixels: int | None = None):
    """Decode a raster image file into an RGB ``size × size`` PIL image on white.

    Raises:
        ImageTooLarge: the header declares more than ``max_pixels`` pixels (nothing decoded).
        DataError: the file is unreadable, or its content is not one of :data:`RASTER_FORMATS`.
    """
    with open_raster(path, max_pixels) as image:
        return fit_square(on_white(image), size)


def render_svg(path: Path, size: int = 224, *, trusted: bool = False):
    """Render an SVG file into an RGB ``size × size`` PIL image on white.

    The drawing is scaled to fit the square (``xMidYMid meet``), whatever size the file declares.

    Raises:
        DataError: unreadable or invalid SVG; for an untrusted file also XML entity declarations,
            external references; an SVG or an embedded image over the bounds of
            :mod:`mispair.limits`, or an embedded raster that is not an allowed format.
    """
    surface, image_module = require("cairosvg.surface"), require("PIL.Image")
    data = read_svg_bytes(path)
    fetcher = BoundedFetcher(path, trusted=trusted)
    try:
        png = surface.PNGSurface.convert(
            bytestring=data, output_width=size, output_height=size, unsafe=trusted, url_fetcher=fetcher
        )
    except DataError:
        raise
    except Exception as exc:  # CairoSVG raises many exception types for bad input
        raise DataError(f"{path}: cannot render SVG ({_describe(exc)})") from None
    with image_module.open(io.BytesIO(png), formats=["PNG"]) as image:
        image.load()
        return fit_square(on_white(image), size)


def _describe(exc: Exception) -> str:
    name = type(exc).__name__
    if name in ("EntitiesForbidden", "ExternalReferenceForbidden", "DTDForbidden"):
        return f"{name}: XML entity declarations are refused in untrusted files"
    return f"{name}: {exc}"[:200]


def on_white(image):
    """Composite ``image`` (any Pillow mode, with or without alpha) on white; returns RGB."""
    image_module = require("PIL.Image")
    rgba = image.convert("RGBA")
    background = image_module.new("RGBA", rgba.size, (255, 255, 255, 255))
    background.alpha_composite(rgba)
    return background.convert("RGB")


def fit_square(image, size: int):
    """Scale an RGB ``image`` to fit ``size × size`` (up or down), centred on white."""
    image_module = require("PIL.Image")
    width, height = image.size
    scale = size / max(width, height)
    new_size = (max(1, round(width * scale)), max(1, round(height * scale)))
    if new_size != image.size:
        image = image.resize(new_size, image_module.Resampling.LANCZOS, reducing_gap=3.0)
    canvas = image_module.new("RGB", (size, size), (255, 255, 255))
    canvas.paste(image, ((size - new_size[0]) // 2, (size - new_size[1]) // 2))
    return canvas


def load_picture(path: Path, size: int = 224, *, svg: Path | None = None, trusted: bool = False):
    """Load a raster or SVG file as an RGB ``size × size`` image on white.

    A raster file too large to decode safely is rendered from ``svg`` (the same picture as a
    vector file) when one is given; the reason is logged.

    Raises:
        DataError: the file cannot be read, or is too large and has no SVG to fall back on.
    """
    path = Path(path)
    if path.suffix.lower() == ".svg":
        return render_svg(path, size, trusted=trusted)
    try:
        return load_raster(path, size)
    except ImageTooLarge as exc:
        if svg is None:
            raise
        logger.warning("%s; rendering %s instead", exc, svg)
        return render_svg(svg, size, trusted=trusted)
