"""Search against independent references: exact search against the all-pairs engine's matrix,
approximate indexes against exact search, reranking against the head's full ranking, and the
protocol from top-k lists against the protocol from the full matrix."""

import numpy as np
import pytest
import torch

pytest.importorskip("faiss")

from mispair.data.pairset import PairSet
from mispair.data.precomp import read_precomp, write_precomp
from mispair.data.synthetic import make_synthetic
from mispair.encoding import similarity_matrix
from mispair.engine.metrics import (
    rank_metrics,
    retrieval_metrics,
)
from mispair.engine.run import evaluate_checkpoint
from mispair.engine.trained import TrainedRun, load_checkpoint, save_checkpoint
from mispair.errors import ConfigError
from mispair.search import Index, IndexSpec, evaluate_index
from mispair.search.cache import EncodedItems
from mispair.search.evaluation import list_ranks


def full_matrix(checkpoint, pairs: PairSet) -> np.ndarray:
    """``[n_images, n_captions]``: the all-pairs engine's similarities of ``pairs`` (averaged over
    the checkpoint's models), as evaluation computes them."""
    run = TrainedRun.open(checkpoint, "cpu")
    return similarity_matrix(run.models, pairs, run.tokens(pairs)).numpy()


def top_k(scores: np.ndarray, k: int) -> np.ndarray:
    """``[q, k]`` indices of each row's ``k`` largest scores, best first."""
    return np.argsort(-scores, axis=1, kind="stable")[:, :k]


@pytest.fixture(scope="module")
def two_models(cosine_checkpoint, tmp_path_factory):
    """The cosine run's checkpoint with a second, perturbed model (as co-training keeps two)."""
    state = load_checkpoint(cosine_checkpoint)
    gen = torch.Generator().manual_seed(0)
    second = {
        k: v + 0.3 * torch.randn(v.shape, generator=gen) if v.is_floating_point() else v
        for k, v in state["models"][0].items()
    }
    state["models"] = [state["models"][0], second]
    path = tmp_path_factory.mktemp("two") / "best.pt"
    save_checkpoint(path, {k: v for k, v in state.items() if k != "format"})
    return path


@pytest.mark.parametrize("models", ["one", "two"])
def test_exact_search_returns_the_all_pairs_engines_top_k(collection, cosine_checkpoint, two_models, models):
    checkpoint = cosine_checkpoint if models == "one" else two_models
    index = Index.build(checkpoint, collection, split="test")
    pairs = read_precomp(collection, "test")
    sims = full_matrix(checkpoint, pairs)
    scores, ids = index.search_vectors(index.vectors("captions"), 10, "images")  # text → images
    np.testing.assert_array_equal(ids, top_k(sims.T, 10))
    np.testing.assert_allclose(scores, np.take_along_axis(sims.T, ids, 1), atol=1e-5)
    scores, ids = index.search_vectors(index.vectors("images"), 10, "captions")  # image → captions
    np.testing.assert_array_equal(ids, top_k(sims, 10))
    np.testing.assert_allclose(scores, np.take_along_axis(sims, ids, 1), atol=1e-5)
    for caption in (0, 37, 199):  # through the text query path: the caption's own words
        hits = index.search(pairs.captions[caption], k=5)
        assert [h.image for h in hits] == top_k(sims.T, 5)[caption].tolist()
        assert [h.caption for h in hits] == [pairs.captions[5 * h.image] for h in hits]  # first caption


def test_approximate_indexes_against_exact_search(collection, cosine_checkpoint):
    exact = Index.build(cosine_checkpoint, collection)
    queries = exact.vectors("captions")
    _, truth = exact.search_vectors(queries, 10, "images")
    ivf = Index.build(cosine_checkpoint, collection, spec=IndexSpec("ivf", nlist=8, nprobe=8))
    np.testing.assert_array_equal(ivf.search_vectors(queries, 10, "images")[1], truth)  # every cell: exact
    few = ivf.search_vectors(queries, 10, "images", IndexSpec("ivf", nlist=8, nprobe=1))[1]
    assert (few >= -1).all() and ((few[:, :, None] == truth[:, None]).any(2).mean()) < 1  # one cell: not
    hnsw = Index.build(cosine_checkpoint, collection, spec=IndexSpec("hnsw", m=8, ef_search=160))
    found = hnsw.search_vectors(queries, 10, "images")[1]
    assert (found[:, :, None] == truth[:, None]).any(2).mean() >= 0.95
    np.testing.assert_allclose(hnsw.vectors("images"), exact.vectors("images"))


def test_reranking_the_top_100_follows_the_heads_full_ranking(collection, sgr_checkpoint):
    index = Index.build(sgr_checkpoint, collection)  # all 160 images, 800 captions
    parts = [read_precomp(collection, s) for s in ("train", "dev", "test")]
    pairs = PairSet(
        np.concatenate([p.images for p in parts]),
        [c for p in parts for c in p.captions],
        np.concatenate([p.image_of_caption + o for p, o in zip(parts, (0, 100, 120))]),
    )
    sims = full_matrix(sgr_checkpoint, pairs)  # the head on every pair
    tokens = index.model.tokens(pairs)
    for caption in (3, 450, 790):  # text → images
        candidates = index.search_vectors(index.vectors("captions")[[caption]], 100, "images")[1][0]
        scores, order = index.rerank_images(candidates, tokens[caption])
        expected = candidates[np.argsort(-sims[candidates, caption], kind="stable")]
        np.testing.assert_allclose(scores, sims[order, caption], atol=1e-5)
        assert np.all(np.diff(scores) <= 0) and sorted(order) == sorted(candidates)
        _same_ranking(order, expected, sims[:, caption])
        hits = index.search(pairs.captions[caption], k=10, rerank=100)
        _same_ranking(np.array([h.image for h in hits]), expected[:10], sims[:, caption])
    for image in (0, 77, 159):  # image → captions
        candidates = index.search_vectors(index.vectors("images")[[image]], 100, "captions")[1][0]
        scores, order = index.rerank_captions(candidates, pairs.images[[image]])
        np.testing.assert_allclose(scores, sims[image, order], atol=1e-5)
        _same_ranking(order, candidates[np.argsort(-sims[image, candidates], kind="stable")], sims[image])


def _same_ranking(order: np.ndarray, expected: np.ndarray, scores: np.ndarray) -> None:
    """Equal orders, except that items whose scores differ by float rounding may swap."""
    mismatch = order != expected
    assert np.allclose(scores[order[mismatch]], scores[expected[mismatch]], atol=1e-6)


def test_the_protocol_from_top_k_lists_equals_the_full_matrix(collection, cosine_checkpoint):
    index = Index.build(cosine_checkpoint, collection, split="test")  # 40 images, 200 captions
    full = evaluate_checkpoint(cosine_checkpoint, data_root=str(collection), split="test")
    lists = evaluate_index(index, k=10)
    recalls = [k for k in full if "_r" in k or k == "rsum"]
    assert lists.keys() <= full.keys() and {k: lists[k] for k in recalls} == {k: full[k] for k in recalls}
    assert evaluate_index(index, k=200) == full  # whole lists: ranks, medr and meanr too
    with pytest.raises(ConfigError, match="at least 10"):
        evaluate_index(index, k=5)


def test_equivalent_caption_recall_from_lists(collection, cosine_checkpoint, tmp_path):
    pairs = make_synthetic(30, 1, seed=5)  # one caption per image, some repeated
    pairs.captions[10:15] = [pairs.captions[0]] * 5
    write_precomp(pairs, tmp_path, "test")
    full = evaluate_checkpoint(cosine_checkpoint, data_root=str(tmp_path), split="test")
    assert "eq_rsum" in full and full["eq_rsum"] != full["rsum"]
    assert evaluate_index(Index.build(cosine_checkpoint, tmp_path, split="test"), k=30) == full


def test_reranked_evaluation_of_every_candidate_is_the_heads_evaluation(collection, sgr_checkpoint):
    index = Index.build(sgr_checkpoint, collection, split="dev")
    full = evaluate_checkpoint(sgr_checkpoint, data_root=str(collection), split="dev")
    assert evaluate_index(index, rerank=100) == pytest.approx(full)  # lists of all 20 images / 100 captions


@pytest.mark.parametrize("ties", [False, True])
def test_list_ranks_against_retrieval_metrics(ties):
    rng = np.random.default_rng(3)
    sims = rng.integers(0, 4, size=(30, 90)).astype(float) if ties else rng.normal(size=(30, 90))
    owner = np.arange(90) // 3
    full = retrieval_metrics(sims, captions_per_image=3)
    for k in (10, 90):
        i2t_ids = top_k(sims, k)
        t2i_ids = top_k(sims.T, min(k, 30))
        i2t_correct = owner[i2t_ids] == np.arange(30)[:, None]
        i2t = list_ranks(np.take_along_axis(sims, i2t_ids, 1), i2t_ids, i2t_correct)
        t2i = list_ranks(np.take_along_axis(sims.T, t2i_ids, 1), t2i_ids, owner[:, None] == t2i_ids)
        got = {**rank_metrics("i2t", i2t), **rank_metrics("t2i", t2i)}
        for key, value in got.items():
            if k == 90 or not ties or key.endswith(("r1", "r5")):  # a tie at the list's end may hide
                assert value == pytest.approx(full[key]), (k, key)


def test_encoded_items_are_kept_within_the_budget(collection, sgr_checkpoint):
    index = Index.build(sgr_checkpoint, collection, split="test")
    features = index.collection().image_features
    encode = lambda ids: index.model.encode_images(PairSet(features(ids), [], np.zeros(0)))  # noqa: E731
    fresh = encode(np.arange(40))[0]
    width, fragments = fresh.pooled.shape[1], fresh.local.shape[1]
    row_bytes = fragments * width * 4 + fragments + width * 4 + fragments * 4  # local, mask, pooled, norms
    cache = EncodedItems(encode, budget=10 * row_bytes)
    for images in ([3, 1, 4, 1, 5], list(range(20, 32)), [9, 2, 6]):
        got = cache(np.array(images))[0]
        np.testing.assert_allclose(got.local.numpy(), fresh.local[images].numpy(), atol=1e-6)
        np.testing.assert_allclose(got.pooled.numpy(), fresh.pooled[images].numpy(), atol=1e-6)
        assert set(images) <= set(cache.rows)  # a call's own images are kept, whatever the budget
        assert cache.size == len(cache.rows) * row_bytes
        assert cache.size <= max(10, len(set(images))) * row_bytes
    assert list(cache.rows)[-3:] == [9, 2, 6]  # the least recently used went first
