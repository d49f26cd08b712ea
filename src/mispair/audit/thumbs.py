"""The report's thumbnails: one small JPEG file per picture in ``thumbs/`` beside the page, named
by the picture's path, size and modification time, so a file is written once and an audit run
again over the same pictures reuses it."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path

from mispair.atomic import atomic_write
from mispair.errors import DataError
from mispair.progress import progress_bar

THUMBS = "thumbs"
"""The thumbnails' folder, beside ``report.html``."""


def thumbnail_name(picture: Path, size: int) -> str:
    """The file name of ``picture``'s ``size``-pixel thumbnail: a digest of its path, byte size
    and modification time (a changed picture gets a new name)."""
    stat = picture.stat()
    key = f"{picture.absolute()}\0{stat.st_size}\0{stat.st_mtime_ns}\0{size}"
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:20] + ".jpg"


def write_thumbnails(
    image_ids: Iterable[str], pictures: Path | None, folder: Path, *, size: int = 96, progress: bool = False
) -> dict[str, str]:
    """Write the thumbnail of each image (``pictures / image_id``) into ``folder / thumbs``, those
    not there yet, and remove the thumbnails no image names any more.

    Returns ``{image_id: "thumbs/<name>.jpg"}``, ``""`` for a picture that cannot be read (and
    for every image when ``pictures`` is None).
    """
    ids = list(dict.fromkeys(image_ids))
    target = folder / THUMBS
    if pictures is None:
        return dict.fromkeys(ids, "")
    target.mkdir(parents=True, exist_ok=True)
    paths = {}
    for image_id in progress_bar(ids, desc="thumbnails", disable=not progress, leave=False):
        paths[image_id] = _thumbnail(pictures / image_id, target, size)
    named = {Path(p).name for p in paths.values() if p}
    for stale in target.glob("*.jpg"):
        if stale.name not in named:
            stale.unlink()
    return paths


def _thumbnail(picture: Path, target: Path, size: int) -> str:
    """``picture``'s thumbnail in ``target`` (written unless already there), as a path relative to
    the report, or "" when the picture cannot be read."""
    from mispair.data.pictures.images import load_picture

    try:
        name = thumbnail_name(picture, size)
        if (target / name).is_file():
            return f"{THUMBS}/{name}"
        image = load_picture(picture, size)
    except (DataError, OSError):
        return ""
    atomic_write(target / name, lambda handle: image.save(handle, format="JPEG", quality=80))
    return f"{THUMBS}/{name}"
