"""Join errors: captions shifted against their pictures, and one caption pasted on many pictures.

Mismatched pairs often come from a join gone wrong rather than from scattered mistakes: a row
deleted from a spreadsheet's caption column shifts every caption below it by one row, a default
text is pasted on every picture of a batch. Both are found here as a whole:

- **Shift runs** (:func:`find_shifts`). In the collection's own row order (each file or shard a
  sequence of its own), the caption of row ``i`` *agrees* with offset ``k`` (``0 < |k| ≤
  max_offset``) when, of the pictures of the rows around it (``i - max_offset`` to ``i +
  max_offset``), the one at ``i + k`` fits it best (ties: the same picture at several offsets
  agrees at each), and better than its own picture. Rows whose
  picture at ``i + k`` is the same picture or a near-duplicate of their own tell nothing (a
  table with five captions per picture, a burst of video frames): they are neither agreement
  nor disagreement, and a run spans them. A row the audit did not read (a refused sample, an
  unaudited row: ``-1`` in ``files``) keeps its place in the row arithmetic (the caption at row
  ``i`` still belongs to the picture at row ``i + k``, counting it) but has no picture or caption:
  it tells nothing at any offset, and neither does a row whose picture ``i + k`` is such a row; a
  run spans them as it spans alike pictures. Without a shift, offset ``k`` agrees at a rate of its
  own (about ``1 / (2 max_offset)`` where the neighbours are alike to a caption; more at ``±1``
  where the rows are sorted by content, alike at ``k`` and ``-k``): the rate measured over every
  informative row of the collection (``(agreeing + 1) / (rows + 1)``). A shift of offset ``k``
  raises the rate at ``k`` (a run over half the rows, the rows below a deleted cell, doubles it
  or more: measured so, its own run no longer stands out) but not at ``-k``; content order
  raises both alike. So ``null_rate[k]`` is the lower of the rates measured at ``k`` and
  ``-k``. A run is a stretch where offset ``k`` agrees far more often than that: the
  maximal-scoring segments of each (file, offset) sequence (Ruzzo & Tompa) under the
  log-likelihood ratio of an agreement rate of ``1/2`` against ``null_rate[k]``; a segment of
  ``n`` informative rows of which ``m`` agree is reported when its binomial tail
  ``P(Bin(n, null_rate[k]) ≥ m)``, multiplied by the number of segments that could have been
  tested (every start and end in every file at every offset: Bonferroni), is at most ``alpha``.
  A maximal segment begins and ends with an agreeing row, so the rows at a run's ends that do
  not agree are left out of it; once a run stands on its own evidence (its *core*), it is
  extended row by row at each end (:func:`_extended`) while the next row *fits* offset ``k``:
  it agrees (never the case next to a maximal segment's end, but it may be after rows that tell
  nothing); or, at the run's end on the side of ``k``, its caption is also the caption of row
  ``i + k`` outside the run and of no other row: a run of offset ``k`` written over the rows
  leaves its last ``|k|`` captions twice, on their own rows ``k`` further on, and the final run,
  which trained on both pairs, fits each caption to both pictures about equally, so those rows
  seldom agree (measured so at the ends of Tux Paint's runs). Rows that tell nothing (the same
  picture at ``i + k``) are spanned only up to a row that fits. The extension stops at the first
  informative row that does not fit (its own picture or another offset's picture fits it
  better), at a file's end and at another run; a row beside a run that is not shifted fits by
  chance only where its caption is repeated at exactly ``k`` rows. Runs of one offset that the
  extension brings together (nothing informative between them) are one run. The evidence
  (``agreeing``, ``informative``, ``gain``, ``p_value``) stays the core's; ``edge_rows`` counts
  the rows added.
- **Repeated captions** (:func:`repeated_captions`): a caption (equal after folding case and
  white space) carried by at least ``min_pictures`` pictures that are not near-duplicates of
  one another is one finding; the same caption on near-duplicate pictures is not.

Convention: a run's ``offset`` ``k`` means the caption found at row ``i`` belongs to the picture at
row ``i + k``; ``+1`` is "the next row's caption" (a row deleted above the run).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
from scipy.stats import binom

from mispair.audit.duplicates import normalized

MAX_OFFSET = 8
"""The largest shift looked for, in rows (either way)."""
ALPHA = 0.01
"""The family-wise error rate of the shift runs reported (over every offset and segment)."""
AGREEING_RATE = 0.5
"""The agreement rate of a shift run that the segments' scores are tuned to find."""
MIN_PICTURES = 10
"""A repeated caption is reported when at least this many pictures that are not near-duplicates
of one another carry it (on Tux Paint's 950 stamps the most repeated description, "A flower.",
is on 6)."""


@dataclass(frozen=True)
class ShiftRun:
    """A run of consecutive rows of file ``file`` (positions ``start`` to ``stop``, inclusive, in
    the file's row order, rows not read counted) whose captions belong ``offset`` rows away: of
    its ``informative`` rows ``agreeing`` agree; ``gain``: the mean similarity gain of the caption
    with the picture ``offset`` rows away over its own, on the informative rows; ``p_value``:
    corrected for every segment tested. The evidence is the run's core's, the segment tested;
    ``edge_rows``: the rows read of the run outside its core (added at its ends,
    :func:`_extended`)."""

    file: int
    start: int
    stop: int
    offset: int
    agreeing: int
    informative: int
    gain: float
    p_value: float
    edge_rows: int = 0

    @property
    def rows(self) -> int:
        return self.stop - self.start + 1


@dataclass(frozen=True)
class ShiftScan:
    """What :func:`find_shifts` found: the ``runs`` reported, the ``null_rate`` of agreement at
    each offset (``{k: rate}``), and the number of segments ``tests`` the p-values are corrected
    for."""

    runs: list[ShiftRun]
    null_rate: dict[int, float]
    tests: int


def find_shifts(
    captions: np.ndarray,
    pictures: np.ndarray,
    looks: np.ndarray,
    files: Sequence[np.ndarray],
    *,
    max_offset: int = MAX_OFFSET,
    alpha: float = ALPHA,
    wording: np.ndarray | None = None,
) -> ShiftScan:
    """The shift runs of a collection (module description).

    Args:
        captions: ``[n, d]`` each pair's caption vector (unit norm: a dot product is the similarity).
        pictures: ``[n, d]`` each pair's own picture vector.
        looks: ``[n]`` int, each pair's picture's class of near-duplicates (equal: alike).
        files: each file's pair indices in its row order (the sequences a shift stays within);
            ``-1`` for a row not read, which keeps its place (module description).
        wording: ``[n]`` int, each pair's caption's class of equal wording
            (:func:`caption_wording`); default: equal caption vectors.
    """
    agree = [agreement(captions, pictures, looks, rows, max_offset) for rows in files]
    hits = sum(a.hit.sum(axis=1) for a in agree)
    rows = sum(a.informative.sum(axis=1) for a in agree)
    measured = (np.asarray(hits) + 1) / (np.asarray(rows) + 1)  # offsets -K..-1, 1..K
    null_rate = np.minimum(measured, measured[::-1]) if measured.ndim else measured  # k and -k
    tests = sum(int(n) * (int(n) + 1) // 2 for a in agree for n in a.informative.sum(axis=1))
    candidates = [
        run
        for f, found in enumerate(agree)
        for run in _runs(found, f, null_rate, max(tests, 1))
        if run.p_value <= alpha
    ]
    if wording is None:
        wording = _equal_rows(captions)
    runs = _extended(_disjoint(candidates), agree, [_file_wording(np.asarray(wording), f) for f in files])
    offsets = agree[0].offsets if agree else np.zeros(0, dtype=np.int64)
    rates = {int(k): float(q) for k, q in zip(offsets, np.broadcast_to(null_rate, offsets.shape))}
    return ShiftScan(runs, rates, tests)


def _equal_rows(captions: np.ndarray) -> np.ndarray:
    """``[n]`` each row's class of equal caption vectors."""
    if not len(captions):
        return np.zeros(0, dtype=np.int64)
    rows = np.ascontiguousarray(captions)
    keys = rows.view(np.dtype((np.void, rows.dtype.itemsize * rows.shape[1]))).ravel()
    return np.unique(keys, return_inverse=True)[1].astype(np.int64)


def _file_wording(wording: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """``[m]`` the wording classes of one file's rows (``rows``: pair indices, ``-1`` not read), each
    row not read a class of its own (its caption is unknown: equal to no other)."""
    words = wording[np.maximum(rows, 0)] if len(wording) else np.zeros(len(rows), dtype=np.int64)
    fresh = int(wording.max(initial=-1)) + 1 + np.arange(len(rows))
    return np.where(rows >= 0, words, fresh)


def caption_wording(captions: Sequence[str]) -> np.ndarray:
    """``[n]`` each caption's class of equal wording (after
    :func:`~mispair.audit.duplicates.normalized`)."""
    classes: dict[str, int] = {}
    return np.array([classes.setdefault(normalized(c), len(classes)) for c in captions], dtype=np.int64)


@dataclass(frozen=True)
class Agreement:
    """One file's evidence: ``hit [2K, m]`` (offset ``offsets[j]``, row ``i``) agreement,
    ``informative [2K, m]`` (rows ``i`` and ``i + k`` read, the picture ``i + k`` not alike),
    ``read [m]`` the rows the audit read (a refused or unaudited row keeps its place), ``gain [2K, m]``
    the similarity with the picture ``i + k`` less the similarity with the row's own, ``unit
    [2K, m]`` the row's pair of pictures (its own look and that of the picture ``i + k``): rows
    of one unit (the captions of one picture beside those of another, five a picture in COCO)
    agree or not together, so the test counts units, not rows."""

    offsets: np.ndarray
    hit: np.ndarray
    informative: np.ndarray
    gain: np.ndarray
    unit: np.ndarray
    read: np.ndarray


def agreement(
    captions: np.ndarray, pictures: np.ndarray, looks: np.ndarray, rows: np.ndarray, max_offset: int
) -> Agreement:
    """:class:`Agreement` of the file whose pair indices in row order are ``rows`` (``-1``: a row
    not read, which tells nothing and whose picture is no row's neighbour)."""
    m, read = len(rows), np.asarray(rows) >= 0
    offsets = np.array([k for k in range(-max_offset, max_offset + 1) if k != 0], dtype=np.int64)
    at = np.where(read, rows, 0)
    caps, pics, look = captions[at], pictures[at], np.asarray(looks)[at]
    own = np.einsum("nd,nd->n", caps, pics)
    sims = np.full((len(offsets), m), -np.inf)
    informative = np.zeros((len(offsets), m), dtype=bool)
    unit = np.full((len(offsets), m), -1, dtype=np.int64)
    looks_count = int(look.max()) + 1 if m else 1
    for j, k in enumerate(offsets):
        i = np.arange(max(0, -k), min(m, m - k))
        i = i[read[i] & read[i + k]]
        sims[j, i] = np.einsum("nd,nd->n", caps[i], pics[i + k])
        informative[j, i] = look[i + k] != look[i]
        unit[j, i] = look[i].astype(np.int64) * looks_count + look[i + k]
    best = sims.max(axis=0) if m else np.zeros(0)
    hit = informative & (sims >= best[None, :]) & (sims > own[None, :])  # ties: the same picture
    gain = np.where(np.isfinite(sims), sims - own[None, :], 0.0)
    return Agreement(offsets, hit, informative, gain, unit, read)


def _runs(found: Agreement, file: int, null_rate: np.ndarray, tests: int) -> list[ShiftRun]:
    """The maximal-scoring segments of each offset's informative rows of one file, as runs
    (``null_rate [2K]``: each offset's)."""
    runs = []
    for j, k in enumerate(found.offsets):
        q = float(null_rate[j])
        if q >= AGREEING_RATE:  # the offset agrees this often everywhere: no run stands out
            continue
        up, down = float(np.log(AGREEING_RATE / q)), float(np.log((1 - AGREEING_RATE) / (1 - q)))
        where = np.flatnonzero(found.informative[j])
        hits = found.hit[j, where]
        scores: np.ndarray = np.where(hits, up, down)
        for a, b in maximal_segments(scores):
            n, agreeing = b - a, int(hits[a:b].sum())
            units, units_agreeing = _units(found.unit[j, where[a:b]], hits[a:b])
            p = float(binom.sf(units_agreeing - 1, units, q)) * tests
            gain = float(found.gain[j, where[a:b]].mean())
            runs.append(
                ShiftRun(file, int(where[a]), int(where[b - 1]), int(k), agreeing, n, gain, min(p, 1.0))
            )
    return runs


def _units(unit: np.ndarray, hits: np.ndarray) -> tuple[int, int]:
    """The segment's units (its rows' distinct pairs of pictures, :class:`Agreement`) and those
    where most of their rows agree."""
    _, inverse = np.unique(unit, return_inverse=True)
    agreeing = np.bincount(inverse, weights=hits.astype(np.float64)) * 2 > np.bincount(inverse)
    return len(agreeing), int(agreeing.sum())


def maximal_segments(scores: np.ndarray) -> list[tuple[int, int]]:
    """``[(start, stop)]`` the maximal-scoring segments of ``scores`` (Ruzzo & Tompa 1999, "A
    linear time algorithm for finding all maximal scoring subsequences"): disjoint, each of
    positive total, none extendable or splittable into a better one. ``stop`` is exclusive."""
    found: list[list[float]] = []  # [start, stop, cumulative before, cumulative at stop]
    total = 0.0
    for i, score in enumerate(scores):
        if score <= 0:
            total += score
            continue
        new = [i, i + 1, total, total + score]
        total += score
        while True:
            j = len(found) - 1
            while j >= 0 and found[j][2] >= new[2]:
                j -= 1
            if j < 0 or found[j][3] >= new[3]:
                found.append(new)
                break
            new = [found[j][0], new[1], found[j][2], new[3]]
            del found[j:]
    return [(int(a), int(b)) for a, b, _, _ in found]


def _disjoint(runs: list[ShiftRun]) -> list[ShiftRun]:
    """The runs, most significant first, each kept only where it overlaps no run kept before it
    in its file; returned in file and row order."""
    kept: list[ShiftRun] = []
    for run in sorted(runs, key=lambda r: (r.p_value, -r.agreeing)):
        if not any(r.file == run.file and r.start <= run.stop and run.start <= r.stop for r in kept):
            kept.append(run)
    return sorted(kept, key=lambda r: (r.file, r.start))


def _extended(runs: list[ShiftRun], agree: list[Agreement], wording: list[np.ndarray]) -> list[ShiftRun]:
    """The ``runs`` (in file and row order, disjoint) each extended at both ends (:func:`_edge`),
    never into another run; runs of one offset that then touch, or lie apart by rows that tell
    nothing, joined (``wording``: each file's rows' classes of equal wording)."""
    out: list[ShiftRun] = []
    for f, found in enumerate(agree):
        mine = [r for r in runs if r.file == f]
        if not mine:
            continue
        taken = np.zeros(found.hit.shape[1], dtype=bool)
        for r in mine:
            taken[r.start : r.stop + 1] = True
        counts = np.bincount(wording[f]) if len(wording[f]) else np.zeros(0, dtype=np.int64)
        grown = []
        for r in mine:
            j = int(np.flatnonzero(found.offsets == r.offset)[0])
            taken[r.start : r.stop + 1] = False
            start = _edge(found, wording[f], counts, j, r.start, -1, taken)
            stop = _edge(found, wording[f], counts, j, r.stop, 1, taken)
            taken[start : stop + 1] = True
            added = found.read[start : r.start].sum() + found.read[r.stop + 1 : stop + 1].sum()
            edge = r.edge_rows + int(added)
            grown.append(replace(r, start=start, stop=stop, edge_rows=edge))
        out += _joined(grown, found)
    return out


def _edge(
    found: Agreement, wording: np.ndarray, counts: np.ndarray, j: int, edge: int, step: int, taken: np.ndarray
) -> int:
    """The run's end (row ``edge``, offset ``found.offsets[j]``) moved ``step`` a row at a time
    while the next row fits the offset: it agrees; or, going the way of ``k``, its caption is the
    caption of row ``i + k`` and of no other row of the file (``wording``, ``counts``: each row's
    class of equal wording and each class's rows; the captions a run written over the rows
    leaves twice at its far end). Rows that tell nothing are passed over, kept only up to a row
    that fits; the first informative row that does not fit, a file's end (``i + k`` outside it)
    or another run's row (``taken``) stops it."""
    k, m = int(found.offsets[j]), found.hit.shape[1]
    i = edge + step
    while 0 <= i < m and 0 <= i + k < m and not taken[i]:
        twice = step * k > 0 and wording[i] == wording[i + k] and counts[wording[i]] == 2
        if found.hit[j, i] or twice:
            edge = i
        elif found.informative[j, i]:
            break
        i += step
    return edge


def _joined(runs: list[ShiftRun], found: Agreement) -> list[ShiftRun]:
    """The runs of one file (in row order) with neighbours of one offset joined where no row between
    them tells anything (none, or only rows whose picture ``k`` rows away is alike)."""
    out: list[ShiftRun] = []
    for run in runs:
        last = out[-1] if out else None
        if last is not None and last.offset == run.offset:
            j = int(np.flatnonzero(found.offsets == run.offset)[0])
            if not found.informative[j, last.stop + 1 : run.start].any():
                n = last.informative + run.informative
                gain = (last.gain * last.informative + run.gain * run.informative) / max(n, 1)
                read = found.read
                core = sum(int(read[r.start : r.stop + 1].sum()) - r.edge_rows for r in (last, run))
                rows = int(read[last.start : run.stop + 1].sum())
                out[-1] = ShiftRun(
                    last.file,
                    last.start,
                    run.stop,
                    run.offset,
                    last.agreeing + run.agreeing,
                    n,
                    gain,
                    min(last.p_value, run.p_value),
                    rows - core,
                )
                continue
        out.append(run)
    return out


def picture_looks(duplicate_of: np.ndarray) -> np.ndarray:
    """``[n_images]`` each image's class of near-duplicates (the lower index of it and its first
    near-duplicate, :attr:`~mispair.audit.duplicates.Duplicates.duplicate_of`; itself without)."""
    own = np.arange(len(duplicate_of))
    return np.where(duplicate_of >= 0, np.minimum(own, duplicate_of), own)


@dataclass(frozen=True)
class RepeatedGroup:
    """A caption (as most of its pairs spell it) carried by the pairs ``pairs`` (indices), on
    ``pictures`` pictures that are not near-duplicates of one another."""

    caption: str
    pairs: np.ndarray
    pictures: int


def repeated_captions(
    captions: Sequence[str],
    looks: np.ndarray,
    *,
    min_pictures: int = MIN_PICTURES,
    wording: np.ndarray | None = None,
) -> list[RepeatedGroup]:
    """The captions (equal after :func:`~mispair.audit.duplicates.normalized`) that at least
    ``min_pictures`` pictures unlike one another carry (``looks [n]``: each pair's picture's class
    of near-duplicates), the most carried first (``wording``: :func:`caption_wording`'s classes,
    where already made)."""
    groups: dict[int, list[int]] = defaultdict(list)
    for k, word in enumerate((caption_wording(captions) if wording is None else wording).tolist()):
        groups[word].append(k)
    found = []
    for members in groups.values():
        distinct = len(set(np.asarray(looks)[members].tolist()))
        if distinct >= min_pictures:
            spelled = Counter(captions[k] for k in members).most_common(1)[0][0]
            found.append(RepeatedGroup(spelled, np.array(members), distinct))
    return sorted(found, key=lambda g: (-len(g.pairs), g.caption))
