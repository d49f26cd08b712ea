"""The pairs as an audit's table names them (``pairs.csv``'s ``pair_id``, ``image_id`` and
``caption``) and the audit's id of them, known as soon as the run has read its collection: the
answers fed back to an audit (``division.answers``) are checked against them before any scorer
trains, as ``mispair estimate`` checks them against the audit's ``summary.json``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from mispair.data.batching import TrainingPairs


@dataclass(frozen=True)
class AuditRows:
    """Every pair as the audit writes it: ``pair_ids``, ``image_ids`` (the picture's name shown
    beside the pair) and ``captions``; the first ``n_train`` are the training pairs."""

    pair_ids: list[str]
    image_ids: list[str]
    captions: list[str]
    n_train: int

    @classmethod
    def of(cls, train: TrainingPairs, others: TrainingPairs | None, split: Sequence[str]) -> AuditRows:
        """The rows of the training pairs (as the run pairs them) followed by ``others`` (the dev
        and test pairs, or None); ``split``: each pair's split name. The pairs are joined as the
        audit joins them, without their features (nothing is copied but names)."""
        parts = [train] if others is None else [train, others]
        pairs = TrainingPairs.join([_named(part) for part in parts])
        every = np.arange(len(pairs))
        names = picture_names(pairs, pairs.image_of_caption, every)
        return cls(pair_names(pairs, split), names, list(pairs.pairs.captions), len(train))

    @property
    def audit_id(self) -> str:
        """The id :func:`mispair.audit.result.audit_id` gives the audit's table of these pairs
        (:func:`mispair.estimate.labels.pairs_audit_id`)."""
        from mispair.estimate.labels import pairs_audit_id

        return pairs_audit_id(self.pair_ids, self.image_ids, self.captions)


def pair_names(pairs: TrainingPairs, split: Sequence[str]) -> list[str]:
    """The reader's pair ids, else ``split/k`` (``k`` the pair's place in its ``split``)."""
    if pairs.pairs.pair_ids is not None:
        return list(pairs.pairs.pair_ids)
    seen: dict[str, int] = {}
    ids = []
    for name in split:
        ids.append(f"{name}/{seen.get(name, 0)}")
        seen[name] = seen.get(name, 0) + 1
    return ids


def picture_names(pairs: TrainingPairs, images: np.ndarray, order: np.ndarray) -> list[str]:
    """The names of ``images [n]`` (a picture per pair) for the pairs ``order``: the pair's own
    row's name for its picture where it is the picture the input pairs it with
    (:meth:`~mispair.data.pairset.PairSet.own_image_names`), else the picture's id (its index as
    text where the collection has no ids)."""
    found = pairs.pairs
    ids = found.image_ids if found.image_ids is not None else [str(i) for i in range(found.n_images)]
    home, own = found.image_of_caption, found.caption_image_names
    if own is None:
        return [ids[i] for i in images[order]]
    return [own[k] if images[k] == home[k] else ids[images[k]] for k in order]


def _named(part: TrainingPairs) -> TrainingPairs:
    """``part`` without its image features, caption vectors or metadata (what the names need)."""
    empty = np.zeros((part.pairs.n_images, 1, 0), dtype=np.float32)
    light = replace(part.pairs, images=empty, text_features=None, image_meta={})
    return TrainingPairs(light, part.tokens, part.image_of_caption)
