"""A 4,000-pair embeddings table (``.devcheck/emb.parquet``), 30% of its captions swapped in one
cycle, its truth in ``.devcheck/truth.npy``: the collection of the CUDA check
(benchmarks/results/cuda_check.md), audited on CPU and on CUDA and judged by ``judge.py``;
``tests/test_cuda.py`` audits a smaller one."""

from pathlib import Path

import numpy as np
import pandas as pd

OUT = Path(".devcheck")


def write_table(out: Path, n: int = 4000, dim: int = 128, rate: float = 0.3, seed: int = 0) -> np.ndarray:
    """``out/emb.parquet`` (columns id, img_emb, txt_emb, caption) and ``out/truth.npy``; the truth
    (True: swapped) by row."""
    rng = np.random.default_rng(seed)
    concept = rng.normal(size=(n, dim))
    image = concept + 1.6 * rng.normal(size=(n, dim))
    text = concept @ rng.normal(size=(dim, dim)) / np.sqrt(dim) + 1.6 * rng.normal(size=(n, dim))
    shown = np.arange(n)
    swapped = np.sort(rng.choice(n, size=int(rate * n), replace=False))
    shown[swapped] = swapped[np.roll(rng.permutation(len(swapped)), 1)]
    out.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(
        {
            "id": [f"p{k}" for k in range(n)],
            "img_emb": list(image[shown].astype(np.float32)),
            "txt_emb": list(text.astype(np.float32)),
            "caption": [f"caption {k}" for k in range(n)],
        }
    ).to_parquet(out / "emb.parquet")
    truth = shown != np.arange(n)
    np.save(out / "truth.npy", truth)
    return truth


if __name__ == "__main__":
    write_table(OUT)
