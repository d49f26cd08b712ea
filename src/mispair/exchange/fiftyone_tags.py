"""The tags a person set on an audit's FiftyOne dataset (:mod:`mispair.audit.fiftyone_dataset`)
read back as judgements (:mod:`mispair.exchange.judgements`).

A tag is one of the labels ``correct``, ``mismatched``, ``unsure``; other tags are ignored.

- **A caption's own tags** (label tags on the caption, set in the App's label-tagging mode or
  with ``label.tags``) judge that pair.
- **A picture's tags** (sample tags) judge its caption when it has exactly one. A picture with
  several captions has no single pair to judge: its sample tags are not read, and the picture is
  listed (``ambiguous``) so the person can tag the captions themselves.
- **An edited caption** (the label's text no longer the audit's caption) is a corrected caption:
  the pair is mismatched and re-captioned (``replace``), whether or not it was also tagged
  ``mismatched``; tagged ``correct`` as well, the two answers contradict and are refused.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mispair.audit.fiftyone_dataset import CAPTIONS, require_fiftyone
from mispair.errors import ConfigError, DataError
from mispair.estimate.labels import LABELS

if TYPE_CHECKING:
    import pandas as pd

REVIEWER = "fiftyone"
"""The reviewer's name of the answers read from a dataset."""


@dataclass(frozen=True)
class TaggedAnswers:
    """What a dataset's tags say: ``judgements`` (columns ``pair_id``, ``reviewer``, ``label``,
    ``caption``) and ``ambiguous`` (image ids of pictures with several captions whose sample
    tags were not read)."""

    judgements: pd.DataFrame
    ambiguous: list[str]


def fiftyone_answers(name: str, pairs: pd.DataFrame, audit_id: str | None) -> TaggedAnswers:
    """The judgements tagged on the FiftyOne dataset ``name`` made from the audit whose pairs
    are ``pairs`` (``pair_id``, ``caption``) and id ``audit_id``. Refused in one line: no such
    dataset, a dataset of another audit, a caption label without a ``pair_id``."""
    import pandas as pd

    fo = require_fiftyone()
    if not fo.dataset_exists(name):
        raise ConfigError(
            f"no FiftyOne dataset {name!r}; export the audit first "
            f"(mispair export AUDIT --to fiftyone --name {name})"
        )
    dataset = fo.load_dataset(name)
    made_from = (dataset.info or {}).get("mispair_audit_id")
    if audit_id and made_from and made_from != audit_id:
        raise DataError(
            f"FiftyOne dataset {name!r} was made from audit {made_from}, not this audit ({audit_id})"
        )
    captions = dict(zip(pairs["pair_id"].astype(str), pairs["caption"].astype(str)))
    rows: list[tuple[str, str, str, str]] = []
    ambiguous: list[str] = []
    for image_id, sample_tags, labels in _samples(dataset):
        judged = _judged(sample_tags)
        if judged and len(labels) > 1:
            ambiguous.append(image_id)
        for pair_id, text, label_tags in labels:
            tags = _judged(label_tags) or (judged if len(labels) == 1 else [])
            rows += _rows(pair_id, text, tags, captions)
    frame = pd.DataFrame(rows, columns=["pair_id", "reviewer", "label", "caption"], dtype=object)
    return TaggedAnswers(frame, ambiguous)


def _samples(dataset: Any) -> Iterator[tuple[str, list[str], list[tuple[str, str, list[str]]]]]:
    """Each sample's image id, its tags and its captions (``pair_id``, text, tags)."""
    base = f"{CAPTIONS}.classifications"
    columns = [
        dataset.values(field)
        for field in ("image_id", "tags", f"{base}.pair_id", f"{base}.label", f"{base}.tags")
    ]
    for image_id, tags, ids, texts, label_tags in zip(*columns):
        ids, texts, label_tags = ids or [], texts or [], label_tags or []
        if any(not p for p in ids):
            raise DataError(f"FiftyOne sample {image_id!r}: a caption label without a pair_id")
        labels = [(str(p), str(t or ""), list(g or [])) for p, t, g in zip(ids, texts, label_tags)]
        yield str(image_id), list(tags or []), labels


def _judged(tags: list[str]) -> list[str]:
    """The judgement tags among ``tags`` (``correct``, ``mismatched``, ``unsure``), in order."""
    return [t for t in dict.fromkeys(tags) if t in LABELS]


def _rows(
    pair_id: str, text: str, tags: list[str], captions: dict[str, str]
) -> list[tuple[str, str, str, str]]:
    """A pair's judgements: one per tag, and a mismatched one with the new caption when edited."""
    if pair_id not in captions:
        raise DataError(f"FiftyOne dataset: pair {pair_id!r} is not in this audit")
    edited = text.strip() != captions[pair_id].strip()
    if edited and text.strip():
        tags = [t for t in tags if t != "mismatched"] + ["mismatched"]
    return [(pair_id, REVIEWER, tag, text.strip() if edited and tag == "mismatched" else "") for tag in tags]
