"""The small collection of :mod:`tests.data.readers_forms` as Hugging Face ``datasets`` objects:
a ``Dataset`` with an ``Image`` feature (one row per pair), a ``DatasetDict`` of its splits, and
a Flickr30k-shaped ``Dataset`` (one row per picture, its captions a list)."""

from __future__ import annotations

from tests.data.readers_forms import pictures, rows

HF_SPLIT = {"train": "train", "dev": "validation", "test": "test"}


def pair_dataset(*, split_column: bool = True):
    """One row per pair: ``image`` (Image, PNG bytes with the file name as path), ``caption``,
    ``number`` (int), ``tags`` (a list), and ``split`` when asked."""
    import datasets

    table = rows()
    columns = {
        "image": [{"bytes": r["png"], "path": r["image"]} for r in table],
        "caption": [r["caption"] for r in table],
        "number": [r["number"] for r in table],
        "tags": [[r["image"], str(k)] for k, r in enumerate(table)],
    }
    features = {
        "image": datasets.Image(),
        "caption": datasets.Value("string"),
        "number": datasets.Value("int32"),
        "tags": datasets.Sequence(datasets.Value("string")),
    }
    if split_column:
        columns["split"] = [r["split"] for r in table]
        features["split"] = datasets.Value("string")
    return datasets.Dataset.from_dict(columns, features=datasets.Features(features))


def split_dict():
    """The pairs as a ``DatasetDict`` ``train`` / ``validation`` / ``test`` (no split column),
    each split's rows in the collection's order."""
    import datasets

    whole = pair_dataset()
    parts = {}
    for split, name in HF_SPLIT.items():
        parts[name] = whole.filter(lambda row, s=split: row["split"] == s).remove_columns("split")
    return datasets.DatasetDict(parts)


def flickr_shaped():
    """One row per picture as Flickr30k on the Hub has it: ``image``, ``caption`` (a list of
    strings), ``sentids`` (a list), ``split``, ``img_id``, ``filename``."""
    import datasets

    from tests.data.readers_forms import split_of

    found = pictures()
    columns = {
        "image": [{"bytes": png, "path": None} for _, png, _ in found],
        "caption": [captions for _, _, captions in found],
        "sentids": [[f"{i}-{k}" for k in range(len(c))] for i, (_, _, c) in enumerate(found)],
        "split": [{"dev": "val"}.get(split_of(i), split_of(i)) for i in range(len(found))],
        "img_id": [str(i) for i in range(len(found))],
        "filename": [name for name, _, _ in found],
    }
    features = datasets.Features(
        {
            "image": datasets.Image(),
            "caption": datasets.Sequence(datasets.Value("string")),
            "sentids": datasets.Sequence(datasets.Value("string")),
            "split": datasets.Value("string"),
            "img_id": datasets.Value("string"),
            "filename": datasets.Value("string"),
        }
    )
    return datasets.Dataset.from_dict(columns, features=features)
