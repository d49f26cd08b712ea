"""``mispair estimate``: what a person's answers on the audit's random sample prove — the share of
mismatched pairs with an interval valid however they stopped (:mod:`mispair.estimate.share`),
the ranking's AUC and recall on their own judgements (:mod:`mispair.estimate.trust`) and, with a
false-discovery rate, the pairs to drop with a finite-sample guarantee
(:mod:`mispair.estimate.selection`). Written as ``estimate.json`` (and ``estimate_pairs.csv``)
into the audit's folder."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from mispair.atomic import atomic_text, atomic_write
from mispair.errors import ConfigError, DataError
from mispair.estimate.labels import MergedLabels, merge_labels, read_labels
from mispair.estimate.sample import SAMPLE, sample_positions
from mispair.estimate.selection import conformal_selection, recalibrated
from mispair.estimate.share import (
    ALPHA,
    TARGET_HALF_WIDTH,
    SampleShare,
    ShareEstimate,
    anytime_share,
    sample_share,
)
from mispair.estimate.trust import Interval, blind_spot, ranking_auc, wilson

if TYPE_CHECKING:
    from typing import TypeAlias

    import pandas as pd

    Labels: TypeAlias = "str | Path | pd.DataFrame"

ESTIMATE = "estimate.json"
ESTIMATE_PAIRS = "estimate_pairs.csv"
DISAGREEMENTS_SHOWN = 10
"""The reviewers' disagreements the command line lists (estimate.json holds every one)."""
METHOD = (
    "PPI++ (power-tuned prediction-powered inference; Angelopoulos, Duchi & Zrnic 2023) with the "
    "audit's calibrated probabilities as predictions, over the first n pairs of sample.csv's "
    "random order; the interval an asymptotic confidence sequence (Waudby-Smith et al. 2024), "
    "valid at every n, so stopping when it is tight keeps it valid; unsure answers bound either way"
)


@dataclass(frozen=True)
class LabelledDrop:
    """The drop chosen against the answers at false-discovery rate ``fdr``: ``suspected`` (how
    many), ``kept_mismatched`` (the estimated share of mismatched pairs among those left, with
    its interval), ``recalibrated`` (whether the probabilities were refitted on the answers)."""

    fdr: float
    suspected: int
    kept: int
    kept_mismatched: ShareEstimate
    recalibrated: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "fdr": self.fdr,
            "method": "conformal selection against the pairs judged correct (Jin & Candès 2023), "
            "Benjamini-Hochberg over the unjudged pairs; the pairs judged mismatched dropped too",
            "suspected": self.suspected,
            "kept": self.kept,
            "kept_mismatched_share": self.kept_mismatched.share,
            "kept_mismatched_share_interval": [self.kept_mismatched.low, self.kept_mismatched.high],
            "probabilities_recalibrated": self.recalibrated,
        }


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
            f"mismatched (95% interval {e.low:.1%}–{e.high:.1%}, valid wherever you stop; from the "
            f"answers alone {s.labels_only.low:.1%}–{s.labels_only.high:.1%})"
        ]
        if self.audit_share is not None and self.audit_share_interval is not None:
            low, high = self.audit_share_interval
            lines.append(f"  the audit's scores alone said {self.audit_share:.1%} ({low:.1%}–{high:.1%})")
        if s.answers_for_target is None:
            lines.append(
                f"  ± {TARGET_HALF_WIDTH:.0%} needs more answers than the {self.pairs_total:,} pairs: "
                "judge them all for the exact share"
            )
        elif s.answers_for_target > s.answers:
            lines.append(
                f"  about {s.answers_for_target - s.answers} more answers would give "
                f"± {TARGET_HALF_WIDTH:.0%}"
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
        if len(self.merged.reviewers) > 1:
            kappas = ", ".join(
                f"{k} κ {'n/a' if v is None else f'{v:.2f}'}" for k, v in self.merged.kappa.items()
            )
            lines.append(
                f"  {len(self.merged.reviewers)} reviewers, {len(self.merged.disagreements)} disagreement(s) "
                f"(counted unsure); {kappas}"
            )
            split = self.merged.disagreements
            for row in split.head(DISAGREEMENTS_SHOWN).to_dict(orient="records"):
                answers = ", ".join(f"{who}: {row[who] or '-'}" for who in self.merged.reviewers)
                lines.append(f"    {row['pair_id']}: {answers}")
            if len(split) > DISAGREEMENTS_SHOWN:
                lines.append(
                    f"    ... and {len(split) - DISAGREEMENTS_SHOWN} more (estimate.json: disagreed_pairs)"
                )
        if self.drop is not None:
            d, k = self.drop, self.drop.kept_mismatched
            lines.append(
                f"  at a false-discovery rate of {d.fdr:g}: {d.suspected} pairs suspected; of the {d.kept:,} "
                f"left an estimated {k.share:.1%} ({k.low:.1%}–{k.high:.1%}) are mismatched "
                f"({ESTIMATE_PAIRS}; `mispair apply AUDIT --decisions` takes it)"
            )
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
    ``fdr``: also choose the drop (:func:`~mispair.estimate.selection.conformal_selection`)."""
    if not labels:
        raise ConfigError("--labels: give at least one labels file")
    if fdr is not None and not 0 < fdr < 1:
        raise ConfigError(f"--fdr: a rate in (0, 1), got {fdr}")
    names = list(reviewers or (_reviewer(source, k) for k, source in enumerate(labels)))
    merged = merge_labels([read_labels(source, audit=audit) for source in labels], names)
    judged = Judged.of(pairs, sample, merged, names[0] if len(names) == 1 else "the merged labels")
    share = sample_share(judged.answers, judged.probability, judged.every_probability)
    auc, recall = _trust(judged.answers, judged.probability, judged.suspected)
    warning = blind_spot(share.estimate.low, share.estimate.share, recall, auc)
    estimate = AuditEstimate(
        audit, len(pairs), share, audit_share, audit_share_interval, auc, recall, warning, merged
    )
    if fdr is None:
        return estimate
    drop, table = _drop(judged, suspicion_score(pairs), fdr)
    return AuditEstimate(**{**estimate.__dict__, "drop": drop, "pairs": table})


@dataclass(frozen=True)
class Judged:
    """The answers against the audit: ``ids [N]`` every pair's id and ``every_probability [N]``
    its mismatch probability (``pairs.csv``'s order); ``judged_at [n]`` the places in it of the
    pairs judged, in the sample's order, with their ``answers [n]`` (1 mismatched, 0 correct, NaN
    unsure), ``probability [n]`` and ``suspected [n]`` (None: the audit flagged none)."""

    ids: np.ndarray
    every_probability: np.ndarray
    judged_at: np.ndarray
    answers: np.ndarray
    probability: np.ndarray
    suspected: np.ndarray | None

    @classmethod
    def of(cls, pairs: pd.DataFrame, sample: pd.DataFrame, merged: MergedLabels, where: str) -> Judged:
        """The ``merged`` answers on the audit's ``pairs``, checked to be the first n pairs of
        its ``sample`` order (:func:`~mispair.estimate.sample.sample_positions`)."""
        import pandas as pd

        ids = pairs["pair_id"].astype(str).to_numpy()
        places = sample_positions(list(merged.labels["pair_id"]), sample, where)
        in_order = pd.Index(sample["pair_id"].iloc[: len(places)].tolist(), dtype=object)
        answer_of = dict(zip(merged.labels["pair_id"], merged.labels["label"]))
        judged_at = pd.Index(ids).get_indexer(in_order).astype(np.int64)
        if (judged_at < 0).any():
            missing = in_order[int(np.argmax(judged_at < 0))]
            raise DataError(f"sample.csv: pair {missing!r} is not one of the audit's pairs (a damaged audit)")
        every = pairs["mismatch_probability"].astype("float64").to_numpy()
        suspected = pairs["suspected"].astype(bool).to_numpy()[judged_at] if "suspected" in pairs else None
        answers = np.array([_value(answer_of[i]) for i in in_order])
        return cls(ids, every, judged_at, answers, every[judged_at], suspected)

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
    answers: np.ndarray, predicted: np.ndarray, suspected: np.ndarray | None
) -> tuple[Interval | None, Interval | None]:
    firm = ~np.isnan(answers)
    auc = ranking_auc(predicted[firm], answers[firm] == 1)
    if suspected is None:
        return auc, None
    mismatched = firm & (answers == 1)
    return auc, wilson(int(suspected[mismatched].sum()), int(mismatched.sum()))


def _drop(judged: Judged, suspicion: np.ndarray, fdr: float) -> tuple[LabelledDrop, pd.DataFrame]:
    """The labelled drop (selected on ``suspicion``) and its table. The share left mismatched:
    the PPI estimate of the mismatched pairs the rule keeps by their scores (a judged pair is
    counted as if unjudged: kept when its p-value is above the selection's), less the judged
    mismatched pairs among them, which the answers themselves drop, over the pairs left."""
    import pandas as pd

    ids, probability, judged_at = judged.ids, judged.every_probability, judged.judged_at
    every_answer = judged.every_answer()
    selection = conformal_selection(suspicion, every_answer, fdr)
    refit = recalibrated(probability, every_answer)
    by_score = (selection.p_values > selection.threshold).astype(np.float64)
    mean_kept = float(np.mean(probability * by_score))
    answers, kept_at = every_answer[judged_at], by_score[judged_at]
    kept = int((~selection.suspected).sum())

    def left(count_share: float) -> float:  # the share of all pairs → the share of those left
        return min(max((count_share * len(ids) - dropped) / max(kept, 1), 0.0), 1.0)

    dropped = float(np.sum((answers == 1) * kept_at))
    reads = [
        anytime_share(
            np.where(answers == 0.5, fill, answers) * kept_at, probability[judged_at] * kept_at, mean_kept
        )
        for fill in (0.0, 1.0)
    ]
    kept_share = ShareEstimate(
        (left(reads[0].share) + left(reads[1].share)) / 2,
        left(min(r.low for r in reads)),
        left(max(r.high for r in reads)),
        reads[0].lam,
        max(r.std for r in reads) * len(ids) / max(kept, 1),
        len(answers),
    )
    labels = np.select(
        [np.isnan(every_answer), every_answer == 1, every_answer == 0],
        ["", "mismatched", "correct"],
        "unsure",
    )
    table = pd.DataFrame(
        {
            "pair_id": ids,
            "mismatch_probability": np.round(probability if refit is None else refit, 6),
            "suspected": selection.suspected,
            "label": labels,
            "conformal_p_value": np.round(selection.p_values, 6),
        }
    )
    drop = LabelledDrop(fdr, int(selection.suspected.sum()), kept, kept_share, refit is not None)
    return drop, table


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
