"""WebDataset shards written back as shards, streamed one shard at a time.

Each input shard is read twice with :mod:`tarfile`: its member headers first (which members
each sample has), then its members in order, each kept one copied into the output shard in
blocks (never held whole), so the memory is bounded by the headers of one shard. A sample is
kept or dropped whole, with every member it has (picture, ``.txt``, ``.json``, any other), under
its key; a replaced caption is written into the member the reader took it from: the ``.txt``,
else the caption field of the ``.json``. Without ``shard_bytes`` an output shard is named as its
input shard (the pair ids ``shard/key`` stay the same); with it, an input shard whose kept
samples would exceed it is written as ``<shard>-0000.tar``, ``<shard>-0001.tar``, … each at
most ``shard_bytes`` (a single sample larger than that alone in its shard).
"""

from __future__ import annotations

import copy
import io
import json
import tarfile
from pathlib import Path

from mispair.audit.writers.base import WriteRequest, Written, new_file
from mispair.data.readers.columns import USUAL_NAMES
from mispair.data.readers.webdataset import shard_paths
from mispair.errors import DataError

BLOCK = 512
"""A tar file's block: headers and each member's data take whole blocks."""
END_BYTES = 2 * BLOCK * 10
"""What closing a tar file adds at most (two empty blocks, padded to a record of 20 blocks)."""


def write_shards(request: WriteRequest, folder: Path) -> Written:
    """Every input shard's kept samples into ``folder`` (see the module's description)."""
    written = Written()
    caption_names = [request.columns.caption] if request.columns.caption else list(USUAL_NAMES["caption"])
    for shard in shard_paths(request.collection):
        written.add(_shard(shard, folder, request, caption_names))
    return written


def _key(name: str) -> str:
    folder, _, base = name.rpartition("/")
    stem = base.partition(".")[0]
    return f"{folder}/{stem}" if folder else stem


def _suffix(name: str) -> str:
    base = name.rpartition("/")[2]
    _stem, dot, suffix = base.partition(".")
    return "." + suffix.lower() if dot else ""


def _shard(shard: Path, folder: Path, request: WriteRequest, caption_names: list[str]) -> Written:
    decided = request.decided
    written = Written()
    try:
        with tarfile.open(shard, "r:") as tar:
            members = [m for m in tar.getmembers() if m.isfile() and "." in m.name.rpartition("/")[2]]
            suffixes: dict[str, set[str]] = {}
            sizes: dict[str, int] = {}
            for member in members:
                key = _key(member.name)
                suffixes.setdefault(key, set()).add(_suffix(member.name))
                sizes[key] = sizes.get(key, 0) + _stored_bytes(member.name, member.size)
            written.read = len(suffixes)
            output = _Output(folder, shard, request.shard_bytes)
            done: set[str] = set()
            for member in members:
                key = _key(member.name)
                pair_id = f"{shard.stem}/{key}"
                if not decided.keeps(pair_id):
                    continue
                if key not in done:
                    done.add(key)
                    written.kept += 1
                    new = decided.caption(pair_id)
                    extra = 0 if new is None else _stored_bytes(member.name, len(new.encode()))
                    output.begin_sample(sizes[key] + extra)
                new = decided.caption(pair_id)
                suffix = _suffix(member.name)
                text_member = ".txt" in suffixes[key]
                if new is not None and (suffix == ".txt" or (suffix == ".json" and not text_member)):
                    data = tar.extractfile(member).read()
                    data = new.encode() if suffix == ".txt" else _json_with(data, new, caption_names)
                    info = copy.copy(member)
                    info.size = len(data)
                    output.add(info, io.BytesIO(data))
                    written.replaced += 1
                else:
                    output.add(copy.copy(member), tar.extractfile(member))
            written.files += output.close()
    except (tarfile.TarError, OSError) as exc:
        raise DataError(f"{shard}: not a readable tar shard ({exc})") from None
    return written


def _stored_bytes(name: str, size: int) -> int:
    """What a member takes in a GNU tar file: its header (and a long name's), its data padded."""
    long_name = -(-len(name.encode()) // BLOCK) * BLOCK + BLOCK if len(name.encode()) > 99 else 0
    return BLOCK + long_name + -(-size // BLOCK) * BLOCK


def _json_with(data: bytes, caption: str, names: list[str]) -> bytes:
    """The sample's JSON with its caption field (the first of ``names`` it has) set."""
    try:
        meta = json.loads(data)
    except (ValueError, RecursionError):
        meta = None
    if not isinstance(meta, dict):
        return data
    field = next((n for n in names if isinstance(meta.get(n), str)), names[0])
    return json.dumps({**meta, field: caption}, ensure_ascii=False).encode()


class _Output:
    """The output shard(s) of one input shard, a new part begun when the bound is reached."""

    def __init__(self, folder: Path, shard: Path, bound: int | None) -> None:
        self.folder, self.shard, self.bound = folder, shard, bound
        self.tar: tarfile.TarFile | None = None
        self.size, self.parts, self.names = 0, 0, []

    def begin_sample(self, size: int) -> None:
        if self.bound is not None and self.tar is not None and self.size + size + END_BYTES > self.bound:
            self.tar.close()
            self.file.close()
            self.tar = None
        if self.tar is None:
            self._open()
        self.size += size

    def _open(self) -> None:
        name = self.shard.name if self.bound is None else f"{self.shard.stem}-{self.parts:04d}.tar"
        self.parts += 1
        self.names.append(name)
        self.file = new_file(self.folder / name)
        self.tar = tarfile.open(fileobj=self.file, mode="w", format=tarfile.GNU_FORMAT)  # noqa: SIM115
        self.size = 0

    def add(self, info: tarfile.TarInfo, data) -> None:
        if self.tar is None:
            self._open()
        self.tar.addfile(info, data)

    def close(self) -> list[str]:
        if self.tar is None and self.bound is None:  # every sample dropped: an empty shard
            self._open()
        if self.tar is not None:
            self.tar.close()
            self.file.close()
        return self.names
