"""Learnable transport costs ``f_c``: a similarity matrix in, a cost matrix out (L2RM §4.2).

L2RM learns the cost of moving image ``i`` to caption ``j`` from the batch similarity matrix
``S`` with one feed-forward layer initialised at ``f_c(S) = relu(1 − S)``, trained
self-supervised by Eq. 6 (``⟨π^sup, f_c(S)⟩`` on reconstructed pairs, see
:mod:`mispair.methods.l2rm`). Two layers are provided:

- :class:`ExchangeableCost` (default): the most general affine map of a matrix that commutes with
  any reordering of the images and, independently, of the captions (Hartford et al., ICML 2018):
  the entry itself, its row mean, its column mean and the matrix mean, plus a bias. Five
  parameters; any batch shape.
- :class:`LinearCost`: the reference code's ``Linear(B, B)`` acting on each row of ``S``. Its
  output depends on where a caption sits in the batch (hhc1997/L2RM issue #14); it is kept for
  fidelity.

Both start exactly at ``relu(1 − S)``; :func:`cosine_cost` is the fixed ``1 − S`` of the Table 3
ablation.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

COST_FUNCTIONS = ("exchangeable", "linear", "cosine")


class ExchangeableCost(nn.Module):
    r"""Row/column permutation-equivariant cost layer.

    .. math::
        f_c(S)_{ij} = \mathrm{relu}\big(w_0 S_{ij} + w_1 \bar S_{i\cdot} + w_2 \bar S_{\cdot j}
        + w_3 \bar S + b\big)

    with ``w = (−1, 0, 0, 0)``, ``b = 1`` at initialisation, i.e. ``relu(1 − S)``. For any
    permutations ``P, Q``: ``f_c(P S Qᵀ) = P f_c(S) Qᵀ``.

    Shapes: ``S [..., n, m]`` → ``[..., n, m]``.
    """

    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.tensor([-1.0, 0.0, 0.0, 0.0]))
        self.bias = nn.Parameter(torch.tensor(1.0))

    def forward(self, sims: Tensor) -> Tensor:
        w = self.weight.to(sims.dtype)
        row = sims.mean(dim=-1, keepdim=True)
        col = sims.mean(dim=-2, keepdim=True)
        total = sims.mean(dim=(-2, -1), keepdim=True)
        return torch.relu(w[0] * sims + w[1] * row + w[2] * col + w[3] * total + self.bias)


class LinearCost(nn.Module):
    r"""The reference's cost layer: ``f_c(S) = relu(S Wᵀ + b)``, ``W ∈ ℝ^{B×B}``, on each row.

    Initialised with ``W = −I``, ``b = 1``, so ``f_c(S) = relu(1 − S)``. Entry ``(i, j)`` mixes
    row ``i`` of ``S`` through column ``j`` of ``Wᵀ``: once trained, the cost depends on the
    order of the captions in the batch. A batch with ``m < B`` captions uses the leading
    ``m × m`` block of ``W`` and ``b[:m]`` (the reference drops such batches).

    Shapes: ``S [..., n, m]`` with ``m ≤ B`` → ``[..., n, m]``.
    """

    def __init__(self, size: int) -> None:
        super().__init__()
        self.size = size
        self.weight = nn.Parameter(-torch.eye(size))
        self.bias = nn.Parameter(torch.ones(size))

    def forward(self, sims: Tensor) -> Tensor:
        m = sims.shape[-1]
        if m > self.size:
            raise ValueError(f"LinearCost of size {self.size} got {m} captions")
        weight = self.weight[:m, :m].to(sims.dtype)
        return torch.relu(sims @ weight.t() + self.bias[:m].to(sims.dtype))


def cosine_cost(sims: Tensor) -> Tensor:
    """The fixed cosine-distance cost ``1 − S`` (L2RM Table 3, "w/o learnable cost")."""
    return 1 - sims


@torch.no_grad()
def cost_drift(cost_fn: nn.Module, size: int, seed: int = 0) -> dict[str, float]:
    """How far a learned cost has moved from its initialisation ``relu(1 − S)``.

    ``mean``/``max`` of ``|f_c(S) − relu(1 − S)|`` over a fixed ``S ~ U[0, 1]^{size × size}``
    (the seed's), and, for :class:`ExchangeableCost`, its five parameters (``w0`` starts at −1,
    ``b`` at 1, the others at 0).
    """
    param = next(cost_fn.parameters())
    generator = torch.Generator().manual_seed(seed)
    sims = torch.rand(size, size, generator=generator, dtype=torch.float64).to(param)
    delta = (cost_fn(sims) - torch.relu(1 - sims)).abs()
    values = {"cost/drift_mean": float(delta.mean()), "cost/drift_max": float(delta.max())}
    if isinstance(cost_fn, ExchangeableCost):
        values.update({f"cost/w{k}": float(w) for k, w in enumerate(cost_fn.weight)})
        values["cost/b"] = float(cost_fn.bias)
    return values


def create_cost_function(kind: str, batch_size: int) -> nn.Module | None:
    """``exchangeable`` | ``linear`` (needs ``batch_size``) → a module; ``cosine`` → None."""
    if kind == "exchangeable":
        return ExchangeableCost()
    if kind == "linear":
        return LinearCost(batch_size)
    if kind == "cosine":
        return None
    raise ValueError(f"cost function must be one of {COST_FUNCTIONS}, got {kind!r}")
