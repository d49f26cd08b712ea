"""The audit's words: why a pair is suspect (:func:`why`), a verdict a person's answer fixed
(:func:`answered`), what its probability means (:func:`verdict`), and what the calibration says
of the share and how far to trust it (:func:`calibration_summary`, :func:`separation_note`)."""

from __future__ import annotations

import numpy as np

from mispair.audit.selfcheck import mismatched_share
from mispair.audit.summary import CalibrationPart
from mispair.division.calibration import WEAK_SEPARATION, Calibration, drop_errors


def why(
    better_images: int,
    best_caption: str | None,
    caption_fits_better: bool,
    *,
    at_least: bool = False,
    among_suspects: bool = False,
    duplicate_of: str = "",
    same_caption: int = 0,
    leak: bool = False,
    probability: float | None = None,
) -> str:
    """Why a pair may be mismatched, in words: how many other images its caption fits better
    (``at_least``: that many or more), the caption its image fits best when that is not its own
    (``among_suspects``: of the suspected pairs' captions), and its duplicates. Given its
    calibrated mismatch ``probability``, the words start from it (:func:`verdict`), and a pair
    below :data:`LIKELY` is not explained by the images its caption fits better (a correct pair
    with a middling score reads as uncertain)."""
    if probability is not None:
        details = why(
            better_images,
            best_caption,
            caption_fits_better,
            at_least=at_least,
            among_suspects=among_suspects,
            duplicate_of=duplicate_of,
            same_caption=same_caption,
            leak=leak,
        ).split("; ")
        kept = details if probability >= LIKELY else details[2:]
        return "; ".join([verdict(probability), *kept])
    fits = (
        f"this caption fits {'at least ' if at_least else ''}{better_images} other "
        f"image{'s' if better_images != 1 else ''} better"
        if better_images
        else "no other image fits this caption better"
    )
    if best_caption is None or not caption_fits_better:
        words = [fits, f"no {'suspect' if among_suspects else 'other'} caption fits this image better"]
    else:
        shown = best_caption if len(best_caption) <= 60 else best_caption[:59] + "…"
        among = "of the suspect captions, " if among_suspects else ""
        words = [fits, f"{among}this image fits '{shown}' best"]
    if duplicate_of:
        words.append(f"its image nearly duplicates {duplicate_of}")
    if same_caption:
        carry = "other image carries" if same_caption == 1 else "other images carry"
        words.append(f"{same_caption} {carry} the same caption")
    if leak:
        words.append("it repeats a training pair (a leak)")
    return "; ".join(words)


JUDGED = {
    0.0: "judged correct in your answers: kept whatever the scores say",
    1.0: "judged mismatched in your answers: suspected whatever the scores say",
}
"""A pair's verdict fixed by a person's answer (``mispair audit --labels``): 0 correct, 1 mismatched."""


def answered(judged: np.ndarray, reasons: list[str]) -> list[str]:
    """The ``reasons`` (:func:`why`, from the scores) of pairs ``judged`` (1 mismatched, 0
    correct, NaN not judged or unsure) led by the answer where there is one."""
    return [
        f"{JUDGED[float(answer)]} (the scores alone: {reason})" if answer in JUDGED else reason
        for answer, reason in zip(judged.tolist(), reasons)
    ]


LIKELY = 0.5
"""From this mismatch probability on, a pair is more likely mismatched than not."""


def verdict(probability: float) -> str:
    """A calibrated mismatch probability in words."""
    if probability >= 0.9:
        words = "scores like a caption taken from another picture"
    elif probability >= LIKELY:
        words = "more likely mismatched than not"
    elif probability >= 0.1:
        words = "uncertain: scores between matched pairs and captions of other pictures"
    else:
        words = "scores like a matched pair"
    return f"{words} (mismatch probability {probability:.2f})"


def calibration_summary(
    calibration: Calibration | None,
    score: np.ndarray,
    suspected: np.ndarray,
    fdr: float,
    mismatch: np.ndarray | None = None,
) -> tuple[float, tuple[float, float], CalibrationPart]:
    """The summary's calibrated numbers: the share of pairs as unrelated as a caption taken
    from another picture with its interval (from the decoys; without decoys, the mixture's
    estimate over the held-out ``score``, marked so), and how they were made, with the estimated
    error rates of dropping the ``suspected`` pairs by the mismatch probabilities ``mismatch``
    (default: the calibration's; with a person's answers, a judged pair's 0 or 1)."""
    if calibration is None:
        share = mismatched_share(score)
        return share.estimate, (share.low, share.high), CalibrationPart("mixture", MIXTURE_NOTE)
    probability = calibration.mismatch_probability if mismatch is None else mismatch
    false_drops, kept_mismatched = drop_errors(probability, suspected)
    part = CalibrationPart(
        "decoys",
        separation_note(calibration),
        decoys=calibration.decoys,
        level=calibration.level,
        lam=calibration.lam,
        separation_auc=round(calibration.separation_auc, 6),
        share_upper_bound=round(calibration.share_bound, 6),
        fdr=fdr,
        estimated_false_drop_share=round(false_drops, 6),
        estimated_kept_mismatched_share=round(kept_mismatched, 6),
    )
    interval = (round(calibration.share_low, 6), round(calibration.share_high, 6))
    return round(calibration.share, 6), interval, part


MIXTURE_NOTE = (
    "no decoy pairs were scored (this run's division scores have none): the share and the "
    "probabilities are a two-component mixture's, not calibrated"
)


def separation_note(calibration: Calibration) -> str:
    """What the numbers can be trusted for, in words."""
    width = calibration.share_high - calibration.share_low
    if calibration.share_high >= 1:
        return (
            f"the share's {calibration.level:.0%} interval reaches 100%: the held-out models cannot "
            "tell your pairs from captions of other pictures here, so these numbers say little "
            "(more pairs, or better embeddings, would let them)"
        )
    if calibration.share_low <= 0:
        return (
            f"the share's {calibration.level:.0%} interval reaches 0: this collection may hold no "
            "mismatched pair of the kind the scores see — check a sample (a near miss or a generic "
            "caption scores like a correct pair); none is suspected at any --fdr (the probabilities "
            "still rank the pairs: review the top of the list)"
        )
    if calibration.separation_auc < WEAK_SEPARATION:
        return (
            "the held-out models barely tell the pairs from captions of other pictures here "
            f"(estimated AUC {calibration.separation_auc:.2f}): the share is uncertain and few pairs "
            "can be suspected at a low error"
        )
    if width > 0.2:
        return f"the share's interval is wide ({width:.0%}): few pairs, or a weak separation"
    return (
        f"the held-out models tell matched pairs from captions of other pictures with an "
        f"estimated AUC of {calibration.separation_auc:.2f}"
    )
