"""``division.trust_pairs``: the most pairs a nested-trust scorer trains on (a seeded sample of the
pairs outside the folds it holds out), the last round's out-of-fold scorers left to
``scorer_pairs``; unset, the trust scorers take ``scorer_pairs`` as before."""

import numpy as np
import pytest

from mispair.config import load_config
from mispair.engine.held_out import HeldOutPlan, HeldOutScoring, Runtime
from mispair.engine.held_out.rounds import refined_out_of_fold_scores
from mispair.errors import ConfigError
from tests.engine.test_division_scores import _setup


def trained_sets(plan, scorer_pairs=None):
    """The pairs each scorer of a nested-trust scoring under ``plan`` trained on, in training
    order (the trust scorers first), with the folds of its partition."""
    config, data, train = _setup([f"division.scorer_pairs={scorer_pairs}"] if scorer_pairs else [])
    seen = []

    def record(trainer):
        seen.append(trainer.recipe.context.train.caption_ids.copy())
        trainer.train_epoch(0)

    scoring = HeldOutScoring(HeldOutScoring.of(config).scorer, plan)
    scores = refined_out_of_fold_scores(scoring, data, train, runtime=Runtime(train_fold=record))
    return seen, scores.fold[0], len(train)


NESTED = HeldOutPlan(folds=3, rounds=2, nested_trust=True, score_kind="contrast")


def test_each_trust_scorer_trains_on_a_seeded_sample_of_trust_pairs_outside_the_folds_it_holds_out():
    seen, fold, n = trained_sets(NESTED.but(trust_pairs=25))
    uncapped, _, _ = trained_sets(NESTED)
    assert len(seen) == len(uncapped) == 3 + 3  # a scorer per two folds held out, then one per fold
    for capped, full in zip(seen[:3], uncapped[:3]):
        assert len(full) > 25 and len(capped) == 25
        assert set(capped.tolist()) <= set(full.tolist())  # outside the held-out folds
    assert len({tuple(s) for s in seen[:3]}) == 3  # each scorer its own sample
    for trained in seen[3:]:  # the last round's scorers: every trusted pair outside their fold
        held = set(np.unique(fold)) - set(fold[trained].tolist())
        assert len(held) == 1 and len(trained) > 25
    again, _, _ = trained_sets(NESTED.but(trust_pairs=25))
    assert all(np.array_equal(a, b) for a, b in zip(seen, again))
    roomy, _, _ = trained_sets(NESTED.but(trust_pairs=n))
    assert all(np.array_equal(a, b) for a, b in zip(roomy[:3], uncapped[:3]))  # a cap above: as before


def test_unset_the_trust_scorers_take_scorer_pairs():
    seen, _, _ = trained_sets(NESTED.but(scorer_pairs=30), scorer_pairs=30)
    assert all(len(s) == 30 for s in seen)
    both, _, _ = trained_sets(NESTED.but(scorer_pairs=30, trust_pairs=20), scorer_pairs=30)
    assert [len(s) for s in both] == [20] * 3 + [30] * 3


def test_the_division_section_carries_trust_pairs_into_the_plan():
    config = load_config(None, ["division.scored_by=out_of_fold", "division.trust_pairs=5000"])
    assert HeldOutPlan.of(config.division).trust_pairs == 5000
    assert HeldOutPlan.of(load_config(None, []).division).trust_pairs is None


@pytest.mark.parametrize("value", [0, -3])
def test_a_trust_pairs_below_one_is_one_error_line(value):
    with pytest.raises(ConfigError, match=r"division\.trust_pairs: at least 1") as error:
        load_config(None, [f"division.trust_pairs={value}"])
    assert "\n" not in str(error.value)


def test_unset_trust_pairs_keeps_the_score_cache_key_of_before_and_a_cap_changes_it():
    """A score cache written before the field existed is read again (its key is the settings'
    digest without ``trust_pairs``, recomputed here as it was then); a cap is a new key."""
    import hashlib
    import json
    from dataclasses import asdict

    from mispair.engine.held_out.answers import answers_key
    from mispair.engine.held_out.entry import _scores_key
    from mispair.engine.held_out.sampling import DECOYS_PER_PAIR, FOLDS_BY

    config, _, train = _setup([])
    scoring = HeldOutScoring.of(config)
    settings = {k: v for k, v in asdict(scoring.scorer).items() if k not in ("name", "output")}
    for key in ("answers", "trust_pairs"):
        settings["division"].pop(key)
    settings["folds_by"], settings["decoys_per_pair"] = FOLDS_BY, DECOYS_PER_PAIR
    before = hashlib.blake2b(json.dumps(settings, sort_keys=True, default=str).encode(), digest_size=16)
    before.update(np.ascontiguousarray(train.image_of_caption).tobytes())
    before.update(answers_key(None).encode())
    assert _scores_key(scoring, train) == before.hexdigest()
    capped, _, _ = _setup(["division.trust_pairs=5000"])  # the same run but for the cap
    assert _scores_key(HeldOutScoring.of(capped), train) != _scores_key(scoring, train)
