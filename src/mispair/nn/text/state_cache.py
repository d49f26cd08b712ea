"""The outputs of a frozen text encoder, computed once per caption and kept in memory and on disk.

A frozen pretrained encoder gives every caption the same token states at every epoch, so running
it on each batch wastes most of an epoch. :class:`TokenStateCache` keeps the states of each
caption, keyed by a digest of its token ids (so a changed caption, or other tokenizer settings,
is a new key and is computed anew; an unchanged caption never is). The cache of one encoder
(``tag``: model files and output kind) is shared by every model of the process.

On disk (:meth:`TokenStateCache.use_directory`), the states are written in shards of
``chunk_size`` captions, each written atomically as ``{directory}/{tag}/{digest}.pt`` once
complete: a killed precomputation resumes at the first missing shard, and a second run loads
every shard without running the encoder.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from mispair.atomic import atomic_write, ensure_directory
from mispair.progress import progress_bar

StateFn = Callable[[Tensor, Tensor], Tensor]
"""Computes token states ``[B, L, H]`` of padded ids ``[B, L]`` with ``lengths [B]``."""


def token_key(ids: Sequence[int]) -> bytes:
    """The cache key of a caption's token ids (a 16-byte digest of them)."""
    return hashlib.blake2b(np.asarray(ids, dtype=np.int64).tobytes(), digest_size=16).digest()


class TokenStateCache:
    """Token states ``[L_i, H]`` (float16) of captions by :func:`token_key` of their ids; with
    ``per_caption``, one state ``[1, H]`` (float32) per caption (``compute`` then returns
    ``[B, 1, H]``: e.g. the mean of the token states, all a pooled-only model reads)."""

    def __init__(self, tag: str, *, per_caption: bool = False) -> None:
        self.tag = tag
        self.per_caption = per_caption
        self.dtype = torch.float32 if per_caption else torch.float16
        self.states: dict[bytes, Tensor] = {}
        self.directory: Path | None = None
        self._loaded: set[Path] = set()

    def __len__(self) -> int:
        return len(self.states)

    def use_directory(self, directory: str | Path) -> None:
        """Keep new states under ``directory/<tag>/`` and load the shards already there (a
        folder that cannot be created or written is a one-line ``DataError``)."""
        self.directory = ensure_directory(Path(directory) / self.tag, "text feature cache")
        for shard in sorted(self.directory.glob("*.pt")):
            if shard not in self._loaded:
                keys, states = torch.load(shard, map_location="cpu", weights_only=True)
                self.states.update(zip((bytes(k) for k in keys.tolist()), states))
                self._loaded.add(shard)

    def missing(self, token_lists: Sequence[Sequence[int]]) -> list[list[int]]:
        """The distinct captions of ``token_lists`` that the cache does not hold yet."""
        todo: dict[bytes, list[int]] = {}
        for ids in token_lists:
            key = token_key(ids)
            if key not in self.states:
                todo.setdefault(key, list(ids))
        return list(todo.values())

    def fill(
        self,
        token_lists: Sequence[Sequence[int]],
        compute: StateFn,
        *,
        batch_size: int = 128,
        chunk_size: int = 2048,
        progress: bool = False,
    ) -> int:
        """Compute the states of the captions not cached yet (in batches of ``batch_size``,
        longest first, with a progress bar when ``progress``) and write a shard per
        ``chunk_size`` of them when a directory is in use. Returns how many were computed."""
        todo = sorted(self.missing(token_lists), key=len, reverse=True)
        bar = progress_bar(
            total=len(todo),
            desc="text features",
            unit="caption",
            disable=not progress or not todo,
            leave=False,
        )
        for start in range(0, len(todo), chunk_size):
            chunk = todo[start : start + chunk_size]
            keys = []
            for first in range(0, len(chunk), batch_size):
                keys += self._compute(chunk[first : first + batch_size], compute)
                bar.update(min(batch_size, len(chunk) - first))
            self._write_shard(keys)
        bar.close()
        return len(todo)

    def lookup(self, tokens: Tensor, lengths: Tensor, compute: StateFn) -> Tensor:
        """``[B, L, H]`` float32 states of a padded batch (ids ``[B, L]``, ``lengths [B]``), zero at
        padding (``[B, 1, H]`` with ``per_caption``); captions not cached are computed with
        ``compute`` and kept (in memory)."""
        rows = [ids[:n] for ids, n in zip(tokens.cpu().tolist(), lengths.cpu().tolist())]
        keys = [token_key(ids) for ids in rows]
        new = [ids for ids, key in zip(rows, keys) if key not in self.states]
        if new:
            self._compute(new, compute)
        if self.per_caption:  # one [1, H] state per caption: stacked in one call
            return torch.stack([self.states[key] for key in keys]).to(
                device=tokens.device, dtype=torch.float32
            )
        first = self.states[keys[0]]
        width = tokens.shape[1]
        out = torch.zeros(len(rows), width, first.shape[-1], dtype=first.dtype)
        for row, key in enumerate(keys):
            state = self.states[key]
            out[row, : state.shape[0]] = state
        return out.to(device=tokens.device, dtype=torch.float32)

    def _compute(self, token_lists: list[list[int]], compute: StateFn) -> list[bytes]:
        lengths = torch.tensor([len(ids) for ids in token_lists], dtype=torch.long)
        padded = torch.zeros(len(token_lists), int(lengths.max()), dtype=torch.long)
        for row, ids in enumerate(token_lists):
            padded[row, : len(ids)] = torch.tensor(ids, dtype=torch.long)
        with torch.inference_mode():
            states = compute(padded, lengths).to("cpu", self.dtype)
        keys = [token_key(ids) for ids in token_lists]
        for key, state, n in zip(keys, states, lengths.tolist()):
            self.states[key] = state[: 1 if self.per_caption else n].clone()
        return keys

    def _write_shard(self, keys: list[bytes]) -> None:
        if self.directory is None or not keys:
            return
        digest = hashlib.blake2b(b"".join(sorted(keys)), digest_size=12).hexdigest()
        path = self.directory / f"{digest}.pt"
        table = torch.tensor([list(k) for k in keys], dtype=torch.uint8)
        states = [self.states[k] for k in keys]
        if self.per_caption:  # one tensor [n, 1, H]: read back 20x faster than n small ones
            states = torch.stack(states)
        atomic_write(path, lambda handle: torch.save((table, states), handle))
        self._loaded.add(path)


_CACHES: dict[str, TokenStateCache] = {}


def shared_cache(tag: str, *, per_caption: bool = False) -> TokenStateCache:
    """The process-wide cache of encoder ``tag`` (every model of a run reads the same one)."""
    return _CACHES.setdefault(tag, TokenStateCache(tag, per_caption=per_caption))
