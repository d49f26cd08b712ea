"""SVG bytes and the images an SVG embeds, bounded in bytes, pixels, count and time.

An SVG can carry a raster of any size in a ``data:`` URI, another SVG inside that, and gzip at
every level; CairoSVG would decode each without a limit (and hand any raster to Pillow without an
allow-list, which starts Ghostscript for PostScript). :class:`BoundedFetcher` is the URL fetcher
CairoSVG calls for every embedded resource: it inflates gzip only up to ``MAX_SVG_BYTES``, lets a
raster through only when its content is an allowed format (re-encoded as PNG, so CairoSVG never
calls Pillow itself) and within the pixel budget, and stops after ``MAX_NESTED_IMAGES`` resources
or ``SVG_SECONDS``.
"""

from __future__ import annotations

import base64
import io
import time
import urllib.parse
import zlib
from pathlib import Path

from mispair.errors import DataError
from mispair.limits import limit, raise_hint

GZIP_MAGIC = b"\x1f\x8b"
EMPTY_SVG = b'<svg xmlns="http://www.w3.org/2000/svg" width="1" height="1"></svg>'


def read_svg_bytes(path: Path) -> bytes:
    """The SVG text of ``path``, inflated when gzip-compressed, at most ``MAX_SVG_BYTES`` long.

    The size on disk is checked before reading, and inflation stops at the bound.
    """
    bound = limit("MAX_SVG_BYTES")
    try:
        with open(path, "rb") as handle:
            if Path(path).stat().st_size > bound:
                raise _too_big(path, bound)
            data = handle.read(bound + 1)
    except OSError as exc:
        raise DataError(f"{path}: cannot read SVG ({exc.strerror or exc})") from None
    return inflate(data, bound, path)


def inflate(data: bytes, bound: int, where: object) -> bytes:
    """``data`` itself, or its gzip decompression when it starts with the gzip magic; either way
    at most ``bound`` bytes (a :class:`DataError` naming ``where`` otherwise)."""
    if len(data) > bound:
        raise _too_big(where, bound)
    if not data.startswith(GZIP_MAGIC):
        return data
    inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    try:
        out = inflater.decompress(data, bound + 1)
    except zlib.error as exc:
        raise DataError(f"{where}: corrupt gzip-compressed SVG ({exc})") from None
    if len(out) > bound or inflater.unconsumed_tail:
        raise _too_big(where, bound, "after decompression ")
    return out


def _too_big(where: object, bound: int, when: str = "") -> DataError:
    return DataError(
        f"{where}: SVG larger than {bound:,} bytes {when}refused ({raise_hint('MAX_SVG_BYTES')})"
    )


class BoundedFetcher:
    """CairoSVG's ``url_fetcher`` for one rendering of the SVG ``where`` (see the module text).

    Untrusted files get ``data:`` URIs only (anything else is an empty picture); trusted ones may
    also read local files. Every resource counts against the budgets of this one rendering.
    """

    def __init__(self, where: object, *, trusted: bool = False) -> None:
        self.where, self.trusted = where, trusted
        self.count = self.pixels = 0
        self.bytes = limit("MAX_SVG_BYTES")
        self.deadline = time.monotonic() + limit("SVG_SECONDS")

    def __call__(self, url: str, resource_type: str = "image/*") -> bytes:
        self._charge()
        if url.startswith("data:"):
            data = self._data_uri(url)
        elif self.trusted and url.startswith("file://"):
            data = read_svg_bytes(Path(urllib.parse.unquote(urllib.parse.urlparse(url).path)))
        else:
            return EMPTY_SVG
        data = inflate(data, self.bytes, self.where)
        self.bytes -= len(data)
        return data if _is_svg(data) else self._raster_as_png(data)

    def _charge(self) -> None:
        self.count += 1
        if self.count > limit("MAX_NESTED_IMAGES"):
            raise DataError(
                f"{self.where}: SVG embeds more than {limit('MAX_NESTED_IMAGES')} images; "
                f"refused ({raise_hint('MAX_NESTED_IMAGES')})"
            )
        if time.monotonic() > self.deadline:
            raise DataError(
                f"{self.where}: SVG took more than {limit('SVG_SECONDS')} s to render; "
                f"refused ({raise_hint('SVG_SECONDS')})"
            )

    def _data_uri(self, url: str) -> bytes:
        header, _, payload = url[5:].partition(",")
        if len(payload) > self.bytes * 4 // 3 + 4:
            raise _too_big(self.where, self.bytes, "in an embedded data: URI ")
        if header.endswith(";base64"):
            try:
                return base64.b64decode(urllib.parse.unquote_to_bytes(payload))
            except ValueError:
                raise DataError(f"{self.where}: an embedded data: URI is not valid base64") from None
        return urllib.parse.unquote_to_bytes(payload)

    def _raster_as_png(self, data: bytes) -> bytes:
        from mispair.data.pictures.raster import open_raster

        budget = limit("MAX_NESTED_PIXELS") - self.pixels
        where = f"{self.where} (embedded image {self.count})"
        with open_raster(io.BytesIO(data), max_pixels=budget, where=where) as image:
            self.pixels += image.size[0] * image.size[1]
            out = io.BytesIO()
            image.convert("RGBA").save(out, format="PNG")
        return out.getvalue()


def _is_svg(data: bytes) -> bool:
    head = data[:4096].lstrip()
    return head.startswith((b"<svg", b"<?xml", b"<!DOC")) or b"<svg" in head
