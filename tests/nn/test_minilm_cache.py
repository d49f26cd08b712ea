"""The frozen MiniLM backbone: its token states computed once per caption and cached on disk
(rebuilt for a changed caption, resumable), identical to running the transformer, and kept out of
the models' weights; the pooled image path equals projecting the mean feature."""

import numpy as np
import pytest
import torch

from mispair.config import ModelConfig
from mispair.data.batching import pad_tokens
from mispair.data.cache_files import read_arrays
from mispair.data.pairset import PairSet
from mispair.data.tokenizers import MiniLMTokenizer
from mispair.nn.assembly import build_model, reads_mean_feature
from mispair.nn.embedding import l2_normalize
from mispair.nn.encoders import FragmentImageEncoder
from mispair.nn.text.minilm import MiniLMTextEncoder, frozen_minilm, minilm_states
from mispair.nn.text.state_cache import TokenStateCache, token_key

CAPTIONS = ["a red apple on a table", "a dog", "two cats sleeping on a sofa in the sun", "a dog"]


def _fake_states(tokens, lengths):
    """Deterministic states from the ids: row b, position t holds [id, t, b-independent] values."""
    return torch.stack([tokens.float(), torch.arange(tokens.shape[1]).float().expand_as(tokens)], dim=-1)


class Counting:
    def __init__(self, fail_after: int | None = None):
        self.captions = 0
        self.fail_after = fail_after

    def __call__(self, tokens, lengths):
        if self.fail_after is not None and self.captions >= self.fail_after:
            raise KeyboardInterrupt  # the run is killed here
        self.captions += len(tokens)
        return _fake_states(tokens, lengths)


def test_a_changed_caption_is_computed_again_and_nothing_else(tmp_path):
    ids = [[101, 7, 8, 102], [101, 9, 102], [101, 5, 5, 5, 102]]
    first = Counting()
    cache = TokenStateCache("fake")
    cache.use_directory(tmp_path)
    assert cache.fill(ids, first) == 3 and first.captions == 3

    again = Counting()  # a new process: everything is read from disk
    reread = TokenStateCache("fake")
    reread.use_directory(tmp_path)
    assert reread.fill(ids, again) == 0 and again.captions == 0

    changed = [ids[0], [101, 9, 11, 102], ids[2]]  # the second caption was edited
    edited = Counting()
    assert reread.fill(changed, edited) == 1 and edited.captions == 1
    tokens = torch.tensor([[101, 9, 11, 102, 0]])
    expected = _fake_states(tokens, None)[0, :4]
    assert torch.equal(reread.lookup(tokens, torch.tensor([4]), Counting())[0, :4], expected)


def test_a_killed_precomputation_resumes_at_the_first_missing_shard(tmp_path):
    ids = [[101, k, 102] for k in range(1, 11)]
    killed = Counting(fail_after=4)
    cache = TokenStateCache("fake")
    cache.use_directory(tmp_path)
    with pytest.raises(KeyboardInterrupt):
        cache.fill(ids, killed, batch_size=2, chunk_size=4)
    assert len(list((tmp_path / "fake").glob("*.states"))) == 1  # one complete shard, no partial file
    assert not [p for p in (tmp_path / "fake").iterdir() if p.suffix != ".states"]

    resumed = Counting()
    cache = TokenStateCache("fake")
    cache.use_directory(tmp_path)
    assert cache.fill(ids, resumed, batch_size=2, chunk_size=4) == 6 and resumed.captions == 6


def test_lookup_pads_with_zeros_and_computes_only_unseen_captions():
    cache = TokenStateCache("fake")
    count = Counting()
    tokens = torch.tensor([[101, 3, 102, 0], [101, 4, 4, 102]])
    lengths = torch.tensor([3, 4])
    out = cache.lookup(tokens, lengths, count)
    assert out.shape == (2, 4, 2) and out.dtype == torch.float32
    assert torch.equal(out[0, 3], torch.zeros(2)) and torch.equal(out[1], _fake_states(tokens, lengths)[1])
    cache.lookup(tokens.flip(0), lengths.flip(0), count)
    assert count.captions == 2 and token_key([101, 3, 102]) != token_key([101, 3, 102, 0])


@pytest.fixture(scope="module")
def minilm_tokens():
    tokenizer = MiniLMTokenizer()
    ids = [tokenizer.encode(c) for c in CAPTIONS]
    lengths = torch.tensor([len(i) for i in ids])
    tokens = torch.zeros(len(ids), int(lengths.max()), dtype=torch.long)
    for row, i in enumerate(ids):
        tokens[row, : len(i)] = torch.tensor(i)
    return ids, tokens, lengths


def test_the_cached_encoder_matches_the_transformer_run_on_every_batch(tmp_path, minilm_tokens):
    ids, tokens, lengths = minilm_tokens
    torch.manual_seed(0)
    frozen = MiniLMTextEncoder(embed_dim=32)
    MiniLMTextEncoder.prepare(ModelConfig(text_encoder="minilm", head="sgr"), ids, tmp_path)
    assert len(list(tmp_path.rglob("*.states"))) == 1
    cached = frozen(tokens, lengths)
    with torch.no_grad():
        states = minilm_states(frozen_minilm(), tokens, lengths)
        direct = l2_normalize(frozen.fc(states))
    mask = cached.mask
    assert torch.allclose(cached.local[mask], direct[mask], atol=5e-3)
    assert torch.allclose(cached.pooled[1], cached.pooled[3])  # the same caption, the same embedding
    assert not any(name.startswith("bert") for name in frozen.state_dict())  # weights: the projection only
    assert set(frozen.state_dict()) == {"fc.weight", "fc.bias"}


def test_a_pooled_only_model_caches_one_mean_state_per_caption_and_embeds_as_the_token_states_do(
    tmp_path, minilm_tokens
):
    ids, tokens, lengths = minilm_tokens
    torch.manual_seed(0)
    tokenwise = MiniLMTextEncoder(embed_dim=32)
    pooled_only = build_model(
        ModelConfig(text_encoder="minilm", head="cosine", embed_dim=32), 8, 10
    ).text_encoder
    pooled_only.load_state_dict(tokenwise.state_dict())
    MiniLMTextEncoder.prepare(ModelConfig(text_encoder="minilm", head="cosine"), ids, tmp_path)
    [shard] = tmp_path.rglob("*.states")
    assert "mean-hidden" in str(shard)  # its own cache, beside the token states'
    shard_arrays = read_arrays(shard)
    assert shard_arrays["keys"].shape == (3, 16) and shard_arrays["states"].shape == (
        3,
        384,
    )  # a row per caption
    with torch.no_grad():
        mine, reference = pooled_only(tokens, lengths), tokenwise(tokens, lengths)
    assert mine.local.shape == (4, 1, 32) and mine.mask.all()
    # the reference: the projection of the mean of the transformer's token states, brute force
    with torch.no_grad():
        hidden = minilm_states(frozen_minilm(), tokens, lengths)
        means = torch.stack([hidden[b, :n].mean(dim=0) for b, n in enumerate(lengths.tolist())])
        expected = l2_normalize(tokenwise.fc(means))
    assert torch.allclose(mine.pooled, expected, atol=1e-5)
    assert torch.allclose(reference.pooled, expected, atol=5e-3)  # the token path reads float16 states


def test_trainable_top_layers_run_the_transformer_and_train(minilm_tokens):
    _, tokens, lengths = minilm_tokens
    encoder = MiniLMTextEncoder(embed_dim=16, trainable_layers=1)
    encoder(tokens, lengths).pooled.sum().backward()
    top = encoder.bert.encoder.layer[-1]
    assert all(p.grad is not None for p in top.parameters())
    assert encoder.bert.embeddings.word_embeddings.weight.grad is None


def test_the_pooled_image_path_projects_the_mean_feature():
    torch.manual_seed(0)
    features = torch.randn(5, 49, 12)
    both = FragmentImageEncoder(12, 8, pooling="features", fragments=True)
    pooled_only = FragmentImageEncoder(12, 8, pooling="features", fragments=False)
    pooled_only.load_state_dict(both.state_dict())
    expected = l2_normalize(both.fc(features.mean(dim=1)))
    assert torch.allclose(both(features).pooled, expected, atol=1e-6)
    assert torch.allclose(pooled_only(features).pooled, expected, atol=1e-6)
    assert both(features).local.shape == (5, 49, 8) and pooled_only(features).local.shape == (5, 1, 8)
    # given the mean fragment alone (PairSet.with_mean_fragment), the same embedding
    assert torch.allclose(pooled_only(features.mean(dim=1, keepdim=True)).pooled, expected, atol=1e-6)


def test_mean_fragment_data_is_read_only_where_the_model_reads_means():
    assert reads_mean_feature(ModelConfig(head="cosine", image_pooling="features"))
    assert not reads_mean_feature(ModelConfig(head="cosine"))
    assert not reads_mean_feature(ModelConfig(head="sgr", image_pooling="features"))
    rng = np.random.default_rng(0)
    pairs = PairSet(rng.normal(size=(7, 4, 3)).astype(np.float16), ["a"] * 7, np.arange(7))
    means = pairs.with_mean_fragment(chunk=3)
    assert means.images.shape == (7, 1, 3) and means.images.dtype == np.float32
    assert np.allclose(means.images[:, 0], pairs.images.astype(np.float32).mean(axis=1), atol=1e-6)
    model = build_model(ModelConfig(head="cosine", image_pooling="features", embed_dim=8, word_dim=4), 3, 10)
    assert not model.image_encoder.fragments


def test_one_float32_fragment_per_image_is_its_own_mean_and_stays_on_disk(tmp_path):
    features = np.random.default_rng(0).normal(size=(7, 1, 3)).astype(np.float32)
    np.save(tmp_path / "ims.npy", features)
    mapped = PairSet(np.load(tmp_path / "ims.npy", mmap_mode="r"), ["a"] * 7, np.arange(7))
    means = mapped.with_mean_fragment()
    assert means.images is mapped.images and isinstance(means.images, np.memmap)  # no copy in memory
    np.testing.assert_array_equal(means.images, features)


def test_a_run_caches_its_text_features_in_the_cache_folder(tmp_path, monkeypatch):
    from mispair.config import load_config
    from mispair.data.precomp import write_precomp
    from mispair.data.synthetic import make_synthetic
    from mispair.engine.run import train_run

    monkeypatch.setenv("MISPAIR_CACHE", str(tmp_path / "cache"))
    root = tmp_path / "toy_precomp"
    for split, seed in (("train", 0), ("dev", 1), ("test", 2)):
        write_precomp(make_synthetic(12, 2, seed=seed), root, split)
    overrides = [
        f"data.root={root}",
        "data.source=precomp",
        "model.text_encoder=minilm",
        "model.image_pooling=features",
        "model.embed_dim=16",
        "train.epochs=1",
        "train.threads=1",
    ]
    messages = []

    def run(out: str) -> None:
        config = load_config(None, [*overrides, f"output={tmp_path / out}"])
        train_run(config, progress=False, log=messages.append)

    run("a")
    assert any(m.startswith("text features: ") for m in messages)
    assert list((tmp_path / "cache" / "collections").glob("toy_precomp-*/text/**/*.states"))
    assert not (root / "cache").exists()  # the collection is only read
    from mispair.nn.text import state_cache

    state_cache._CACHES.clear()  # a new process: only the disk holds the states
    messages.clear()
    run("b")
    assert not any(m.startswith("text features: ") for m in messages)  # nothing encoded again


def test_the_batch_tokenizer_gives_each_caption_the_ids_of_its_own_call():
    tokenizer = MiniLMTokenizer(max_length=16)
    captions = ["a red apple", "", "Ünïcödé — caption", "word " * 40, "two  spaces\tand a tab"] * 3
    assert tokenizer.encode_many(captions, chunk=4) == [tokenizer.encode(c) for c in captions]


def test_per_caption_states_are_written_as_one_tensor_and_read_back_equal(tmp_path):
    ids = [[101, k, k + 1, 102] for k in range(1, 8)]

    def means(tokens, lengths):  # one state per caption, as a pooled-only MiniLM computes
        return _fake_states(tokens, lengths).mean(dim=1, keepdim=True)

    cache = TokenStateCache("mean", per_caption=True)
    cache.use_directory(tmp_path)
    assert cache.fill(ids, means, batch_size=3, chunk_size=4) == 7
    shards = sorted((tmp_path / "mean").glob("*.states"))
    assert len(shards) == 2 and all(read_arrays(p)["states"].shape[1] == 2 for p in shards)
    reread = TokenStateCache("mean", per_caption=True)
    reread.use_directory(tmp_path)
    tokens, lengths = torch.tensor(ids), torch.full((len(ids),), 4)
    never = Counting(fail_after=0)  # every state comes from disk
    assert torch.equal(reread.lookup(tokens, lengths, never), cache.lookup(tokens, lengths, never))
    assert reread.lookup(tokens, lengths, never).shape == (7, 1, 2)


def _means(tokens, lengths):
    """One state per caption from its ids alone: [sum of ids, length, first id]."""
    mask = torch.arange(tokens.shape[1])[None, :] < lengths[:, None]
    ids = (tokens * mask).float()
    return torch.stack([ids.sum(1), lengths.float(), tokens[:, 0].float()], dim=-1)[:, None]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_per_caption_states_grown_batch_by_batch_equal_each_caption_computed_alone(seed, tmp_path):
    rng = np.random.default_rng(seed)
    captions = [[101, *rng.integers(1, 30, size=rng.integers(1, 6)).tolist(), 102] for _ in range(300)]
    cache = TokenStateCache("mean", per_caption=True)
    cache.use_directory(tmp_path)
    for start in range(0, 300, 37):  # many small additions: the matrix grows several times
        part = captions[start : start + 37]
        tokens, lengths = pad_tokens(part)
        cache.lookup(tokens, lengths, _means)
    cache.fill(captions[::-1], _means, chunk_size=16)  # nothing new: every caption is kept
    alone = torch.cat([_means(*pad_tokens([ids]))[:, 0] for ids in captions])
    assert torch.equal(cache.vectors(captions, Counting(fail_after=0)), alone)
    assert len(cache) == len({tuple(c) for c in captions})
    table, rows = cache.table(captions, Counting(fail_after=0))
    assert torch.equal(table[rows], alone)  # the cache's own rows, not a copy:
    assert table.data_ptr() == cache.table(captions[:5], Counting(fail_after=0))[0].data_ptr()

    fresh = TokenStateCache("mean", per_caption=True)
    fresh.use_directory(tmp_path / "other")  # written shard by shard, then read by a new process
    fresh.fill(captions, _means, chunk_size=16)
    reread = TokenStateCache("mean", per_caption=True)
    reread.use_directory(tmp_path / "other")
    assert torch.equal(reread.vectors(captions, Counting(fail_after=0)), alone)


def test_cleared_states_are_freed_then_read_again_from_disk_or_computed_anew(tmp_path):
    captions = [[101, k, k + 2, 102] for k in range(1, 40)]
    cache = TokenStateCache("mean", per_caption=True)
    cache.use_directory(tmp_path)
    cache.fill(captions, _means, chunk_size=16)
    alone = torch.cat([_means(*pad_tokens([ids]))[:, 0] for ids in captions])
    table, _ = cache.table(captions, Counting(fail_after=0))
    held = table.untyped_storage().nbytes()
    del table
    cache.clear()
    assert len(cache) == 0 and cache._matrix is None  # nothing held: the matrix is freed
    assert held >= len(captions) * 3 * 4
    cache.use_directory(tmp_path)  # what a later prepare does: every state from the shards
    assert torch.equal(cache.vectors(captions, Counting(fail_after=0)), alone)
    cache.clear()
    computed = []  # no directory read again: a caption asked for is computed anew

    def means(tokens, lengths):
        computed.append(len(tokens))
        return _means(tokens, lengths)

    assert torch.equal(cache.vectors(captions[:3], means), alone[:3]) and computed == [3]


def test_shards_of_older_versions_are_not_read_their_captions_are_computed_again(tmp_path):
    keys = [token_key([101, k, 102]) for k in (1, 2)]
    table = torch.tensor([list(k) for k in keys], dtype=torch.uint8)
    (tmp_path / "mean").mkdir()
    torch.save((table, [torch.full((1, 3), 1.0), torch.full((1, 3), 2.0)]), tmp_path / "mean" / "old.pt")
    cache = TokenStateCache("mean", per_caption=True)
    cache.use_directory(tmp_path)  # an unchecked .pt is nobody's entry: never loaded
    assert len(cache) == 0
    captions = [[101, 2, 102], [101, 1, 102]]
    assert torch.equal(cache.vectors(captions, _means), _means(*pad_tokens(captions))[:, 0])


def test_bfloat16_states_are_cached_apart_and_close_to_float32s(tmp_path, minilm_tokens):
    ids, tokens, lengths = minilm_tokens
    config = ModelConfig(text_encoder="minilm", head="cosine", embed_dim=32, text_precision="bfloat16")
    MiniLMTextEncoder.prepare(config, ids, tmp_path)
    [shard] = tmp_path.rglob("*.states")
    assert shard.parent.name.endswith("-bfloat16")  # never read by a float32 run
    encoder = build_model(config, 8, 10).text_encoder
    assert encoder.cache.tag.endswith("-bfloat16")
    vectors = encoder.caption_vectors(ids)
    with torch.no_grad():  # the reference: float32 states, their mean per caption, brute force
        hidden = minilm_states(frozen_minilm(), tokens, lengths)
        means = torch.stack([hidden[b, :n].mean(dim=0) for b, n in enumerate(lengths.tolist())])
    cosine = torch.nn.functional.cosine_similarity(vectors, means, dim=1)
    assert cosine.min() > 0.999 and not torch.equal(vectors, means)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["model.text_precision=bfloat16"], r"only the frozen MiniLM runs in it"),
        (
            ["model.text_encoder=minilm", "model.text_trainable_layers=1", "model.text_precision=bfloat16"],
            r"only the frozen MiniLM runs in it",
        ),
        (["model.text_encoder=minilm", "model.text_precision=float16"], r"model.text_precision"),
    ],
)
def test_a_precision_the_encoder_cannot_run_is_one_line(overrides, message):
    from mispair.config import load_config
    from mispair.engine.checks import check_run_config
    from mispair.errors import ConfigError

    with pytest.raises(ConfigError, match=message) as caught:  # before a run writes anything
        check_run_config(load_config(None, overrides))
    assert "\n" not in str(caught.value)


def test_bfloat16_with_onnx_runtime_is_refused_before_a_run_starts():
    from mispair.config import load_config
    from mispair.engine.checks import check_run_config
    from mispair.errors import ConfigError

    config = load_config(
        None, ["model.text_encoder=minilm", "model.text_precision=bfloat16", "data.encoder_runtime=onnx"]
    )
    with pytest.raises(ConfigError, match=r"runs in PyTorch: use data.encoder_runtime=torch$"):
        check_run_config(config)


def test_the_batch_tokenizer_shares_one_object_per_id_value():
    ids = MiniLMTokenizer(max_length=16).encode_many(
        ["a lighthouse at night", "a lighthouse by day"] * 3, chunk=2
    )
    lighthouse = {id(i) for caption in ids for i in caption if i == ids[0][2]}
    assert ids[0][2] > 256 and len(lighthouse) == 1  # one int object, not one per occurrence


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        ("fpu sse avx512f amx_bf16 amx_tile", True),
        ("fpu sse avx512f avx512_bf16", True),
        ("fpu sse avx2 avx512f avx512_vnni", False),  # bfloat16 only emulated: slower than float32
    ],
)
def test_cpu_bfloat16_is_read_from_the_flags_line(tmp_path, flags, expected):
    from mispair.nn.text.minilm import cpu_computes_bfloat16

    cpuinfo = tmp_path / "cpuinfo"
    name = "amx_bf16 in a name is not a flag"
    cpuinfo.write_text(f"processor\t: 0\nmodel name\t: {name}\nflags\t\t: {flags}\n")
    assert cpu_computes_bfloat16(str(cpuinfo)) is expected
    assert cpu_computes_bfloat16(str(tmp_path / "absent")) is False  # not Linux: float32


@pytest.mark.parametrize(
    ("overrides", "native", "expected"),
    [
        ([], True, "bfloat16"),
        ([], False, "float32"),
        (["data.encoder_runtime=onnx"], True, "float32"),  # ONNX Runtime computes float32
        (["model.text_trainable_layers=1"], True, "float32"),  # a trained MiniLM is not autocast
        (["model.text_encoder=bigru"], True, "float32"),
        (["model.text_precision=float32"], True, "float32"),  # what the user set is kept
    ],
)
def test_auto_precision_is_made_concrete_where_the_cpu_computes_bfloat16(
    monkeypatch, overrides, native, expected
):
    from mispair.config import ROBUST_RUN, load_config
    from mispair.engine import assembly
    from mispair.engine.checks import check_run_config

    monkeypatch.setattr(assembly, "cpu_computes_bfloat16", lambda: native)
    config = load_config(None, overrides, default=ROBUST_RUN)
    check_run_config(config)  # auto is not refused with ONNX Runtime
    said = []
    model = assembly.concrete_precision(config.model, config.data, log=said.append)
    assert model.text_precision == expected
    assert bool(said) == (expected == "bfloat16" and config.model.text_precision == "auto")


def test_an_unresolved_precision_never_reaches_the_cache():
    config = ModelConfig(text_encoder="minilm", head="cosine", embed_dim=32, text_precision="auto")
    with pytest.raises(ValueError, match="concrete_precision"):
        build_model(config, 8, 10)
