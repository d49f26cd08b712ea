"""Decoy pairs: captions shown with another picture, scored exactly like the real pairs.

A held-out score says how well a pair fits, on a scale of its own (the model, the collection,
the score kind). To read it as a probability, the audit needs the scores that *mismatched* pairs
get on that same scale. A decoy is a caption of the collection shown with the picture of another
pair held out with it: "a caption that describes another picture". Each is scored by the same
held-out scorers as the fold's real pairs, so no scorer trained on either side, and its score
distribution is the mismatched pairs' null on the collection's own scale
(:mod:`mispair.division.calibration` turns it into a share, probabilities and error rates).

A real pair's score is the mean over the repeats of its scores in the fold that held it out
(in the content group of that fold its ``contrast`` score weighs it against). A decoy's caption
and picture must therefore be held out, and weighed, together in every repeat: both come from
one **cell**, the pairs that share fold and contrast group in every partition. Within a cell a
caption is shown with the picture of a pair of another content group (never its own picture, an
identical caption's or a near-duplicate's). Choosing the decoys costs no training; scoring them
reads similarities the real scores computed already
(:func:`~mispair.engine.held_out.contrast.contrast_scores`).
"""

from __future__ import annotations

import numpy as np

DECOYS_PER_PAIR = 4
"""Decoys drawn per caption (fewer where its cell holds fewer other content groups)."""


def cells_of(assignments: np.ndarray) -> np.ndarray:
    """``[n]`` cell of each pair: pairs with equal columns of ``assignments [r, n]`` (their fold
    and contrast group in each partition) share a cell."""
    return np.unique(np.asarray(assignments).T, axis=0, return_inverse=True)[1].reshape(-1)


def decoy_pairs(cell: np.ndarray, group: np.ndarray, per_pair: int, seed: int) -> np.ndarray:
    """``[m, 2]`` decoys ``(caption, other)``: caption ``caption`` shown with the picture of pair
    ``other`` (both indices into the pairs), at most ``per_pair`` for each caption, all of its
    ``cell [n]`` and of another content ``group [n]``, sorted. Each cell's pairs are put in a
    random cyclic order (``seed``) and a caption is shown with the pictures of the ``per_pair``
    pairs after it (those of its own group left out): distinct for each caption, every picture
    shown about as often as every caption, drawn for a million pairs in about a second."""
    cell, group = np.asarray(cell, dtype=np.int64), np.asarray(group)
    rng = np.random.default_rng(seed)
    order = np.lexsort((rng.random(len(cell)), cell))  # each cell's pairs, in a random order
    counts = np.bincount(cell)
    size = counts[cell[order]]
    start = (np.cumsum(counts) - counts)[cell[order]]
    position = np.arange(len(cell)) - start
    chosen = []
    for shift in range(1, per_pair + 1):
        other = order[start + (position + shift) % size]
        keep = (size > shift) & (group[order] != group[other])  # another pair, of another group
        chosen.append(np.stack([order[keep], other[keep]], axis=1))
    decoys = np.concatenate(chosen).astype(np.int64) if chosen else np.zeros((0, 2), dtype=np.int64)
    return decoys[np.lexsort((decoys[:, 1], decoys[:, 0]))]


def local_decoys(decoys: np.ndarray, members: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """The decoys whose caption is one of ``members`` (sorted indices into ``size`` pairs, all of
    one cell's group of pairs: a fold or one of its contrast groups), as ``(rows, local)``: their
    rows in ``decoys`` and their ``[k, 2]`` indices into ``members``."""
    position = np.full(size, -1, dtype=np.int64)
    position[members] = np.arange(len(members))
    rows = np.flatnonzero(position[decoys[:, 0]] >= 0)
    local = position[decoys[rows]]
    if (local < 0).any():
        raise ValueError("a decoy's picture lies outside its caption's group: cells were not shared")
    return rows, local
