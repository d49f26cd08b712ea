"""How far an audit's ranking can be trusted, told from the collection itself.

**The mismatched share with an interval.** The share is the mean mismatch probability of the
two-component mixture fitted to the held-out scores; its interval is the percentile bootstrap of
that mean, the mixture fitted again on each resample of the pairs.

**The self-check on planted swaps** (``--plant``). Swapping captions between images plants pairs
known to be mismatched; the ranking's AUC against them is measurable. But a collection that is
already dirty holds mismatched pairs among the originals too, and counting them as clean
understates the AUC. With ``π`` the share of mismatched pairs among the originals, and the
planted swaps scored like the collection's own mismatched pairs (the assumption: both are pairs
whose caption describes another picture), the measured AUC is

    AUC_measured = (1 − π) · AUC + π · ½,

since a planted pair is compared with a clean original with probability ``1 − π`` (where it wins
with probability ``AUC``, the ranking's AUC on mismatched against clean pairs) and with a
mismatched original with probability ``π`` (a coin toss). Hence

    AUC = (AUC_measured − π / 2) / (1 − π),

with ``π`` estimated from the planted swaps themselves (Storey's estimator of a null share, with
the planted scores as the null): below the ``λ``-quantile ``q`` of the planted swaps' scores lie a
share ``λ`` of the mismatched originals and, for a ranking worth checking, few clean ones, so

    π ≈ P(original score ≤ q) / λ,     λ = :data:`STOREY_LAMBDA`,

an estimate that errs high by ``(1 − π) P(clean ≤ q) / λ``. The mixture's own share is no
estimate here: a Gaussian mixture fitted to a weak model's skewed scores gives the mismatched
component the tail of hard but correct pairs (on Tux Paint with 26% of its originals swapped and
``--plant 0.1``, the mixture put π at 0.41, this estimator at 0.25 against a true 0.26).

**The planted swaps check the decoys** (the audit's default run scores decoy pairs, whose
scores calibrate the share and the probabilities on the assumption that a mismatched pair scores
as a decoy does): ``planted_like_decoys``, the planted swaps' Storey ratio ``#{u ≤ λ} /
(planted · λ)`` on the decoys' scale ``u``, is about 1 when a planted mismatch scores as a decoy
does, below 1 when it scores higher (the calibrated share is then understated), above 1 when
lower. The corrected AUC keeps ``π`` from the planted swaps themselves: in simulation (300 pairs,
30 planted) the decoys' ``π`` is the steadier share but gives the noisier corrected AUC, the
planted quantile's error partly cancelling that of the AUC measured on the same swaps.

**When the share cannot be right.** The corrected AUC is at most 1 only if
``π ≤ 2 (1 − AUC_measured)``: the planted swaps themselves bound how many originals can be
mismatched. Where clean pairs often score like mismatched ones (a weak model), the estimate can
exceed that bound (on 346 icons with 23% of their captions swapped: 47% against a bound of 46%):
it is then overstated, the correction would claim a perfect ranking, and the check says so
instead (``consistent`` false) and keeps the measured AUC, a lower bound of the ranking's AUC on
the collection's own mismatches whatever ``π`` is (``AUC_measured ≥ ½``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

import numpy as np
from sklearn.metrics import roc_auc_score

if TYPE_CHECKING:
    from mispair.division.calibration import Calibration


def mismatch_probability(score: np.ndarray) -> np.ndarray:
    """``[n_pairs]`` the posterior of the mismatched component of a two-component GMM fitted to
    the suspicion ``−score`` (min–max normalised, as ``holdout`` fits it), EM run to convergence
    (not NCR's 10 iterations, which stop short and overstate the smaller component's weight by a
    few points: here the weight is the estimate a user reads)."""
    from mispair.audit.ranking import score_division

    return 1.0 - score_division(score).clean_prob


@dataclass(frozen=True)
class Share:
    """The estimated share of mismatched pairs and its ``level`` percentile-bootstrap interval."""

    estimate: float
    low: float
    high: float
    level: float

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


def mismatched_share(
    score: np.ndarray, *, resamples: int = 100, level: float = 0.95, seed: int = 0, max_sample: int = 20_000
) -> Share:
    """The mean mismatch probability of the pairs scored ``score [n_pairs]``, and its interval:
    the mixture refitted on ``resamples`` bootstrap resamples (each at most ``max_sample`` pairs,
    so the cost stays bounded on large collections; the interval is then that of a sample of
    ``max_sample``, a little wider than the whole collection's)."""
    score = np.asarray(score, dtype=np.float64)
    rng = np.random.default_rng(seed)
    size = min(len(score), max_sample)
    resampled = (rng.choice(score, size=size, replace=True) for _ in range(resamples))
    means = [mismatch_probability(sample).mean() for sample in resampled]
    low, high = np.quantile(means, [(1 - level) / 2, (1 + level) / 2])
    return Share(float(mismatch_probability(score).mean()), float(low), float(high), level)


@dataclass(frozen=True)
class SelfCheck:
    """The ranking scored on the planted swaps.

    ``measured_auc``: ROC-AUC of the suspicion, planted swaps against every other pair (counting
    the collection's own mismatched pairs as clean); ``originals_mismatched_share``: the
    estimated share of mismatched pairs among the originals (``π``, from the planted swaps);
    ``estimated_auc``: the AUC corrected for
    them (module docstring), the estimate of the ranking's AUC on the collection's mismatches;
    ``share_upper_bound``: ``2 (1 − measured_auc)``, the most originals that can be mismatched given
    the measured AUC; ``consistent``: the estimated ``π`` lies within it (else ``estimated_auc`` is
    the measured AUC, a lower bound, and ``π`` is overstated).
    """

    measured_auc: float
    originals_mismatched_share: float
    estimated_auc: float
    planted: int
    originals: int
    share_upper_bound: float = 1.0
    consistent: bool = True
    planted_like_decoys: float | None = None
    """The planted swaps' Storey ratio on the decoys' scale (about 1: they score as decoys do);
    None without decoys."""
    planted_like_decoys_p: float | None = None
    """The two-sided binomial p-value of that count if the planted swaps scored as decoys do."""

    def to_dict(self) -> dict[str, float]:
        """The fields, the decoys' check only where it was made (older summaries unchanged)."""
        named = asdict(self)
        if self.planted_like_decoys is None:
            del named["planted_like_decoys"], named["planted_like_decoys_p"]
        return named


def self_check(score: np.ndarray, planted: np.ndarray, calibration: Calibration | None = None) -> SelfCheck:
    """:class:`SelfCheck` of the held-out ``score [n_pairs]`` (low = suspect) and ``planted
    [n_pairs]`` bool (the swaps the audit planted); ``calibration``: the pairs' calibrated
    numbers, whose decoys the planted swaps then check (``planted_like_decoys``)."""
    planted = np.asarray(planted, dtype=bool)
    score = np.asarray(score, dtype=np.float64)
    measured = float(roc_auc_score(planted, -score))
    share = originals_mismatched_share(score[~planted], score[planted])
    like_decoys = like_decoys_p = None
    if calibration is not None:
        from scipy.stats import binomtest

        below = int(np.sum(calibration.null_quantile[planted] <= calibration.lam))
        like_decoys = below / (planted.sum() * calibration.lam)
        like_decoys_p = float(binomtest(below, int(planted.sum()), calibration.lam).pvalue)
    bound = float(np.clip(2 * (1 - measured), 0.0, 1.0))
    consistent = share <= bound
    corrected = (measured - share / 2) / (1 - share) if consistent and share < 1 else measured
    return SelfCheck(
        measured,
        share,
        float(np.clip(corrected, 0.0, 1.0)),
        int(planted.sum()),
        int((~planted).sum()),
        bound,
        consistent,
        like_decoys,
        like_decoys_p,
    )


STOREY_LAMBDA = 0.25
"""The quantile of the planted swaps' scores below which the originals are counted: lower errs less
high (fewer clean pairs below it) and varies more (fewer planted swaps define it)."""


def originals_mismatched_share(
    original: np.ndarray, planted: np.ndarray, lam: float = STOREY_LAMBDA
) -> float:
    """Storey's estimate of the share of mismatched pairs among the ``original [n]`` scores, the
    ``planted [m]`` swaps' scores standing for the mismatched pairs' (module docstring)."""
    threshold = np.quantile(planted, lam)
    return float(np.clip(np.mean(original <= threshold) / lam, 0.0, 1.0))
