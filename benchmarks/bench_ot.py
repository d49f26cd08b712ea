"""Speed of ``mispair.ot.sinkhorn`` against POT on the OMIT and L2RM workloads.

    python benchmarks/bench_ot.py [--n-iter 30] [--tol 1e-4] [--max-iter 100] [--repeats 3]

OMIT: 128 x 128 image-caption pairs, each a 50 x 17 problem (49 grid fragments and 16 tokens, each
side extended by its global embedding as a dustbin, uniform marginals), cosine costs ``1 - cos``,
reg 0.02, float32. L2RM: one 129 x 129 problem (128 noisy pairs + the dummy point of Eq. 12-14,
Eq. 8 mask, rho = 0.1), reg 0.01 and 0.07. Compared at the same iteration count (fixed mode:
POT with ``tol=0``) and at the same tolerance (row-marginal L2 error; POT stops the whole batch
when its worst problem converges, we retire each problem when it converges). The per-problem
loop (POT ``ot.sinkhorn``, ``method="sinkhorn_log"``) runs on a sample of ``--loop-sample``
problems and is scaled to the whole batch. Times are medians over ``--repeats`` runs.
"""

from __future__ import annotations

import argparse
import statistics
import time

import ot
import torch

from mispair.ot import partial_extension, positive_pair_mask, sinkhorn


def omit_workload(n_pairs: int = 128, seed: int = 0, dim: int = 64):
    """Cosine costs between dustbin-extended fragment sets of every image-caption pair."""
    gen = torch.Generator().manual_seed(seed)
    common = torch.randn(dim, generator=gen)

    def frags(count, size):
        x = torch.randn(count, size, dim, generator=gen) + 0.5 * common
        x = torch.nn.functional.normalize(x, dim=-1)
        glob = torch.nn.functional.normalize(x.mean(1, keepdim=True), dim=-1)
        return torch.cat([glob, x], 1)  # dustbin first, as in OMIT Eq. 4

    img, cap = frags(n_pairs, 49), frags(n_pairs, 16)
    cost = 1 - torch.einsum("ikd,jld->ijkl", img, cap).reshape(n_pairs * n_pairs, 50, 17)
    bsz = cost.shape[0]
    return cost.contiguous(), torch.full((bsz, 50), 1 / 50), torch.full((bsz, 17), 1 / 17)


def l2rm_workload(seed: int = 0):
    """One batch of 128 noisy pairs, extended with dummies; POT gets the mask as a big cost."""
    gen = torch.Generator().manual_seed(seed)
    cost = torch.rand(1, 128, 128, generator=gen)
    uni = torch.full((1, 128), 1 / 128)
    mask = positive_pair_mask(128)
    ext = partial_extension(cost, uni, uni, 0.1, mask=mask)
    return cost, uni, mask, (torch.where(ext[3], ext[0], 1e3), ext[1], ext[2])


def timed(fn, repeats):
    out, times = None, []
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return out, statistics.median(times)


def pot_loop(cost, a, b, reg, n_iter, tol, sample):
    """POT's single-problem solver on the first ``sample`` problems: plans and mean iterations."""
    plans, iters = [], []
    for k in range(sample):
        plan, log = ot.sinkhorn(
            a[k], b[k], cost[k], reg, method="sinkhorn_log", numItermax=n_iter, stopThr=tol, log=True
        )
        plans.append(plan)
        iters.append(log["niter"] + 1)
    return torch.stack(plans), sum(iters) / len(iters)


def compare(label, cost, a, b, reg, n_iter, tol, args, pot_problem=None, ours_kw=None):
    """Time ours (auto and log), POT batched and POT's loop; print one block of rows."""
    ours_kw = ours_kw or {}
    pc, pa, pb = pot_problem or (cost, a, b)
    crop = (slice(None), slice(0, cost.shape[1]), slice(0, cost.shape[2]))
    kw = {"n_iter": n_iter, "tol": tol}
    auto, t_auto = timed(lambda: sinkhorn(cost, a, b, reg, **kw, **ours_kw), args.repeats)
    log, t_log = timed(lambda: sinkhorn(cost, a, b, reg, method="log", **kw, **ours_kw), args.repeats)
    pot, t_pot = timed(
        lambda: ot.solve_batch(
            pc, reg, pa, pb, max_iter=n_iter, tol=tol or 0.0, method="log_sinkhorn", grad="detach"
        ),
        args.repeats,
    )
    sample = min(args.loop_sample, cost.shape[0])
    (loop, loop_iters), t_loop = timed(
        lambda: pot_loop(pc, pa, pb, reg, n_iter, tol or 0.0, sample), args.repeats
    )
    t_loop *= cost.shape[0] / sample
    it = f"iters <= {n_iter}, tol {tol}" if tol else f"{n_iter} iters"
    print(
        f"\n{label} ({it}); our iterations: median {auto.n_iter.float().median():.0f}, "
        f"mean {auto.n_iter.float().mean():.1f}, max {auto.n_iter.max()}; POT batched stopped "
        f"after {pot.log['n_iter'] + 1}; POT loop mean {loop_iters:.1f}"
    )
    rows = [
        (f"mispair sinkhorn, method=auto -> {auto.method}", t_auto, auto.plan),
        ("mispair sinkhorn, method=log", t_log, log.plan),
        ("POT ot.solve_batch (log_sinkhorn)", t_pot, pot.plan[crop]),
        (f"POT ot.sinkhorn loop (x{cost.shape[0] // sample} from {sample})", t_loop, None),
    ]
    for name, sec, plan in rows:
        diff = (plan - auto.plan).abs().max().item() if plan is not None else None
        if plan is None:
            diff = (loop[crop] - auto.plan[:sample]).abs().max().item()
        print(
            f"  {name:<48} {sec:9.3f} s   auto is {sec / t_auto:6.1f}x faster"
            f"   max|plan - auto plan| {diff:.1e}"
        )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-iter", type=int, default=30)
    parser.add_argument("--tol", type=float, default=1e-4)
    parser.add_argument("--max-iter", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--loop-sample", type=int, default=64)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, POT {ot.__version__}, {args.threads} thread(s), float32")
    cost, a, b = omit_workload()
    lo, hi = cost.amin().item(), cost.amax().item()
    print(
        f"OMIT: {cost.shape[0]} problems of {tuple(cost.shape[1:])}, cost range [{lo:.2f}, "
        f"{hi:.2f}], reg 0.02"
    )
    compare("OMIT, fixed", cost, a, b, 0.02, args.n_iter, None, args)
    compare("OMIT, tolerance", cost, a, b, 0.02, args.max_iter, args.tol, args)
    lc, uni, mask, pot_problem = l2rm_workload()
    for reg in (0.01, 0.07):
        kw = {"partial_mass": 0.1, "mask": mask}
        compare(
            f"L2RM reg {reg}, fixed",
            lc,
            uni,
            uni,
            reg,
            10 * args.n_iter,
            None,
            args,
            pot_problem,
            kw,
        )
        compare(
            f"L2RM reg {reg}, tolerance",
            lc,
            uni,
            uni,
            reg,
            10 * args.max_iter,
            args.tol,
            args,
            pot_problem,
            kw,
        )


if __name__ == "__main__":
    main()
