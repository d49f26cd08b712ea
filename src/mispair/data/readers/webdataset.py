"""WebDataset / img2dataset tar shards: samples ``KEY.jpg|png|webp|...`` with ``KEY.txt`` and/or
``KEY.json`` (its ``caption``, ``text``, ... field), in one ``.tar``, a folder of ``.tar`` files,
or a brace pattern (``shards/{00000..00009}.tar``).

Read with the standard library's ``tarfile`` (the ``webdataset`` package streams shards into a
training loop; here every sample is read once and its image unpacked into the cache as
``images/<digest><ext>``, named by its content, so that the copies img2dataset writes of one
picture, one per caption, are one image with several captions). The image's id is its first
sample's ``shard/key`` with the picture's extension (``shard-000/0000012.jpg``), as in the
shards. Only regular members are read, none larger than ``MAX_MEMBER_BYTES``
(:mod:`mispair.limits`); a sample without an image or a caption is refused with the reason.
"""

from __future__ import annotations

import json
import re
import tarfile
from pathlib import Path
from typing import TYPE_CHECKING

from mispair.data.cache_folder import shipped
from mispair.data.readers.base import READERS
from mispair.data.readers.columns import USUAL_NAMES
from mispair.data.readers.files import unpacked_view, write_image_bytes
from mispair.data.readers.table import CACHE_FOLDER, CollectionTable, TableReader, checked_table
from mispair.errors import DataError
from mispair.limits import limit, raise_hint

if TYPE_CHECKING:
    from mispair.config import DataConfig

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".webp", ".gif", ".bmp")
"""A tar member larger than this is not read (its sample is refused)."""
BRACES = re.compile(r"\{([^{}]*)\}")


def expand_braces(pattern: str) -> list[str]:
    """``pattern`` with its first ``{a..b}`` (zero-padded numbers) or ``{x,y}`` expanded, then the
    rest recursively: ``"s{0..2}.tar"`` → ``["s0.tar", "s1.tar", "s2.tar"]``."""
    match = BRACES.search(pattern)
    if match is None:
        return [pattern]
    inner, head, tail = match.group(1), pattern[: match.start()], pattern[match.end() :]
    numbers = re.fullmatch(r"(\d+)\.\.(\d+)", inner)
    if numbers:
        first, last = numbers.groups()
        width = len(first) if first.startswith("0") else 0
        choices = [str(n).zfill(width) for n in range(int(first), int(last) + 1)]
    else:
        choices = inner.split(",")
    return [expanded for choice in choices for expanded in expand_braces(head + choice + tail)]


def expanded_count(pattern: str) -> int:
    """How many names :func:`expand_braces` makes of ``pattern``, counted without expanding (a
    group's choices hold no braces, so the count is the product of the groups' sizes)."""
    count = 1
    for match in BRACES.finditer(pattern):
        numbers = re.fullmatch(r"(\d+)\.\.(\d+)", match.group(1))
        count *= max(int(numbers[2]) - int(numbers[1]) + 1, 0) if numbers else match.group(1).count(",") + 1
    return count


def shard_paths(path: Path) -> list[Path]:
    """The shards ``path`` names: a tar file, a folder's tar files (sorted) or a brace pattern
    (of at most ``MAX_EXPANDED_NAMES`` names, counted before it is expanded)."""
    text = str(path)
    if "{" in text:
        count, bound = expanded_count(text), limit("MAX_EXPANDED_NAMES")
        if count > bound:
            raise DataError(
                f"{text[:200]}: a brace pattern naming {count:,} shards, more than {bound:,} "
                f"({raise_hint('MAX_EXPANDED_NAMES')})"
            )
        return [Path(p) for p in expand_braces(text)]
    if path.is_dir():
        return sorted(path.glob("*.tar"))
    return [path]


@READERS.register("webdataset")
class WebDatasetReader(TableReader):
    name = "webdataset"
    priority = 40
    describes = "WebDataset / img2dataset .tar shards (a file, a folder of them, or a brace pattern)"

    def detect(self, path: Path) -> bool:
        shards = shard_paths(path)
        return bool(shards) and all(p.suffix == ".tar" and p.is_file() for p in shards)

    def stamp(self, data: DataConfig) -> tuple:
        return tuple((str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in self.shards(data))

    def old_cache_dirs(self, data: DataConfig) -> list[Path]:
        return [] if data.cache_dir else shipped(self.shards(data)[0].parent / CACHE_FOLDER)

    def table(self, data: DataConfig) -> CollectionTable:
        import pandas as pd

        cache, rows, refused = self.cache_dir(data), [], []
        for shard in self.shards(data):
            for key, sample in _samples(shard, cache / "images"):
                row = _row(shard, key, sample, data)
                copies = int(sample.get(".copies", 1))  # type: ignore[arg-type]
                (refused if "reason" in row else rows).extend([row] * copies)  # each refused sample counted
        frame = pd.DataFrame(rows, columns=["pair_id", "image", "caption", "split", "named"], dtype=object)
        view, ids, names = unpacked_view(cache, frame["named"].tolist(), frame["image"].tolist())
        frame = frame.assign(
            image=pd.Series(ids, index=frame.index, dtype=object),
            image_name=pd.Series(names, index=frame.index, dtype=object),
        ).drop(columns="named")
        return checked_table(frame, view, str(data.root), trusted_paths=True, refused=refused)

    def shards(self, data: DataConfig) -> list[Path]:
        shards = shard_paths(Path(data.root))
        missing = [p for p in shards if not p.is_file()]
        if not shards or missing:
            raise DataError(f"{data.root}: shard {missing[0] if missing else 'none'} not found")
        return shards


STORED = "stored:"
"""A sample part whose image was written to the cache as it was read (its name follows)."""


def _samples(shard: Path, folder: Path) -> list[tuple[str, dict[str, bytes | str]]]:
    """``(key, {suffix: bytes | why-not})`` of every sample of a shard, in order, streamed: each
    image member is written to the cache ``folder`` as it is read (``STORED`` + its name), so a
    shard costs the memory of its captions, not of its pictures. Bounded before anything is
    read: members (``MAX_SHARD_MEMBERS``), their declared sizes together
    (``MAX_SHARD_DECODED_BYTES``) and each (``MAX_MEMBER_BYTES``); a sparse member is refused
    (a few bytes in the tar, gigabytes unpacked), and a key met more than once marks its sample
    with how many samples share it (``.copies``): each is refused, none lost without a word."""
    samples: dict[str, dict[str, bytes | str]] = {}
    seen: dict[tuple[str, str], int] = {}
    members = declared = 0
    try:
        with tarfile.open(shard, "r:") as tar:
            while (member := tar.next()) is not None:
                tar.members = []  # streamed: tarfile would keep every member's header
                members += 1
                _check_shard(shard, members, declared := declared + max(member.size, 0))
                key, suffix = _key_of(member)
                if key is None:
                    continue
                parts = samples.setdefault(key, {})
                seen[key, suffix] = seen.get((key, suffix), 0) + 1
                if suffix in parts:
                    copies = max(int(parts.get(".copies", 1)), seen[key, suffix])  # type: ignore[arg-type]
                    parts[".copies"] = str(copies)
                    parts[".duplicate"] = (
                        f"the key {key!r} appears more than once in the shard ({copies} samples "
                        "under it, each refused: give each sample its own key)"
                    )
                    continue
                parts[suffix] = _member(tar, member, suffix, folder)
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise DataError(f"{shard}: not a readable tar shard ({exc})") from None
    return list(samples.items())


def _key_of(member: tarfile.TarInfo) -> tuple[str | None, str]:
    """A member's sample key and its lowered suffix (``.jpg``); no key for what is not a regular
    file with a suffix."""
    if not member.isfile():
        return None, ""
    folder_name, _, base = member.name.rpartition("/")
    stem, dot, suffix = base.partition(".")
    if not dot:
        return None, ""
    return (f"{folder_name}/{stem}" if folder_name else stem), "." + suffix.lower()


def shard_keys(shard: Path) -> list[str]:
    """Every sample key of a shard in the shard's order, refused samples included (the members'
    headers only, streamed: the order in which a shard's rows are joined). Bounded by
    ``MAX_SHARD_MEMBERS`` as the reading is."""
    keys: dict[str, None] = {}
    members = 0
    try:
        with tarfile.open(shard, "r:") as tar:
            while (member := tar.next()) is not None:
                tar.members = []
                members += 1
                _check_shard(shard, members, 0)
                key, _ = _key_of(member)
                if key is not None:
                    keys.setdefault(key)
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise DataError(f"{shard}: not a readable tar shard ({exc})") from None
    return list(keys)


def _check_shard(shard: Path, members: int, declared: int) -> None:
    if members > limit("MAX_SHARD_MEMBERS"):
        raise DataError(
            f"{shard}: more than {limit('MAX_SHARD_MEMBERS'):,} members ({raise_hint('MAX_SHARD_MEMBERS')})"
        )
    if declared > limit("MAX_SHARD_DECODED_BYTES"):
        raise DataError(
            f"{shard}: its members declare more than {limit('MAX_SHARD_DECODED_BYTES'):,} bytes "
            f"({raise_hint('MAX_SHARD_DECODED_BYTES')})"
        )


def _member(tar: tarfile.TarFile, member: tarfile.TarInfo, suffix: str, folder: Path) -> bytes | str:
    """A member's bytes (an image's: written to the cache, its ``STORED`` name), or why not."""
    if member.issparse():
        return "a sparse tar member (unpacked, larger than it is stored)"
    if member.size > limit("MAX_MEMBER_BYTES"):
        return "too large"
    blob = tar.extractfile(member).read()  # type: ignore[union-attr]
    return STORED + write_image_bytes(folder, blob, suffix) if suffix in IMAGE_SUFFIXES else blob


def _row(shard: Path, key: str, sample: dict, data: DataConfig) -> dict[str, str]:
    meta = _json(sample.get(".json"))
    caption = sample.get(".txt")
    caption = caption.decode("utf-8", "replace") if isinstance(caption, bytes) else _meta_caption(meta, data)
    image_suffix = next((s for s in IMAGE_SUFFIXES if s in sample), None)
    row = {
        "pair_id": f"{shard.stem}/{key}",
        "image": f"{shard.stem}/{key}{image_suffix or ''}",
        "caption": caption,
        "split": str(meta.get(data.split_column or "split", "") or ""),
    }
    if ".duplicate" in sample:
        return {**row, "reason": sample[".duplicate"]}
    if image_suffix is None:
        return {**row, "reason": "no image in the sample (" + ", ".join(sample) + ")"}
    stored = sample[image_suffix]
    if stored == "too large":
        bound, hint = limit("MAX_MEMBER_BYTES"), raise_hint("MAX_MEMBER_BYTES")
        return {**row, "reason": f"image larger than {bound:,} bytes ({hint})"}
    if not stored.startswith(STORED):
        return {**row, "reason": stored}
    return {**row, "image": stored[len(STORED) :], "named": row["image"]}


def _json(blob: bytes | str | None) -> dict:
    if not isinstance(blob, bytes):
        return {}
    try:
        value = json.loads(blob)
    except (ValueError, RecursionError):  # not JSON, or nested past Python's stack
        return {}
    return value if isinstance(value, dict) else {}


def _meta_caption(meta: dict, data: DataConfig) -> str:
    names = [data.caption_column] if data.caption_column else USUAL_NAMES["caption"]
    return next((str(meta[n]) for n in names if isinstance(meta.get(n), str)), "")
