"""Internal: a prepared batch of problems and the two ways to run a Sinkhorn half-step on it.

Both domains compute the same soft c-transforms on scaled potentials ``α = f/ε``, ``β = g/ε``:

.. math::
    \\mathrm{row}_i(β) = \\log\\sum_j e^{-C_{ij}/ε + β_j}, \\qquad
    \\mathrm{col}_j(α) = \\log\\sum_i e^{-C_{ij}/ε + α_i}.

``LogDomain`` evaluates them with an exact per-row log-sum-exp (one ``exp`` of the whole
``[B, n, m]`` tensor per half-step). ``KernelDomain`` precomputes the max-shifted kernel
``K_ij = exp(-C_ij/ε - s_i)``, ``s_i = max_j(-C_ij/ε)``, once and iterates the scalings
``u = e^α``, ``v = e^β`` (each kept at sum 1 per problem, its scale in a separate log factor), so
a half-step is one batched vector–matrix product and one division; it is exact in float32 as long
as every row's cost range over ``ε`` stays below :func:`kernel_limit` minus ``log max(n, m)``
(then no entry of ``K`` and no row or column sum underflows), see :func:`kernel_safe`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor


def neg_fill(dtype: torch.dtype) -> float:
    """Finite stand-in for ``-inf`` on masked entries (``exp`` gives 0, gradients stay finite)."""
    return torch.finfo(dtype).min / 4


def kernel_limit(dtype: torch.dtype) -> float:
    """Largest row range of ``C/ε`` the kernel accepts: ``-log(tiny) - 8`` (79 in float32)."""
    return -torch.log(torch.tensor(torch.finfo(dtype).tiny, dtype=torch.float64)).item() - 8.0


@dataclass(frozen=True)
class Problem:
    """A batch prepared for iteration: scaled cost and log-marginals, zeroed where masked."""

    cr: Tensor  # [B, n, m]  -C/ε on valid entries, neg_fill elsewhere
    valid: Tensor | None  # [B, n, m] bool: transport allowed; None: every row x col pair
    loga: Tensor  # [B, n]  log a on transportable rows, 0 elsewhere
    logb: Tensor  # [B, m]
    a: Tensor  # [B, n]  a on transportable rows, 0 elsewhere
    b: Tensor  # [B, m]
    rows: Tensor  # [B, n] bool: the row has mass and at least one allowed entry
    cols: Tensor  # [B, m] bool
    row_max: Tensor  # [B, n] max_j cr_ij over allowed entries; 0 on other rows (detached)
    row_min: Tensor  # [B, n] min_j cr_ij over allowed entries; 0 on other rows (detached)

    def select(self, idx: Tensor) -> Problem:
        """The sub-batch ``idx`` (a bool mask or an index tensor over problems)."""
        return Problem(*(None if x is None else x[idx] for x in (getattr(self, k) for k in _FIELDS)))


_FIELDS = tuple(Problem.__dataclass_fields__)


def prepare(cost: Tensor, a: Tensor, b: Tensor, reg: float, mask: Tensor | None) -> Problem:
    """Build a :class:`Problem`; padded or masked entries can hold anything, even NaN."""
    has_a, has_b = a > 0, b > 0
    scaled = cost * (-1.0 / reg)
    if mask is None:  # rectangular support: the rows and columns that carry mass
        valid = None
        rows, cols = has_a & has_b.any(1, keepdim=True), has_b & has_a.any(1, keepdim=True)
        # all-real batches skip the padding fill; the check reads the device, so CPU only
        full = cost.device.type == "cpu" and bool(rows.all()) and bool(cols.all())
        support = None if full else rows.unsqueeze(2) & cols.unsqueeze(1)
    else:
        valid = has_a.unsqueeze(2) & has_b.unsqueeze(1) & mask.to(torch.bool)
        rows, cols, support = valid.any(2), valid.any(1), valid
    if support is None:
        cr = scaled
        low, high = torch.aminmax(cr.detach(), dim=2)
    else:
        cr = torch.where(support, scaled, neg_fill(cost.dtype))
        high = cr.detach().amax(2)
        low = torch.where(support, cr.detach(), torch.finfo(cr.dtype).max).amin(2)
    zero, one = torch.zeros((), dtype=cost.dtype), torch.ones((), dtype=cost.dtype)
    return Problem(
        cr,
        valid,
        torch.where(rows, torch.where(rows, a, one).log(), zero),
        torch.where(cols, torch.where(cols, b, one).log(), zero),
        torch.where(rows, a, zero),
        torch.where(cols, b, zero),
        rows,
        cols,
        torch.where(rows, high, zero),
        torch.where(rows, low, zero),
    )


def kernel_safe(p: Problem, *, autodiff: bool = False) -> Tensor:
    """``[B]`` bool: the kernel domain is exact for this problem.

    Requires a rectangular support (the allowed entries are all pairs of transportable rows and
    columns, as with padding) and a largest row range of ``C/ε`` below :func:`kernel_limit` minus
    ``log max(n, m)``. Then ``K`` has a 1 in every row and no entry below ``tiny``, and the
    scalings (sum 1) have an entry of at least ``1/max(n, m)``, so every row and column sum is at
    least ``exp(-limit)``. Sparser supports (e.g. L2RM's Eq. 8 mask) use the log domain.

    With ``autodiff`` (backpropagation through the iterations) the limit is halved: the backward
    pass of ``u = a / (K v)`` divides by the square of the sum, which must not overflow either.
    """
    if p.valid is None:
        rect = torch.ones_like(p.rows[:, 0])
    else:
        rect = (p.valid == (p.rows.unsqueeze(2) & p.cols.unsqueeze(1))).flatten(1).all(1)
    spread = (p.row_max - p.row_min).amax(1)
    limit = kernel_limit(p.cr.dtype) / (2 if autodiff else 1)
    return rect & (spread <= limit - math.log(max(p.cr.shape[1:])))


def _lse(x: Tensor, dim: int) -> Tensor:
    if torch.is_grad_enabled() and x.requires_grad:
        return torch.logsumexp(x, dim)
    top = x.amax(dim, keepdim=True)  # in place: one allocation per half-step
    return x.sub_(top).exp_().sum(dim).log_().add_(top.squeeze(dim))


class LogDomain:
    """Exact per-row / per-column log-sum-exp (robust at any ``ε``); state ``(α, β)``."""

    name = "log"

    def __init__(self, p: Problem) -> None:
        self.cr, self.rows, self.cols = p.cr, p.rows, p.cols
        self.loga, self.logb = p.loga, p.logb

    def start(self) -> tuple[Tensor, ...]:
        return self.loga.new_zeros(self.loga.shape), self.logb.new_zeros(self.logb.shape)

    def step(self, state: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
        alpha = torch.where(self.rows, self.loga - self.row(state[1]), 0)
        return alpha, torch.where(self.cols, self.logb - self.col(alpha), 0)

    def potentials(self, state: tuple[Tensor, ...]) -> tuple[Tensor, Tensor]:
        return state[0], state[1]

    def row(self, beta: Tensor) -> Tensor:
        return _lse(self.cr + beta.unsqueeze(1), 2)

    def col(self, alpha: Tensor) -> Tensor:
        return _lse(self.cr + alpha.unsqueeze(2), 1)

    def select(self, idx: Tensor) -> LogDomain:
        new = LogDomain.__new__(LogDomain)
        for key in ("cr", "rows", "cols", "loga", "logb"):
            setattr(new, key, getattr(self, key)[idx])
        return new


class KernelDomain:
    r"""Max-shifted kernel in scaling form: a half-step is one batched vector–matrix product.

    ``K_ij = exp(-C_ij/ε - s_i)`` with ``s_i = max_j(-C_ij/ε)`` (row maximum 1). The state is
    ``(û, log c_u, v̂, log c_v)`` with scalings ``u = c_u û``, ``v = c_v v̂``, each of ``û``,
    ``v̂`` scaled to sum 1 per problem, and ``P_ij = u_i K_ij v_j``:

    .. math::
        u = a \oslash (K v), \qquad v = b \oslash (K^\top u).

    Under :func:`kernel_safe` every ``K v̂`` and ``K^T û`` on a transportable row/column is at
    least ``exp(-limit)``: no ``exp``/``log`` inside the loop, and no underflow. Potentials:
    ``α = log u - s``, ``β = log v``.
    """

    name = "kernel"

    def __init__(self, p: Problem) -> None:
        self.rows, self.cols, self.a, self.b = p.rows, p.cols, p.a, p.b
        self.shift = p.row_max  # [B, n]
        k = p.cr - self.shift.unsqueeze(2)
        self.k = k.exp_() if not k.requires_grad else k.exp()  # [B, n, m], max 1 per row
        self.tiny = torch.finfo(p.cr.dtype).tiny

    def start(self) -> tuple[Tensor, ...]:
        zero = self.a.new_zeros(self.a.shape[0])
        return torch.ones_like(self.a), zero, torch.ones_like(self.b), zero

    def _scale(self, marg: Tensor, sums: Tensor, log_other: Tensor) -> tuple[Tensor, Tensor]:
        x = marg / sums.squeeze(1).clamp_min(self.tiny)  # zero where the marginal is zero
        total = x.sum(1).clamp_min(self.tiny).detach()
        return x / total.unsqueeze(1), total.log() - log_other

    def step(self, state: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
        u, log_cu = self._scale(self.a, state[2].unsqueeze(1) @ self.k.transpose(1, 2), state[3])
        v, log_cv = self._scale(self.b, u.unsqueeze(1) @ self.k, log_cu)
        return u, log_cu, v, log_cv

    def potentials(self, state: tuple[Tensor, ...]) -> tuple[Tensor, Tensor]:
        u, log_cu, v, log_cv = state
        alpha = torch.where(self.rows, u, 1).log() + (log_cu.unsqueeze(1) - self.shift)
        beta = torch.where(self.cols, v, 1).log() + log_cv.unsqueeze(1)
        return torch.where(self.rows, alpha, 0), torch.where(self.cols, beta, 0)

    def select(self, idx: Tensor) -> KernelDomain:
        new = KernelDomain.__new__(KernelDomain)
        for key in ("rows", "cols", "a", "b", "shift", "k"):
            setattr(new, key, getattr(self, key)[idx])
        new.tiny = self.tiny
        return new
