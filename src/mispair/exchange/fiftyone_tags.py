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

The dataset is read as someone else's: a dataset without mispair's fields (a user's own, not
made by ``mispair export --to fiftyone``) and every value of another type than mispair wrote (a
tag that is not text, a pair id that is not an id) are refused in one line naming the sample.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mispair.audit.fiftyone_dataset import CAPTIONS, require_fiftyone
from mispair.errors import ConfigError, DataError
from mispair.estimate.labels import LABELS
from mispair.limits import limit, raise_hint
from mispair.safe_io import shown

if TYPE_CHECKING:
    import pandas as pd

REVIEWER = "fiftyone"
"""The reviewer's name of the answers read from a dataset."""
FIELDS = ("image_id", CAPTIONS)
"""The sample fields of mispair's datasets the answers are read from."""


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
            f"no FiftyOne dataset {shown(name)!r}; export the audit first "
            f"(mispair export AUDIT --to fiftyone --name {shown(name)})"
        )
    dataset = fo.load_dataset(name)
    info = dataset.info if isinstance(dataset.info, dict) else {}
    made_from = info.get("mispair_audit_id")
    if audit_id and made_from and made_from != audit_id:
        raise DataError(
            f"FiftyOne dataset {shown(name)!r} was made from audit {shown(made_from, 40)}, not this "
            f"audit ({audit_id})"
        )
    _check_fields(dataset, name)
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


def _check_fields(dataset: Any, name: str) -> None:
    """Refuse a dataset without mispair's sample fields (:data:`FIELDS`) in one line."""
    try:
        schema = dataset.get_field_schema()
    except (AttributeError, TypeError, ValueError, KeyError):
        schema = {}
    missing = [field for field in FIELDS if field not in schema]
    if missing:
        raise DataError(
            f"FiftyOne dataset {shown(name)!r} has no field {missing[0]!r}: not a dataset mispair "
            "made; export the audit with mispair export AUDIT --to fiftyone --name NAME and tag that one"
        )


def _samples(dataset: Any) -> Iterator[tuple[str, list[str], list[tuple[str, str, list[str]]]]]:
    """Each sample's image id, its tags and its captions (``pair_id``, text, tags), each value of
    the type mispair wrote (else one line naming the sample and the field)."""
    base = f"{CAPTIONS}.classifications"
    fields = ("image_id", "tags", f"{base}.pair_id", f"{base}.label", f"{base}.tags")
    try:
        columns = [dataset.values(field) for field in fields]
    except (ValueError, KeyError, AttributeError, TypeError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DataError(
            f"FiftyOne dataset: its fields are not those mispair wrote ({shown(first)}); export "
            "the audit again with mispair export AUDIT --to fiftyone"
        ) from None
    for image_id, tags, ids, texts, label_tags in zip(*columns):
        where = f"FiftyOne sample {shown(image_id)!r}"
        ids, texts, label_tags = (_items(v, where, f) for v, f in zip((ids, texts, label_tags), fields[2:]))
        if any(not _plain_id(p) for p in ids):
            raise DataError(f"{where}: a caption label without a pair_id (or not an id)")
        labels = [
            (_id(p, where), _text(t, where, "a caption"), _tags(g, where))
            for p, t, g in zip(ids, texts, label_tags)
        ]
        yield str(image_id), _tags(tags, where), labels


def _items(value: Any, where: str, field: str) -> list:
    """A list field's value (None: empty)."""
    if value is None:
        return []
    if not isinstance(value, (list, tuple)):
        raise DataError(f"{where}: {field} is {type(value).__name__}, not a list")
    return list(value)


def _plain_id(value: Any) -> bool:
    """A pair id as mispair wrote it: text that is not empty, or a whole number."""
    return (isinstance(value, str) and bool(value)) or (
        isinstance(value, int) and not isinstance(value, bool)
    )


def _id(value: Any, where: str) -> str:
    text = str(value)
    if len(text) > limit("MAX_ID_CHARS"):
        raise DataError(
            f"{where}: a pair_id of {len(text):,} characters, more than the {limit('MAX_ID_CHARS'):,} "
            f"an id may have ({raise_hint('MAX_ID_CHARS')})"
        )
    return text


def _text(value: Any, where: str, what: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise DataError(f"{where}: {what} is {type(value).__name__}, not text")
    return value


def _tags(value: Any, where: str) -> list[str]:
    """A sample's or a label's tags: a list of texts (None: none)."""
    tags = _items(value, where, "tags")
    if not all(isinstance(t, str) for t in tags):
        raise DataError(f"{where}: a tag that is not text")
    return tags


def _judged(tags: list[str]) -> list[str]:
    """The judgement tags among ``tags`` (``correct``, ``mismatched``, ``unsure``), in order."""
    return [t for t in dict.fromkeys(tags) if t in LABELS]


def _rows(
    pair_id: str, text: str, tags: list[str], captions: dict[str, str]
) -> list[tuple[str, str, str, str]]:
    """A pair's judgements: one per tag, and a mismatched one with the new caption when edited."""
    if pair_id not in captions:
        raise DataError(f"FiftyOne dataset: pair {shown(pair_id)!r} is not in this audit")
    edited = text.strip() != captions[pair_id].strip()
    if edited and text.strip():
        tags = [t for t in tags if t != "mismatched"] + ["mismatched"]
    return [(pair_id, REVIEWER, tag, text.strip() if edited and tag == "mismatched" else "") for tag in tags]
