"""The reader of Hugging Face ``save_to_disk`` folders, against the rows the test wrote: one pair
per row (or per caption of a list), pair ids from the row or the id column, the pictures' bytes
unpacked as they were, splits from a DatasetDict or the split column, and one-line errors for
what it cannot read (no Image column, a streaming dataset, the library missing)."""

import sys
from pathlib import Path

import pytest

from mispair.config import DataConfig
from mispair.data.readers import detect_source
from mispair.data.readers.hf import HFDatasetReader
from mispair.errors import DataError
from tests.data.hf_forms import flickr_shaped, pair_dataset, split_dict
from tests.data.readers_forms import pictures, rows

datasets = pytest.importorskip("datasets")


def _table(path: Path, **columns):
    data = DataConfig(root=str(path), source="hf", cache_dir=str(path.parent / "cache"), **columns)
    return HFDatasetReader().table(data)


def _saved(dataset, folder: Path) -> Path:
    dataset.save_to_disk(str(folder))
    return folder


def test_a_dataset_folder_is_one_pair_per_row_with_its_bytes_and_its_row_as_id(tmp_path):
    path = _saved(pair_dataset(), tmp_path / "ds")
    assert detect_source(path) == "hf"
    table = _table(path)
    expected = rows()
    assert table.pairs["pair_id"].tolist() == [str(k) for k in range(len(expected))]
    assert table.pairs["caption"].tolist() == [r["caption"] for r in expected]
    assert table.pairs["split"].tolist() == [r["split"] for r in expected]
    assert table.pairs["image"].tolist() == [r["image"] for r in expected]  # the cell's path names it
    for image, row in zip(table.pairs["image"], expected):
        assert (table.image_root / image).read_bytes() == row["png"]
    assert table.refused.empty


def test_a_dataset_dict_s_splits_are_its_splits_and_prefix_the_row_ids(tmp_path):
    path = _saved(split_dict(), tmp_path / "dd")
    assert detect_source(path) == "hf"
    pairs = _table(path).pairs
    by_split = {"train": [], "dev": [], "test": []}
    for r in rows():
        by_split[r["split"]].append(r["caption"])
    hf = {"train": "train", "dev": "validation", "test": "test"}
    for split, captions in by_split.items():
        part = pairs[pairs["split"] == split]
        assert part["caption"].tolist() == captions
        assert part["pair_id"].tolist() == [f"{hf[split]}/{k}" for k in range(len(captions))]


def test_a_list_of_captions_is_one_pair_per_caption_named_row_and_place(tmp_path):
    path = _saved(flickr_shaped(), tmp_path / "flickr")
    table = _table(path)
    expected = [
        (f"{i}/{k}", caption, f"{i}.png")
        for i, (_, _, captions) in enumerate(pictures())
        for k, caption in enumerate(captions)
    ]
    got = list(table.pairs[["pair_id", "caption", "image"]].itertuples(index=False, name=None))
    assert got == expected  # pictures without a file name are named by their row
    assert set(table.pairs["split"]) == {"train", "dev", "test"}  # the split column's val is dev
    with_ids = _table(path, id_column="img_id")
    assert with_ids.pairs["pair_id"].tolist()[:3] == ["0/0", "0/1", "1/0"]


def test_a_column_of_paths_is_read_from_the_files_and_paths_outside_are_refused(tmp_path):
    folder = tmp_path / "ds"
    found = pictures()[:6]
    outside = tmp_path / "elsewhere.png"
    outside.write_bytes(found[0][1])
    paths = [f"pics/{name}" for name, _, _ in found] + [str(outside), "pics/missing.png"]
    captions = [f"caption {k}" for k in range(len(paths))]
    _saved(datasets.Dataset.from_dict({"picture": paths, "caption": captions}), folder)
    (folder / "pics").mkdir()
    for name, png, _ in found:
        (folder / "pics" / name).write_bytes(png)
    table = _table(folder, image_column="picture")
    assert table.pairs["pair_id"].tolist() == [str(k) for k in range(6)]
    assert [(table.image_root / i).read_bytes() for i in table.pairs["image"]] == [p for _, p, _ in found]
    reasons = dict(zip(table.refused["pair_id"], table.refused["reason"]))
    assert reasons["6"].startswith("the image lies outside") and reasons["7"] == "image file not found"


def test_an_image_feature_of_paths_given_to_mispair_is_saved_with_its_pictures(tmp_path):
    from mispair.data.readers.hf_dataset import save_input

    found = pictures()[:5]
    for name, png, _ in found:
        (tmp_path / name).write_bytes(png)
    ds = datasets.Dataset.from_dict(
        {"image": [str(tmp_path / name) for name, _, _ in found], "caption": [c[0] for _, _, c in found]}
    ).cast_column("image", datasets.Image(decode=False))
    saved = save_input(ds, tmp_path / "audit")
    assert saved == tmp_path / "audit" / "input_dataset"
    for name, _, _ in found:
        (tmp_path / name).unlink()  # the saved dataset holds the pictures themselves
    table = _table(saved)
    assert table.pairs["image"].tolist() == [name for name, _, _ in found]
    assert [(table.image_root / i).read_bytes() for i in table.pairs["image"]] == [p for _, p, _ in found]


def test_no_image_column_is_one_line_naming_the_columns(tmp_path):
    path = _saved(datasets.Dataset.from_dict({"text": ["a"], "other": [1]}), tmp_path / "ds")
    with pytest.raises(DataError, match=r"no column with an Image feature.*--image-column.*text, other"):
        _table(path)


def test_a_caption_column_that_is_not_text_is_one_line(tmp_path):
    ds = pair_dataset().rename_column("caption", "words").rename_column("number", "caption")
    path = _saved(ds, tmp_path / "ds")
    with pytest.raises(DataError, match=r"the caption column 'caption' holds .*--caption-column"):
        _table(path)


def test_a_streaming_dataset_is_refused_in_one_line_saying_how_to_materialise_it(tmp_path):
    import mispair

    streaming = pair_dataset().to_iterable_dataset()
    with pytest.raises(DataError, match=r"streaming IterableDataset.*streaming=False.*from_generator"):
        mispair.audit(streaming, tmp_path / "audit", progress=False)
    assert not (tmp_path / "audit").exists()  # nothing left behind


def test_without_the_library_the_error_names_the_extra(tmp_path, monkeypatch):
    path = _saved(pair_dataset(), tmp_path / "ds")
    monkeypatch.setitem(sys.modules, "datasets", None)  # what `import datasets` meets when missing
    assert detect_source(path) == "hf"  # recognised without the library
    with pytest.raises(DataError, match=r"needs the datasets library \(pip install 'mispair\[hf\]'\)"):
        _table(path)
