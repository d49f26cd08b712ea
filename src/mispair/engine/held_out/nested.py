"""Nested trust: a refinement round whose trust was never decided by a model that saw the fold
it scores.

A refinement round trains fold ``k``'s scorer on the pairs of the other folds that the previous
round trusted. When that trust came from the previous round's scorers, each trained on every
fold but its own, the trust of fold ``j``'s pairs was decided by a model that trained on fold
``k``: the pairs of fold ``k``, mismatched ones too, then score above its decoys
(``benchmarks/refinement_leak.py``). Here the trust of each set of folds is decided by scorers
that hold that set out, round by round down a lattice of held-out sets.

With ``R`` rounds and ``F`` folds, round ``t < R`` trains one scorer per set ``S`` of ``R − t + 1``
folds, on the pairs outside ``S`` (trusted, from round 2 on, as decided for ``S`` below), and scores
the pairs of each fold ``j`` of ``S`` with it. The trust of the pairs outside a set ``T`` of
``R − t`` folds is the clean split (:func:`~mispair.division.scores.clean_split`) of their scores,
fold ``j`` scored by the scorer of ``T ∪ {j}``, which saw none of ``T``. The last round's scorer of
fold ``k`` trains on the trust of ``{k}``. Scorers per partition: ``C(F, 2) + … + C(F, R)``, for
two rounds of five folds ten (as many as three leaky rounds' fifteen less the last five), each on
``F − R`` of the ``F`` folds.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from itertools import combinations

import numpy as np

from mispair.data.batching import TrainingPairs
from mispair.distributed import from_main, sum_over
from mispair.division.scores import TRAINING_MIXTURE, clean_split
from mispair.engine.assembly import RunData
from mispair.engine.held_out.answers import with_answers
from mispair.engine.held_out.kinds import KindSettings, scores_and_decoys
from mispair.engine.held_out.plan import HeldOutScoring, Runtime
from mispair.engine.held_out.sampling import NO_DECOYS, DealtPairs, contrast_groups, grouped_scores, sampled
from mispair.engine.held_out.scorers import ScorerRun, trained_scorers
from mispair.progress import progress_bar
from mispair.seeds import child_seed

HeldSet = tuple[int, ...]
"""A set of folds held out together, sorted."""


def nested_trust(
    scoring: HeldOutScoring, data: RunData, train: TrainingPairs, dealt: DealtPairs, runtime: Runtime
) -> np.ndarray:
    """``[repeats × folds, n_pairs]`` bool: for each job (``repeat × folds + fold``), the pairs of the
    other folds its last-round scorer trains on, decided down the lattice of held-out sets of
    ``dealt.fold`` (module docstring). Every rank returns every row: the lattice's scorers are
    dealt over ``runtime.shard``'s ranks and their scores summed."""
    plan = scoring.plan
    if not 1 < plan.rounds < plan.folds:
        raise ValueError(f"nested trust needs 1 < rounds < folds, got {plan.rounds} and {plan.folds}")
    trust: dict[tuple[int, HeldSet], np.ndarray] = {}
    for size in range(plan.rounds, 1, -1):
        trust = _trust_below(scoring, data, train, dealt, runtime, size, trust)
    trusted = np.zeros((plan.repeats * plan.folds, len(train)), dtype=bool)
    for (repeat, (k,)), mask in trust.items():
        trusted[repeat * plan.folds + k] = mask
    return trusted


def _trust_below(
    scoring: HeldOutScoring,
    data: RunData,
    train: TrainingPairs,
    dealt: DealtPairs,
    runtime: Runtime,
    size: int,
    trust: dict[tuple[int, HeldSet], np.ndarray],
) -> dict[tuple[int, HeldSet], np.ndarray]:
    """One round of the lattice: a scorer per ``(repeat, set of size folds)`` trained outside its
    set (on ``trust`` of that set where given; read back from ``runtime.stash`` when an earlier run
    finished it), and from their scores the trust of every set one fold smaller: ``{(repeat, set):
    [n_pairs] bool}`` (False inside the set)."""
    plan = scoring.plan
    below = [(r, held) for r in range(plan.repeats) for held in combinations(range(plan.folds), size - 1)]
    index = {key: i for i, key in enumerate(below)}
    scores = np.zeros((len(below), len(train)), dtype=np.float32)
    sets = [(r, held) for r in range(plan.repeats) for held in combinations(range(plan.folds), size)]
    stash, stage = runtime.stash, f"trust{size}"  # its scorers stashed beside the rounds', to resume
    todo = []
    for job in range(runtime.shard.rank, len(sets), runtime.shard.world):
        repeat, held = sets[job]
        scored = np.flatnonzero(np.isin(dealt.fold[repeat], held))  # held's folds, in pair order
        kept = None if stash is None else stash.load(stage, job)
        if kept is not None and len(kept) == len(scored):
            _fill(scores, index, repeat, held, dealt.fold[repeat], scored, kept)
        else:
            todo.append(_scorer(scoring, dealt.fold[repeat], held, trust.get((repeat, held)), job, repeat))
    settings = KindSettings(plan.tau, scoring.scorer.train.eval_batch_size, runtime.device)
    trained = trained_scorers(todo, data, train, runtime.device, runtime.train_fold)
    desc = f"nested trust ({size} folds out)"
    for run, model in progress_bar(
        trained, total=len(todo), desc=desc, disable=not runtime.progress, leave=False
    ):
        repeat, held = sets[run.job]
        score = partial(scores_and_decoys, model, kind=plan.score_kind, settings=settings)
        scored = np.flatnonzero(np.isin(dealt.fold[repeat], held))
        kept = np.zeros(len(scored), dtype=np.float32)
        for j in held:
            in_fold = np.flatnonzero(dealt.fold[repeat][scored] == j)
            fold_pairs = train.subset(scored[in_fold])
            group = contrast_groups(dealt.content, fold_pairs, run.seed)
            kept[in_fold] = grouped_scores(score, fold_pairs, group, NO_DECOYS)[0]
        if stash is not None:
            stash.save(stage, run.job, kept)
        _fill(scores, index, repeat, held, dealt.fold[repeat], scored, kept)
    scores = sum_over(runtime.shard, scores)
    return from_main(runtime.shard, partial(_trusted, scores, below, dealt.fold, plan.p_threshold))


def _fill(
    scores: np.ndarray,
    index: dict[tuple[int, HeldSet], int],
    repeat: int,
    held: HeldSet,
    fold: np.ndarray,
    scored: np.ndarray,
    kept: np.ndarray,
) -> None:
    """The scores ``kept [len(scored)]`` of the set ``held``'s scorer (of the pairs ``scored``, its
    folds') into ``scores``: fold ``j``'s into the row of the set ``held`` less ``j``."""
    for j in held:
        in_fold = fold[scored] == j
        rest = tuple(f for f in held if f != j)
        scores[index[(repeat, rest)], scored[in_fold]] = kept[in_fold]


def _trusted(
    scores: np.ndarray, below: list[tuple[int, HeldSet]], fold: np.ndarray, p_threshold: float
) -> dict[tuple[int, HeldSet], np.ndarray]:
    """The trust of each ``(repeat, set)`` of ``below``: the clean split of its row of ``scores
    [len(below), n_pairs]`` over the pairs outside the set (fitted once, on rank 0)."""
    trust = {}
    for (repeat, held), row in zip(below, scores, strict=True):
        outside = np.flatnonzero(~np.isin(fold[repeat], held))
        mask = np.zeros(len(row), dtype=bool)
        mask[outside] = clean_split(row[outside], p_threshold, TRAINING_MIXTURE)
        trust[(repeat, held)] = mask
    return trust


def _scorer(
    scoring: HeldOutScoring,
    fold: np.ndarray,
    held: HeldSet,
    trusted: np.ndarray | None,
    job: int,
    repeat: int,
) -> ScorerRun:
    """The scorer that holds out the folds ``held`` of ``fold [n_pairs]``: it trains on the pairs
    outside them (those ``trusted`` only, where given; at most ``plan.trust_pairs`` of them, else
    ``plan.scorer_pairs``), seeded by its repeat and set."""
    seed = child_seed(scoring.seeds.repeats[repeat], "trust", sum(1 << f for f in held))
    held_out = np.isin(fold, held)
    training = ~held_out
    if trusted is not None:
        training &= trusted
    training = with_answers(training, held_out, scoring.judged)
    config = replace(scoring.scorer, train=replace(scoring.scorer.train, seed=seed))
    plan = scoring.plan
    most = plan.scorer_pairs if plan.trust_pairs is None else plan.trust_pairs
    return ScorerRun(job, config, sampled(np.flatnonzero(training), most, seed))
