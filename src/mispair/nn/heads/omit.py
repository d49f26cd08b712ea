r"""OMIT head: cross-modal Sinkhorn matching with global dustbins (Pan et al., OMIT §3.1–3.2).

Every image–caption pair is one entropic transport problem between the image's fragments and
the caption's words; all ``Bi × Bt`` pairs of a block are solved by one batched
:func:`~mispair.ot.sinkhorn` call. Variants (OMIT Table 4): ``partial`` (the paper's method,
global embeddings as dustbins, Eq. 4–5), ``naive`` (plain OT, Eq. 1–3), ``full`` (the dustbins
count as fragments) and ``prompt`` (two learnable dustbins). Marginals: Eq. 7.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor, nn

from mispair.nn.embedding import Fragments, l2_normalize
from mispair.nn.heads import register_head
from mispair.ot import sinkhorn


@dataclass
class OMITSettings:
    """The options of the ``omit`` head (``model.head_options``), OMIT's paper defaults.

    ``reg`` λ = 0.02 (§4.1); ``n_iter`` 3 (Algorithm A1, T = 3; the reference code's
    ``--belta=3``); ``variant`` (Table 4); ``marginals`` (Eq. 7, Table 5) with ``marginal_tau`` τ
    of Eq. 7; ``dustbin_mass`` ρ (the τ of Eq. 4 in §4.1); ``grad`` (``autodiff``: backpropagate
    through the unrolled iterations, as the reference); ``method`` (``auto``: the fast kernel
    domain where exact, see :func:`solver_method`; ``kernel`` | ``log``, see
    :func:`~mispair.ot.sinkhorn`); ``num_regions`` (fragments per image, only to size
    evaluation blocks).
    """

    reg: float = 0.02
    n_iter: int = 3
    variant: Literal["partial", "naive", "full", "prompt"] = "partial"
    marginals: Literal["uni", "intra", "inter", "norm"] = "uni"
    dustbin_mass: float = 0.1
    marginal_tau: float = 1.0
    grad: Literal["detach", "autodiff", "envelope"] = "autodiff"
    method: Literal["auto", "kernel", "log"] = "auto"
    num_regions: int = 36


def fragment_marginals(
    images: Fragments, texts: Fragments, kind: str, tau: float = 1.0
) -> tuple[Tensor, Tensor]:
    r"""Masses of the fragments of every pair, OMIT Eq. 7 (Appendix B1.1).

    .. math::
        \text{uni: } \alpha_i = \tfrac{1}{K},\quad
        \text{intra: } \alpha_i = \mathrm{softmax}_i(\bar v^\top v_i/\tau),\quad
        \text{inter: } \alpha_i = \mathrm{softmax}_i(\bar t^\top v_i/\tau),\quad
        \text{norm: } \alpha_i = \frac{\lVert\tilde v_i\rVert}{\sum_k \lVert\tilde v_k\rVert}

    and symmetrically for :math:`\beta_j` over the words (``inter`` uses :math:`\bar v`). Sums run
    over the real fragments; padding gets zero mass. :math:`v_i` are the L2-normalised fragments,
    :math:`\lVert\tilde v_i\rVert` the norms of the fragments before the encoder normalised them
    (``Fragments.norms``; the norms of ``local`` when an encoder does not keep them),
    :math:`\bar v, \bar t` the normalised pooled embeddings.

    Args:
        images: ``Bi`` images (``local [Bi, K, d]``); texts: ``Bt`` captions (``[Bt, L, d]``).
        kind: ``uni`` | ``intra`` | ``inter`` | ``norm``.
        tau: temperature of ``intra``/``inter`` (the paper uses 1).

    Returns:
        ``a [Bi, Bt, K]`` and ``b [Bi, Bt, L]``, each summing to 1 over the real fragments
        (broadcast views when the masses do not depend on the other item).
    """
    (n_img, k), (n_txt, n_words) = images.mask.shape, texts.mask.shape
    v, t = l2_normalize(images.local), l2_normalize(texts.local)
    vg, tg = l2_normalize(images.pooled), l2_normalize(texts.pooled)
    if kind == "uni":
        a, b = images.mask.to(v.dtype)[:, None], texts.mask.to(t.dtype)[None]
        a, b = a / a.sum(-1, keepdim=True), b / b.sum(-1, keepdim=True)
    elif kind == "intra":
        a = _masked_softmax(torch.einsum("ikd,id->ik", v, vg) / tau, images.mask)[:, None]
        b = _masked_softmax(torch.einsum("jld,jd->jl", t, tg) / tau, texts.mask)[None]
    elif kind == "inter":
        a = _masked_softmax(torch.einsum("ikd,jd->ijk", v, tg) / tau, images.mask[:, None])
        b = _masked_softmax(torch.einsum("jld,id->ijl", t, vg) / tau, texts.mask[None])
    elif kind == "norm":
        a = images.fragment_norms * images.mask
        b = texts.fragment_norms * texts.mask
        a, b = (a / a.sum(-1, keepdim=True))[:, None], (b / b.sum(-1, keepdim=True))[None]
    else:
        raise ValueError(f"marginals must be one of uni, intra, inter, norm; got {kind!r}")
    return a.expand(n_img, n_txt, k), b.expand(n_img, n_txt, n_words)


def _masked_softmax(logits: Tensor, mask: Tensor) -> Tensor:
    return torch.softmax(logits.masked_fill(~mask, float("-inf")), dim=-1).masked_fill(~mask, 0)


def omit_similarity(
    images: Fragments,
    texts: Fragments,
    settings: OMITSettings,
    dustbins: tuple[Tensor, Tensor] | None = None,
) -> Tensor:
    r"""OMIT similarity of every image with every caption, ``[Bi, Bt]``.

    For image :math:`m` (fragments :math:`v_i`, global :math:`\bar v`) and caption :math:`n`
    (words :math:`t_j`, global :math:`\bar t`), all L2-normalised, the extended problem (Eq. 4)

    .. math::
        \hat\Omega^\star = \mathop{\arg\min}_{\hat\Omega \in U(\hat\alpha, \hat\beta)}
        \langle \hat\Omega, \hat C\rangle - \lambda H(\hat\Omega),\quad
        \hat C = 1 - \begin{bmatrix} \bar v^\top \bar t & \bar v^\top t_j \\
        v_i^\top \bar t & v_i^\top t_j \end{bmatrix},\quad
        \hat\alpha = \begin{bmatrix}\rho\\ \alpha\end{bmatrix},\
        \hat\beta = \begin{bmatrix}\rho\\ \beta\end{bmatrix}

    is solved by ``n_iter`` Sinkhorn iterations (Eq. 3, row then column normalisation, as
    Algorithm A1), and the similarity is the local block only (Eq. 5):
    :math:`S = \langle \Omega^\star, V_m T_n^\top\rangle`. The dustbin mass :math:`\rho`
    (``dustbin_mass``; the paper's τ = 0.1 of Eq. 4, our reading) bounds the mass a side may
    discard: the local block carries between :math:`1 - \rho` and 1. ``naive`` drops the dustbin
    row and column (Eq. 1–3); ``full`` scores the whole extended plan; ``prompt`` uses
    ``dustbins`` (learned vectors) instead of the pooled embeddings.

    Args:
        images: ``Bi`` images; texts: ``Bt`` captions (padded words: ``mask`` False, no mass).
        settings: λ (``reg``), iterations, variant, marginals (Eq. 7), dustbin mass, solver.
        dustbins: ``(visual [d], textual [d])`` for the ``prompt`` variant.

    Returns:
        ``[Bi, Bt]`` similarities (higher = more similar), differentiable per ``settings.grad``.
    """
    s = settings
    a, b = fragment_marginals(images, texts, s.marginals, s.marginal_tau)
    v, t = l2_normalize(images.local), l2_normalize(texts.local)
    n_img, n_txt = len(images), len(texts)
    extended = s.variant != "naive"
    if extended:
        if s.variant == "prompt":
            assert dustbins is not None, "the prompt variant needs learned dustbins"
            vg = l2_normalize(dustbins[0]).expand(n_img, -1)
            tg = l2_normalize(dustbins[1]).expand(n_txt, -1)
        else:
            vg, tg = l2_normalize(images.pooled), l2_normalize(texts.pooled)
        v, t = torch.cat([vg[:, None], v], 1), torch.cat([tg[:, None], t], 1)
        rho = a.new_full((n_img, n_txt, 1), s.dustbin_mass)
        a, b = torch.cat([rho, a], -1), torch.cat([rho, b], -1)
    sims = _pair_sims(v, t)  # [Bi * Bt, K', L']
    a, b = a.reshape(n_img * n_txt, -1), b.reshape(n_img * n_txt, -1)
    method = solver_method(s.method, s.reg, sims.dtype)
    plan = sinkhorn(1 - sims, a, b, s.reg, n_iter=s.n_iter, grad=s.grad, method=method).plan
    if s.variant in ("partial", "prompt"):
        plan, sims = plan[:, 1:, 1:], sims[:, 1:, 1:]
    return (plan * sims).sum((1, 2)).view(n_img, n_txt)


def solver_method(method: str, reg: float, dtype: torch.dtype) -> str:
    """``auto``: the kernel domain whenever it is exact for any cosine cost, decided without a
    host synchronisation. Costs ``1 - cos`` lie in [0, 2], so every kernel entry is at least
    ``exp(-2/λ)``: nonzero in float32 (smallest subnormal ``e^-103``) for λ ≥ 0.02, in float64
    for λ ≥ 0.003; below that, the log domain."""
    if method != "auto":
        return method
    smallest = torch.finfo(dtype).tiny * torch.finfo(dtype).eps  # the smallest subnormal
    return "kernel" if 2 / reg <= -math.log(smallest) - 3 else "log"


def _pair_sims(v: Tensor, t: Tensor) -> Tensor:
    """``v [Bi, K, d]``, ``t [Bt, L, d]`` -> ``[Bi * Bt, K, L]`` inner products, one matmul."""
    (n_img, k, dim), (n_txt, n_words) = v.shape, t.shape[:2]
    sims = (v.reshape(-1, dim) @ t.reshape(-1, dim).t()).view(n_img, k, n_txt, n_words)
    return sims.transpose(1, 2).reshape(n_img * n_txt, k, n_words)


@register_head("omit")
class OMITHead(nn.Module):
    """Cross-modal Sinkhorn matching (OMIT), ``[Bi, Bt]`` similarities in [-1, 1]; its options
    are :class:`OMITSettings`.

    Scores in two stages for :func:`~mispair.nn.allpairs.all_pair_similarities` (captions grouped
    by length, blocks bounded in memory); see :func:`omit_similarity` for the equations.
    """

    Options = OMITSettings

    def __init__(self, embed_dim: int, settings: OMITSettings | None = None) -> None:
        super().__init__()
        self.settings = settings or OMITSettings()
        self.num_regions = self.settings.num_regions
        self.dustbins = None
        if self.settings.variant == "prompt":
            self.dustbins = nn.Parameter(torch.randn(2, embed_dim) / embed_dim**0.5)

    def prepare_images(self, images: Fragments) -> Fragments:
        return images

    def prepare_texts(self, texts: Fragments) -> Fragments:
        """Captions with the word axis trimmed to the longest one."""
        return texts.trimmed()

    def score(self, images: Fragments, texts: Fragments) -> Tensor:
        dustbins = None if self.dustbins is None else (self.dustbins[0], self.dustbins[1])
        return omit_similarity(images, texts, self.settings, dustbins)

    def pair_bytes(self, n_words: int) -> int:
        """Rough peak bytes per pair: ~8 float32 ``(K + 1) × (L + 1)`` tensors in the solver."""
        return 4 * 8 * (self.num_regions + 1) * (n_words + 1)

    def forward(self, images: Fragments, texts: Fragments) -> Tensor:
        return self.score(images, self.prepare_texts(texts))
