"""The division section is read once, into a HeldOutScoring, and the held-out scoring below it
reads that object, not the run's config."""

from dataclasses import replace

from mispair.config import load_config
from mispair.engine.held_out import HeldOutPlan, HeldOutScoring, HeldOutSeeds
from mispair.seeds import child_seed

OVERRIDES = [
    "data.source=synthetic",
    "train.epochs=8",
    "train.lr_decay_epochs=[5]",
    "division.scored_by=out_of_fold",
    "division.folds=3",
    "division.epochs=2",
    "division.pair_score=contrast",
]


def test_the_scoring_holds_the_plan_and_the_scorers_run_of_the_division_section():
    config = load_config(None, OVERRIDES)
    scoring = HeldOutScoring.of(config)
    assert scoring.scored_by == "out_of_fold"
    assert scoring.plan == HeldOutPlan.of(config.division)
    assert scoring.plan.folds == 3 and scoring.plan.score_kind == "contrast"
    assert scoring.scorer.recipe == "vse" and scoring.scorer.method == dict(config.division.scorer_options)
    assert scoring.scorer.train == replace(config.train, epochs=2, lr_decay_epochs=[])
    assert config.train.epochs == 8 and config.train.lr_decay_epochs == [5]  # the run's own untouched


def test_the_seeds_are_derived_once_from_the_scorers_seed():
    """Every seed below the entry comes from :class:`HeldOutSeeds`, derived with ``child_seed``
    when the scoring is built: the repeats' partitions, each scorer's, the decoys'."""
    config = load_config(None, [*OVERRIDES, "division.repeats=2", "train.seed=5"])
    seeds = HeldOutScoring.of(config).seeds
    assert seeds == HeldOutSeeds.of(5, repeats=2, folds=3)
    assert seeds.repeats == (child_seed(5, "repeat", 0), child_seed(5, "repeat", 1)) and seeds.repeats[0] == 5
    assert seeds.scorers[1][2] == child_seed(seeds.repeats[1], "fold", 2, 3)
    assert seeds.decoys == child_seed(5, "decoys") and seeds.other_decoys == seeds.decoys + 1
    assert seeds.other_groups == 5
    assert HeldOutScoring.of(config).but(repeats=1).seeds.repeats == (5,)
