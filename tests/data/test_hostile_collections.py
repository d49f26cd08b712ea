"""Collections someone else wrote: embedding paths confined like picture paths (class 5), and
each bounded reader refusing its bomb within 10 s and 500 MB, measured in a fresh process
(class 3)."""

import os
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mispair.data.readers.embeddings import embedding_cells
from mispair.errors import DataError
from tests.bounded import call, measured


def npy(path: Path, array: np.ndarray) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    np.save(path, array)
    return str(path)


@pytest.mark.parametrize("where", ["traversing", "absolute", "a link out"])
def test_an_embedding_path_outside_the_collection_is_refused(tmp_path, where):
    base = tmp_path / "collection"
    npy(base / "e" / "0.npy", np.ones(4, np.float32))
    secret = npy(tmp_path / "secret.npy", np.ones(4, np.float32))
    cell = {"traversing": "../secret.npy", "absolute": secret, "a link out": "e/link.npy"}[where]
    os.symlink(secret, base / "e" / "link.npy")
    cells = pd.Series(["e/0.npy", cell])
    with pytest.raises(DataError, match="outside the collection"):
        embedding_cells(cells, pd.Series(["a", "b"]), base, "emb", "t.csv")
    assert embedding_cells(cells[:1], pd.Series(["a"]), base, "emb", "t.csv")[0].shape == (4,)


def test_a_deeply_nested_embedding_cell_is_one_error(tmp_path):
    cells = pd.Series(["[" * 100_000 + "]" * 100_000])
    with pytest.raises(DataError, match=r"nested too deep|not a vector"):
        embedding_cells(cells, pd.Series(["a"]), tmp_path, "emb", "t.csv")


def npy_header_bomb(path: Path) -> Path:
    """A 128-byte ``.npy`` whose header declares 37 GB of float32."""
    header = np.lib.format.header_data_from_array_1_0(np.zeros(1, np.float32))
    header["shape"] = (9_250_000_000,)
    with path.open("wb") as handle:
        np.lib.format.write_array_header_1_0(handle, header)
        handle.write(b"\0" * 64)
    return path


def within_budget(code: str, message: str, **env: str) -> None:
    run = measured(code, timeout=60, env=env)
    assert run.code == 2 and message in run.stderr, run.stderr[-2000:]
    assert run.seconds < 10 and run.peak_mb < 500, (run.seconds, run.peak_mb)


def test_a_npy_header_declaring_37_gb_is_refused_before_reading(tmp_path):
    bomb = npy_header_bomb(tmp_path / "bomb.npy")
    within_budget(call("mispair.data.precomp", "load_npy", str(bomb)), "more than the")
    with pytest.raises(DataError, match="more than the"):
        embedding_cells(pd.Series(["bomb.npy"]), pd.Series(["a"]), tmp_path, "emb", "t.csv")


def test_a_npy_header_larger_than_its_file_is_truncated_even_when_mapped(tmp_path):
    from mispair.data.precomp import load_npy

    with pytest.raises(DataError, match="truncated"):
        load_npy(npy_header_bomb(tmp_path / "bomb.npy"), mmap=True)


# --- each bounded reader refuses its bomb within 10 s and 500 MB (class 3) --------------------

sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))
import hostile_fixtures as fx  # noqa: E402


def read_table(root: Path, cache: Path) -> str:
    """Code reading the collection at ``root`` as its reader builds the table (no features):
    exit 2 with the message on a mispair error, else the refused rows' reasons on stderr."""
    return (
        "import sys\n"
        "from mispair.errors import MispairError\n"
        "from mispair.config import DataConfig\n"
        "from mispair.data.loading import resolve_source\n"
        "from mispair.data.readers import reader_of\n"
        "try:\n"
        f"    data = resolve_source(DataConfig(root={str(root)!r}, cache_dir={str(cache)!r}))\n"
        "    table = reader_of(data).table(data)\n"
        "except MispairError as error:\n"
        "    print(error, file=sys.stderr)\n"
        "    sys.exit(2)\n"
        "print(len(table.pairs), 'kept;', '; '.join(sorted(set(table.refused['reason']))), file=sys.stderr)\n"
    )


def test_a_parquet_file_of_100_million_dictionary_encoded_rows_is_refused(tmp_path):
    bomb = fx.parquet_row_bomb(tmp_path / "rows.parquet")
    assert bomb.stat().st_size < 1_000_000
    within_budget(read_table(bomb, tmp_path / "cache"), "100,000,000 rows, more than the 20,000,000")


def test_a_parquet_file_that_decodes_past_its_byte_bound_is_refused(tmp_path):
    bomb = fx.parquet_row_bomb(tmp_path / "rows.parquet", rows=5_000_000)
    within_budget(
        read_table(bomb, tmp_path / "cache"),
        "bytes once decoded",
        MISPAIR_LIMIT_MAX_TABLE_DECODED_BYTES="10000000",
    )


def test_a_csv_of_more_lines_than_the_row_bound_is_refused(tmp_path):
    table = tmp_path / "t.csv"
    table.write_text("image,caption\n" + "a.png,x\n" * 2000)
    within_budget(read_table(table, tmp_path / "cache"), "2,000 rows", MISPAIR_LIMIT_MAX_TABLE_ROWS="1000")


def test_a_tar_of_sparse_members_is_refused_without_unpacking(tmp_path):
    shards = fx.sparse_tar(tmp_path / "sparse")
    run = measured(read_table(shards, tmp_path / "cache"), timeout=60)
    assert "sparse tar member" in run.stderr or "rows refused" in run.stderr, run.stderr[-2000:]
    assert run.seconds < 10 and run.peak_mb < 500, (run.seconds, run.peak_mb)
    assert sum(f.stat().st_size for f in (tmp_path / "cache").rglob("*") if f.is_file()) < 1_000_000


def test_a_tar_of_more_members_than_the_bound_is_refused(tmp_path):
    shards = fx.duplicate_key_tar(tmp_path / "many")
    within_budget(
        read_table(shards, tmp_path / "cache"), "more than 10 members", MISPAIR_LIMIT_MAX_SHARD_MEMBERS="10"
    )


def test_a_brace_pattern_of_10_to_the_8_names_is_refused_before_expanding(tmp_path):
    pattern = str(tmp_path / "s{0..9999}-{0..9999}.tar")
    code = call("mispair.data.readers.webdataset", "shard_paths", pattern)
    within_budget(
        code.replace("from mispair", "from pathlib import Path\nfrom mispair", 1).replace(
            f"shard_paths({pattern!r})", f"shard_paths(Path({pattern!r}))"
        ),
        "100,000,000 shards",
    )


def test_coco_json_that_grows_27_times_is_refused_before_parsing(tmp_path):
    bomb = fx.coco_element_bomb(tmp_path / "coco")
    within_budget(
        read_table(bomb, tmp_path / "cache"),
        "JSON values, more than",
        MISPAIR_LIMIT_MAX_JSON_ELEMENTS="1000000",
    )


@pytest.mark.parametrize("value", [10**10, -5, "not bytes", [1, 2, 300]])
def test_an_image_struct_whose_bytes_are_not_bytes_is_a_refused_row(tmp_path, value):
    table = fx.image_struct_parquet(tmp_path / "t.parquet", value)
    run = measured(read_table(table, tmp_path / "cache"), timeout=60)
    assert run.code == 0 and "0 kept" in run.stderr and "not bytes" in run.stderr, run.stderr[-2000:]
    assert run.seconds < 10 and run.peak_mb < 500, (run.seconds, run.peak_mb)
    assert not any(f.stat().st_size > 1000 for f in (tmp_path / "cache").rglob("*") if f.is_file())


def test_a_repeated_key_in_a_shard_is_a_refused_row_not_a_silent_drop(tmp_path):
    shards = fx.duplicate_key_tar(tmp_path / "dup")
    run = measured(read_table(shards, tmp_path / "cache"), timeout=60)
    assert run.code == 0 and "12 kept" in run.stderr and "appears more than once" in run.stderr, run.stderr


# --- bad input is one error or a refused row, never a traceback (class 7); nothing silently
# wrong (class 8) ---------------------------------------------------------------------------------


def test_karpathy_json_with_fields_of_the_wrong_types_is_read_without_a_traceback(tmp_path):
    import json

    from mispair.data.readers.coco import _karpathy

    document = {
        "images": [
            {"filename": 5, "filepath": ["x"], "sentences": 7, "split": "train"},
            {"filename": "a.png", "sentences": [{"raw": 3, "tokens": 9}, {"tokens": ["a", 1, None]}, "x"]},
            {"filename": "b.png", "sentences": [{"raw": {"x": 1}, "sentid": [1]}]},
        ]
    }
    path = tmp_path / "dataset_coco.json"
    path.write_text(json.dumps(document))
    frame = _karpathy(document)
    assert frame["caption"].tolist() == ["3", "a 1 ", ""] and frame["image"].tolist() == ["a.png"] * 2 + [
        "b.png"
    ]


def test_deeply_nested_jsonl_is_one_error(tmp_path):
    from mispair.data.readers.files import read_frame

    path = tmp_path / "t.jsonl"
    path.write_text('{"image": "a.png", "caption": ' + "[" * 100_000 + "]" * 100_000 + "}\n")
    with pytest.raises(DataError, match="not a JSON object"):
        read_frame(path)


def test_one_oversized_caption_in_a_tsv_is_cut_not_the_file_refused(tmp_path):
    from mispair.data.readers.files import read_frame

    path = tmp_path / "t.tsv"
    path.write_text("image\tcaption\na.png\t" + "x" * 500_000 + "\nb.png\tshort\n")
    frame = read_frame(path)
    assert len(frame) == 2 and len(frame["caption"][0]) == 500_000  # the caption bound cuts it later


def test_a_struct_path_with_a_nul_is_not_used_as_a_name(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    pictures = fx.colour_pictures()
    images = [{"bytes": blob, "path": f"p\0{k}.png"} for k, (_, blob, _) in enumerate(pictures)]
    pq.write_table(
        pa.table({"image": images, "caption": [c for _, _, c in pictures]}), tmp_path / "t.parquet"
    )
    run = measured(read_table(tmp_path / "t.parquet", tmp_path / "cache"), timeout=60)
    assert run.code == 0 and f"{len(pictures)} kept" in run.stderr, run.stderr[-2000:]


def test_dataframes_with_duplicate_columns_mixed_types_pil_images_and_bytes_captions():
    from PIL import Image

    from mispair.data.readers import dataframe_table

    twice = pd.DataFrame([["a.png", "x", "y"]], columns=["image", "caption", "caption"])
    with pytest.raises(DataError, match="appears more than once"):
        dataframe_table(twice)
    mixed = pd.DataFrame({"image": ["a.png", b"\x89PNG"], "caption": ["x", 5]})
    with pytest.raises(DataError, match="mixes"):
        dataframe_table(mixed)
    pil = pd.DataFrame({"image": [Image.new("RGB", (4, 4))], "caption": [b"caf\xc3\xa9"], "id": [1.5]})
    table = dataframe_table(pil)
    assert table["image"][0]["bytes"].startswith(b"\x89PNG") and table["caption"][0] == "café"
    numbers = pd.DataFrame({"image": ["a.png", "b.png"], "caption": ["x", 5]})
    assert dataframe_table(numbers)["caption"].tolist() == ["x", "5"]
    with pytest.raises(DataError, match="not UTF-8"):
        dataframe_table(pd.DataFrame({"image": ["a.png"], "caption": [b"\xff\xfe"]}))


def test_cache_files_are_checked_before_they_are_read(tmp_path, monkeypatch):
    import zipfile

    from mispair.safe_parse import check_npy, check_npz

    os.mkfifo(tmp_path / "chunk.npz")
    with pytest.raises(DataError, match="not a regular file"):
        check_npz(tmp_path / "chunk.npz")
    (tmp_path / "zero.npy").symlink_to("/dev/zero")
    with pytest.raises(DataError, match="not a regular file"):
        check_npy(tmp_path / "zero.npy")
    with zipfile.ZipFile(tmp_path / "bomb.npz", "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("features.npy", b"\0" * 30_000_000)
    monkeypatch.setenv("MISPAIR_LIMIT_MAX_ARRAY_BYTES", "1000000")
    with pytest.raises(DataError, match="unpacks to 30,000,000 bytes"):
        check_npz(tmp_path / "bomb.npz")
