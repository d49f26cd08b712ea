"""SGR / SAF heads and the all-pairs engine against a per-caption loop in the reference's style."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import Tensor, nn

from mispair.losses.triplet import triplet_loss
from mispair.nn.allpairs import all_pair_similarities
from mispair.nn.embedding import Fragments
from mispair.nn.heads import create_head
from mispair.nn.model import RetrievalModel
from mispair.testing import random_images, random_texts, reference_similarities

HEADS = ["sgr", "saf"]


def small_head(name: str, seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    head = create_head(name, 32, sim_dim=16, num_regions=5).double()
    with torch.no_grad():  # non-trivial batch-norm statistics and affine parameters
        for module in head.modules():
            if isinstance(module, nn.BatchNorm1d):
                module.running_mean.uniform_(-0.3, 0.3)
                module.running_var.uniform_(0.5, 2.0)
                module.weight.uniform_(0.5, 1.5)
                module.bias.uniform_(-0.2, 0.2)
    return head.eval()


def small_inputs(seed: int = 0) -> tuple[Fragments, Fragments]:
    images = random_images(6, 5, 32, seed).to("cpu", torch.float64)
    texts = random_texts([3, 7, 1, 5, 7, 2, 4], 32, seed + 1, width=9).to("cpu", torch.float64)
    return images, texts


# --- tests ------------------------------------------------------------------------------------


def test_parameter_counts_match_the_reference_architecture() -> None:
    d, s, k = 1024, 256, 36
    linear = lambda n_in, n_out: n_in * n_out + n_out  # noqa: E731
    visual_sa = linear(d, d) + 2 * k + linear(d, d) + 2 * d + linear(d, 1)
    text_sa = linear(d, d) + linear(d, d) + linear(d, 1)
    shared = visual_sa + text_sa + linear(d, s) + linear(d, s) + linear(s, 1)
    expected = {"sgr": shared + 3 * 3 * linear(s, s), "saf": shared + linear(s, 1) + 2}
    for name, count in expected.items():
        head = create_head(name, d)
        assert sum(p.numel() for p in head.parameters()) == count


@pytest.mark.parametrize("name", HEADS)
def test_matches_the_per_caption_loop(name: str) -> None:
    head = small_head(name)
    images, texts = small_inputs()
    with torch.no_grad():
        sims = head(images, texts)
        expected = reference_similarities(head, images, texts)
    assert sims.shape == (6, 7)
    torch.testing.assert_close(sims, expected, rtol=0, atol=1e-12)


@pytest.mark.parametrize("name", HEADS)
def test_training_mode_matches_the_loop_with_its_batch_norm_updates(name: str) -> None:
    head = small_head(name).train()
    for module in head.modules():
        if isinstance(module, nn.Dropout):
            module.p = 0.0
    reference = copy.deepcopy(head)
    images, texts = small_inputs(seed=3)
    expected = reference_similarities(reference, images, texts)
    torch.testing.assert_close(head(images, texts), expected, rtol=0, atol=1e-12)
    for ours, theirs in zip(head.buffers(), reference.buffers()):
        torch.testing.assert_close(ours, theirs, rtol=0, atol=1e-12)


@pytest.mark.parametrize("name", HEADS)
def test_permutations_permute_rows_and_columns(name: str) -> None:
    head = small_head(name)
    images, texts = small_inputs(seed=5)
    rows, cols = torch.randperm(6), torch.randperm(7)
    with torch.no_grad():
        sims, permuted = head(images, texts), head(images[rows], texts[cols])
    torch.testing.assert_close(permuted, sims[rows][:, cols], rtol=0, atol=1e-12)


@pytest.mark.parametrize("chunks", [(1, 1), (2, 3), (4, 100), (256, 2048)])
@pytest.mark.parametrize("name", HEADS)
def test_chunked_engine_matches_one_shot(name: str, chunks: tuple[int, int]) -> None:
    head = small_head(name)
    images, texts = random_images(11, 5, 32, 7), random_texts([4, 1, 9, 2, 6, 6, 3, 8, 5], 32, 8)
    images, texts = images.to("cpu", torch.float64), texts.to("cpu", torch.float64)
    with torch.no_grad():
        expected = head(images, texts).float()
    model = RetrievalModel(nn.Identity(), nn.Identity(), head)
    image_chunk, caption_chunk = chunks
    for similarity in (head, model.similarity, lambda i, t: head(i, t)):
        sims = all_pair_similarities(
            similarity, images, texts, image_chunk=image_chunk, caption_chunk=caption_chunk
        )
        torch.testing.assert_close(sims, expected, rtol=0, atol=1e-6)


@pytest.mark.parametrize("name", [*HEADS, "plain"])
def test_the_engine_adds_into_a_given_matrix(name: str) -> None:
    """Two heads' similarities added into one matrix (``add_to``): their sum, in the same tensor;
    a matrix of another shape is refused."""
    heads = [small_head("sgr" if name == "plain" else name) for _ in range(2)]
    images, texts = random_images(7, 5, 32, 3), random_texts([4, 1, 9, 2, 6], 32, 4)
    images, texts = images.to("cpu", torch.float64), texts.to("cpu", torch.float64)
    with torch.no_grad():
        expected = (heads[0](images, texts) + heads[1](images, texts)).float()
    total = torch.zeros(7, 5)
    for head in heads:  # a plain function takes the unprepared path
        similarity = (lambda i, t, h=head: h(i, t)) if name == "plain" else head
        out = all_pair_similarities(similarity, images, texts, image_chunk=3, caption_chunk=2, add_to=total)
        assert out is total
    torch.testing.assert_close(total, expected, rtol=0, atol=1e-6)
    with pytest.raises(ValueError, match="add_to"):
        all_pair_similarities(heads[0], images, texts, add_to=torch.zeros(7, 4))


def test_engine_respects_a_tiny_memory_budget() -> None:
    head = small_head("sgr")
    images, texts = small_inputs(seed=9)
    with torch.no_grad():
        expected = head(images, texts).float()
    sims = all_pair_similarities(head, images, texts, max_block_bytes=1)  # one pair per block
    torch.testing.assert_close(sims, expected, rtol=0, atol=1e-6)


def test_engine_blocks_fill_the_budget_with_few_images() -> None:
    """With fewer images than ``image_chunk``, a block holds as many captions as the budget
    allows for the images there are (not for ``image_chunk`` images)."""
    head = small_head("saf")
    images, texts = random_images(3, 5, 32, 1), random_texts([4] * 40, 32, 2)
    images, texts = images.to("cpu", torch.float64), texts.to("cpu", torch.float64)
    blocks = []
    score = head.score
    head.score = lambda i, t: blocks.append((len(i.glob), len(t.glob))) or score(i, t)
    budget = 3 * 40 * head.pair_bytes(4)  # exactly all pairs, far less than 256 × 40
    sims = all_pair_similarities(head, images, texts, max_block_bytes=budget)
    assert blocks == [(3, 40)]
    with torch.no_grad():
        torch.testing.assert_close(sims, head(images, texts).float(), rtol=0, atol=1e-6)


def concept_pairs(combos: Tensor, prototypes: Tensor, gen: torch.Generator) -> tuple[Tensor, ...]:
    """Images whose regions render the pair's two concepts (plus two distractors), and captions
    naming them (token ``1 + c``) among filler tokens, in random order."""
    n, dim = len(combos), prototypes.shape[1]
    regions = torch.cat([prototypes[combos], torch.randn(n, 2, dim, generator=gen)], dim=1)
    regions = regions + 0.3 * torch.randn(regions.shape, generator=gen)
    regions = regions[:, torch.randperm(4, generator=gen)]
    lengths = torch.randint(3, 6, (n,), generator=gen)
    tokens = torch.zeros(n, 5, dtype=torch.long)
    for i in range(n):
        words = torch.cat([1 + combos[i], 17 + torch.randint(0, 4, (3,), generator=gen)])
        words = words[: int(lengths[i])]
        tokens[i, : len(words)] = words[torch.randperm(len(words), generator=gen)]
    return regions, tokens, lengths


@pytest.mark.parametrize("name", HEADS)
def test_head_learns_concepts_well_above_chance(name: str) -> None:
    from mispair.nn.encoders import FragmentImageEncoder
    from mispair.nn.text.bigru import BiGRUTextEncoder

    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    prototypes = torch.randn(16, 16, generator=gen)
    all_combos = torch.combinations(torch.arange(16), 2)  # 120 concept pairs
    held_out = all_combos[torch.randperm(len(all_combos), generator=gen)[:40]]
    model = RetrievalModel(
        FragmentImageEncoder(16, 64),
        BiGRUTextEncoder(21, 32, 64),
        create_head(name, 64, sim_dim=32, num_regions=4),
    )
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
    for _ in range(250):
        combos = all_combos[torch.randint(0, len(all_combos), (32,), generator=gen)]
        sims = model(*concept_pairs(combos, prototypes, gen))
        loss = triplet_loss(sims, 0.2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()
    with torch.no_grad():
        sims = model(*concept_pairs(held_out, prototypes, gen))
    recall_at_1 = (sims.argmax(dim=1) == torch.arange(40)).float().mean()
    assert recall_at_1 > 0.5  # chance: 1/40
