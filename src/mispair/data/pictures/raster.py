"""Raster pictures decoded by their content alone, within a pixel budget (see
:mod:`mispair.data.pictures.images` for the whole policy; :mod:`~mispair.data.pictures.svg_fetch`
decodes the rasters an SVG embeds through the same door)."""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator

from mispair.errors import DataError, MispairError
from mispair.limits import limit, raise_hint

RASTER_FORMATS = ("PNG", "JPEG", "WEBP", "GIF", "BMP")
"""The only Pillow decoders mispair runs, chosen by content (``Image.open(..., formats=...)``)."""
INSTALL_HINT = "pip install 'mispair[features]'"


class ImageTooLarge(DataError):
    """A raster image whose header declares more pixels than allowed."""


def require(module: str):
    """Import an optional dependency of the ``features`` extra, or raise a one-line error."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise MispairError(f"{module} is not installed: {INSTALL_HINT}") from None


@contextlib.contextmanager
def open_raster(source, max_pixels: int | None = None, where: object = None) -> Iterator:
    """A decoded PIL image of ``source`` (a path or a binary file), allow-listed by content.

    Only the decoders of :data:`RASTER_FORMATS` are tried; a picture whose header declares more
    than ``max_pixels`` (default ``MAX_PIXELS``) pixels raises :class:`ImageTooLarge` before any
    pixel is decoded. ``where`` names the source in errors (default ``source``).
    """
    image_module = require("PIL.Image")
    max_pixels = limit("MAX_PIXELS") if max_pixels is None else max_pixels
    where = source if where is None else where
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", image_module.DecompressionBombWarning)
            with image_module.open(source, formats=RASTER_FORMATS) as image:
                width, height = image.size
                if width * height > max_pixels:
                    raise ImageTooLarge(
                        f"{where}: {width}×{height} pixels exceeds {max_pixels:,} "
                        f"({raise_hint('MAX_PIXELS')})"
                    )
                image.load()
                yield image
    except image_module.UnidentifiedImageError:
        raise DataError(
            f"{where}: not a PNG, JPEG, WebP, GIF or BMP picture by its content (other "
            "formats are refused; convert the file to PNG)"
        ) from None
    except (image_module.DecompressionBombError, image_module.DecompressionBombWarning):
        hint = raise_hint("MAX_PIXELS")
        raise ImageTooLarge(f"{where}: more than {max_pixels:,} pixels ({hint})") from None
    except (OSError, ValueError, SyntaxError) as exc:
        raise DataError(f"{where}: cannot decode image ({exc})") from None
