"""The report's data: every pair of the audit, ranked, as ``pairs.js`` beside ``report.html``.

A browser refuses ``fetch`` on a ``file://`` page, so the data comes as a script that sets one
global, ``window.mispairAudit = {...}``: ``audit_id``, ``threshold``, ``images`` (``[image_id,
thumbnail path or ""]``), ``fields`` (the names of a row's entries) and ``rows``, from the most
suspect pair to the least, each ``[pair_id, image (index into images), caption, mismatch
probability, held-out score, split, suggested captions [[caption, score], ...], suggested images
[[image index, score], ...], why, duplicate of (image index or -1), pairs sharing the caption,
truly mismatched (1, 0 or null), map ([image x, image y, caption x, caption y] in [0, 1], or
null), raw similarity (the given embeddings' cosine, or null)]``, and ``sample``: what the page's
"check a sample" needs of the audit's stratified random order (``sample.csv``,
:mod:`mispair.estimate.design`) to compute :func:`~mispair.estimate.share.sample_share` as
``mispair estimate`` does (equal to 1e-9): ``n_pairs``; ``strata``, every stratum in the order of
its first place in the whole order, ``[name, pairs N_h, mean mismatch probability, answers at the
look]`` (the mean: the estimate of a stratum without answers, unrounded); ``look``, the planned
look (:func:`~mispair.estimate.share.planned_look`, which may lie past the rows the page carries;
whether it is predicted within ± 3 points the page asks of the answers so far, as
:func:`~mispair.estimate.share.answers_for_design` does); the estimate's constants (``alpha``: the
confidence sequence's level, ``tuned_for``, ``z_look``, ``target``); and ``rows``, the first
:data:`SAMPLE_SHOWN` pairs of the order, ``[pair_id, image, caption, mismatch probability,
stratum, suspected (1, 0, or null when the table has no verdicts)]``. No other pair's probability
is needed: the page judges only the rows it carries. ``digest``: the order's :func:`order_digest`,
which keys the answers the page stores (a re-audit with another seed, the same id, keeps none of
the old order's). For the drop the answers prove (:func:`~mispair.estimate.selection.proven_cut`
as ``mispair estimate --fdr`` runs it, :func:`~mispair.estimate.audit_estimate.suspicion_score`'s
ranking): ``fdr``, ``delta``, ``interval_delta``, ``cut_ids`` (the ``cut`` stratum's pair ids,
most suspect first), ``cut_sizes`` (the cuts tested) and ``cut_places`` (the places, from 0, of
the cut's pairs in the order: where the answers a proof needs are reached); for the blind-spot
warning (:func:`~mispair.estimate.trust.blind_spot`): ``z_975``, ``z_975_squared``,
``blind_spot_recall``, ``blind_spot_auc``. ``findings``: the join errors' cards
(:mod:`mispair.audit.page_findings`), or null: ``cards``, each with its ``kind``, ``sentence``,
``offset``, ``pair_ids``, ``rows`` shown ``[pair_id, image, caption, caption after the repair or
null, state]`` (``hidden`` rows not shown after the ``gap``-th) and ``repair`` ``[pair_id,
replace|drop, caption]``; ``more``: the findings without a card. Suggestions are the columns
``suggested_caption_1..3`` / ``suggested_image_id_1..3`` (with ``..._score_1..3``) when the table
has them, else the single ``suggested_caption`` / ``suggested_image_id``. The page computes no
score: every pair's number is here; it computes only the estimate from a person's answers (the
formulas of :mod:`mispair.estimate.share`)."""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

    from mispair.audit.page_findings import FindingCards

PAGE_DATA = "pairs.js"
MAP_COLUMNS = ("map_image_x", "map_image_y", "map_caption_x", "map_caption_y")
"""The pairs table's map columns: where each pair's image and caption lie (:mod:`mispair.audit.atlas`)."""
FDR = 0.1
"""The false-discovery rate the page proves the drop at when the summary records none: the
audit's default ``--fdr`` (:data:`mispair.audit.run.DEFAULT_FDR`, held equal by a test; not
imported, the audit's run module brings the training engine)."""
SAMPLE_SHOWN = 2000
"""The pairs of the random order the page carries: more than a person judges in a sitting (the
interval is within ± 3 points at a few hundred answers where the scores help)."""
FIELDS = (
    "pair_id",
    "image",
    "caption",
    "mismatch_probability",
    "held_out_score",
    "split",
    "suggested_captions",
    "suggested_images",
    "why",
    "duplicate_image_of",
    "duplicate_caption_count",
    "truly_mismatched",
    "map",
    "raw_similarity",
    "suspected",
)


def page_data(
    table: pd.DataFrame,
    thumbnails: dict[str, str],
    *,
    audit: str,
    threshold: float,
    rest: pd.DataFrame | None = None,
    sample: pd.DataFrame | None = None,
    design: dict[str, Any] | None = None,
    findings: FindingCards | None = None,
) -> str:
    """``pairs.js`` for the ranked ``table`` (``pairs.csv``'s rows), ``thumbnails`` (image id →
    path relative to the page, "" for none), the ``audit`` id and the suspicion ``threshold``;
    ``rest``: the pairs the page does not show, counted (``rest``: their number and the sum of
    their mismatch probabilities) so the bulk drop's estimates cover every pair; ``sample``: the
    rows of :func:`sample_rows`, with ``design``, the whole order's :func:`sample_design`;
    ``findings``: the join errors' cards (:func:`~mispair.audit.page_findings.finding_cards`)."""
    images: dict[str, int] = {}

    def image(image_id: str | None) -> int:
        return -1 if image_id is None else images.setdefault(image_id, len(images))

    n = len(table)
    captions = _suggestions(table, "suggested_caption", "suggested_caption_score")
    pictures = _suggestions(table, "suggested_image_id", "suggested_image_score")
    has_map = set(MAP_COLUMNS) <= set(table)
    where = table[list(MAP_COLUMNS)].round(4).to_numpy().tolist() if has_map else [None] * n
    text = {
        name: _texts(table, name)
        for name in ("pair_id", "image_id", "caption", "split", "why", "duplicate_image_of")
    }
    p, score = _numbers(table, "mismatch_probability"), _numbers(table, "held_out_score")
    count = _numbers(table, "same_caption_images", digits=0)
    truth = _numbers(table, "truly_mismatched", digits=0)
    raw = _numbers(table, "raw_similarity")  # the given vectors' plain cosine, when they are aligned
    suspected = table["suspected"].astype(bool).tolist() if "suspected" in table else [False] * n
    rows = []
    for k in range(n):
        rows.append(
            [
                text["pair_id"][k],
                image(text["image_id"][k]),
                text["caption"][k] or "",
                p[k],
                score[k],
                text["split"][k] or "",
                [[c, s] for c, s in captions[k] if c is not None],
                [[image(i), s] for i, s in pictures[k] if i is not None],
                text["why"][k] or "",
                image(text["duplicate_image_of"][k]),
                count[k] or 0,
                truth[k],
                where[k],
                raw[k],
                suspected[k],
            ]
        )
    judged = None
    if sample is not None:
        columns = ["pair_id", "image_id", "caption", "mismatch_probability", "stratum"]
        flags = sample["suspected"].astype(bool).tolist() if "suspected" in sample else [None] * len(sample)
        judged = {
            **(design or {}),
            "rows": [
                [str(pid), image(str(iid)), str(caption), float(p), str(stratum), _flag(flag)]
                for (pid, iid, caption, p, stratum), flag in zip(
                    sample[columns].itertuples(index=False), flags
                )
            ],
        }
    cards = None if findings is None else findings.to_page(image)  # before the images are listed
    data = {
        "audit_id": audit,
        "threshold": threshold,
        "rest": {
            "n": 0 if rest is None else len(rest),
            "sum_p": 0.0 if rest is None else round(float(rest["mismatch_probability"].sum()), 6),
        },
        "fields": FIELDS,
        "images": [[i, thumbnails.get(i, "")] for i in images],
        "rows": rows,
        "sample": judged,
        "findings": cards,
    }
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return f"window.mispairAudit = {text};\n"


def sample_rows(table: pd.DataFrame, sample: pd.DataFrame) -> pd.DataFrame:
    """The first :data:`SAMPLE_SHOWN` pairs of the ``sample`` order (``pair_id``, ``order``,
    ``stratum``) with their ``image_id``, ``caption``, ``mismatch_probability`` (and
    ``suspected``, when the table has it) from ``table``."""
    first = _ordered(sample).head(SAMPLE_SHOWN)
    columns = ["pair_id", "image_id", "caption", "mismatch_probability"]
    columns += ["suspected"] if "suspected" in table else []
    rows = table[columns].assign(pair_id=table["pair_id"].astype(str)).set_index("pair_id")
    return rows.loc[first["pair_id"].astype(str)].reset_index().assign(stratum=first["stratum"].to_numpy())


def sample_design(table: pd.DataFrame, sample: pd.DataFrame, *, fdr: float = FDR) -> dict[str, Any]:
    """What the page's estimate needs of the whole ``sample`` order beyond the rows it carries
    (the module's ``sample`` entries but ``rows``), from every pair's probability in ``table``
    (``pairs.csv``'s rows, every one), computed by :mod:`mispair.estimate` itself; ``fdr``: the
    rate the drop is proven at (the audit's ``--fdr``)."""
    import numpy as np

    from mispair.estimate.share import (
        ALPHA,
        LOOK_ALPHA,
        TARGET_HALF_WIDTH,
        TUNED_FOR,
        Z_LOOK,
        planned_look,
        stratum_figures,
    )

    order = _ordered(sample)
    probability = table["mismatch_probability"].astype("float64").set_axis(table["pair_id"].astype(str))
    f = probability.loc[order["pair_id"].astype(str)].to_numpy()
    strata = order["stratum"].to_numpy(dtype=object)
    parts = []
    for name in dict.fromkeys(strata.tolist()):  # the estimate's order of the strata
        part = stratum_figures(np.empty(0), f[strata == name], len(f))
        parts.append([str(name), part.pairs, part.mean])
    look = planned_look(f, strata)
    for part in parts:  # each stratum's answers at the look (the page predicts the look's width)
        part.append(int((strata[:look] == part[0]).sum()))
    return {
        "digest": order_digest(order["pair_id"].astype(str).tolist()),
        "n_pairs": len(f),
        "strata": parts,
        "look": look,
        "alpha": ALPHA - LOOK_ALPHA,
        "tuned_for": TUNED_FOR,
        "z_look": Z_LOOK,
        "target": TARGET_HALF_WIDTH,
        **_cut_design(table, order, fdr),
    }


def order_digest(pair_ids: list[str]) -> str:
    """The sample order's digest: the first 16 hex digits of the SHA-256 of its pair ids joined by
    a newline (the page keys its stored answers by the audit id and this)."""
    return hashlib.sha256("\n".join(pair_ids).encode("utf-8")).hexdigest()[:16]


def _cut_design(table: pd.DataFrame, order: pd.DataFrame, fdr: float) -> dict[str, Any]:
    """The entries of the proven drop and the blind-spot warning (the module's ``fdr`` …
    ``blind_spot_auc``): the cut stratum ranked as
    :func:`~mispair.estimate.selection.proven_cut` ranks it, by
    :func:`~mispair.estimate.audit_estimate.suspicion_score` of ``table``."""
    import numpy as np

    from mispair.estimate.audit_estimate import suspicion_score
    from mispair.estimate.selection import DELTA, INTERVAL_DELTA, cut_sizes
    from mispair.estimate.share import Z_975
    from mispair.estimate.trust import BLIND_SPOT_AUC, BLIND_SPOT_RECALL

    in_order = (order["stratum"] == "cut").to_numpy()
    ids = table["pair_id"].astype(str).to_numpy()
    cut = np.flatnonzero(np.isin(ids, order["pair_id"].astype(str).to_numpy()[in_order]))
    ranked = cut[np.argsort(-suspicion_score(table)[cut], kind="stable")]
    return {
        "fdr": fdr,
        "delta": DELTA,
        "interval_delta": INTERVAL_DELTA,
        "cut_ids": ids[ranked].tolist(),
        "cut_sizes": cut_sizes(len(ranked)),
        "cut_places": np.flatnonzero(in_order).tolist(),
        "z_975": Z_975,
        "z_975_squared": Z_975**2,
        "blind_spot_recall": BLIND_SPOT_RECALL,
        "blind_spot_auc": BLIND_SPOT_AUC,
    }


def _ordered(sample: pd.DataFrame) -> pd.DataFrame:
    """The ``sample`` sorted by its ``order``, with a ``stratum`` (one for every pair of an
    older audit's sample, which has none)."""
    from mispair.estimate.sample import ONE_STRATUM

    first = sample.sort_values("order", kind="stable")
    return first if "stratum" in first else first.assign(stratum=ONE_STRATUM)


def _flag(value: object) -> int | None:
    """A row's ``suspected`` flag as 1 or 0 (None: the table has none)."""
    return None if value is None else int(bool(value))


def _suggestions(table: pd.DataFrame, value: str, score: str) -> list[list[tuple[str | None, float | None]]]:
    """Per row, the (suggestion, score) pairs: ``value_1..3`` with ``score_1..3`` when present,
    else the single ``value`` with ``score``, else none (a missing suggestion is None)."""
    numbered = [(f"{value}_{k}", f"{score}_{k}") for k in (1, 2, 3) if f"{value}_{k}" in table]
    columns = numbered or ([(value, score)] if value in table else [])
    parts = [list(zip(_texts(table, v), _numbers(table, s))) for v, s in columns]
    return [list(row) for row in zip(*parts)] if parts else [[] for _ in range(len(table))]


def _texts(table: pd.DataFrame, name: str) -> list[str | None]:
    """The column ``name`` as text, None where it is missing or empty (or the table has none)."""
    if name not in table:
        return [None] * len(table)
    column = table[name]
    present = (column.notna() & (column.astype(str) != "")).tolist()
    return [str(v) if keep else None for v, keep in zip(column.tolist(), present)]


def _numbers(table: pd.DataFrame, name: str, *, digits: int = 3) -> list[float | None]:
    """The numeric column ``name`` rounded to ``digits`` (0: integers), None where it is missing."""
    if name not in table:
        return [None] * len(table)
    column = table[name].astype("float64")
    present = column.notna().tolist()
    values = column.round(digits).tolist()
    return [(int(v) if digits == 0 else v) if keep else None for v, keep in zip(values, present)]
