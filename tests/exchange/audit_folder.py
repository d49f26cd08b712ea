"""An audit folder to exchange: the synthetic audit (pictures files, several captions on most
pictures, the map's columns), with ``q_value`` added and a ``sample.csv`` the test draws itself
(every pair id once, ``order`` 1..N in a random permutation), as the audit writes it."""

import json
from pathlib import Path

import numpy as np
import pandas as pd

from mispair.audit.result import write_parquet
from mispair.audit.synthetic import synthetic_audit


def exchange_audit(base: Path, *, pairs: int = 30, images: int = 12, seed: int = 0) -> Path:
    """The audit's folder under ``base`` (``base/audit``), its pictures in ``base/pictures``."""
    synthetic_audit(base, pairs=pairs, images=images, seed=seed)
    folder = base / "audit"
    table = pd.read_parquet(folder / "pairs.parquet")
    table["q_value"] = np.clip(1.0 - table["mismatch_probability"], 0.0, 1.0).round(6)
    with (folder / "pairs.parquet").open("wb") as handle:
        write_parquet(table, handle)
    rng = np.random.default_rng(seed + 1)
    ids = table["pair_id"].to_numpy()[rng.permutation(len(table))]
    pd.DataFrame({"pair_id": ids, "order": np.arange(1, len(ids) + 1)}).to_csv(
        folder / "sample.csv", index=False
    )
    return folder


def audit_id(folder: Path) -> str:
    return json.loads((folder / "summary.json").read_text())["audit_id"]
