"""Partial transport through dummy points (L2RM Appendix B, Eq. 12–14) and the Eq. 8 mask."""

from __future__ import annotations

import torch
from torch import Tensor


def positive_pair_mask(n: int, m: int | None = None, *, device: torch.device | str | None = None) -> Tensor:
    r"""Mask of L2RM Eq. 8 that forbids transport between the two halves of a given pair.

    .. math:: M_{ij} = 0 \text{ if } i = j, \quad 1 \text{ otherwise.}

    Parameters
    ----------
    n, m : int
        Numbers of images and captions (``m = n`` by default); pair ``i`` is row and column ``i``.
    device : torch.device, optional

    Returns
    -------
    Tensor, shape (n, m), bool
        ``True`` where transport is allowed; broadcasts against a batch ``[B, n, m]``.

    Examples
    --------
    >>> positive_pair_mask(3).int()
    tensor([[0, 1, 1],
            [1, 0, 1],
            [1, 1, 0]], dtype=torch.int32)
    """
    m = n if m is None else m
    return ~torch.eye(n, m, dtype=torch.bool, device=device)


def partial_extension(
    cost: Tensor,
    a: Tensor,
    b: Tensor,
    mass: float | Tensor,
    *,
    mask: Tensor | None = None,
    xi: float = 1.0,
    big: float | Tensor | None = None,
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    r"""Extend a partial problem with one dummy point per side (Chapel et al.; L2RM Eq. 12–14).

    Moving only :math:`\rho` units between :math:`a` and :math:`b` (L2RM Eq. 7) becomes a
    balanced problem on one more row and column:

    .. math::
        \hat C = \begin{bmatrix} C & \xi \mathbb 1_m \\ \xi \mathbb 1_n^\top & 2\xi + A
        \end{bmatrix}, \quad
        \hat M = \begin{bmatrix} M & \mathbb 1 \\ \mathbb 1^\top & 1 \end{bmatrix}, \quad
        \hat a = \begin{bmatrix} a \\ \lVert b\rVert_1 - \rho \end{bmatrix}, \quad
        \hat b = \begin{bmatrix} b \\ \lVert a\rVert_1 - \rho \end{bmatrix},

    with :math:`A > \max C`, so the dummies exchange no mass in the exact problem and the
    ``[:n, :m]`` block of the solution carries exactly :math:`\rho`. ``ξ`` only adds the constant
    :math:`\xi(\lVert a\rVert_1 + \lVert b\rVert_1 - 2\rho)` to the objective (any ``ξ`` gives
    the same plan, entropic or not); with entropy, the dummy–dummy entry keeps a fraction of
    order :math:`e^{-(A - \max C)/\varepsilon}` of the mass.

    Parameters
    ----------
    cost : Tensor, shape (B, n, m)
    a : Tensor, shape (B, n)
    b : Tensor, shape (B, m)
    mass : float or Tensor of shape (B,)
        :math:`0 \le \rho \le \min(\lVert a\rVert_1, \lVert b\rVert_1)` (not checked).
    mask : Tensor, shape (B, n, m) or (n, m), bool, optional
        Allowed entries of the real block (e.g. :func:`positive_pair_mask`); dummies are free.
    xi : float
        Cost :math:`\xi` of moving to or from a dummy.
    big : float or Tensor of shape (B,), optional
        :math:`A`; default ``max C + 1`` per problem over the allowed entries with mass (no
        gradient).

    Returns
    -------
    cost_ext : Tensor, shape (B, n + 1, m + 1)
        Differentiable in ``cost``.
    a_ext : Tensor, shape (B, n + 1)
    b_ext : Tensor, shape (B, m + 1)
    mask_ext : Tensor, shape (B, n + 1, m + 1), bool

    Examples
    --------
    >>> c, a, b = torch.zeros(1, 2, 2), torch.full((1, 2), 0.5), torch.full((1, 2), 0.5)
    >>> ce, ae, be, me = partial_extension(c, a, b, 0.25, xi=1.0, big=2.0)
    >>> ce[0]
    tensor([[0., 0., 1.],
            [0., 0., 1.],
            [1., 1., 4.]])
    >>> ae[0], be[0]
    (tensor([0.5000, 0.5000, 0.7500]), tensor([0.5000, 0.5000, 0.7500]))
    """
    bsz, n, m = cost.shape
    full = torch.ones(bsz, n, m, dtype=torch.bool, device=cost.device)
    mask = full if mask is None else mask.to(torch.bool) & full
    if big is None:
        support = mask & (a > 0).unsqueeze(2) & (b > 0).unsqueeze(1)
        top = torch.where(support, cost.detach(), -torch.inf).flatten(1).amax(1)
        big = torch.where(top.isfinite(), top + 1.0, 1.0)
    big = torch.as_tensor(big, dtype=cost.dtype, device=cost.device).expand(bsz)
    mass = torch.as_tensor(mass, dtype=a.dtype, device=a.device).expand(bsz)
    side_col = torch.full((bsz, n, 1), xi, dtype=cost.dtype, device=cost.device)
    side_row = torch.full((bsz, 1, m), xi, dtype=cost.dtype, device=cost.device)
    corner = (2 * xi + big).view(bsz, 1, 1)
    cost_ext = torch.cat([torch.cat([cost, side_col], 2), torch.cat([side_row, corner], 2)], 1)
    a_ext = torch.cat([a, (b.sum(1) - mass).unsqueeze(1)], 1)
    b_ext = torch.cat([b, (a.sum(1) - mass).unsqueeze(1)], 1)
    mask_ext = torch.nn.functional.pad(mask, (0, 1, 0, 1), value=True)
    return cost_ext, a_ext, b_ext, mask_ext
