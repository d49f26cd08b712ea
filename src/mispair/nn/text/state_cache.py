"""The outputs of a frozen text encoder, computed once per caption and kept in memory and on disk.

A frozen pretrained encoder gives every caption the same token states at every epoch, so running
it on each batch wastes most of an epoch. :class:`TokenStateCache` keeps the states of each
caption, keyed by a digest of its token ids (so a changed caption, or other tokenizer settings,
is a new key and is computed anew; an unchanged caption never is). The cache of one encoder
(``tag``: model files and output kind) is shared by every model of the process.

On disk (:meth:`TokenStateCache.use_directory`), the states are written in shards of
``chunk_size`` captions, each written atomically as ``{directory}/{tag}/{digest}.states`` once
complete (``digest``: of the shard's keys): a killed precomputation resumes at the first missing
shard, and a second run loads every shard without running the encoder. A shard is read through
:mod:`mispair.data.cache_files` (a regular file this user's mispair wrote under this name, finite
states) and must hold the keys its name says, each once, with one state each; one that does not
is removed and its captions computed again, with one warning line, so no shard can decide a
caption's states but the one this cache wrote for it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from mispair.data.cache_files import BadEntry, Rejected, write_arrays
from mispair.data.cache_folder import private_folder
from mispair.progress import progress_bar

StateFn = Callable[[Tensor, Tensor], Tensor]
"""Computes token states ``[B, L, H]`` of padded ids ``[B, L]`` with ``lengths [B]``."""


MAX_PADDING = 0.1
"""The share of a batch's ids that may be padding when :meth:`TokenStateCache.fill` forms it."""


def length_batches(
    lengths: Sequence[int], batch_size: int, max_padding: float | None = MAX_PADDING
) -> list[range]:
    """Consecutive batches of captions of ``lengths`` (sorted longest first): each at most
    ``batch_size`` captions, closed before its padding (``len(batch) · lengths[first] − Σ
    lengths``) would pass ``max_padding`` of its ids; ``None``: every batch ``batch_size`` long.

    A batch is padded to its first caption's length, so a fixed size wastes the encoder's work
    where lengths fall fast: 43% of the ids of 804 Tux Paint captions in batches of 128.

    >>> length_batches([9, 8, 8, 4, 4, 4], 4)
    [range(0, 3), range(3, 6)]
    """
    out, start = [], 0
    while start < len(lengths):
        stop, total = start + 1, lengths[start]
        while stop < len(lengths) and stop - start < batch_size:
            padded = lengths[start] * (stop - start + 1)
            if max_padding is not None and total + lengths[stop] < (1 - max_padding) * padded:
                break
            total += lengths[stop]
            stop += 1
        out.append(range(start, stop))
        start = stop
    return out


def token_key(ids: Sequence[int]) -> bytes:
    """The cache key of a caption's token ids (a 16-byte digest of them)."""
    return hashlib.blake2b(np.asarray(ids, dtype=np.int64).tobytes(), digest_size=16).digest()


class TokenStateCache:
    """Token states ``[L_i, H]`` (float16) of captions by :func:`token_key` of their ids; with
    ``per_caption``, one state ``[1, H]`` (float32) per caption (``compute`` then returns
    ``[B, 1, H]``: e.g. the mean of the token states, all a pooled-only model reads).

    Per caption, the states are rows of one matrix ``[capacity, H]`` (a caption's row in
    :attr:`rows`) rather than a tensor each: a million captions take 1.5 GB instead of about 2.2
    GB (a tensor's own bookkeeping outweighs its 384 numbers), and a batch is one gather.
    """

    def __init__(self, tag: str, *, per_caption: bool = False) -> None:
        self.tag = tag
        self.per_caption = per_caption
        self.dtype = torch.float32 if per_caption else torch.float16
        self.rows: dict[bytes, int] = {}
        self._ragged: list[Tensor] = []  # token states, by row
        self._matrix: Tensor | None = None  # per-caption states [capacity, H], by row
        self._room = 0  # the rows the matrix is to hold at least, once its width is known
        self.directory: Path | None = None
        self._loaded: set[Path] = set()

    def __len__(self) -> int:
        return len(self.rows)

    def use_directory(self, directory: str | Path) -> None:
        """Keep new states under ``directory/<tag>/`` and load the shards already there that pass
        their check (the others are removed, said in one warning line; their captions are
        computed when asked for). A folder that cannot be created or written, or that is not
        the user's alone, is a one-line ``DataError``."""
        directory = Path(directory)
        self.directory = private_folder(directory / self.tag, "text feature cache", top=_top(directory))
        shards = [s for s in sorted(self.directory.glob("*.states")) if s not in self._loaded]
        rejected = Rejected("text feature cache")
        for left, shard in zip(range(len(shards), 0, -1), shards):
            arrays = rejected.load(shard, self._shard_check(shard))
            if arrays is None:
                continue
            keys = [bytes(k) for k in arrays["keys"].tolist()]
            if self.per_caption:  # room for the shards left, each as large as this one
                self._reserve(len(self) + len(keys) * left)
            self._add(keys, _states_of(arrays, self.per_caption))
            self._loaded.add(shard)
        rejected.warn()

    def _shard_check(self, shard: Path) -> Callable[[dict[str, np.ndarray]], None]:
        """What a shard named ``shard`` must hold: distinct 16-byte keys whose digest is its name,
        and one state per key (of this cache's kind)."""

        def check(arrays: dict[str, np.ndarray]) -> None:
            keys, states = arrays.get("keys"), arrays.get("states")
            if keys is None or states is None or keys.ndim != 2 or keys.shape[1] != 16 or states.ndim != 2:
                raise BadEntry("not a shard of token states")
            if _shard_name([bytes(k) for k in keys.tolist()]) != shard.name:
                raise BadEntry("its keys are not those its name says")
            lengths = arrays.get("lengths")
            rows = len(keys) if self.per_caption else None if lengths is None else int(lengths.sum())
            if rows != len(states) or (
                lengths is not None and (len(lengths) != len(keys) or (lengths < 1).any())
            ):
                raise BadEntry("its states do not match its keys")

        return check

    def clear(self) -> None:
        """Forget every state held in memory (a million per-caption states: 1.5 GB); the shards on
        disk stay, and the next :meth:`use_directory` reads them again. A caption looked up
        meanwhile is computed anew."""
        self.rows, self._ragged, self._matrix, self._room, self._loaded = {}, [], None, 0, set()

    def missing(self, token_lists: Sequence[Sequence[int]]) -> list[list[int]]:
        """The distinct captions of ``token_lists`` that the cache does not hold yet."""
        todo: dict[bytes, list[int]] = {}
        for ids in token_lists:
            key = token_key(ids)
            if key not in self.rows:
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
        max_padding: float | None = MAX_PADDING,
    ) -> int:
        """Compute the states of the captions not cached yet (longest first, in batches of at
        most ``batch_size`` that pad at most ``max_padding`` of their ids, :func:`length_batches`;
        with a progress bar when ``progress``) and write a shard per ``chunk_size`` of them when a
        directory is in use. Returns how many were computed."""
        todo = sorted(self.missing(token_lists), key=len, reverse=True)
        if self.per_caption:
            self._reserve(len(self) + len(todo))
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
            for batch in length_batches([len(ids) for ids in chunk], batch_size, max_padding):
                keys += self._compute(chunk[batch.start : batch.stop], compute)
                bar.update(len(batch))
            self._write_shard(keys)
        bar.close()
        return len(todo)

    def lookup(self, tokens: Tensor, lengths: Tensor, compute: StateFn) -> Tensor:
        """``[B, L, H]`` float32 states of a padded batch (ids ``[B, L]``, ``lengths [B]``), zero at
        padding (``[B, 1, H]`` with ``per_caption``); captions not cached are computed with
        ``compute`` and kept (in memory)."""
        token_lists = [ids[:n] for ids, n in zip(tokens.cpu().tolist(), lengths.cpu().tolist())]
        if self.per_caption:
            return self.vectors(token_lists, compute)[:, None].to(tokens.device)
        keys = self._known(token_lists, compute)
        first = self._ragged[self.rows[keys[0]]]
        out = torch.zeros(len(token_lists), tokens.shape[1], first.shape[-1], dtype=first.dtype)
        for row, key in enumerate(keys):
            state = self._ragged[self.rows[key]]
            out[row, : state.shape[0]] = state
        return out.to(device=tokens.device, dtype=torch.float32)

    def vectors(self, token_lists: Sequence[Sequence[int]], compute: StateFn) -> Tensor:
        """``[n, H]`` float32: the state of each caption of ``token_lists`` (``per_caption`` only),
        gathered in one call; captions not cached are computed with ``compute`` and kept."""
        table, rows = self.table(token_lists, compute)
        return table[rows]

    def table(self, token_lists: Sequence[Sequence[int]], compute: StateFn) -> tuple[Tensor, Tensor]:
        """``(table [m, H], rows [n])``: the states the cache keeps (``per_caption`` only; the
        cache's own tensor, not a copy: read it, never write it) and the row of each caption of
        ``token_lists``; captions not cached are computed with ``compute`` first."""
        if not self.per_caption:
            raise ValueError(f"{self.tag}: token states are kept per token, not one vector per caption")
        keys = self._known(token_lists, compute)
        assert self._matrix is not None
        return self._matrix[: len(self)], torch.tensor([self.rows[k] for k in keys], dtype=torch.long)

    def _known(self, token_lists: Sequence[Sequence[int]], compute: StateFn) -> list[bytes]:
        """The keys of ``token_lists``, the captions not cached computed first."""
        keys = [token_key(ids) for ids in token_lists]
        new = {key: list(ids) for ids, key in zip(token_lists, keys) if key not in self.rows}
        if new:
            self._compute(list(new.values()), compute)
        return keys

    def _compute(self, token_lists: list[list[int]], compute: StateFn) -> list[bytes]:
        lengths = torch.tensor([len(ids) for ids in token_lists], dtype=torch.long)
        padded = torch.zeros(len(token_lists), int(lengths.max()), dtype=torch.long)
        for row, ids in enumerate(token_lists):
            padded[row, : len(ids)] = torch.tensor(ids, dtype=torch.long)
        with torch.inference_mode():
            states = compute(padded, lengths).to("cpu", self.dtype)
        keys = [token_key(ids) for ids in token_lists]
        self._add(keys, states if self.per_caption else [s[:n] for s, n in zip(states, lengths.tolist())])
        return keys

    def _add(self, keys: list[bytes], states: Tensor | Sequence[Tensor]) -> None:
        """Keep ``states`` (``[n, 1, H]`` per caption, else ``n`` tensors ``[L_i, H]``) under
        ``keys``; a key already kept keeps its state."""
        fresh = [k for k, key in enumerate(keys) if key not in self.rows]
        if not fresh:
            return
        if not self.per_caption:
            for k in fresh:
                self.rows[keys[k]] = len(self._ragged)
                self._ragged.append(states[k].clone())
            return
        stacked = states if torch.is_tensor(states) else torch.stack(list(states))  # older shards: a list
        block = stacked[fresh, 0].to(self.dtype)
        start = len(self.rows)
        self._reserve(start + len(fresh), width=block.shape[1])
        assert self._matrix is not None
        self._matrix[start : start + len(fresh)] = block
        self.rows.update((keys[k], start + n) for n, k in enumerate(fresh))

    def _reserve(self, size: int, width: int | None = None) -> None:
        """Room for ``size`` per-caption states (the matrix doubles at least, so that captions
        added one batch at a time are copied a bounded number of times); before the first state,
        the room is remembered until its ``width`` is known."""
        self._room = max(self._room, size)
        if self._matrix is None:
            if width is not None:
                self._matrix = torch.empty(self._room, width, dtype=self.dtype)
        elif size > len(self._matrix):
            grown = torch.empty(max(size, 2 * len(self._matrix)), self._matrix.shape[1], dtype=self.dtype)
            grown[: len(self.rows)] = self._matrix[: len(self.rows)]
            self._matrix = grown

    def _write_shard(self, keys: list[bytes]) -> None:
        if self.directory is None or not keys:
            return
        path = self.directory / _shard_name(keys)
        table = np.frombuffer(b"".join(keys), dtype=np.uint8).reshape(len(keys), 16)
        arrays = {"keys": table}
        if self.per_caption:  # one matrix [n, H]: read back 20x faster than n small tensors
            assert self._matrix is not None
            arrays["states"] = self._matrix[[self.rows[k] for k in keys]].numpy()
        else:
            states = [self._ragged[self.rows[k]] for k in keys]
            arrays["states"] = torch.cat(states).numpy()
            arrays["lengths"] = np.array([len(s) for s in states], dtype=np.int64)
        write_arrays(path, arrays)
        self._loaded.add(path)


def _shard_name(keys: Sequence[bytes]) -> str:
    """The file name of the shard of ``keys``: a digest of them, sorted (their order aside)."""
    return hashlib.blake2b(b"".join(sorted(keys)), digest_size=12).hexdigest() + ".states"


def _states_of(arrays: dict[str, np.ndarray], per_caption: bool) -> Tensor | list[Tensor]:
    """A checked shard's states: ``[n, 1, H]`` per caption, else one ``[L_i, H]`` per key."""
    states = torch.from_numpy(arrays["states"])
    if per_caption:
        return states[:, None]
    return list(torch.split(states, arrays["lengths"].tolist()))


def _top(directory: Path) -> Path | None:
    """The highest folder of the cache whose privacy :func:`private_folder` checks for
    ``directory``: the cache root when ``directory`` lies in it, else ``directory``."""
    from mispair.data.cache_folder import cache_root

    return None if directory.is_relative_to(cache_root()) else directory


_CACHES: dict[str, TokenStateCache] = {}


def shared_cache(tag: str, *, per_caption: bool = False) -> TokenStateCache:
    """The process-wide cache of encoder ``tag`` (every model of a run reads the same one)."""
    return _CACHES.setdefault(tag, TokenStateCache(tag, per_caption=per_caption))
