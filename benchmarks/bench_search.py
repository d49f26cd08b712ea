"""Search: approximate indexes against exact search, and reranking by a fragment head.

Three parts, each measured side by side in one run:

1. **Synthetic 100K**: a model trained briefly on synthetic data (or ``--synthetic-checkpoint``)
   indexes a generated collection of ``--synthetic-images`` images (one caption each; features
   rendered by :func:`mispair.data.synthetic.make_synthetic`). For the exact index and each
   approximate one (``--specs``): build time, index size, queries per second (``--queries``
   captions searching the images, one batch, ``--threads`` FAISS threads), recall@10 against
   exact search (the share of exact top-10 found) and the ground truth's R@10.
2. **OpenClipart**, the same for the whole prepared collection (train + dev + test) with a
   checkpoint trained on it (``--checkpoint``; the test captions are the queries).
3. **Reranking** (``--rerank-checkpoint``, a fragment head such as CAM or SGR, on OpenClipart's
   test split): every caption's first-stage top-``--rerank`` images and every image's top captions
   reordered by the head, against the head's full all-pairs ranking (overlap of the top 10,
   R@1/5/10 of first stage, reranked and full) and the cost per query of each.

Run: ``PYTHONPATH=src python benchmarks/bench_search.py --checkpoint runs/vse_openclipart/best.pt
--rerank-checkpoint runs/cam_openclipart/best.pt`` (``--skip-synthetic``, ``--skip-openclipart``
to run parts alone).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from mispair.config import load_config
from mispair.data.precomp import read_precomp, write_precomp
from mispair.data.synthetic import make_synthetic
from mispair.engine.metrics import rank_metrics
from mispair.engine.run import train_run
from mispair.search import Index, IndexSpec
from mispair.search.backend import build_ann, faiss_module, search_ann, to_bytes
from mispair.search.evaluation import list_ranks, ranked_lists

DEFAULT_SPECS = ["ivf:nlist=1024,nprobe=8", "ivf:nlist=1024,nprobe=16", "hnsw:m=32,ef_search=64",
                 "hnsw:m=32,ef_search=128"]  # fmt: skip
TARGET_RECALL, TARGET_SPEEDUP = 0.95, 10.0


def parse_spec(text: str) -> IndexSpec:
    """``kind:key=value,...`` (e.g. ``ivf:nlist=1024,nprobe=8``) as an IndexSpec."""
    kind, _, rest = text.partition(":")
    options = dict(item.split("=") for item in rest.split(",") if item)
    return IndexSpec.from_dict({"kind": kind, **{k: int(v) for k, v in options.items()}}, text)


def timed(fn, repeats: int) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeats):
        began = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - began)
    return best, out


def compare_indexes(label: str, vectors: np.ndarray, queries: np.ndarray, truth: np.ndarray,
                    specs: list[IndexSpec], args: argparse.Namespace) -> list[dict]:  # fmt: skip
    """Build each index over ``vectors``, search ``queries`` (their ground truth ``truth``) and
    print one row per index; the first spec must be the exact one."""
    build_threads, search_threads, repeats = args.build_threads, args.threads, args.repeats
    faiss, rows = faiss_module(), []
    for spec in specs:
        faiss.omp_set_num_threads(build_threads)
        build_s, ann = timed(lambda s=spec: build_ann(vectors, s), 1)
        faiss.omp_set_num_threads(search_threads)
        search_s, (_, ids) = timed(lambda s=spec, a=ann: search_ann(a, queries, 10, s), repeats)
        rows.append({"spec": spec, "build_s": build_s, "mb": len(to_bytes(ann)) / 2**20,
                     "qps": len(queries) / search_s, "ids": ids})  # fmt: skip
    exact = rows[0]
    print(f"\n{label}: {len(vectors)} vectors of dimension {vectors.shape[1]}, {len(queries)} queries, "
          f"top 10; built with {build_threads} FAISS thread(s), searched with {search_threads} (one batch of "
          f"all queries, best of {repeats})")  # fmt: skip
    print(f"{'index':<52} {'build s':>8} {'size MB':>8} {'QPS':>9} {'× exact':>8} {'recall@10':>10} "
          f"{'R@10':>6}  target")  # fmt: skip
    for row in rows:
        valid = exact["ids"] >= 0
        found = (exact["ids"][:, :, None] == row["ids"][:, None, :]).any(2) & valid
        row["recall"] = float(found.sum() / valid.sum())
        row["speedup"] = row["qps"] / exact["qps"]
        r10 = 100 * float((row["ids"] == truth[:, None]).any(1).mean())
        met = row["recall"] >= TARGET_RECALL and row["speedup"] >= TARGET_SPEEDUP
        verdict = "" if row is exact else ("met" if met else "not met")
        print(f"{row['spec'].describe():<52} {row['build_s']:8.2f} {row['mb']:8.1f} {row['qps']:9.0f} "
              f"{row['speedup']:8.1f} {row['recall']:10.3f} {r10:6.1f}  {verdict}")  # fmt: skip
    return rows


def synthetic_part(args: argparse.Namespace, specs: list[IndexSpec], work: Path) -> None:
    checkpoint = args.synthetic_checkpoint
    if checkpoint is None:  # a brief training on the synthetic world the collection is drawn from
        config = load_config(None, ["data.source=synthetic", "model.head=cosine", "model.text_encoder=bigru",
                                    "model.image_pooling=fragments", "model.embed_dim=256", "train.epochs=5",
                                    f"output={work / 'synthetic_run'}"])  # fmt: skip
        train_run(config, progress=False, log=lambda _: None)
        checkpoint = work / "synthetic_run" / "best.pt"
    pairs = make_synthetic(args.synthetic_images, 1, seed=7)
    write_precomp(pairs, work / "synthetic_100k", "test")
    began = time.perf_counter()
    index = Index.build(checkpoint, work / "synthetic_100k", split="test")
    print(f"\nsynthetic: embedded {index.n_images} images and {index.n_captions} captions with {checkpoint} "
          f"in {time.perf_counter() - began:.1f} s (the same for every kind of index)")  # fmt: skip
    chosen = np.random.default_rng(0).choice(index.n_captions, size=min(args.queries, index.n_captions),
                                             replace=False)  # fmt: skip
    compare_indexes("synthetic collection", index.vectors("images"), index.vectors("captions")[chosen],
                    index.image_of_caption[chosen], specs, args)  # fmt: skip


def openclipart_part(args: argparse.Namespace, specs: list[IndexSpec]) -> None:
    index = Index.build(args.checkpoint, args.data)
    test_images = np.flatnonzero(np.array(index.image_splits) == "test")
    queries = np.flatnonzero(np.isin(index.image_of_caption, test_images))
    splits = ", ".join(index.manifest["collection"]["splits"])
    print(f"\nOpenClipart ({args.data}, splits {splits}), checkpoint {args.checkpoint}; "
          "the test captions search")  # fmt: skip
    compare_indexes("OpenClipart, all splits", index.vectors("images"), index.vectors("captions")[queries],
                    index.image_of_caption[queries], specs, args)  # fmt: skip


def rerank_part(args: argparse.Namespace) -> None:
    index = Index.build(args.rerank_checkpoint, args.data, split="test")
    pairs = read_precomp(args.data, "test")
    full_s, full = timed(lambda: index.model.head_scores(pairs, index.model.tokens(pairs)).numpy(), 1)
    head = index.model.config.model.head
    print(f"\nreranking on {args.data}/test ({index.n_images} images, {index.n_captions} captions): the "
          f"{head} head of {args.rerank_checkpoint}; first stage: its pooled embeddings, exact; "
          f"top {args.rerank} reranked")  # fmt: skip
    print(f"full all-pairs {head} matrix (the reference ranking): {full_s:.1f} s")
    for target in ("images", "captions"):
        report_rerank(index, target, full, full_s, args.rerank)


def report_rerank(index: Index, target: str, full: np.ndarray, full_s: float, k: int) -> None:
    """Rerank every query's top ``k`` ``target`` and compare with the head's full ranking."""
    sims = full.T if target == "images" else full  # [queries, candidates]: the head on every pair
    queries, owner = np.arange(len(sims)), index.image_of_caption
    first = ranked_lists(index, target, k)
    rerank_s, reranked = timed(lambda: ranked_lists(index, target, k, rerank=k), 1)
    order = np.argsort(-sims, axis=1, kind="stable")
    full_lists = (np.take_along_axis(sims, order, 1), order)
    lists = {"first stage": first, "reranked": reranked, "full head": full_lists}
    direction = "t2i" if target == "images" else "i2t"
    ms, full_ms = 1000 * rerank_s / len(queries), 1000 * full_s / len(queries)
    overlap = _overlap(reranked[1][:, :10], order[:, :10])
    covered = _overlap(first[1], order[:, :10])
    print(f"{direction} ({len(queries)} queries): rerank {ms:.1f} ms per query, the full matrix "
          f"{full_ms:.1f} ms per query ({full_ms / ms:.1f}×); reranked top 10 ∩ head's top 10: "
          f"{overlap:.3f}; head's top 10 within the first stage's top {k}: {covered:.3f}")  # fmt: skip
    for name, (scores, ids) in lists.items():
        correct = owner[:, None] == ids if target == "images" else owner[ids] == queries[:, None]
        values = rank_metrics(direction, list_ranks(scores, ids, correct))
        print(f"    {name:<12} " + "  ".join(f"R@{n} {values[f'{direction}_r{n}']:5.1f}" for n in (1, 5, 10)))


def _overlap(found: np.ndarray, best: np.ndarray) -> float:
    """The mean share of each row of ``best`` that its row of ``found`` holds."""
    return float(np.mean([len(set(f) & set(b)) / len(b) for f, b in zip(found.tolist(), best.tolist())]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", help="a checkpoint trained on OpenClipart (part 2)")
    parser.add_argument("--rerank-checkpoint", help="a fragment-head checkpoint on OpenClipart (part 3)")
    parser.add_argument("--data", default="data/openclipart_precomp")
    parser.add_argument("--synthetic-checkpoint", help="default: train one briefly (5 epochs)")
    parser.add_argument("--synthetic-images", type=int, default=100_000)
    parser.add_argument("--specs", nargs="+", default=DEFAULT_SPECS,
                        help="approximate indexes, kind:key=value,...")
    parser.add_argument("--queries", type=int, default=2000)
    parser.add_argument("--rerank", type=int, default=100)
    parser.add_argument("--threads", type=int, default=1, help="FAISS threads searching (default 1)")
    parser.add_argument("--build-threads", type=int, default=2, help="FAISS threads building (default 2)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--skip-synthetic", action="store_true")
    args = parser.parse_args()
    specs = [IndexSpec(), *(parse_spec(s) for s in args.specs)]
    with tempfile.TemporaryDirectory(prefix="bench_search_") as work:
        if not args.skip_synthetic:
            synthetic_part(args, specs, Path(work))
    if args.checkpoint:
        openclipart_part(args, specs)
    if args.rerank_checkpoint:
        rerank_part(args)


if __name__ == "__main__":
    main()
