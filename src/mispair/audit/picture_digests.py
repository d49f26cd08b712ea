"""The pictures an audit scored, recorded by their content, and checked when ``apply`` copies them.

A picture's identity is its content: ``pairs.parquet`` holds, per pair, ``image_digest`` (SHA-256,
the first 32 hex digits, as the feature cache keys pictures) of the file the pair's picture is
read from below the audit's image root (the picture the input pairs the caption with: before a
planted swap). ``apply`` hashes each kept picture again before it links or copies it and refuses
one whose content changed since the audit (rewritten, even with the same name, size and time):
its scores describe another picture. An audit from before the digests were recorded, or of
pictures that are no files of the collection (image bytes, shards), is not checked.
"""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from mispair.errors import DataError

if TYPE_CHECKING:
    import pandas as pd

COLUMN = "image_digest"
THREADS = 4
"""Pictures hashed at once (hashing releases the GIL)."""


def with_picture_digests(pairs: pd.DataFrame, image_root: Path, planted: bool) -> pd.DataFrame:
    """``pairs`` with :data:`COLUMN`: the digest of each pair's picture file below ``image_root``
    (``true_image_id`` where the audit planted swaps, else ``image_id``); ``unreadable`` for a
    name that is no regular file."""
    from mispair.data.features import content_digest  # torch, only when an audit is saved

    names = pairs["true_image_id" if planted and "true_image_id" in pairs else "image_id"].astype(str)
    unique = list(dict.fromkeys(names))
    with ThreadPoolExecutor(max_workers=THREADS) as pool:
        digests = dict(zip(unique, pool.map(lambda n: content_digest(_below(image_root, n)), unique)))
    return pairs.assign(**{COLUMN: names.map(digests)})


def recorded(pairs: pd.DataFrame, image_root: str | None, planted: bool) -> pd.DataFrame:
    """``pairs`` as an audit saves them: with :data:`COLUMN` when its pictures are files below an
    image root (and it has none yet)."""
    if COLUMN in pairs or image_root is None:
        return pairs
    return with_picture_digests(pairs, Path(image_root), planted)


def check_unchanged(expected: Mapping[str, str], files: Mapping[str, Path]) -> None:
    """Refuse (one-line :class:`~mispair.errors.DataError`) the first picture of ``files`` (name →
    file) whose content is not the ``expected`` digest of its name; names without one (an older
    audit) are not checked."""
    from mispair.data.features import content_digest

    for name, file in files.items():
        want = expected.get(name)
        if want and content_digest(file) != want:
            raise DataError(
                f"{file}: the picture changed since the audit (its content is not the picture the "
                "audit scored); audit the collection again, or remove the pair"
            )


def expected_digests(rows: pd.DataFrame) -> dict[str, str]:
    """Each kept picture's recorded digest (``rows``: apply's kept rows with ``image``), or none
    when the audit recorded none; a digest that is not 32 hex digits is a tampered audit."""
    if COLUMN not in rows:
        return {}
    found: dict[str, str] = {}
    for name, digest in zip(rows["image"], rows[COLUMN]):
        text = digest if isinstance(digest, str) else ""
        if text and text != "unreadable" and not _hex32(text):
            raise DataError(
                f"the audit's pairs: image digest {text[:40]!r} is not a SHA-256 prefix (a tampered audit)"
            )
        found[str(name)] = text if text != "unreadable" else ""
    return found


def _hex32(text: str) -> bool:
    return len(text) == 32 and all(c in "0123456789abcdef" for c in text)


def _below(root: Path, name: str) -> Path:
    return root.joinpath(*PurePosixPath(name).parts)
