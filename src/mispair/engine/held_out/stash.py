"""Finished out-of-fold scorers kept on disk, so an interrupted held-out scoring resumes."""

from __future__ import annotations

import contextlib
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from mispair.atomic import atomic_write
from mispair.safe_parse import read_npz


class FoldStash:
    """Finished scorers' held-out scores of an out-of-fold scoring kept on disk
    (``folder/<round>_<scorer>.npz``, scorer = repeat × folds + fold, written atomically, each
    tagged with ``key``: what the scores depend on; a round is its index, or the name of a stage
    such as nested trust's ``trust2``, whose scorers number its held-out sets), so an interrupted
    scoring resumes at its first missing scorer; :meth:`clear` removes them once the whole scores
    are saved."""

    def __init__(self, folder: Path, key: str) -> None:
        self.folder, self.key = folder, key

    def load(self, round_index: int | str, scorer: int) -> np.ndarray | None:
        path = self.folder / f"{round_index}_{scorer}.npz"
        if not path.is_file():
            return None
        saved = read_npz(path, ("score", "key"))
        return saved["score"] if str(saved.get("key")) == self.key else None

    def save(
        self, round_index: int | str, scorer: int, score: np.ndarray, weights: dict | None = None
    ) -> None:
        """Keep a finished scorer's held-out scores (and its ``weights``, which a warm-started
        next round starts from; written first, so scores on disk always have theirs)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        if weights is not None:
            atomic_write(
                self.folder / f"{round_index}_{scorer}.pt",
                lambda handle: torch.save({"key": self.key, "weights": weights}, handle),
            )
        atomic_write(
            self.folder / f"{round_index}_{scorer}.npz",
            lambda handle: np.savez(handle, score=score, key=np.array(self.key)),
        )

    def load_weights(self, round_index: int | str, scorer: int) -> dict[str, Tensor] | None:
        """The weights kept with a finished scorer, or None."""
        path = self.folder / f"{round_index}_{scorer}.pt"
        if not path.is_file():
            return None
        saved = torch.load(path, map_location="cpu", weights_only=True)
        return saved["weights"] if saved.get("key") == self.key else None

    def clear(self) -> None:
        if self.folder.is_dir():
            for path in [*self.folder.glob("*.npz"), *self.folder.glob("*.pt")]:
                path.unlink(missing_ok=True)
            with contextlib.suppress(OSError):
                self.folder.rmdir()
