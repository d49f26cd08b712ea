"""The report's data: every pair of the audit, ranked, as ``pairs.js`` beside ``report.html``.

A browser refuses ``fetch`` on a ``file://`` page, so the data comes as a script that sets one
global, ``window.mispairAudit = {...}``: ``audit_id``, ``threshold``, ``images`` (``[image_id,
thumbnail path or ""]``), ``fields`` (the names of a row's entries) and ``rows``, from the most
suspect pair to the least, each ``[pair_id, image (index into images), caption, mismatch
probability, held-out score, split, suggested captions [[caption, score], ...], suggested images
[[image index, score], ...], why, duplicate of (image index or -1), pairs sharing the caption,
truly mismatched (1, 0 or null), map ([image x, image y, caption x, caption y] in [0, 1], or
null)]``. Suggestions are the columns ``suggested_caption_1..3`` /
``suggested_image_id_1..3`` (with ``..._score_1..3``) when the table has them, else the single
``suggested_caption`` / ``suggested_image_id``. The page computes nothing: every number is here.
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

PAGE_DATA = "pairs.js"
MAP_COLUMNS = ("map_image_x", "map_image_y", "map_caption_x", "map_caption_y")
"""The pairs table's map columns: where each pair's image and caption lie (:mod:`mispair.audit.atlas`)."""
FIELDS = ("pair_id", "image", "caption", "mismatch_probability", "held_out_score", "split",
          "suggested_captions", "suggested_images", "why", "duplicate_image_of", "duplicate_caption_count",
          "truly_mismatched", "map")  # fmt: skip


def audit_id(table: pd.DataFrame) -> str:
    """A 16-hex-digit digest of the audit's ranking (pair ids, image ids, captions and mismatch
    probabilities, in rank order): the key of the page's saved decisions and the tag of
    ``decisions-<audit_id>.csv``, so decisions are never applied to another audit's pairs."""
    content = [table[name].astype(str).tolist() for name in ("pair_id", "image_id", "caption")]
    content.append(table["mismatch_probability"].round(6).tolist())
    return hashlib.sha256(json.dumps(content).encode("utf-8")).hexdigest()[:16]


def page_data(table: pd.DataFrame, thumbnails: dict[str, str], *, audit: str, threshold: float) -> str:
    """``pairs.js`` for the ranked ``table`` (``pairs.csv``'s rows), ``thumbnails`` (image id →
    path relative to the page, "" for none), the ``audit`` id and the suspicion ``threshold``."""
    images: dict[str, int] = {}

    def image(image_id: Any) -> int:
        if _missing(image_id):
            return -1
        return images.setdefault(str(image_id), len(images))

    captions = _suggestions(table, "suggested_caption", "suggested_caption_score")
    pictures = _suggestions(table, "suggested_image_id", "suggested_image_score")
    why = _column(table, "why", "")
    duplicate_of = _column(table, "duplicate_image_of", None)
    duplicate_count = _column(table, "duplicate_caption_count", 0)
    truth = _column(table, "truly_mismatched", None)
    where = table[list(MAP_COLUMNS)].to_numpy().tolist() if set(MAP_COLUMNS) <= set(table) else None
    rows = []
    for k, (pair_id, image_id, caption, p, score, split) in enumerate(zip(
            table["pair_id"], table["image_id"], table["caption"], table["mismatch_probability"],
            table["held_out_score"], table["split"])):  # fmt: skip
        rows.append([
            str(pair_id), image(image_id), str(caption), round(float(p), 3), _number(score), str(split),
            [[str(c), _number(s)] for c, s in captions[k] if not _missing(c)],
            [[image(i), _number(s)] for i, s in pictures[k] if not _missing(i)],
            "" if _missing(why[k]) else str(why[k]),
            image(duplicate_of[k]),
            0 if _missing(duplicate_count[k]) else int(duplicate_count[k]),
            None if _missing(truth[k]) else int(bool(truth[k])),
            None if where is None else [round(v, 4) for v in where[k]],
        ])  # fmt: skip
    data = {"audit_id": audit, "threshold": threshold, "fields": FIELDS,
            "images": [[i, thumbnails.get(i, "")] for i in images], "rows": rows}  # fmt: skip
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return f"window.mispairAudit = {text};\n"


def _suggestions(table: pd.DataFrame, value: str, score: str) -> list[list[tuple[Any, Any]]]:
    """Per row, the (suggestion, score) pairs: ``value_1..3`` with ``score_1..3`` when present,
    else the single ``value`` with ``score``, else none."""
    numbered = [(f"{value}_{k}", f"{score}_{k}") for k in (1, 2, 3) if f"{value}_{k}" in table]
    columns = numbered or ([(value, score)] if value in table else [])
    parts = [list(zip(table[v].tolist(), _column(table, s, None))) for v, s in columns]
    return [list(row) for row in zip(*parts)] if parts else [[] for _ in range(len(table))]


def _column(table: pd.DataFrame, name: str, default: Any) -> list[Any]:
    return table[name].tolist() if name in table else [default] * len(table)


def _missing(value: Any) -> bool:
    import pandas as pd

    if isinstance(value, str):
        return value == ""
    return value is None or bool(pd.isna(value))


def _number(value: Any) -> float | None:
    return None if _missing(value) else round(float(value), 3)
