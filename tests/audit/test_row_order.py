"""The audit of a collection and of the same collection in reversed row order: the same held-out
folds (they are dealt by content) and the same detection within 0.01 AUC (the pairs reach the model
in an order of their content, so the batches agree too; tests/audit/test_same_pairs.py asserts equal
numbers). On Tux Paint as a user's folder with a quarter of its captions swapped."""

import csv
import sys
from pathlib import Path

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

ROOT = Path(__file__).resolve().parents[2]
PRECOMP = ROOT / "data" / "tuxpaint_precomp"
SHORT = ["division.rounds=2", "division.repeats=2", "train.epochs=10", "train.threads=2"]


def reversed_table(folder: Path) -> Path:
    """``folder/reversed.csv``: its captions.csv with the rows in reverse order and a ``row``
    column with each row's original number (the same pictures, the same feature cache)."""
    with open(folder / "captions.csv", newline="", encoding="utf-8") as f:
        header, *rows = list(csv.reader(f))
    with open(folder / "reversed.csv", "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows([[*header, "row"], *[[*r, i] for i, r in reversed(list(enumerate(rows)))]])
    return folder / "reversed.csv"


def train_folds(folder: Path, id_column: str | None) -> dict[str, int]:
    """Each training pair's fold (first repeat, 5 folds, seed 0) by its original row."""
    from mispair.config import DataConfig
    from mispair.data.batching import encode_captions
    from mispair.data.content import content_folds, fold_groups
    from mispair.data.loading import load_split, resolve_source
    from mispair.data.tokenizers import MiniLMTokenizer

    data = resolve_source(DataConfig(root=str(folder), id_column=id_column))
    train = load_split(data, "train").with_mean_fragment()
    tokens = encode_captions(train, MiniLMTokenizer())
    fold = content_folds(
        fold_groups(train.images, tokens, train.image_of_caption, 5), train.image_of_caption, 5, 0
    )
    return dict(zip(train.pair_ids, fold.tolist()))


@pytest.mark.slow  # two audits of 950 pairs, about 3 minutes on two cores
def test_reversed_rows_give_the_same_folds_and_detection(tmp_path):
    if not PRECOMP.is_dir():
        pytest.skip("needs data/tuxpaint_precomp (mispair prepare tuxpaint)")
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from audit_quality import user_collection
    from mispair.audit import audit_collection

    given = tmp_path / "given"
    true_image = user_collection(given, 0.25, seed=0)
    backwards = reversed_table(given)
    folds = train_folds(given, None)
    again = train_folds(backwards, "row")
    assert folds == again

    aucs = []
    for folder, ids in ((given, None), (backwards, "row")):
        options = [] if ids is None else [f"data.id_column={ids}"]
        result = audit_collection(
            folder,
            tmp_path / f"audit-{folder.stem}",
            overrides=[*SHORT, *options],
            progress=False,
            log=lambda _: None,
        )
        pairs = result.pairs
        truth = np.array(
            [true_image[str(p)] != image for p, image in zip(pairs["pair_id"], pairs["image_id"])]
        )
        aucs.append(roc_auc_score(truth, -pairs["held_out_score"].to_numpy()))
    assert aucs[0] > 0.75
    assert abs(aucs[0] - aucs[1]) <= 0.01
