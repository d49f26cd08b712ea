"""The review page's cards of the join errors (:mod:`mispair.audit.join_findings`): each shift run
and each pasted caption with a few of its pairs, and what one decision for the whole finding
writes into the page's decisions.

A shift run's card shows its first :data:`FIRST` and last :data:`LAST` rows: the picture, the
caption it carries and the caption the repair gives it (:func:`~mispair.audit.repair.repaired`:
the caption found ``offset`` rows away, as ``repair.csv`` has it), or that its own caption is
lost. Its decisions: *repair* writes the run's rows of ``repair.csv`` (``replace`` with each
moved caption, ``drop`` for each lost row), *drop* a ``drop`` for every pair of the run, *keep as
is* a ``keep`` for each; so a page's "repair" applied with ``mispair apply --decisions`` gives the
collection ``mispair apply --repair`` does. A pasted caption's card shows a few of its pictures;
its decisions are *drop all* and *keep* (a pasted caption is never replaced by another row's).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mispair.audit.repair import Repaired, repaired

if TYPE_CHECKING:
    import pandas as pd

    from mispair.audit.join_findings import JoinFindings

FIRST, LAST = 3, 2
"""The rows of a run a card shows: its first and its last."""
PASTED_SHOWN = 5
"""The pairs a pasted caption's card shows."""
MAX_CARDS = 20
"""The findings the page carries cards for (the shifts first); the others are in
``structure.json`` and ``repair.csv``."""


@dataclass(frozen=True)
class CardRow:
    """A pair shown on a card: its ``pair_id``, ``image_id`` and the ``caption`` it carries; the
    ``caption_after`` the repair (``state`` ``replace``), or None: ``lost`` (its own caption is
    lost: the repair drops it), ``same`` (the repair leaves it: a pasted caption is never
    replaced), ``pasted`` (a pasted caption's pair)."""

    pair_id: str
    image_id: str
    caption: str
    caption_after: str | None
    state: str


@dataclass(frozen=True)
class FindingCard:
    """One finding on the page: ``kind`` (``shift`` or ``pasted``), its ``sentence`` (the
    headline's words), every pair of it (``pair_ids``: the run's rows, or the pairs carrying
    the caption), the ``rows`` shown (``hidden``: the run's rows between them not shown), and
    for a shift the repair's decisions of the run (``repair``: ``(pair_id, replace|drop,
    caption)``, the caption raw; ``repair.csv`` writes it spreadsheet-safe)."""

    kind: str
    sentence: str
    pair_ids: list[str]
    rows: list[CardRow]
    hidden: int = 0
    offset: int = 0
    repair: tuple[tuple[str, str, str], ...] = ()

    def to_page(self, image: Callable[[str], int]) -> dict[str, Any]:
        """The card as ``pairs.js`` carries it, each picture an index into its ``images``."""
        return {
            "kind": self.kind,
            "sentence": self.sentence,
            "offset": self.offset,
            "pair_ids": self.pair_ids,
            "hidden": self.hidden,
            "gap": FIRST if self.hidden else None,
            "rows": [[r.pair_id, image(r.image_id), r.caption, r.caption_after, r.state] for r in self.rows],
            "repair": [list(r) for r in self.repair],
        }


@dataclass(frozen=True)
class FindingCards:
    """The page's ``cards`` (at most :data:`MAX_CARDS`) and the findings left ``more``."""

    cards: list[FindingCard]
    more: int = 0

    def images(self) -> list[str]:
        """The pictures the cards show (their thumbnails go beside the page)."""
        return list(dict.fromkeys(r.image_id for card in self.cards for r in card.rows))

    def to_page(self, image: Callable[[str], int]) -> dict[str, Any]:
        return {"cards": [card.to_page(image) for card in self.cards], "more": self.more}


def finding_cards(findings: JoinFindings, pairs: pd.DataFrame, *, most: int = MAX_CARDS) -> FindingCards:
    """The cards of ``findings`` (the shifts first, at most ``most``) over the audit's ``pairs``
    (every pair: ``pair_id``, ``image_id``, ``caption``)."""
    ids = pairs["pair_id"].astype(str).tolist()
    image = dict(zip(ids, pairs["image_id"].astype(str)))
    caption = dict(zip(ids, pairs["caption"].fillna("").astype(str)))
    repair = repaired(findings, pairs)
    cards = []
    for n, shift in enumerate(findings.shifts[:most], 1):
        shown = _shown(shift.pair_ids)
        rows = [_shift_row(p, image[p], caption[p], repair.get(p)) for p in shown]
        own = tuple((p, r.decision, r.caption) for p, r in repair.items() if r.shift == n)
        cards.append(
            FindingCard(
                "shift",
                shift.sentence(),
                shift.pair_ids,
                rows,
                hidden=len(shift.pair_ids) - len(shown),
                offset=shift.offset,
                repair=own,
            )
        )
    for group in findings.repeated_captions[: max(most - len(cards), 0)]:
        shown = group.pair_ids[:PASTED_SHOWN]
        rows = [CardRow(p, image[p], caption[p], None, "pasted") for p in shown]
        cards.append(FindingCard("pasted", group.sentence(), group.pair_ids, rows))
    total = len(findings.shifts) + len(findings.repeated_captions)
    return FindingCards(cards, total - len(cards))


def _shown(pair_ids: list[str]) -> list[str]:
    """A run's first :data:`FIRST` and last :data:`LAST` rows (every row of a short run)."""
    if len(pair_ids) <= FIRST + LAST:
        return list(pair_ids)
    return [*pair_ids[:FIRST], *pair_ids[-LAST:]]


def _shift_row(pair_id: str, image_id: str, caption: str, repair: Repaired | None) -> CardRow:
    if repair is None:
        return CardRow(pair_id, image_id, caption, None, "same")
    if repair.decision == "drop":
        return CardRow(pair_id, image_id, caption, None, "lost")
    return CardRow(pair_id, image_id, caption, repair.caption, "replace")
