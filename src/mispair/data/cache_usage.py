"""What the cache folder holds and its size (``mispair cache``), and pruning it.

Three kinds of files live in the cache folder (:func:`~mispair.data.cache_folder.cache_root`):
the pictures' features (:mod:`mispair.data.picture_store`, by form), the collections' own folders
(unpacked image bytes, caption states), and feature chunks of an older format (a collection's
``*.chunk``/``*.npz``, never read again: :func:`prune` removes them).

>>> import tempfile
>>> print(cache_usage(Path(tempfile.mkdtemp())).line().split(": ")[1])
no pictures' features (cap 20.0 GiB); no collection folders
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from mispair.data.cache_folder import COLLECTIONS
from mispair.data.picture_store import FORMS, STORE, cap, entries, evict

OLD_SUFFIXES = (".chunk", ".npz")
"""Feature files of the format before :data:`~mispair.data.picture_store.STORE`."""


@dataclass
class CacheUsage:
    """The cache folder ``root``: its feature entries by form ``{form: (count, bytes)}``, its
    collection folders (count, bytes) and, among them, old-format chunks (count, bytes)."""

    root: Path
    forms: dict[str, tuple[int, int]] = field(default_factory=dict)
    collections: tuple[int, int] = (0, 0)
    old: tuple[int, int] = (0, 0)

    @property
    def pictures(self) -> tuple[int, int]:
        return sum(n for n, _ in self.forms.values()), sum(b for _, b in self.forms.values())

    def line(self) -> str:
        """The one-line summary ``mispair cache`` prints."""
        count, size = self.pictures
        kinds = ", ".join(f"{n:,} {form}" for form, (n, _) in self.forms.items() if n)
        stored = (
            f"{count:,} pictures' features, {human(size)} ({kinds})" if count else "no pictures' features"
        )
        folders = (
            f"{self.collections[0]:,} collection folders, {human(self.collections[1])}"
            if self.collections[0]
            else "no collection folders"
        )
        if self.old[0]:
            folders += (
                f", of which {self.old[0]:,} old-format chunks, {human(self.old[1])} "
                "(`mispair cache prune` removes them)"
            )
        return f"{self.root}: {stored} (cap {human(cap())}); {folders}"


def cache_usage(root: Path) -> CacheUsage:
    """What the cache folder ``root`` holds (nothing is changed)."""
    usage = CacheUsage(Path(root), {form: (0, 0) for form in FORMS})
    for item in entries(Path(root) / STORE):
        form = item.path.suffix[1:]
        n, size = usage.forms[form]
        usage.forms[form] = (n + 1, size + item.size)
    folders = _listed(Path(root) / COLLECTIONS)
    usage.collections = (len(folders), sum(_size(f) for f in folders))
    old = _old_chunks(Path(root))
    usage.old = (len(old), sum(p.stat().st_size for p in old))
    return usage


def prune(root: Path, limit: int | None = None) -> tuple[int, int, int, int]:
    """Remove the old-format chunks of the cache folder ``root`` and its least recently used
    feature entries beyond ``limit`` bytes (default :func:`~mispair.data.picture_store.cap`);
    ``(old chunks, their bytes, entries, their bytes)`` removed."""
    old = _old_chunks(Path(root))
    old_bytes = sum(p.stat().st_size for p in old)
    for path in old:
        path.unlink(missing_ok=True)
    gone, gone_bytes = evict(Path(root) / STORE, cap() if limit is None else limit)
    return len(old), old_bytes, gone, gone_bytes


def _old_chunks(root: Path) -> list[Path]:
    """The old-format feature chunks in the collection folders of ``root`` (not links)."""
    return [
        Path(entry.path)
        for folder in _listed(root / COLLECTIONS)
        for entry in os.scandir(folder)
        if entry.name.endswith(OLD_SUFFIXES) and entry.is_file(follow_symlinks=False)
    ]


def _listed(folder: Path) -> list[Path]:
    """The sub-folders of ``folder`` (none when it is missing; links skipped)."""
    if not folder.is_dir():
        return []
    return [Path(e.path) for e in os.scandir(folder) if e.is_dir(follow_symlinks=False)]


def _size(folder: Path) -> int:
    """Bytes of the files under ``folder`` (links not followed)."""
    total = 0
    for base, _, files in os.walk(folder):
        total += sum(os.lstat(os.path.join(base, f)).st_size for f in files)
    return total


def human(size: float) -> str:
    """``size`` bytes in words: ``2.3 MiB``."""
    units, k = ("B", "KiB", "MiB", "GiB", "TiB"), 0
    while size >= 1024 and k < len(units) - 1:
        size, k = size / 1024, k + 1
    return f"{size:.0f} B" if k == 0 else f"{size:.1f} {units[k]}"
