"""The division keys of earlier versions are read under their new names, with a one-line note."""

import pytest

from mispair.config import RENAMED_DIVISION_KEYS, load_config
from mispair.errors import ConfigError


def test_old_division_keys_read_as_the_new_ones():
    old = ["division.scores=out_of_fold", "division.score=contrast", "division.scorer={loss: triplet}"]
    new = [
        "division.scored_by=out_of_fold",
        "division.pair_score=contrast",
        "division.scorer_options={loss: triplet}",
    ]
    with pytest.warns(FutureWarning) as noted:
        config = load_config(None, old)
    assert config.division == load_config(None, new).division
    assert config.division.scored_by == "out_of_fold" and config.division.scorer_options == {
        "loss": "triplet"
    }
    assert sorted(str(w.message).split(": ", 1)[1] for w in noted) == sorted(
        f"division.{a} is now division.{b}" for a, b in RENAMED_DIVISION_KEYS.items()
    )


@pytest.mark.parametrize("value", [0, 1, -0.5, 1.5])
def test_the_division_threshold_is_a_probability(value):
    with pytest.raises(ConfigError, match=r"division\.p_threshold: between 0 and 1"):
        load_config(None, [f"division.p_threshold={value}"])
