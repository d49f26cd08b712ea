"""The audit's random order of its pairs (``sample.csv``): the first ``n`` pairs of it are a
uniform random sample of the collection for every ``n``, so a person judges them in that order
and stops when they like.

The order is a plain uniform permutation (not stratified by score band): every prefix is then a
simple random sample, which the anytime interval (:mod:`mispair.estimate.share`) needs, and the
scores already enter the estimate as predictions, which recovers most of what stratifying by
them would save. It is drawn from the audit's seed (:func:`mispair.seeds.child_seed`, purpose
``sample``) over the pair ids in sorted order, so the same audit draws the same order.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from mispair.errors import DataError
from mispair.limits import limit, raise_hint
from mispair.safe_io import read_input, spreadsheet_text
from mispair.seeds import child_seed

if TYPE_CHECKING:
    import pandas as pd

SAMPLE = "sample.csv"
"""The audit's file of its pairs in their random order: ``pair_id``, ``order`` (from 1)."""


def sample_order(pair_ids: Sequence[str], seed: int) -> pd.DataFrame:
    """Every pair id in a uniformly random order drawn from the audit's ``seed``: a table of
    ``pair_id``, ``order`` (1 … N), sorted by ``order``."""
    import pandas as pd

    ids = sorted(str(i) for i in pair_ids)
    rng = np.random.default_rng(child_seed(seed, "sample"))
    drawn = rng.permutation(len(ids))
    return pd.DataFrame({"pair_id": [ids[k] for k in drawn], "order": np.arange(1, len(ids) + 1)})


def read_sample(folder: str | Path) -> pd.DataFrame:
    """``sample.csv`` of the audit ``folder``, checked as untrusted input (bounded, each pair id
    once, ``order`` exactly 1 … N), sorted by ``order``."""
    import pandas as pd

    path = Path(folder) / SAMPLE
    if not path.exists():
        raise DataError(
            f"{folder}: no {SAMPLE} (audits before the labelled sample had none); audit the "
            "collection again with this version to draw one"
        )
    data = read_input(path, limit("MAX_TABLE_BYTES"), "an audit's sample", hint=raise_hint("MAX_TABLE_BYTES"))
    try:
        frame = pd.read_csv(io.BytesIO(data), dtype=str, keep_default_na=False)
        order = pd.to_numeric(frame["order"], errors="raise").astype("int64")
        ids = frame["pair_id"]
        quoted = ids.str.startswith("'")  # written spreadsheet-safe: '=... read as it was
        if quoted.any():
            ids = ids.where(~quoted, ids[quoted].map(spreadsheet_text))
        frame = pd.DataFrame({"pair_id": ids, "order": order})
    except (KeyError, ValueError, pd.errors.ParserError, pd.errors.EmptyDataError):
        raise DataError(f"{path}: not an audit's sample (pair_id,order); audit the collection anew") from None
    frame = frame.sort_values("order", kind="stable").reset_index(drop=True)
    counted = np.array_equal(frame["order"], np.arange(1, len(frame) + 1))
    if not frame["pair_id"].is_unique or not counted:
        raise DataError(f"{path}: damaged (an order repeated or missing, or a pair twice); audit again")
    return frame


def sample_positions(labelled: Sequence[str], sample: pd.DataFrame, where: str) -> np.ndarray:
    """The positions (0-based, in sample order) of the ``labelled`` pair ids, checked to be the
    first ``n`` of the order exactly: a pair outside the sample, or answers that skip pairs of
    the order (a person who reviews the top-ranked pairs is not a random sample) are refused in
    one line saying which."""
    import pandas as pd

    found = pd.Index(sample["pair_id"]).get_indexer(pd.Index(list(labelled), dtype=object))
    unknown = [i for i, k in zip(labelled, found) if k < 0]
    if unknown:
        raise DataError(
            f"{where}: pair {unknown[0]!r} is not in this audit ({len(unknown)} such answer(s)); "
            "were the answers given on another audit?"
        )
    places = np.sort(found.astype(np.int64))
    n = len(places)
    if n and places[-1] != n - 1:
        skipped = int(np.setdiff1d(np.arange(n), places)[0])
        raise DataError(
            f"{where}: {n} answers, but pair {labelled[int(np.argmax(found))]!r} "
            f"is number {int(places[-1]) + 1} of {SAMPLE}'s order and number {skipped + 1} "
            f"({sample['pair_id'].iloc[skipped]!r}) is not judged; judge the pairs in the sample's order "
            '(the review page\'s "check a sample"): only the first n of it are a random sample'
        )
    return places
