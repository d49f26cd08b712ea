"""``--export-pairs``: every training pair of a trained run with its scores."""

from __future__ import annotations

import csv
import io
from typing import Any

from mispair.config import RunConfig
from mispair.division.scores import PAIR_SCORES_FILE, DivisionScores
from mispair.encoding import pair_similarities
from mispair.engine.trained import TrainedRun


def export_training_pairs(config: RunConfig) -> list[dict[str, Any]]:
    """One row per training pair of a trained run: image id, caption, the best model's pair
    similarity (in-sample: the model trained on the pair), the recipe's clean probability when it
    has one, the memorisation-free score its division fitted (``division_score``, when the run's
    ``division.scored_by`` made one) and the true noise when known."""
    run = TrainedRun.best_of(config)
    run.prepare_texts(run.train.tokens)
    batch_size = config.train.eval_batch_size
    scores = {"similarity": pair_similarities(run.models, run.train, batch_size, run.device)}
    held_out = DivisionScores.read(run.provenance.folder / PAIR_SCORES_FILE)
    if held_out is not None:
        scores["division_score"] = held_out.train
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
