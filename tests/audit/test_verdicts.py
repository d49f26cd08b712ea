"""The audit's verdicts follow the calibration: where the share's interval reaches 0 no pair is
suspected, not even one whose mismatch probability reads 1.00 (the cut's threshold is then 1.0,
which such a pair reaches); the pairs table, the page and ``keep()`` read the same verdicts."""

import numpy as np
import pandas as pd

from mispair.audit.page_data import FIELDS, page_data
from mispair.audit.run import Verdicts
from mispair.division.calibration import Stratum, calibrate


class _Scored:
    """What :meth:`Verdicts.of` reads of the audited pairs: their scores and calibration."""

    def __init__(self, score: np.ndarray, null: np.ndarray) -> None:
        self.score, self.null = score, null

    def calibration(self):
        return calibrate([Stratum(self.score, self.null)], resamples=100)


def _clean_with_a_certain_looking_pair() -> _Scored:
    """A clean collection (10% hard pairs scored like the decoys' upper half) whose lowest pair
    reads 1.00 while the share's interval reaches 0: the first seed that gives one."""
    for seed in range(40):
        rng = np.random.default_rng(seed)
        hard = rng.random(300) < 0.1
        scored = _Scored(
            np.where(hard, rng.normal(0.8, 1, 300), rng.normal(3, 1, 300)), rng.normal(0, 1, 1200)
        )
        found = scored.calibration()
        if found.share_low == 0 and found.mismatch_probability.max() == 1.0:
            return scored
    raise AssertionError("no seed gave a clean collection with a pair at 1.00")


def test_no_pair_is_suspected_where_the_interval_reaches_zero_even_at_probability_one():
    scored = _clean_with_a_certain_looking_pair()
    verdicts = Verdicts.of(scored, 0.5, 0.1)  # type: ignore[arg-type]
    assert (verdicts.mismatch >= verdicts.threshold).any()  # what the threshold alone would suspect
    assert not verdicts.suspected.any()


def test_a_dirty_collection_is_suspected_at_its_threshold():
    rng = np.random.default_rng(0)
    mismatched = rng.random(2000) < 0.3
    scored = _Scored(
        np.where(mismatched, rng.normal(0, 1, 2000), rng.normal(3, 1, 2000)), rng.normal(0, 1, 8000)
    )
    verdicts = Verdicts.of(scored, 0.5, 0.1)  # type: ignore[arg-type]
    assert verdicts.suspected.sum() > 0.8 * mismatched.sum()
    assert np.array_equal(verdicts.suspected, verdicts.mismatch >= verdicts.threshold)


def test_the_page_marks_the_rows_the_table_suspects_not_those_at_the_threshold():
    table = pd.DataFrame(
        {
            "pair_id": ["a", "b"],
            "image_id": ["x.png", "y.png"],
            "caption": ["one", "two"],
            "mismatch_probability": [1.0, 0.2],
            "held_out_score": [-3.0, 1.0],
            "split": ["train", "train"],
            "why": ["", ""],
            "duplicate_image_of": ["", ""],
            "suspected": [False, False],
        }
    )
    script = page_data(table, {}, audit="0" * 16, threshold=1.0)
    assert '"suspected"' in script and FIELDS[-1] == "suspected"
    import json

    data = json.loads(script[script.index("{") : script.rindex("}") + 1])
    assert [row[FIELDS.index("suspected")] for row in data["rows"]] == [False, False]
