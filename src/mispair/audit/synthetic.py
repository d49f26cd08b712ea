"""A synthetic audit, no training: random scores over generated pictures and captions, saved
like a real audit's folder. For the report's tests and benchmark (a 100K-pair report in seconds)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from mispair.audit.page_data import MAP_COLUMNS
from mispair.audit.ranking import score_division
from mispair.audit.report import METRIC_KEYS, review_page
from mispair.audit.result import AuditResult, audit_id
from mispair.audit.selfcheck import mismatched_share
from mispair.audit.summary import AuditSummary
from mispair.estimate.sample import audit_sample

COLOURS = {
    "red": (220, 30, 30),
    "green": (30, 170, 60),
    "blue": (40, 60, 220),
    "yellow": (235, 210, 30),
    "purple": (130, 40, 160),
    "grey": (120, 120, 120),
}
SHAPES = ("square", "disc", "bar", "ring")
PLACES = ("on a table", "in the snow", "beside a window", "under a tree", "at the beach", "in a box")


def synthetic_audit(
    folder: str | Path,
    *,
    pairs: int,
    images: int,
    seed: int = 0,
    top: int | None = None,
    suggestions: int = 3,
    progress: bool = False,
) -> AuditResult:
    """Write ``images`` small pictures into ``folder/pictures`` and the audit of ``pairs`` pairs
    over them (random held-out scores, the mixture fitted to them) into ``folder/audit``.

    ``suggestions``: 3 gives the table ``suggested_caption_1..3`` / ``suggested_image_id_1..3``
    with scores, a ``why`` column, the duplicate and the map columns; 1 the single
    ``suggested_caption`` / ``suggested_image_id`` of a table without them.
    """
    folder, rng = Path(folder), np.random.default_rng(seed)
    pictures = folder / "pictures"
    ids = _draw_pictures(pictures, images, rng)
    table, score = _table(ids, pairs, rng, suggestions)
    division = score_division(score)
    mismatch = 1.0 - division.clean_prob[np.argsort(score, kind="stable")]
    table["mismatch_probability"] = mismatch.round(6)
    table["suspected"] = mismatch >= 0.5
    share = mismatched_share(score, resamples=10)
    summary = AuditSummary(
        collection=str(pictures),
        threshold=0.5,
        collection_name="synthetic",
        created="synthetic",
        recipe="none",
        pairs=pairs,
        images=images,
        estimated_mismatched_share=share.estimate,
        estimated_mismatched_share_interval=(share.low, share.high),
        suspected=int(table["suspected"].sum()),
        scored_by="random",
        map="pca" if suggestions > 1 else None,
        image_root=str(pictures),
        split_note="synthetic",
        audit_id=audit_id(table),
    )
    out = folder / "audit"
    retrieval = [("this run", dict.fromkeys(METRIC_KEYS, 0.0))]
    sample = audit_sample(table, seed, summary.audit_id or "")
    summary.sample_seed = seed
    report = review_page(
        table, summary, [], division, retrieval, pictures, out, top=top, progress=progress, sample=sample
    )
    result = AuditResult(
        table, summary, report.page, page_data=report.data, thumbs=report.thumbs, sample=sample
    )
    result.save(out)
    return result


def _draw_pictures(folder: Path, n: int, rng: np.random.Generator) -> list[str]:
    """``n`` 32-pixel PNG pictures of a coloured shape, named ``<k>_<colour>_<shape>.png``."""
    from PIL import Image, ImageDraw

    folder.mkdir(parents=True, exist_ok=True)
    names = []
    for k in range(n):
        colour, shape = rng.choice(list(COLOURS)), rng.choice(SHAPES)
        name = f"{k:06d}_{colour}_{shape}.png"
        if not (folder / name).is_file():
            image = Image.new("RGB", (32, 32), tuple(int(v) for v in rng.integers(200, 256, 3)))
            draw = ImageDraw.Draw(image)
            box = {
                "square": (6, 6, 26, 26),
                "disc": (4, 4, 28, 28),
                "bar": (2, 12, 30, 20),
                "ring": (4, 4, 28, 28),
            }[shape]
            if shape == "ring":
                draw.ellipse(box, outline=COLOURS[colour], width=5)
            else:
                (draw.ellipse if shape == "disc" else draw.rectangle)(box, fill=COLOURS[colour])
            image.save(folder / name)
        names.append(name)
    return names


def _caption(name: str, rng: np.random.Generator) -> str:
    _, colour, shape = Path(name).stem.split("_")
    return f"a {colour} {shape} {rng.choice(PLACES)}, seen from {rng.choice(('above', 'the side', 'below'))}"


def _table(ids: list[str], pairs: int, rng: np.random.Generator, suggestions: int):
    """The pairs table (ranked by a random held-out score, a tenth of the pairs mismatched and
    scored lower) and the scores in the collection's order."""
    import pandas as pd

    image = np.arange(pairs) % len(ids)
    captions = [_caption(ids[i], rng) for i in image]
    swapped = rng.random(pairs) < 0.1
    shown = np.where(swapped, rng.integers(0, len(ids), pairs), image)
    score = rng.normal(0.6, 0.1, pairs) - 0.35 * swapped
    order = np.argsort(score, kind="stable")
    n = len(order)
    columns = {
        "pair_id": [f"train/{k}" for k in order],
        "rank": np.arange(1, n + 1),
        "split": ["train"] * n,
        "image_id": [ids[shown[k]] for k in order],
        "caption": [captions[k] for k in order],
        "mismatch_probability": 0.0,
        "suspected": False,
        "held_out_score": score[order].round(6),
        "pair_similarity": score[order].round(6),
    }
    pick = rng.integers(0, pairs, (n, suggestions))
    if suggestions == 1:
        columns |= {
            "suggested_caption": [captions[k] for k in pick[:, 0]],
            "suggested_caption_score": rng.random(n).round(6),
            "suggested_image_id": [ids[image[k]] for k in pick[:, 0]],
            "suggested_image_score": rng.random(n).round(6),
        }
    else:
        for j in range(suggestions):
            columns[f"suggested_caption_{j + 1}"] = [captions[k] for k in pick[:, j]]
            columns[f"suggested_caption_score_{j + 1}"] = rng.random(n).round(6)
            columns[f"suggested_image_id_{j + 1}"] = [ids[image[k]] for k in pick[:, j]]
            columns[f"suggested_image_score_{j + 1}"] = rng.random(n).round(6)
        columns["why"] = [f"this caption fits {rng.integers(0, 40)} other images better" for _ in range(n)]
        columns["duplicate_image_of"] = [
            ids[rng.integers(len(ids))] if rng.random() < 0.02 else "" for _ in range(n)
        ]
        columns["same_caption_images"] = rng.poisson(0.05, n)
        where = rng.random((len(ids), 2)) * 0.9
        caption_at = np.clip(where[image] + rng.normal(0, 0.03, (pairs, 2)), 0, 1)
        placed = (where[shown[order], 0], where[shown[order], 1], caption_at[order, 0], caption_at[order, 1])
        columns |= dict(zip(MAP_COLUMNS, placed))
    return pd.DataFrame(columns), score
