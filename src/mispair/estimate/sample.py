"""The audit's random order of its pairs (``sample.csv``): the first ``n`` pairs of it are a
random sample of the collection for every ``n``, so a person judges them in that order and stops
when they like.

The order is stratified by the audit's probabilities (:mod:`mispair.estimate.design`): each row
carries its ``stratum``, and the first ``n`` rows hold a simple random sample of each stratum of
a size fixed by ``n``, which the estimate weighs back (:func:`~mispair.estimate.share.stratified_share`).
A ``sample.csv`` without the column (audits before the design) is one stratum, a plain uniform
order. It is drawn from the audit's seed (:func:`mispair.seeds.child_seed`, purpose ``sample``)
over the pair ids in sorted order, so the same audit draws the same order.
"""

from __future__ import annotations

import hashlib
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
"""The audit's file of its pairs in their random order: ``pair_id``, ``order`` (from 1),
``stratum`` (:data:`~mispair.estimate.design.STRATA`)."""
ONE_STRATUM = "all"
"""The stratum of every pair of a sample drawn without strata (an older audit's)."""


def sample_order(
    pair_ids: Sequence[str],
    seed: int,
    probability: Sequence[float] | None = None,
    suspected: Sequence[bool] | None = None,
    *,
    audit: str = "",
) -> pd.DataFrame:
    """Every pair id in the audit's random order, drawn from its ``seed`` and its ``audit`` id (so
    two collections audited with one seed get different orders; an empty id: the seed alone, as
    audits before the design drew it): a table of ``pair_id``, ``order`` (1 … N) and ``stratum``,
    sorted by ``order``. With each pair's calibrated mismatch ``probability`` (and the audit's
    ``suspected`` flags), in ``pair_ids``' order, the order is stratified
    (:mod:`mispair.estimate.design`); without, it is uniform (one stratum)."""
    import pandas as pd

    from mispair.estimate.design import strata_of, stratified_order, stratum_means

    given = [str(i) for i in pair_ids]
    by_id = np.argsort(np.array(given, dtype=object), kind="stable")
    ids = [given[k] for k in by_id]
    rng = _generator(seed, audit)
    if probability is None:
        drawn = rng.permutation(len(ids))
        strata = np.full(len(ids), ONE_STRATUM, dtype=object)
    else:
        p = np.asarray(probability, dtype=np.float64)[by_id]
        flags = None if suspected is None else np.asarray(suspected, dtype=bool)[by_id]
        strata = strata_of(p, flags)
        drawn = stratified_order(ids, strata, stratum_means(p, strata), rng)
    return pd.DataFrame(
        {"pair_id": [ids[k] for k in drawn], "order": np.arange(1, len(ids) + 1), "stratum": strata[drawn]}
    )


def _generator(seed: int, audit: str) -> np.random.Generator:
    """The sample's random stream: the seed's ``sample`` child, joined by the audit id's digest."""
    base = child_seed(seed, "sample")
    if not audit:
        return np.random.default_rng(base)
    return np.random.default_rng([base, int(hashlib.sha256(audit.encode("utf-8")).hexdigest()[:16], 16)])


def audit_sample(table: pd.DataFrame, seed: int, audit: str) -> pd.DataFrame:
    """:func:`sample_order` of an audit's pair ``table`` (``pair_id``, ``mismatch_probability``,
    ``suspected``) and its ``audit`` id, stratified by its probabilities and its cut."""
    return sample_order(
        table["pair_id"].tolist(),
        seed,
        table["mismatch_probability"].astype("float64").to_numpy(),
        table["suspected"].astype(bool).to_numpy() if "suspected" in table else None,
        audit=audit,
    )


def verify_sample(sample: pd.DataFrame, pairs: pd.DataFrame, seed: object, audit: str, where: str) -> None:
    """Refuse, in one line, a ``sample`` that is not the order the audit drew: it is drawn again
    from the recorded ``seed``, the ``audit`` id and the ``pairs``' probabilities and cut (an
    older audit's sample, without strata, from the seed alone) and compared, pair by pair. A
    sample rewritten so that, say, the correct pairs come first would prove a false share."""
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise DataError(f"{where}: summary.json records no sample seed; audit the collection again")
    if (sample["stratum"] == ONE_STRATUM).all():
        drawn = sample_order(pairs["pair_id"].astype(str).tolist(), seed)
    else:
        drawn = audit_sample(pairs.assign(pair_id=pairs["pair_id"].astype(str)), seed, audit)
    same = len(drawn) == len(sample) and (drawn["pair_id"].to_numpy() == sample["pair_id"].to_numpy()).all()
    if not same or not (drawn["stratum"].to_numpy() == sample["stratum"].to_numpy()).all():
        raise DataError(
            f"{where}: {SAMPLE} is not the order this audit drew from its seed (edited, reordered or "
            "another audit's); restore it or audit the collection again"
        )


def read_sample(folder: str | Path) -> pd.DataFrame:
    """``sample.csv`` of the audit ``folder``, checked as untrusted input (bounded, each pair id
    once, ``order`` exactly 1 … N, ``stratum`` one of the design's), sorted by ``order``; a file
    without ``stratum`` (an older audit's) is one stratum."""
    import pandas as pd

    from mispair.estimate.design import STRATA

    path = Path(folder) / SAMPLE
    if not path.exists():
        raise DataError(
            f"{folder}: no {SAMPLE} (audits before the labelled sample had none); audit the "
            "collection again with this version to draw one"
        )
    data = read_input(
        path, limit("MAX_TABLE_BYTES"), "an audit's sample", hint=raise_hint("MAX_TABLE_BYTES"), links=False
    )
    try:
        frame = pd.read_csv(io.BytesIO(data), dtype=str, keep_default_na=False)
        order = pd.to_numeric(frame["order"], errors="raise").astype("int64")
        ids = frame["pair_id"]
        quoted = ids.str.startswith("'")  # written spreadsheet-safe: '=... read as it was
        if quoted.any():
            ids = ids.where(~quoted, ids[quoted].map(spreadsheet_text))
        strata = frame["stratum"] if "stratum" in frame else pd.Series(ONE_STRATUM, index=frame.index)
        frame = pd.DataFrame({"pair_id": ids, "order": order, "stratum": strata})
    except (KeyError, ValueError, pd.errors.ParserError, pd.errors.EmptyDataError):
        raise DataError(f"{path}: not an audit's sample (pair_id,order); audit the collection anew") from None
    frame = frame.sort_values("order", kind="stable").reset_index(drop=True)
    counted = np.array_equal(frame["order"], np.arange(1, len(frame) + 1))
    if not frame["pair_id"].is_unique or not counted:
        raise DataError(f"{path}: damaged (an order repeated or missing, or a pair twice); audit again")
    known = {*STRATA, ONE_STRATUM}
    if not frame["stratum"].isin(known).all():
        raise DataError(
            f"{path}: damaged (a stratum that is none of {', '.join(sorted(known))}); audit again"
        )
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
