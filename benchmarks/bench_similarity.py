"""SGR / SAF all-pairs similarities: the engine against NCR's evaluation strategy.

The reference strategy is NCR's ``shard_attn_scores`` + ``EncoderSimilarity.forward``: for each
shard of images × shard of captions, loop over the captions, repeat each (at its exact length)
across the image shard and run the head. It is re-implemented with the same weights in
``tests/nn/test_sgraf.py::reference_similarities``. Both run on the same random inputs (embed
1024, sim_dim 256, caption lengths 6–20); the table shows the max abs difference and the speed
ratio. Peak memory for 1K images × 5K captions is measured in subprocesses (Linux ``VmHWM``,
reset after the inputs are built).

Both strategies must run the same dense products: for every image–caption pair, the word–region
scores and the attended contexts (``2 × K × 1024`` per word), the ``1024 → 256`` projection of
every word's squared difference (and of the global one), and for SGR the
``256 × 256`` products of its reasoning steps (two per node per step: the folded bilinear form
and the update; the reference spends three, and runs its last step on every node). The ``floor``
column is the time of those products alone for the engine, at the GEMM throughput measured here
on one ``[16384, 1024] × [1024, 256]`` product: no strategy with the same output can go below it,
which bounds the ratio.

``--dtype bfloat16`` adds a row for the engine with the head and embeddings in that dtype (fast
on CPUs with ``avx512_bf16`` or AMX, and on GPUs): its speed-up over the float32 reference, its
max abs difference, and how often each image's best caption is unchanged (``top-1 kept``; with
these untrained weights the similarities span little, so this is a harsh test).

Run: ``PYTHONPATH=src python benchmarks/bench_similarity.py [--quick] [--no-memory]
[--dtype bfloat16] [--device cuda] [--profile]``. ``--profile`` first prints the share of
the engine's time spent in matrix products (torch profiler).
"""

from __future__ import annotations

import argparse
import copy
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

import torch

from mispair.nn.allpairs import all_pair_similarities
from mispair.nn.embedding import Fragments
from mispair.nn.heads import create_head
from mispair.testing import random_images, random_texts, reference_similarities

EMBED, REGIONS = 1024, 36


@torch.no_grad()
def reference_strategy(head: torch.nn.Module, images: Fragments, texts: Fragments, shard: int):
    """NCR ``shard_attn_scores``: shards of images × captions, a caption loop inside each."""
    sims = torch.empty(len(images), len(texts), device=images.local.device)
    for i in range(0, len(images), shard):
        for j in range(0, len(texts), shard):
            block = reference_similarities(head, images[i : i + shard], texts[j : j + shard])
            sims[i : i + shard, j : j + shard] = block
    return sims


def inputs(n_images: int, n_captions: int, seed: int = 0, device: str = "cpu") -> tuple[Fragments, Fragments]:
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.randint(6, 21, (n_captions,), generator=gen).tolist()
    images = random_images(n_images, REGIONS, EMBED, seed)
    return images.to(device), random_texts(lengths, EMBED, seed + 1).to(device)


def timed(fn, repeats: int) -> tuple[float, torch.Tensor]:
    best, out = float("inf"), None
    for _ in range(repeats):
        began = time.perf_counter()
        out = fn()
        if out.is_cuda:
            torch.cuda.synchronize()
        best = min(best, time.perf_counter() - began)
    return best, out.cpu()


def gemm_macs_per_second(device: str) -> float:
    """Throughput of one ``[16384, 1024] × [1024, 256]`` product (best of 3)."""
    x, w = torch.randn(16384, EMBED, device=device), torch.randn(256, EMBED, device=device)
    seconds, _ = timed(lambda: torch.nn.functional.linear(x, w), 3)
    return x.shape[0] * EMBED * 256 / seconds


def floor_seconds(head, n_images: int, texts: Fragments, macs_per_second: float) -> float:
    """Seconds of the dense products any exact strategy runs (see the module docstring)."""
    nodes = n_images * int((texts.lengths + 1).sum())
    words = n_images * int(texts.lengths.sum())
    macs = nodes * EMBED * 256 + words * 2 * REGIONS * EMBED
    if hasattr(head, "steps"):  # SGR: two 256 × 256 products per node per step but the last
        macs += nodes * 2 * (len(head.steps) - 1) * 256 * 256
    return macs / macs_per_second


def low_precision_row(head, images, texts, ref, ref_s, dtype, repeats) -> str:
    """The engine with the head and inputs in ``dtype``, against the float32 reference."""
    low = copy.deepcopy(head).to(dtype)
    low_s, out = timed(partial(all_pair_similarities, low, images, texts, dtype=dtype), repeats)
    diff = (ref - out).abs().max().item()
    kept = (ref.argmax(1) == out.argmax(1)).float().mean().item()
    return (
        f"{str(dtype).removeprefix('torch.'):>4} engine: {low_s:.2f} s, {ref_s / low_s:.2f}× "
        f"the reference, max |diff| {diff:.2e} (similarity std {ref.std():.2e}), "
        f"top-1 kept {kept:.0%}"
    )


def speed_table(
    sizes: list[tuple[int, int, int]], repeats: int, dtype: torch.dtype | None, device: str
) -> None:
    rate = gemm_macs_per_second(device)
    print(f"dense throughput {2 * rate / 1e9:.1f} GFLOP/s")
    print(
        f"{'head':>4} {'images×captions':>16} {'shard':>5} {'reference s':>11} "
        f"{'engine s':>9} {'ratio':>6} {'floor s':>8} {'engine/floor':>12} "
        f"{'max |diff|':>11}"
    )
    for name in ("sgr", "saf"):
        torch.manual_seed(0)
        head = create_head(name, EMBED, num_regions=REGIONS).eval().to(device)
        for n_images, n_captions, shard in sizes:
            images, texts = inputs(n_images, n_captions, device=device)
            ref_s, ref = timed(partial(reference_strategy, head, images, texts, shard), repeats)
            eng_s, eng = timed(partial(all_pair_similarities, head, images, texts), repeats)
            diff = (ref - eng).abs().max().item()
            floor = floor_seconds(head, n_images, texts, rate)
            print(
                f"{name:>4} {f'{n_images}×{n_captions}':>16} {shard:>5} {ref_s:>11.2f} "
                f"{eng_s:>9.2f} {ref_s / eng_s:>5.2f}× {floor:>8.2f} {eng_s / floor:>11.2f}× "
                f"{diff:>11.2e}",
                flush=True,
            )
            if dtype is not None:
                print("     ", low_precision_row(head, images, texts, ref, ref_s, dtype, repeats))


GEMM_OPS = ("aten::addmm", "aten::mm", "aten::bmm", "aten::baddbmm")


def gemm_share(n_images: int = 200, n_captions: int = 100, device: str = "cpu") -> None:
    """Share of the engine's SGR time spent in matrix products (torch profiler, self time)."""
    from torch.profiler import ProfilerActivity, profile

    head = create_head("sgr", EMBED, num_regions=REGIONS).eval().to(device)
    images, texts = inputs(n_images, n_captions, device=device)
    all_pair_similarities(head, images, texts)  # warm-up
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        all_pair_similarities(head, images, texts)
    events = prof.key_averages()
    total = sum(e.self_cpu_time_total for e in events)
    gemm = sum(e.self_cpu_time_total for e in events if e.key in GEMM_OPS)
    print(
        f"engine, SGR {n_images}×{n_captions}: {gemm / total:.0%} of the CPU time in "
        f"{'/'.join(op.removeprefix('aten::') for op in GEMM_OPS)}"
    )


def _rss_mib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field):
            return int(line.split()[1]) // 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def memory_child(strategy: str) -> None:
    """Peak RSS with 1K×5K inputs: the engine over one 16-image slice (every caption block) or
    the reference over one 1000-image shard × 8 captions (its peak is per caption)."""
    head = create_head("sgr", EMBED, num_regions=REGIONS).eval()
    images, texts = inputs(1000, 5000)
    Path("/proc/self/clear_refs").write_text("5")  # reset the peak (VmHWM) to the current RSS
    base = _rss_mib("VmRSS:")
    if strategy == "engine":
        all_pair_similarities(head, images[:16], texts)
    else:
        reference_strategy(head, images, texts[:8], shard=1000)
    print(base, _rss_mib("VmHWM:"))


def memory_report() -> None:
    print("peak memory, SGR, 1K images × 5K captions, 36 regions (RSS MiB, subprocess):")
    for strategy in ("engine", "reference"):
        command = [sys.executable, __file__, "--memory-child", strategy]
        result = subprocess.run(command, capture_output=True, text=True, check=True)
        base, peak = result.stdout.split()
        print(f"  {strategy:>9}: inputs {base} MiB, peak {peak} MiB (+{int(peak) - int(base)} MiB)")
    print(
        "  engine: measured on a 16-image slice against all 5K captions (blocks are capped by "
        "max_block_bytes=64 MiB, so more images add only the 20 MiB output);"
    )
    print("  reference: one 1000-image shard, 8 captions (its working set is per caption)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="the small size only")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--no-memory", action="store_true")
    parser.add_argument("--dtype", choices=["bfloat16", "float16"], help="also time the engine in it")
    parser.add_argument("--profile", action="store_true", help="the engine's share of time in GEMMs")
    parser.add_argument("--device", default="cpu", help="cpu or cuda (memory is reported on the CPU only)")
    parser.add_argument("--memory-child", choices=["engine", "reference"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.memory_child:
        memory_child(args.memory_child)
        return
    print(
        f"torch {torch.__version__}, {args.device}, {torch.get_num_threads()} threads, embed {EMBED}, "
        f"{REGIONS} regions, sim_dim 256; best of {args.repeats}"
    )
    sizes = [(100, 500, 100)] + ([] if args.quick else [(1000, 100, 1000)])
    if args.profile:
        gemm_share(device=args.device)
    speed_table(sizes, args.repeats, getattr(torch, args.dtype) if args.dtype else None, args.device)
    if not args.no_memory and args.device == "cpu":
        memory_report()


if __name__ == "__main__":
    main()
