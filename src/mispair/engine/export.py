"""``--export-pairs``: every training pair of a trained run with its scores."""

from __future__ import annotations

import csv
import io
from typing import Any

import numpy as np
import torch

from mispair.config import RunConfig
from mispair.data.batching import TrainingPairs
from mispair.engine.assembly import load_models, load_run_data, pick_device, prepare_text_encoder
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


def export_training_pairs(config: RunConfig) -> list[dict[str, Any]]:
    """One row per training pair of a trained run: image id, caption, the best model's pair
    similarity (in-sample: the model trained on the pair), the recipe's clean probability when it
    has one, the memorisation-free score its division fitted (``division_score``, when the run's
    ``division.scores`` made one) and the true noise when known."""
    state = load_checkpoint(config.output_dir / "best.pt")
    data = load_run_data(config)
    device = pick_device(config.train.device)
    prepare_text_encoder(config.model, config.data, data.train_tokens, log=lambda _: None)
    paired = data.train.image_of_caption if data.noise is None else data.noise.image_of_caption
    train = TrainingPairs(data.train, data.train_tokens, paired)
    models = load_models(state, device, str(config.output_dir / "best.pt"))
    scores = {"similarity": pair_similarities(models, train,
                                              config.train.eval_batch_size, device)}  # fmt: skip
    saved = config.output_dir / PAIR_SCORES_FILE
    if saved.is_file():
        with np.load(saved) as stored:
            scores["division_score"] = stored["score"]
    clean_prob = state["recipe"].get("clean_prob")
    if clean_prob is not None:
        scores["clean_prob"] = np.asarray(clean_prob, dtype=np.float64)
    ids = data.train.image_ids or [str(i) for i in range(data.train.n_images)]
    rows = []
    for k, caption in enumerate(data.train.captions):
        row: dict[str, Any] = {"caption_index": k, "image_id": ids[paired[k]], "caption": caption}
        row.update({name: round(float(values[k]), 6) for name, values in scores.items()})
        if data.noise is not None:
            row["truly_mismatched"] = bool(data.noise.is_noisy[k])
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
