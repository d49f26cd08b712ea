"""What a run reads of each picture, stored once per picture content, with a size cap.

An entry holds one picture's features as an image encoder gave them, in one of two forms:

- ``mean`` (the default run's): the mean of the picture's fragments, ``[1, D]`` float32, computed
  from the float16 grid exactly as :meth:`~mispair.data.pairset.PairSet.with_mean_fragment` does
  (bit for bit what the run read from a grid); deflated, 2–3 KB for EfficientNet-Lite0;
- ``grid``: every fragment, ``[K, D]`` float16 (125 KB; heads that read fragments, SGR or SAF).

with ``valid`` (the picture could be decoded) and ``digest``: the picture's content digest as
:func:`~mispair.data.content.stored_digests` gives it for the grid, whatever the form, so that a
collection's content order does not depend on what the run reads.

The entry's name is a digest of :data:`STORE` (the format's version), the encoder, the form and
the picture's content key (its bytes' digest, and whether it is drawn as SVG): the same picture
in two collections, or in a folder and a table of image bytes, is one entry, encoded once. An
entry is read through :mod:`mispair.data.cache_files` (a regular file, written under its name by
this user's mispair, its arrays checked), and its modification time is its last use: beyond the
cap (``$MISPAIR_CACHE_MAX_BYTES``, default :data:`DEFAULT_CAP`), the entries used least
recently are removed (:func:`evict`). A folder of another format (``features-v1``, or the chunks
of a collection's folder an older mispair wrote) is never read: its pictures are encoded again.

>>> import tempfile
>>> store = PictureStore(Path(tempfile.mkdtemp()), "demo-encoder", "mean")
>>> store.path("raster:ab12").name[-5:]
'.mean'
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mispair.data.cache_files import BadEntry, Rejected, write_arrays
from mispair.data.cache_folder import private_folder
from mispair.errors import ConfigError

STORE = "features-v2"
"""The store's folder in the cache folder; the version of its entries' format."""
FORMS = ("mean", "grid")
CAP_ENVIRONMENT = "MISPAIR_CACHE_MAX_BYTES"
DEFAULT_CAP = 20 * 2**30
"""The store's size cap when ``$MISPAIR_CACHE_MAX_BYTES`` is unset: 20 GiB (about 5 million
pictures' mean features)."""
DIGEST_CHARS = 24


@dataclass(frozen=True)
class Entry:
    """One picture's stored features: ``features [K, D]`` (``K = 1`` for the mean), ``valid``,
    and its content ``digest`` (of its grid)."""

    features: np.ndarray
    valid: bool
    digest: str


@dataclass(frozen=True)
class PictureFeatures:
    """``features [n, K, D]`` (the mean: ``K = 1`` float32; the grid: float16), ``valid [n]``
    (False: not a readable picture, its features zeros), ``digests [n]``: each picture's content
    digest (:func:`~mispair.data.content.stored_digests` of its grid, whatever the form)."""

    features: np.ndarray
    valid: np.ndarray
    digests: list[str]


@dataclass(frozen=True)
class PictureStore:
    """The entries of ``encoder`` (its cache name and preprocessing) in ``form`` under the cache
    folder ``root`` (entries in ``root/STORE``); ``read_also``: other cache folders whose entries
    are read, never written."""

    root: Path
    encoder: str
    form: str
    read_also: tuple[Path, ...] = ()

    @property
    def folder(self) -> Path:
        return Path(self.root) / STORE

    def name(self, content: str) -> str:
        """The entry name of the picture whose content key is ``content``."""
        text = f"{STORE}\n{self.encoder}\n{self.form}\n{content}".encode("utf-8", "surrogateescape")
        return f"{hashlib.sha256(text).hexdigest()[:32]}.{self.form}"

    def path(self, content: str, root: Path | None = None) -> Path:
        name = self.name(content)
        return Path(root or self.root) / STORE / name[:2] / name

    def load(self, content: str, rejected: Rejected) -> Entry | None:
        """The entry of ``content`` (here, else in ``read_also``), its use recorded; None when
        there is none or it fails its check (noted in ``rejected``, removed from this store)."""
        for root in (self.root, *self.read_also):
            path = self.path(content, root)
            arrays = rejected.load(path, self._check, discard=root == self.root)
            if arrays is not None:
                if root == self.root:  # (another folder is only read)
                    _touch(path)
                return Entry(arrays["features"], bool(arrays["valid"]), str(arrays["digest"]))
        return None

    def save(self, content: str, entry: Entry) -> int:
        """Write ``entry`` as the picture ``content``'s; its size in bytes."""
        path = self.path(content)
        private_folder(path.parent, "image feature cache", top=self.root)
        arrays = {
            "features": entry.features,
            "valid": np.array(entry.valid),
            "digest": np.array(entry.digest),
        }
        write_arrays(path, arrays, compress=True)
        return path.stat().st_size

    def _check(self, arrays: dict[str, np.ndarray]) -> None:
        features, valid, digest = (arrays.get(k) for k in ("features", "valid", "digest"))
        if features is None or valid is None or digest is None:
            raise BadEntry("not a picture's features")
        dtype = np.float32 if self.form == "mean" else np.float16
        if features.ndim != 2 or features.dtype != dtype or (self.form == "mean" and len(features) != 1):
            raise BadEntry(f"features {features.dtype}{list(features.shape)} are not a {self.form} entry's")
        if valid.shape or valid.dtype != bool or digest.shape or len(str(digest)) != DIGEST_CHARS:
            raise BadEntry("its valid flag or digest is malformed")


def _touch(path: Path) -> None:
    """Record a use of ``path`` (its modification time: access times are often not kept)."""
    with contextlib.suppress(OSError):
        os.utime(path)


def cap() -> int:
    """The store's size cap in bytes: ``$MISPAIR_CACHE_MAX_BYTES`` (a number, with an optional
    K, M, G or T suffix), else :data:`DEFAULT_CAP`."""
    text = os.environ.get(CAP_ENVIRONMENT, "").strip()
    return parse_size(text, CAP_ENVIRONMENT) if text else DEFAULT_CAP


def parse_size(text: str, what: str) -> int:
    """``"500M"`` → 524288000 (K, M, G, T: powers of 1024; a plain number: bytes).

    Raises:
        ConfigError: not a size (one line naming ``what``).
    """
    scale = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
    number, unit = (text[:-1], text[-1].upper()) if text[-1:].upper() in scale else (text, "")
    try:
        value = float(number) * scale.get(unit, 1)
    except ValueError:
        value = -1.0
    if not value >= 0:
        raise ConfigError(f"{what}: {text!r} is not a size (e.g. 500M, 20G)")
    return int(value)


@dataclass(frozen=True)
class Stored:
    """A stored file: its path, size in bytes and last use (modification time, ns)."""

    path: Path
    size: int
    used: int


def entries(folder: Path) -> Iterator[Stored]:
    """Every entry file under the store folder ``folder`` (its two levels; links and folders
    skipped)."""
    if not folder.is_dir():
        return
    for sub in os.scandir(folder):
        if sub.is_dir(follow_symlinks=False):
            for item in os.scandir(sub.path):
                if item.is_file(follow_symlinks=False) and item.name.rsplit(".", 1)[-1] in FORMS:
                    info = item.stat(follow_symlinks=False)
                    yield Stored(Path(item.path), info.st_size, info.st_mtime_ns)


def least_recent(stored: list[Stored], limit: int) -> list[Stored]:
    """The entries to remove so that those left hold at most ``limit`` bytes: the least recently
    used first (ties by name)."""
    total = sum(s.size for s in stored)
    out = []
    for item in sorted(stored, key=lambda s: (s.used, s.path.name)):
        if total <= limit:
            break
        out.append(item)
        total -= item.size
    return out


def evict(folder: Path, limit: int) -> tuple[int, int]:
    """Remove the least recently used entries of the store folder ``folder`` until it holds at
    most ``limit`` bytes; ``(entries, bytes)`` removed."""
    gone = least_recent(list(entries(folder)), limit)
    for item in gone:
        item.path.unlink(missing_ok=True)
    return len(gone), sum(s.size for s in gone)
