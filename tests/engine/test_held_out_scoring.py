"""The division section is read once, into a HeldOutScoring, and the held-out scoring below it
reads that object, not the run's config."""

from dataclasses import replace

from mispair.config import load_config
from mispair.engine.held_out import HeldOutPlan, HeldOutScoring, scorer_config

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
    assert scoring.scorer == scorer_config(config)
    assert scoring.scorer.recipe == "vse" and scoring.scorer.method == dict(config.division.scorer_options)
    assert scoring.scorer.train == replace(config.train, epochs=2, lr_decay_epochs=[])
    assert config.train.epochs == 8 and config.train.lr_decay_epochs == [5]  # the run's own untouched
