"""``--export-pairs``: every training pair of a trained run with its scores."""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from mispair.config import RunConfig
from mispair.data.batching import TrainingPairs
from mispair.engine.assembly import RunData, load_models, load_run_data, pick_device, prepare_text_encoder
from mispair.engine.checkpoint import load_checkpoint
from mispair.nn.model import RetrievalModel

PAIR_SCORES_FILE = "pair_scores.npz"
"""A run's division scores (:mod:`mispair.engine.pair_scores`), kept in its output folder."""


@torch.no_grad()
def pair_similarities(models: list[RetrievalModel], train: TrainingPairs, batch_size: int,
                      device: torch.device) -> np.ndarray:
    """``[len(train)]`` similarity of every pair of ``train`` as paired, in its order (averaged
    over ``models``)."""
    scores = []
    for batch in train.batches(batch_size):
        batch = batch.to(device)
        sims = sum(m(batch.images, batch.tokens, batch.lengths).diagonal() for m in models)
        scores.append((sims / len(models)).float().cpu().numpy())
    return np.concatenate(scores) if scores else np.zeros(0, dtype=np.float32)


@dataclass
class TrainedRun:
    """A trained run's best models with its data, as the models read it: ``train`` holds the
    training pairs in the pairing the run trained on (the noise record's, when it has one)."""

    config: RunConfig
    state: dict[str, Any]
    data: RunData
    train: TrainingPairs
    models: list[RetrievalModel]
    device: torch.device

    @property
    def division_score(self) -> np.ndarray | None:
        """``[n_pairs]`` the memorisation-free scores its division fitted, when it made them."""
        saved = self.config.output_dir / PAIR_SCORES_FILE
        if not saved.is_file():
            return None
        with np.load(saved) as stored:
            return stored["score"]

    @property
    def clean_prob(self) -> np.ndarray | None:
        """``[n_pairs]`` the recipe's clean probability of every pair, when it has one."""
        clean_prob = self.state["recipe"].get("clean_prob")
        return None if clean_prob is None else np.asarray(clean_prob, dtype=np.float64)

    @property
    def image_ids(self) -> list[str]:
        """The training images' ids (their index as text where the data has none)."""
        return self.data.train.image_ids or [str(i) for i in range(self.data.train.n_images)]


def load_trained_run(config: RunConfig, *, progress: bool = False) -> TrainedRun:
    """The run of ``config`` (its ``best.pt``) loaded with its training data."""
    state = load_checkpoint(config.output_dir / "best.pt")
    data = load_run_data(config)
    device = pick_device(config.train.device)
    prepare_text_encoder(config.model, config.data, data.train_tokens, progress=progress, log=lambda _: None)
    paired = data.train.image_of_caption if data.noise is None else data.noise.image_of_caption
    train = TrainingPairs(data.train, data.train_tokens, paired)
    models = load_models(state, device, str(config.output_dir / "best.pt"))
    return TrainedRun(config, state, data, train, models, device)


def export_training_pairs(config: RunConfig) -> list[dict[str, Any]]:
    """One row per training pair of a trained run: image id, caption, the best model's pair
    similarity (in-sample: the model trained on the pair), the recipe's clean probability when it
    has one, the memorisation-free score its division fitted (``division_score``, when the run's
    ``division.scores`` made one) and the true noise when known."""
    run = load_trained_run(config)
    batch_size = config.train.eval_batch_size
    scores = {"similarity": pair_similarities(run.models, run.train, batch_size, run.device)}
    if run.division_score is not None:
        scores["division_score"] = run.division_score
    if run.clean_prob is not None:
        scores["clean_prob"] = run.clean_prob
    ids, paired, noise = run.image_ids, run.train.image_of_caption, run.data.noise
    rows = []
    for k, caption in enumerate(run.data.train.captions):
        row: dict[str, Any] = {"caption_index": k, "image_id": ids[paired[k]], "caption": caption}
        row.update({name: round(float(values[k]), 6) for name, values in scores.items()})
        if noise is not None:
            row["truly_mismatched"] = bool(noise.is_noisy[k])
        rows.append(row)
    return rows


FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
"""Leading characters that make a spreadsheet read a cell as a formula (CSV injection)."""


def spreadsheet_safe(value: Any) -> Any:
    """``value`` with a leading ``'`` when it is text a spreadsheet would run as a formula
    (captions and ids are untrusted text); anything else unchanged."""
    return "'" + value if isinstance(value, str) and value.startswith(FORMULA_STARTS) else value


def pairs_csv(rows: list[dict[str, Any]]) -> str:
    """The rows of :func:`export_training_pairs` as CSV text, every text cell spreadsheet-safe."""
    table = io.StringIO(newline="")
    writer = csv.DictWriter(table, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows({k: spreadsheet_safe(v) for k, v in row.items()} for row in rows)
    return table.getvalue()
