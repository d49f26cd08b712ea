"""``mispair estimate``: what a person's answers on the audit's random sample prove — the share of
mismatched pairs with an interval valid however they stopped (:mod:`mispair.estimate.share`),
the ranking's AUC and recall on their own judgements (:mod:`mispair.estimate.trust`) and, with a
false-discovery rate, the largest cut of the ranking whose error the answers prove
(:mod:`mispair.estimate.selection`). Written as ``estimate.json`` (and ``estimate_pairs.csv``)
into the audit's folder."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from mispair.atomic import atomic_text, atomic_write
from mispair.errors import ConfigError, DataError
from mispair.estimate.labels import MergedLabels, merge_labels, read_labels
from mispair.estimate.sample import SAMPLE, sample_positions
from mispair.estimate.selection import DELTA, INTERVAL_DELTA, ProvenCut, proven_cut, recalibrated
from mispair.estimate.share import (
    ALPHA,
    LOOK_ALPHA,
    TARGET_HALF_WIDTH,
    SampleShare,
    ShareEstimate,
    sample_share,
)
from mispair.estimate.trust import Interval, blind_spot, ranking_auc, weighted_recall

if TYPE_CHECKING:
    from typing import TypeAlias

    import pandas as pd

    Labels: TypeAlias = "str | Path | pd.DataFrame"

ESTIMATE = "estimate.json"
ESTIMATE_PAIRS = "estimate_pairs.csv"
DISAGREEMENTS_SHOWN = 10
"""The reviewers' disagreements the command line lists (estimate.json holds every one)."""
METHOD = (
    "a stratified random sample (sample.csv's order: strata by the audit's calibrated probabilities, "
    "an exact optimal allocation, the cut checked first), each stratum's answers weighed by its size; the "
    "interval an asymptotic confidence sequence (Waudby-Smith et al. 2024) credited for sampling "
    f"without replacement (Waudby-Smith & Ramdas 2020) at level {ALPHA - LOOK_ALPHA:g}, intersected "
    f"from the planned look on with that look's fixed-n interval at level {LOOK_ALPHA:g}: valid at "
    "every n, so stopping when it is tight keeps it valid; unsure answers bound either way"
)


@dataclass(frozen=True)
class LabelledDrop:
    """The drop proven against the answers at false-discovery rate ``fdr``
    (:func:`~mispair.estimate.selection.proven_cut`): ``cut`` (the proof as run), ``kept``,
    ``kept_mismatched`` (the share of mismatched pairs among those left, with its interval),
    ``more_answers`` (when no cut is proven: about how many more answers in the sample's order
    would prove the first cut, None when the answers say it holds too many correct pairs),
    ``recalibrated`` (whether the probabilities were refitted on the answers)."""

    fdr: float
    cut: ProvenCut
    kept: int
    kept_mismatched: ShareEstimate
    more_answers: int | None
    recalibrated: bool

    @property
    def suspected(self) -> int:
        return int(self.cut.dropped.sum())

    def to_dict(self) -> dict[str, Any]:
        low, high = self.cut.fdr_interval
        return {
            "fdr": self.fdr,
            "method": "the largest cut of the audit's ranking inside its suspects whose share of "
            "correct pairs the answers in it prove at most fdr (exact hypergeometric bounds, "
            "fixed-sequence testing over the cuts of 4/8 … 8/8 of the suspects, risk limit "
            f"{DELTA:g}); the pairs judged correct kept, every pair judged mismatched dropped",
            "confidence": 1 - DELTA,
            "fdr_proven_at_most": self.cut.fdr_proven,
            "proven": self.cut.size > 0,
            "suspected": self.suspected,
            "cut": self.cut.size,
            "cut_stratum": self.cut.cut_pairs,
            "answered_in_cut": self.cut.answered_in_cut,
            "unjudged_dropped": self.cut.unjudged,
            "fdr_estimate": (low + high) / 2,
            "fdr_interval": [low, high],
            "fdr_interval_confidence": 1 - 2 * INTERVAL_DELTA,
            "tests": [t.to_dict() for t in self.cut.tests],
            "more_answers_to_prove": self.more_answers,
            "kept": self.kept,
            "kept_mismatched_share": self.kept_mismatched.share,
            "kept_mismatched_share_interval": [self.kept_mismatched.low, self.kept_mismatched.high],
            "probabilities_recalibrated": self.recalibrated,
        }

    def line(self) -> str:
        """What the command line says of the drop."""
        k, cut = self.kept_mismatched, self.cut
        if cut.cut_pairs == 0:
            return (
                f"at a false-discovery rate of {self.fdr:g}: the audit suspects no pair, so there is no "
                f"cut to prove; the {self.suspected} pairs judged mismatched are dropped ({ESTIMATE_PAIRS})"
            )
        if cut.size == 0:
            more = (
                f"about {self.more_answers} more answers in the sample's order would prove one"
                if self.more_answers is not None
                else "at the share of correct pairs your answers found among them, more answers would "
                "not prove a cut"
            )
            return (
                f"at a false-discovery rate of {self.fdr:g}: no cut of the ranking is proven yet "
                f"({cut.answered_in_cut} answers among the {cut.cut_pairs:,} suspects; {more}); "
                f"the {self.suspected} pairs judged mismatched are dropped ({ESTIMATE_PAIRS})"
            )
        low, high = cut.fdr_interval
        return (
            f"at a false-discovery rate of {self.fdr:g}: {self.suspected} pairs dropped "
            f"({cut.unjudged} of them unjudged), proven: at most {cut.fdr_proven:.1%} of them are "
            f"correct pairs (confidence {1 - DELTA:.0%}; 95% interval {low:.1%}–{high:.1%}); of the "
            f"{self.kept:,} left "
            f"{k.share:.1%} ({k.low:.1%}–{k.high:.1%}) are mismatched "
            f"({ESTIMATE_PAIRS}; `mispair apply AUDIT --decisions` takes it)"
        )


@dataclass(frozen=True)
class AuditEstimate:
    """What the answers prove about an audit (``estimate.json``); ``pairs``: with a drop, every
    pair's ``pair_id``, recalibrated ``mismatch_probability``, ``suspected``, ``label``."""

    audit_id: str
    pairs_total: int
    share: SampleShare
    audit_share: float | None
    audit_share_interval: list[float] | None
    auc: Interval | None
    recall: Interval | None
    warning: str | None
    merged: MergedLabels
    drop: LabelledDrop | None = None
    pairs: pd.DataFrame | None = field(default=None, repr=False)

    def to_dict(self) -> dict[str, Any]:
        s = self.share
        data: dict[str, Any] = {
            "audit_id": self.audit_id,
            "method": METHOD,
            "level": 1 - ALPHA,
            "pairs": self.pairs_total,
            "mismatched_share": s.estimate.share,
            "mismatched_share_interval": [s.estimate.low, s.estimate.high],
            "labels_only_interval": [s.labels_only.low, s.labels_only.high],
            "fixed_n_interval": [s.fixed_n.low, s.fixed_n.high],
            "labels": s.answers,
            "mismatched": s.mismatched,
            "correct": s.correct,
            "unsure": s.unsure,
            "lambda": s.estimate.lam,
            "answers_for_3_points": s.answers_for_target,
            "audit_share": self.audit_share,
            "audit_share_interval": self.audit_share_interval,
            "ranking_auc": None if self.auc is None else self.auc.value,
            "ranking_auc_interval": None if self.auc is None else self.auc.to_list(),
            "recall": None if self.recall is None else self.recall.value,
            "recall_interval": None if self.recall is None else self.recall.to_list(),
            "warning": self.warning,
            "reviewers": list(self.merged.reviewers),
            "kappa": self.merged.kappa,
            "disagreements": len(self.merged.disagreements),
            "disagreed_pairs": self.merged.disagreements.to_dict(orient="records"),
        }
        if self.drop is not None:
            data["drop"] = self.drop.to_dict()
        return data

    def save(self, folder: str | Path) -> list[Path]:
        """Write ``estimate.json`` (and, with a drop, ``estimate_pairs.csv``, each row carrying the
        audit's id so that ``apply`` takes it for this audit only) into ``folder``; an earlier
        drop's list goes when this estimate makes none (it would no longer match the answers)."""
        from mispair.safe_io import write_csv

        folder, written = Path(folder), []
        if self.pairs is not None:
            pairs = self.pairs.assign(audit_id=self.audit_id)
            atomic_write(folder / ESTIMATE_PAIRS, lambda handle: write_csv(pairs, handle))
            written.append(folder / ESTIMATE_PAIRS)
        else:
            (folder / ESTIMATE_PAIRS).unlink(missing_ok=True)
        atomic_text(folder / ESTIMATE, json.dumps(self.to_dict(), indent=2, allow_nan=False) + "\n")
        return [folder / ESTIMATE, *written]

    def lines(self) -> list[str]:
        """What the command line prints."""
        s, e = self.share, self.share.estimate
        judged = f"{s.mismatched} mismatched, {s.correct} correct"
        judged += f", {s.unsure} unsure" if s.unsure else ""
        lines = [
            f"your {s.answers} answers ({judged}): {e.share:.1%} of the {self.pairs_total:,} pairs are "
            f"mismatched (95% interval {e.low:.1%}–{e.high:.1%}, valid wherever you stop)"
        ]
        if self.audit_share is not None and self.audit_share_interval is not None:
            low, high = self.audit_share_interval
            lines.append(f"  the audit's scores alone said {self.audit_share:.1%} ({low:.1%}–{high:.1%})")
        if s.answers_for_target is None:
            lines.append(
                f"  ± {100 * TARGET_HALF_WIDTH:.0f} points needs more answers than the "
                f"{self.pairs_total:,} pairs: judge them all for the exact share"
            )
        elif s.answers_for_target > s.answers:
            lines.append(
                f"  about {s.answers_for_target - s.answers} more answers would give "
                f"± {100 * TARGET_HALF_WIDTH:.0f} points"
            )
        if self.auc is not None:
            lines.append(
                f"  the ranking on your answers: AUC {self.auc.value:.2f} "
                f"({self.auc.low:.2f}–{self.auc.high:.2f})"
            )
        if self.recall is not None:
            lines.append(
                f"  the audit suspected {self.recall.value:.0%} "
                f"({self.recall.low:.0%}–{self.recall.high:.0%}) of the pairs you judged mismatched"
            )
        if self.warning:
            lines.append(f"  warning: {self.warning}")
        if len(self.merged.reviewers) > 1:  # each name and pair id cut and terminal-safe
            from mispair.estimate.labels import KAPPA_LISTED, answers_text
            from mispair.safe_io import shown

            if len(self.merged.reviewers) <= KAPPA_LISTED:
                kappas = ", ".join(
                    f"{shown(k, 83)} κ {'n/a' if v is None else f'{v:.2f}'}"
                    for k, v in self.merged.kappa.items()
                )
            else:
                kappas = self.merged.agreement().text() + " (estimate.json: kappa)"
            lines.append(
                f"  {len(self.merged.reviewers)} reviewers, {len(self.merged.disagreements)} disagreement(s) "
                f"(counted unsure); {kappas}"
            )
            split = self.merged.disagreements
            for row in split.head(DISAGREEMENTS_SHOWN).to_dict(orient="records"):
                lines.append(f"    {shown(row['pair_id'])}: {answers_text(row['answers'])}")
            if len(split) > DISAGREEMENTS_SHOWN:
                lines.append(
                    f"    ... and {len(split) - DISAGREEMENTS_SHOWN} more (estimate.json: disagreed_pairs)"
                )
        if self.drop is not None:
            lines.append("  " + self.drop.line())
        return lines


def estimate_pairs(
    pairs: pd.DataFrame,
    sample: pd.DataFrame,
    labels: Sequence[Labels],
    *,
    audit: str,
    fdr: float | None = None,
    audit_share: float | None = None,
    audit_share_interval: list[float] | None = None,
    reviewers: Sequence[str] | None = None,
) -> AuditEstimate:
    """The estimate from the ``labels`` (one file or table per reviewer, merged) on the audit's
    ``pairs`` (``pair_id``, ``mismatch_probability``, ``suspected``) and its ``sample`` order.
    ``fdr``: also choose the drop (:func:`~mispair.estimate.selection.proven_cut`)."""
    if not labels:
        raise ConfigError("--labels: give at least one labels file")
    if fdr is not None and not 0 < fdr < 1:
        raise ConfigError(f"--fdr: a rate in (0, 1), got {fdr}")
    names = list(reviewers or (_reviewer(source, k) for k, source in enumerate(labels)))
    merged = merge_labels([read_labels(source, audit=audit) for source in labels], names)
    judged = Judged.of(pairs, sample, merged, names[0] if len(names) == 1 else "the merged labels")
    share = sample_share(judged.answers, judged.order_probability, judged.order_strata)
    auc, recall = _trust(judged.answers, judged.probability, judged.suspected, judged.weights())
    warning = blind_spot(share.estimate.low, share.estimate.share, recall, auc)
    estimate = AuditEstimate(
        audit, len(pairs), share, audit_share, audit_share_interval, auc, recall, warning, merged
    )
    if fdr is None:
        return estimate
    drop, table = _drop(judged, suspicion_score(pairs), fdr, share.estimate)
    return AuditEstimate(**{**estimate.__dict__, "drop": drop, "pairs": table})


@dataclass(frozen=True)
class Judged:
    """The answers against the audit: ``ids [N]`` every pair's id and ``every_probability [N]``
    its mismatch probability (``pairs.csv``'s order); ``judged_at [n]`` the places in it of the
    pairs judged, in the sample's order, with their ``answers [n]`` (1 mismatched, 0 correct, NaN
    unsure), ``probability [n]`` and ``suspected [n]`` (None: the audit flagged none); every
    pair's probability and stratum in the sample's order, ``order_probability [N]`` and
    ``order_strata [N]``, and its place in ``pairs``, ``order_at [N]``."""

    ids: np.ndarray
    every_probability: np.ndarray
    judged_at: np.ndarray
    answers: np.ndarray
    probability: np.ndarray
    suspected: np.ndarray | None
    order_at: np.ndarray
    order_probability: np.ndarray
    order_strata: np.ndarray

    @classmethod
    def of(cls, pairs: pd.DataFrame, sample: pd.DataFrame, merged: MergedLabels, where: str) -> Judged:
        """The ``merged`` answers on the audit's ``pairs``, checked to be the first n pairs of
        its ``sample`` order (:func:`~mispair.estimate.sample.sample_positions`)."""
        import pandas as pd

        ids = pairs["pair_id"].astype(str).to_numpy()
        places = sample_positions(list(merged.labels["pair_id"]), sample, where)
        answer_of = dict(zip(merged.labels["pair_id"], merged.labels["label"]))
        order_at = (
            pd.Index(ids).get_indexer(pd.Index(sample["pair_id"].tolist(), dtype=object)).astype(np.int64)
        )
        if (order_at < 0).any() or len(order_at) != len(ids):
            missing = sample["pair_id"].iloc[int(np.argmax(order_at < 0))] if (order_at < 0).any() else None
            what = (
                f"pair {missing!r} is not one of the audit's pairs"
                if missing is not None
                else "not every pair"
            )
            raise DataError(f"sample.csv: {what} (a damaged audit)")
        judged_at = order_at[: len(places)]
        every = pairs["mismatch_probability"].astype("float64").to_numpy()
        suspected = pairs["suspected"].astype(bool).to_numpy()[judged_at] if "suspected" in pairs else None
        answers = np.array([_value(answer_of[i]) for i in ids[judged_at]])
        strata = sample["stratum"].to_numpy(dtype=object)
        return cls(
            ids, every, judged_at, answers, every[judged_at], suspected, order_at, every[order_at], strata
        )

    def weights(self) -> np.ndarray:
        """``[n]`` each judged pair's inverse inclusion probability, ``N_h / n_h`` of its stratum."""
        n = len(self.answers)
        strata = self.order_strata
        names, counts = np.unique(strata, return_counts=True)
        judged_names, judged_counts = np.unique(strata[:n], return_counts=True)
        size = dict(zip(names.tolist(), counts.tolist()))
        taken = dict(zip(judged_names.tolist(), judged_counts.tolist()))
        return np.array([size[h] / taken[h] for h in strata[:n].tolist()], dtype=np.float64)

    def every_answer(self) -> np.ndarray:
        """``[N]`` each pair's answer (1, 0, 0.5 unsure), NaN where none was given."""
        every = np.full(len(self.ids), np.nan)
        every[self.judged_at] = np.where(np.isnan(self.answers), 0.5, self.answers)
        return every


def _reviewer(source: object, k: int) -> str:
    """A reviewer's name: the labels file's name, or "reviewer k" for a table."""
    return f"reviewer {k + 1}" if hasattr(source, "columns") else Path(str(source)).name


def _value(label: str) -> float:
    return {"mismatched": 1.0, "correct": 0.0}.get(label, float("nan"))


def _trust(
    answers: np.ndarray, predicted: np.ndarray, suspected: np.ndarray | None, weights: np.ndarray
) -> tuple[Interval | None, Interval | None]:
    """The ranking's AUC and the audit's recall on the firm answers, each answer weighed by the
    inverse of its stratum's sampling rate (the collection's figures, not the sample's)."""
    firm = ~np.isnan(answers)
    auc = ranking_auc(predicted[firm], answers[firm] == 1, weights[firm])
    if suspected is None:
        return auc, None
    mismatched = firm & (answers == 1)
    return auc, weighted_recall(suspected[mismatched], weights[mismatched])


def _drop(
    judged: Judged, suspicion: np.ndarray, fdr: float, share: ShareEstimate
) -> tuple[LabelledDrop, pd.DataFrame]:
    """The proven drop (:func:`~mispair.estimate.selection.proven_cut`, ranked by ``suspicion``)
    and its table. The share left mismatched: the mismatched pairs of the collection (the
    ``share``'s interval) less those dropped (the drop's size less its correct pairs, bounded by
    the proof), over the pairs left; its interval joins the two intervals' ends."""
    import pandas as pd

    every_answer = judged.every_answer()
    in_cut = np.zeros(len(judged.ids), dtype=bool)
    in_cut[judged.order_at[judged.order_strata == "cut"]] = True
    cut = proven_cut(suspicion, every_answer, in_cut, fdr)
    refit = recalibrated(judged.every_probability, every_answer)
    total, dropped = len(judged.ids), int(cut.dropped.sum())
    kept = total - dropped

    def left(share_of_all: float, correct_dropped: int) -> float:
        return min(max((share_of_all * total - dropped + correct_dropped) / max(kept, 1), 0.0), 1.0)

    middle = (cut.correct_low + cut.correct_high) // 2
    kept_share = ShareEstimate(
        left(share.share, middle),
        left(share.low, cut.correct_low),
        left(share.high, cut.correct_high),
        share.lam,
        share.std,
        share.answers,
    )
    more = None if cut.size else _more_answers(judged, cut, fdr)
    labels = np.select(
        [np.isnan(every_answer), every_answer == 1, every_answer == 0],
        ["", "mismatched", "correct"],
        "unsure",
    )
    table = pd.DataFrame(
        {
            "pair_id": judged.ids,
            "mismatch_probability": np.round(judged.every_probability if refit is None else refit, 6),
            "suspected": cut.dropped,
            "label": labels,
        }
    )
    return LabelledDrop(fdr, cut, kept, kept_share, more, refit is not None), table


def _more_answers(judged: Judged, cut: ProvenCut, fdr: float) -> int | None:
    """About how many more answers in the sample's order would prove the first cut, were the
    share of correct pairs its answers found so far (``c / m``; 0 before any) to hold; None
    when no count of answers would (that share is ``fdr`` or more) or no cut exists."""
    from mispair.estimate.selection import DELTA, correct_upper

    if not cut.tests:
        return None
    first = cut.tests[0]
    rate = first.correct / first.answered if first.answered else 0.0
    if rate >= fdr:
        return None
    order_cut = np.cumsum(judged.order_strata == "cut")
    answers = len(judged.answers)
    for m in range(first.answered + 1, first.size + 1):
        if correct_upper(first.size, m, round(rate * m), DELTA) <= fdr * first.size:
            need_in_cut = math.ceil(m * cut.cut_pairs / first.size)  # the cut's answers spread over it
            reached = int(np.searchsorted(order_cut, min(need_in_cut, cut.cut_pairs))) + 1
            return max(reached - answers, 1)
    return None


def suspicion_score(pairs: pd.DataFrame) -> np.ndarray:
    """``[N]`` each pair's place in the order of suspicion, higher = more suspect: by mismatch
    probability, ties (many pairs share 0 or 1) broken by the held-out score (lower = more
    suspect), so a pair judged correct ties with no other."""
    p = pairs["mismatch_probability"].astype("float64").to_numpy()
    score = (
        pairs["held_out_score"].astype("float64").to_numpy()
        if "held_out_score" in pairs
        else np.zeros(len(p))
    )
    order = np.lexsort((-np.nan_to_num(score, nan=np.inf), p))  # ascending suspicion
    places = np.empty(len(p))
    places[order] = np.arange(len(p))
    return places


__all__ = ["ESTIMATE", "ESTIMATE_PAIRS", "SAMPLE", "AuditEstimate", "LabelledDrop", "estimate_pairs"]
