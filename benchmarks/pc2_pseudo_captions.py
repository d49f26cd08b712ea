"""How good PC²'s pseudo-captions are, epoch by epoch, on Tux Paint (issue 9).

A pseudo-caption is the caption of a clean image whose pseudo-prediction is closest to the noisy
image's (PC² Eq. 4). Tux Paint stamps sit in category folders (``animals/birds``, ``food/fruit``,
...), so "the lending image shares the noisy image's folder" is a measurable proxy for the
caption being about the right kind of thing. The ``pc2`` recipe logs it per epoch as
``pseudo_caption/{k}/category_match`` (model ``k``; the value at epoch ``e`` describes the steps of
epoch ``e − 1``). This script reads the logs of ``compare_recipes.py`` runs and prints, per epoch,
the mean over seeds and both models, beside the chance level: the probability that a clean image
drawn uniformly from the training split shares the folder, ``Σ_c p_c²``.

    python benchmarks/pc2_pseudo_captions.py --variants pc2 pc2-embedding --noise 0.4 0.7
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from collections import Counter
from pathlib import Path


def chance_level(meta: Path) -> float:
    """``Σ_c p_c²`` over the category folders of the training images."""
    categories = json.loads(meta.read_text())["image_meta"]["category"]
    counts = Counter(categories)
    return sum((c / len(categories)) ** 2 for c in counts.values())


def epoch_matches(log: Path) -> list[float]:
    """Per logged epoch: the mean category match over the models (NaN before pseudo-captioning)."""
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    out = []
    for row in rows:
        values = [
            v
            for k, v in row.items()
            if k.startswith("pseudo_caption/") and k.endswith("/category_match") and not math.isnan(v)
        ]
        out.append(statistics.mean(values) if values else math.nan)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=Path, default=Path("runs/compare"))
    parser.add_argument("--variants", nargs="+", default=["pc2"])
    parser.add_argument("--noise", nargs="+", type=float, default=[0.4, 0.7])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--meta", type=Path, default=Path("data/tuxpaint_precomp/train_meta.json"))
    args = parser.parse_args()
    print(f"chance level (random clean lender): {chance_level(args.meta):.3f}\n")
    columns, series = [], []
    for variant in args.variants:
        for noise in args.noise:
            per_seed = [
                epoch_matches(log)
                for s in args.seeds
                if (log := args.runs / f"tuxpaint_{variant}_n{noise:g}_s{s}" / "log.jsonl").is_file()
            ]
            if per_seed:
                columns.append(f"{variant} {noise:g} ({len(per_seed)} seeds)")
                series.append(per_seed)
    if not series:
        raise SystemExit(f"no pc2 run logs under {args.runs}")
    print("| epoch | " + " | ".join(columns) + " |")
    print("|---|" + "---|" * len(columns))
    for epoch in range(max(len(s) for runs in series for s in runs)):
        cells = []
        for runs in series:
            values = [s[epoch] for s in runs if epoch < len(s) and not math.isnan(s[epoch])]
            cells.append(f"{statistics.mean(values):.3f}" if values else "")
        if any(cells):
            print(f"| {epoch} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
