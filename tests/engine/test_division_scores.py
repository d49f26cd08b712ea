"""Held-out pair scores wired into runs: the contrast score against a brute-force loop, refinement
rounds that still never score a pair with a model that trained on it, the scores cached in the run
folder, used by every division recipe and by the export, the ``holdout`` recipe, the oracle."""

import csv
import io
import json
import math
from dataclasses import replace

import numpy as np
import pytest
import torch
from sklearn.metrics import roc_auc_score

from mispair.config import load_config
from mispair.data.batching import TrainingPairs
from mispair.engine.assembly import load_run_data
from mispair.engine.export import export_training_pairs, pairs_csv
from mispair.engine.held_out import (
    FoldStash,
    HeldOutPlan,
    HeldOutScoring,
    HeldOutSeeds,
    RoundStart,
    Runtime,
    division_scores,
    held_out_scores,
    out_of_fold_scores,
    rounds,
    sampling,
    scorers,
)
from mispair.engine.held_out.contrast import contrast_scores
from mispair.engine.run import train_run
from mispair.errors import ConfigError
from tests.conftest import small_model

TINY = [
    "data.source=synthetic",
    "data.synthetic_images=120",
    "data.noise.rate=0.4",
    "data.noise.protocol=pmp",
    "model.embed_dim=64",
    "model.word_dim=32",
    "train.batch_size=32",
    "train.lr=0.002",
    "train.lr_decay_epochs=[]",
    "train.threads=1",
]
HELD_OUT = [
    "division.scored_by=out_of_fold",
    "division.folds=3",
    "division.epochs=8",
    "division.pair_score=contrast",
]


def test_contrast_scores_match_a_brute_force_loop():
    rng = np.random.default_rng(0)
    sims = torch.from_numpy(rng.normal(size=(4, 7))).float()
    paired = torch.tensor([0, 0, 1, 2, 3, 3, 3])
    tau = 0.3
    got = contrast_scores(sims, 4, paired, tau)
    for chunk in (1, 3):  # read a few images at a time: the same scores
        chunked = contrast_scores(lambda a, b: sims[a:b], 4, paired, tau, chunk=chunk)
        assert torch.allclose(chunked, got, atol=1e-5)
    for c in range(7):
        i = int(paired[c])
        t2i = sims[i, c] / tau - math.log(sum(math.exp(sims[j, c] / tau) for j in range(4)))
        rivals = [d for d in range(7) if int(paired[d]) != i or d == c]  # other images' captions, and c
        i2t = sims[i, c] / tau - math.log(sum(math.exp(sims[i, d] / tau) for d in rivals))
        assert float(got[c]) == pytest.approx(float((t2i + i2t) / 2), abs=1e-4)


def _setup(overrides=()):
    config = load_config(None, [*TINY, "method.loss=infonce", "train.epochs=8", *overrides])
    data = load_run_data(config)
    return config, data, TrainingPairs(data.train, data.train_tokens, data.noise.image_of_caption)


def test_a_refinement_round_trains_on_trusted_pairs_of_the_other_folds_only():
    config, data, train = _setup()
    trusted = np.random.default_rng(3).random(len(train)) < 0.6
    seen = []

    def record(trainer):
        seen.append(set(trainer.recipe.context.train.caption_ids.tolist()))
        trainer.train_epoch(0)

    scores = out_of_fold_scores(
        HeldOutScoring(config, HeldOutPlan(folds=3, score_kind="contrast")),
        data,
        train,
        runtime=Runtime(train_fold=record),
        round_start=RoundStart(trusted=trusted),
    )
    for k, trained in enumerate(seen):
        assert trained == set(np.flatnonzero((scores.fold[0] != k) & trusted).tolist())
    assert np.isfinite(scores.score).all() and (scores.score <= 0).all()  # log-probabilities


def test_repeated_partitions_each_hold_their_pairs_out_and_the_score_is_their_mean(tmp_path):
    config, data, train = _setup(["train.epochs=2"])
    seen = []

    def record(trainer):
        seen.append(set(trainer.recipe.context.train.caption_ids.tolist()))
        trainer.train_epoch(0)

    stash = FoldStash(tmp_path / "folds", "key")
    plan = HeldOutPlan(folds=3, repeats=2, score_kind="contrast")
    scores = out_of_fold_scores(
        HeldOutScoring(config, plan), data, train, runtime=Runtime(train_fold=record, stash=stash)
    )
    assert scores.fold.shape == (2, len(train)) and len(seen) == 6
    assert not np.array_equal(scores.fold[0], scores.fold[1])  # two partitions
    per_repeat = np.zeros((2, len(train)))
    for job, trained in enumerate(seen):
        repeat, k = divmod(job, 3)
        held_out = np.flatnonzero(scores.fold[repeat] == k)
        assert trained == set(np.flatnonzero(scores.fold[repeat] != k).tolist())
        per_repeat[repeat, held_out] = stash.load(0, job)[: len(held_out)]  # then its decoys'
    assert np.allclose(scores.score, per_repeat.mean(axis=0), atol=1e-6)
    single = out_of_fold_scores(
        HeldOutScoring(config, plan.but(repeats=1)), data, train, runtime=Runtime(train_fold=record)
    )
    assert np.array_equal(single.fold[0], scores.fold[0])  # the first repeat is the one-repeat scoring
    assert np.allclose(single.score, per_repeat[0], atol=1e-6)


def test_the_other_splits_are_scored_by_every_scorer_and_trained_on_by_none(tmp_path):
    """Cross-fitting: the dev/test pairs (``others``) get the mean of every scorer's score, each
    computed in groups of about a fold's size; no scorer trains on them."""
    config, data, train = _setup(["train.epochs=2"])
    others = TrainingPairs(data.dev, data.dev_tokens)
    models, trained = [], []

    def record(trainer):
        trained.append(set(trainer.recipe.context.train.caption_ids.tolist()))
        trainer.train_epoch(0)
        models.append(trainer.recipe.models[0])

    stash = FoldStash(tmp_path / "folds", "key")
    scores = out_of_fold_scores(
        HeldOutScoring(config, HeldOutPlan(folds=3, repeats=2, score_kind="contrast")),
        data,
        train,
        others=others,
        runtime=Runtime(train_fold=record, stash=stash),
    )
    assert len(models) == 6 and all(t <= set(range(len(train))) for t in trained)
    group = sampling.other_groups(others, -(-data.train.n_images // 3), config.train.seed)[0]
    sizes = np.bincount(np.unique(np.stack([group, others.image_of_caption]), axis=1)[0])
    assert abs(sizes.mean() - data.train.n_images / 3) <= data.train.n_images / 3  # about a fold's images
    per_scorer = []
    for job, model in enumerate(models):
        held_out = int((scores.fold[job // 3] == job % 3).sum())
        kept = stash.load(0, job)[held_out : held_out + len(others)]  # then the decoys' scores
        brute = np.zeros(len(others), dtype=np.float32)
        for g in np.unique(group):  # each group scored on its own, as a fold is
            members = np.flatnonzero(group == g)
            group_pairs = others.subset(members)
            brute[members] = held_out_scores(model.eval(), group_pairs, kind="contrast")
        assert np.allclose(kept, brute, atol=1e-5)
        per_scorer.append(kept)
    assert np.allclose(scores.others, np.mean(per_scorer, axis=0), atol=1e-5)


def test_scores_are_kept_in_the_run_folder_and_recomputed_when_the_settings_change(tmp_path, monkeypatch):
    config, data, train = _setup(HELD_OUT)
    cache = tmp_path / "pair_scores.npz"
    first = division_scores(config, data, train, Runtime(), cache=cache).train
    clean = ~data.noise.is_noisy
    assert roc_auc_score(clean, first) > 0.8

    def forbidden(*args, **kwargs):
        raise AssertionError("trained again")

    monkeypatch.setattr(rounds, "scored_round", forbidden)
    assert np.array_equal(division_scores(config, data, train, Runtime(), cache=cache).train, first)
    config.division.folds = 4  # other settings: the cached scores are not theirs
    with pytest.raises(AssertionError, match="trained again"):
        division_scores(config, data, train, Runtime(), cache=cache)
    config.division.scored_by = "in_sample"
    assert division_scores(config, data, train, Runtime(), cache=cache) is None


def test_an_interrupted_scoring_resumes_at_its_first_missing_fold(tmp_path, monkeypatch):
    config, data, train = _setup([*HELD_OUT, "division.rounds=2", "division.epochs=1"])
    whole = division_scores(config, data, train, Runtime()).train  # uninterrupted, nothing kept
    cache, trained = tmp_path / "pair_scores.npz", []
    real = scorers.train_scorer

    def interrupted_at_the_fifth(*args, **kwargs):  # round 2, fold 2 of 3
        if len(trained) == 4:
            raise KeyboardInterrupt
        trained.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(scorers, "train_scorer", interrupted_at_the_fifth)
    with pytest.raises(KeyboardInterrupt):
        division_scores(config, data, train, Runtime(), cache=cache)
    assert not cache.exists() and len(list(cache.with_suffix(".folds").glob("*.npz"))) == 4
    trained.clear()
    monkeypatch.setattr(scorers, "train_scorer", lambda *a, **k: trained.append(1) or real(*a, **k))
    resumed = division_scores(config, data, train, Runtime(), cache=cache).train
    assert len(trained) == 2  # the two missing folds only
    assert np.allclose(resumed, whole, atol=1e-5)  # as if never interrupted
    assert cache.is_file() and not cache.with_suffix(".folds").exists()


@pytest.fixture(scope="module")
def holdout_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("holdout")
    # one run for both holdout tests: it re-pairs suspected captions from its fourth epoch
    overrides = [*TINY, "recipe=holdout", "train.epochs=6", "method.rematch_from=3", *HELD_OUT]
    with small_model():  # the tests' model, as the module's other runs train
        config = load_config(None, [*overrides, f"output={out}"])
    return config, train_run(config, progress=False, log=lambda m: None)


def test_holdout_trains_on_held_out_division_and_exports_its_scores(holdout_run):
    config, summary = holdout_run
    assert summary["test"]["rsum"] > 200  # random scores give about 16 on 200 test images
    rows = list(csv.DictReader(io.StringIO(pairs_csv(export_training_pairs(config)))))
    noisy = np.array([r["truly_mismatched"] == "True" for r in rows])
    clean_prob = np.array([float(r["clean_prob"]) for r in rows])
    score = np.array([float(r["division_score"]) for r in rows])
    assert roc_auc_score(~noisy, clean_prob) > 0.8 and roc_auc_score(~noisy, score) > 0.8
    with np.load(config.output_dir / "pair_scores.npz") as saved:
        assert np.allclose(saved["score"], score, atol=1e-5)


def test_holdout_without_held_out_scores_is_a_one_line_error_before_anything_is_written(tmp_path):
    config = load_config(None, [*TINY, "recipe=holdout", "train.epochs=1", f"output={tmp_path / 'run'}"])
    with pytest.raises(ConfigError, match=r"^recipe holdout: needs held-out pair scores"):
        train_run(config, progress=False, log=lambda m: None)
    assert not (tmp_path / "run").exists()


def test_an_oracle_without_noise_is_a_one_line_error_before_anything_is_written(tmp_path):
    clean = [o for o in TINY if not o.startswith("data.noise")]
    overrides = [*clean, "data.noise.oracle=true", "train.epochs=1", f"output={tmp_path / 'run'}"]
    config = load_config(None, overrides)
    with pytest.raises(ConfigError, match=r"^data\.noise\.oracle: needs a noise record"):
        train_run(config, progress=False, log=lambda m: None)
    assert not (tmp_path / "run").exists()


def test_the_oracle_trains_on_the_truly_clean_pairs_only(tmp_path, monkeypatch):
    from mispair.engine import run

    seen = {}
    real = run._train

    def spy(config, recipe, *args, **kwargs):
        seen["train"], seen["noise"] = recipe.context.train, recipe.context.noise
        return real(config, recipe, *args, **kwargs)

    monkeypatch.setattr(run, "_train", spy)
    config = load_config(None, [*TINY, "data.noise.oracle=true", "train.epochs=1", f"output={tmp_path}"])
    train_run(config, progress=False, log=lambda m: None)
    noise = load_run_data(config).noise
    clean = np.flatnonzero(~noise.is_noisy)
    assert len(seen["train"]) == len(clean) and seen["noise"] is None
    assert np.array_equal(seen["train"].image_of_caption, noise.image_of_caption[clean])
    assert np.array_equal(seen["train"].image_of_caption, load_run_data(config).train.image_of_caption[clean])


def test_holdout_re_pairs_suspected_captions_with_the_images_they_were_written_for(holdout_run):
    config, _ = holdout_run  # re-pairing from the fourth epoch
    log = [json.loads(line) for line in (config.output_dir / "log.jsonl").read_text().splitlines()]
    assert all("rematch/fraction" not in r for r in log[:3])
    rematched = [r for r in log[3:]]
    assert all(r["rematch/fraction"] > 0 for r in rematched)
    # 5 captions per image: a suspected caption's chance of landing on its own image is small
    assert min(r["rematch/precision"] for r in rematched) > 0.5


def test_a_fold_larger_than_the_contrast_cap_is_scored_in_content_groups(tmp_path, monkeypatch):
    """With :data:`~mispair.engine.held_out.sampling.CONTRAST_IMAGES` below a fold's images, each held-out
    pair's contrast weighs it against its group only (groups of about that many images, whole
    content groups): equal to a brute-force loop over the groups."""
    monkeypatch.setattr(sampling, "CONTRAST_IMAGES", 12)
    config, data, train = _setup(["train.epochs=1"])
    models = []

    def record(trainer):
        trainer.train_epoch(0)
        models.append(trainer.recipe.models[0])

    stash = FoldStash(tmp_path / "folds", "key")
    plan = HeldOutPlan(folds=3, score_kind="contrast")
    scores = out_of_fold_scores(
        HeldOutScoring(config, plan), data, train, runtime=Runtime(train_fold=record, stash=stash)
    )
    content = sampling.fold_groups(train.pairs.images, train.tokens, train.image_of_caption, 3)
    for k, model in enumerate(models):
        held = train.subset(np.flatnonzero(scores.fold[0] == k))
        seed = HeldOutSeeds.of(config.train.seed, 1, 3).scorers[0][k]
        group = sampling.contrast_groups(content, held, seed)
        images = [len(np.unique(held.image_of_caption[group == g])) for g in np.unique(group)]
        assert len(images) > 1 and max(images) <= 2 * 12  # about the cap, whole content groups
        brute = np.zeros(len(held), dtype=np.float32)
        for g in np.unique(group):
            members = np.flatnonzero(group == g)
            brute[members] = held_out_scores(model.eval(), held.subset(members), kind="contrast")
        assert np.allclose(stash.load(0, k)[: len(held)], brute, atol=1e-5)


def test_the_structure_and_gap_scores_are_the_core_functions_on_the_held_out_embeddings():
    """``contrast_structure`` and ``gap_corrected`` (issue 37): GSC's checked probability of the
    fold's contrast scores and MGCS's corrected similarity, on the pooled embeddings of the fold's
    pairs under the scorer (recomputed here from the encoders)."""
    from mispair.division.gap import gap_corrected_similarity
    from mispair.division.structure import structure_checked_probability

    config, data, train = _setup(HELD_OUT)
    model = scorers.train_scorer(config, data, train.subset(np.arange(0, len(train), 2)), torch.device("cpu"))
    held = train.subset(np.arange(1, len(train), 2))
    batch = held.batch(np.arange(len(held)))
    images = model.encode_images(batch.images).pooled
    texts = model.encode_texts(batch.tokens, batch.lengths).pooled
    contrast = held_out_scores(model, held, kind="contrast")
    checked = held_out_scores(model, held, kind="contrast_structure")
    assert np.allclose(checked, structure_checked_probability(images, texts, contrast), atol=1e-5)
    corrected = held_out_scores(model, held, kind="gap_corrected")
    assert np.allclose(corrected, gap_corrected_similarity(images, texts).numpy(), atol=1e-5)
    clean = ~data.noise.is_noisy[1::2]
    assert roc_auc_score(clean, checked) > 0.7  # it still detects the planted mismatches


def test_a_scorer_trains_on_a_seeded_sample_of_its_folds_when_they_outnumber_scorer_pairs():
    """``division.scorer_pairs`` (issue 35): each scorer trains on that many of the other folds'
    pairs, a sample that differs between scorers and repeats with the seed; every pair is still
    scored by a scorer that never saw it; below the cap nothing changes."""
    config, data, train = _setup(["train.epochs=1", "division.scorer_pairs=40"])
    runs = []

    def record(trainer):
        runs.append(trainer.recipe.context.train.caption_ids.copy())
        trainer.train_epoch(0)

    plan = HeldOutPlan.of(config.division).but(folds=3)
    scores = out_of_fold_scores(HeldOutScoring(config, plan), data, train, runtime=Runtime(train_fold=record))
    assert len(runs) == 3 and all(len(r) == 40 for r in runs)
    for k, trained in enumerate(runs):
        assert set(trained.tolist()) <= set(np.flatnonzero(scores.fold[0] != k).tolist())
    assert len({tuple(r) for r in runs}) == 3
    again = []
    out_of_fold_scores(
        HeldOutScoring(config, plan),
        data,
        train,
        runtime=Runtime(train_fold=lambda t: again.append(t.recipe.context.train.caption_ids.copy())),
    )
    assert all(np.array_equal(a, b) for a, b in zip(runs, again))
    assert np.isfinite(scores.score).all() and len(scores.score) == len(train)
    roomy, _, _ = _setup(["train.epochs=1", f"division.scorer_pairs={len(train)}"])
    full = []
    out_of_fold_scores(
        HeldOutScoring(roomy, HeldOutPlan.of(roomy.division).but(folds=3)),
        data,
        train,
        runtime=Runtime(train_fold=lambda t: full.append(len(t.recipe.context.train))),
    )
    assert full == [int((scores.fold[0] != k).sum()) for k in range(3)]


def test_the_reference_division_is_one_round_of_scorers_trained_on_the_truly_matched_pairs(tmp_path):
    overrides = [
        "recipe=holdout",
        "division.scored_by=out_of_fold",
        "division.folds=3",
        "division.rounds=2",
        "division.epochs=2",
        "division.pair_score=contrast",
        "division.reference=true",
    ]
    config, data, train = _setup(overrides)
    got = division_scores(config, data, train, Runtime())
    want = out_of_fold_scores(
        HeldOutScoring(HeldOutScoring.of(config).scorer, HeldOutPlan(folds=3, score_kind="contrast")),
        data,
        train,
        round_start=RoundStart(trusted=~data.noise.is_noisy),
    )
    np.testing.assert_array_equal(got.train, want.score)
    honest = division_scores(
        replace(config, division=replace(config.division, reference=False)), data, train, Runtime()
    )
    assert not np.array_equal(honest.train, got.train)


def test_a_run_asking_for_the_reference_division_without_noise_fails_before_anything_is_written(tmp_path):
    clean = [o for o in TINY if not o.startswith("data.noise")]
    overrides = [*clean, "recipe=holdout", "division.scored_by=out_of_fold", "division.reference=true"]
    config = load_config(None, [*overrides, "train.epochs=1", f"output={tmp_path / 'run'}"])
    with pytest.raises(ConfigError, match=r"^division\.reference: needs a training split with planted noise"):
        train_run(config, progress=False, log=lambda m: None)
    assert not (tmp_path / "run").exists()


def test_a_reference_division_without_planted_noise_is_a_one_line_error():
    clean = [o for o in TINY if not o.startswith("data.noise")]
    config = load_config(None, [*clean, "division.scored_by=out_of_fold", "division.reference=true"])
    data = load_run_data(config)
    train = TrainingPairs(data.train, data.train_tokens, data.train.image_of_caption)
    with pytest.raises(ConfigError, match=r"^division\.reference: needs a training split with planted noise"):
        division_scores(config, data, train, Runtime())


def test_the_score_kinds_a_config_names_are_the_table_the_check_reads(tmp_path):
    """``division.pair_score``'s values are :data:`SCORE_KINDS`' names; a name outside the table
    is a one-line error before anything is written."""
    from typing import get_args

    from mispair.config import DivisionConfig
    from mispair.engine.checks import check_run_config
    from mispair.engine.held_out import SCORE_KINDS, ScoreKind

    field_type = DivisionConfig.__dataclass_fields__["pair_score"].type
    assert set(get_args(ScoreKind)) == set(SCORE_KINDS)
    assert "contrast" in field_type and "gap_corrected" in field_type
    config = load_config(None, [*TINY, "train.epochs=1"])
    config.division.pair_score = "telepathy"
    with pytest.raises(ConfigError, match=r"^division\.pair_score: 'telepathy' is not a held-out score kind"):
        check_run_config(config)
