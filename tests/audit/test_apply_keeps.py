"""``mispair apply`` keeps every sample and every caption as decided (issue 58, class 4): two
shards of one name in different folders come back as two shards; a kept sample's sparse member is
copied as stored (never unpacked); a replacement caption holding a bare CR, LF, CRLF, quotes,
commas or a Unicode line separator reads back identical in every form (the form's own reader is
the reference); ``--out`` that is a link is refused; a picture changed since the audit is refused;
decisions of another audit are refused by the ``audit_id`` inside the file, whatever its name;
``--fdr`` or ``--threshold`` alone drop by the audit's numbers."""

import hashlib
import io
import os
import shutil
import tarfile
from pathlib import Path

import pandas as pd
import pytest

from mispair.audit.picture_digests import COLUMN, with_picture_digests
from mispair.audit.result import AuditResult
from mispair.audit.writers import WRITERS, Decided, WriteRequest
from mispair.audit.writers.webdataset import output_names
from mispair.cli import main
from mispair.config import DataConfig
from mispair.data.loading import resolve_source
from mispair.data.readers import READERS
from mispair.data.readers.columns import Columns
from mispair.errors import DataError
from tests.audit.test_apply_hostile import fake_audit, save
from tests.cli_errors import one_line_error
from tests.data.readers_forms import pictures, write_form

HARD = [
    "one\rtwo",
    "one\ntwo",
    "one\r\ntwo",
    'say "hi", then, go',
    "tab\there",
    "a line\u2028separator",
    "next\x85line",
    "'=1+1",
]
"""Replacement captions a careless writer splits into extra rows or changes."""
TABLE_COLUMNS = {"image": "picture", "caption": "alt"}
FORMS = [
    "folder-csv",
    "folder-tsv",
    "folder-jsonl",
    "imagefolder-csv",
    "imagefolder-jsonl",
    "imagefolder-parquet",
    "table-csv",
    "table-jsonl",
    "table-parquet",
    "parquet-bytes",
    "webdataset",
    "coco",
    "karpathy",
]


def refused(argv: list[str], capsys, *fragments: str) -> None:
    """``mispair ARGV`` ends in one error line holding every fragment."""
    code = main(argv)
    one_line_error(code, capsys.readouterr().err, *fragments)


def read(path: Path, form: str) -> dict[str, str]:
    """Every pair id's caption as mispair's reader of ``form`` reads ``path``."""
    columns = TABLE_COLUMNS if form.startswith("table-") else {}
    data = resolve_source(
        DataConfig(root=str(path), image_column=columns.get("image"), caption_column=columns.get("caption"))
    )
    table = READERS.get(data.source)().table(data)
    return dict(zip(table.pairs["pair_id"].astype(str), table.pairs["caption"]))


def write(path: Path, form: str, kept: dict[str, str | None], out: Path) -> list[str]:
    """``path`` written by its form's writer into ``out`` with ``kept``; the pictures copied."""
    columns = TABLE_COLUMNS if form.startswith("table-") else {}
    source = resolve_source(DataConfig(root=str(path))).source if form != "webdataset" else "webdataset"
    base = path if path.is_dir() else path.parent

    def copy_pictures(folder: Path, written=()) -> dict[str, int]:
        for picture in base.rglob("*.png"):
            target = folder / picture.relative_to(base)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(picture, target)
        return {}

    request = WriteRequest(path, Columns(**columns), Decided(kept), copy_pictures)
    return WRITERS.get(source).write(request, out).files


@pytest.mark.parametrize("form", FORMS)
def test_a_replaced_caption_reads_back_identical_in_every_form(tmp_path, form):
    path = write_form(form, tmp_path / "in")
    before = read(path, form)
    ids = list(before)
    new = dict(zip(ids[1:], HARD))
    out = tmp_path / "out"
    out.mkdir()
    write(path, form, {i: new.get(i) for i in ids}, out)
    again = out if path.is_dir() or path.suffix == ".tar" else out / path.name
    after = read(again, form)
    assert after == {i: new.get(i, caption) for i, caption in before.items()}  # no row split, none lost


def test_the_plain_folder_writes_a_replaced_caption_that_reads_back_identical(tmp_path):
    _, audit, _, _ = fake_audit(tmp_path)
    decisions = pd.DataFrame({"pair_id": ["1", "2", "3"], "decision": "replace", "caption": HARD[:3]})
    applied = AuditResult.load(audit).apply(decisions, tmp_path / "clean", format="folder")
    with open(applied.folder / "captions.csv", newline="", encoding="utf-8") as handle:
        text = handle.read()
    written = pd.read_csv(io.StringIO(text, newline=""), dtype=str, keep_default_na=False)
    assert written["caption"].tolist() == ["caption 0", *HARD[:3], "caption 4", "caption 5"]


def shards_of_one_name(root: Path) -> str:
    """``root/a/shard-000.tar`` (keys 0-11) and ``root/b/shard-000.tar`` (keys 12-23): one name,
    two folders; returns the brace pattern naming both."""
    for half, folder in enumerate(("a", "b")):
        (root / folder).mkdir(parents=True)
        with tarfile.open(root / folder / "shard-000.tar", "w") as tar:
            for k, (_, png, captions) in enumerate(pictures()[12 * half : 12 * half + 12]):
                for suffix, data in ((".png", png), (".txt", captions[0].encode())):
                    info = tarfile.TarInfo(f"{12 * half + k:05d}{suffix}")
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
    return str(root / "{a,b}" / "shard-000.tar")


def test_two_shards_of_one_name_in_two_folders_come_back_as_two_shards_with_every_sample(tmp_path):
    pattern = Path(shards_of_one_name(tmp_path / "in"))
    shards = [tmp_path / "in" / f / "shard-000.tar" for f in ("a", "b")]
    assert output_names(shards) == ["a/shard-000.tar", "b/shard-000.tar"]
    before = read(pattern, "webdataset")
    assert len(before) == 24
    out = tmp_path / "out"
    out.mkdir()
    files = write(pattern, "webdataset", dict.fromkeys(before), out)
    assert files == ["a/shard-000.tar", "b/shard-000.tar"]
    assert read(Path(str(out / "{a,b}" / "shard-000.tar")), "webdataset") == before
    for name in files:  # each sample's members as they were stored
        with tarfile.open(tmp_path / "in" / name) as source, tarfile.open(out / name) as written:
            assert written.getnames() == source.getnames()


def sparse_member_shard(folder: Path, size: int = 1 << 30) -> Path:
    """A shard of three samples; the second has a ``.bin`` GNU sparse member of ``size`` bytes
    unpacked (a hole: nothing stored)."""
    folder.mkdir(parents=True)
    shard = folder / "shard-000.tar"
    with tarfile.open(shard, "w", format=tarfile.GNU_FORMAT) as tar:
        for k, (_, png, captions) in enumerate(pictures()[:3]):
            for suffix, data in ((".png", png), (".txt", captions[0].encode())):
                info = tarfile.TarInfo(f"{k:05d}{suffix}")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
            if k == 1:
                info = tarfile.TarInfo(f"{k:05d}.bin")
                info.type = tarfile.GNUTYPE_SPARSE
                info.sparse = [(0, 0)]
                info.size = 0
                header = bytearray(info.tobuf(tarfile.GNU_FORMAT)[:512])
                header[483:495] = f"{size:011o}\0".encode()  # realsize
                header[386:398] = header[398:410] = b"00000000000\0"  # one empty map entry
                header[148:156] = b" " * 8
                header[148:156] = f"{sum(header):06o}\0 ".encode()
                tar.fileobj.write(bytes(header))
                tar.offset += 512
    return folder


def test_a_kept_sample_s_sparse_member_is_copied_as_stored_never_unpacked(tmp_path):
    folder = sparse_member_shard(tmp_path / "in")
    before = read(folder, "webdataset")
    assert len(before) == 3  # the sparse member is no picture: the sample is read and kept
    out = tmp_path / "out"
    out.mkdir()
    write(folder, "webdataset", {i: "a new caption" if i.endswith("1") else None for i in before}, out)
    assert (out / "shard-000.tar").stat().st_size < 1 << 20  # not a gigabyte of zeros
    with tarfile.open(out / "shard-000.tar") as tar:
        member = tar.getmember("00001.bin")
        assert member.issparse() and member.size == 1 << 30  # as it was stored
        assert tar.extractfile("00001.txt").read() == b"a new caption"
    assert read(out, "webdataset") == {**before, "shard-000/00001": "a new caption"}


def test_out_that_is_a_link_even_a_dangling_one_is_refused(tmp_path, capsys):
    _, audit, _, _ = fake_audit(tmp_path)
    decisions = tmp_path / "decisions.csv"
    decisions.write_text("pair_id,decision,caption\n1,drop,\n")
    target = tmp_path / "elsewhere" / "clean"  # its folder missing: the link dangles
    link = tmp_path / "clean"
    link.symlink_to(target)
    refused(["apply", str(audit), "--decisions", str(decisions), "--out", str(link)], capsys, "symbolic link")
    assert not (tmp_path / "elsewhere").exists() and link.is_symlink()


def test_the_audit_records_each_picture_by_its_content(tmp_path):
    collection, _, pairs, _ = fake_audit(tmp_path)
    recorded = with_picture_digests(pairs, collection, planted=False)
    expected = [hashlib.sha256((collection / i).read_bytes()).hexdigest()[:32] for i in pairs["image_id"]]
    assert recorded[COLUMN].tolist() == expected


def test_a_picture_changed_since_the_audit_is_refused_even_with_the_same_size_and_time(tmp_path, capsys):
    collection, audit, pairs, summary = fake_audit(tmp_path)
    save(audit, with_picture_digests(pairs, collection, planted=False), summary)
    picture = collection / "pics" / "3.png"
    stamp = picture.stat()
    picture.write_bytes(b"picture X")  # the same size
    os.utime(picture, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))  # and the same time
    decisions = tmp_path / "decisions.csv"
    decisions.write_text("pair_id,decision,caption\n1,drop,\n")
    out = tmp_path / "clean"
    refused(["apply", str(audit), "--decisions", str(decisions), "--out", str(out)], capsys, "changed since")
    assert not out.exists()
    decisions.write_text("pair_id,decision,caption\n3,drop,\n")  # dropped: nothing of it is copied
    assert main(["apply", str(audit), "--decisions", str(decisions), "--out", str(out)]) == 0


@pytest.mark.parametrize("name", ["decisions.csv", "decisions-0123456789abcdef.csv"])
def test_decisions_of_another_audit_are_refused_by_the_audit_id_inside_them(tmp_path, capsys, name):
    _, audit, _, _ = fake_audit(tmp_path)
    decisions = tmp_path / name
    decisions.write_text("pair_id,decision,caption,audit_id\n1,drop,,feedfacefeedface\n")
    out = tmp_path / "clean"
    argv = ["apply", str(audit), "--decisions", str(decisions), "--out", str(out)]
    refused(argv, capsys, "feedfacefeedface", "0123456789abcdef")  # both ids named
    assert not out.exists()
    decisions.write_text("pair_id,decision,caption,audit_id\n1,drop,,0123456789abcdef\n")  # its own
    assert main(["apply", str(audit), "--decisions", str(decisions), "--out", str(out)]) == 0
    decisions.write_text("pair_id,decision,caption\n1,drop,\n")  # an older page's, or by hand
    assert main(["apply", str(audit), "--decisions", str(decisions), "--out", str(out), "--overwrite"]) == 0


def test_fdr_or_threshold_alone_drops_by_the_audit_s_numbers_without_decisions(tmp_path, capsys):
    _, audit, _, _ = fake_audit(tmp_path)
    out = tmp_path / "clean"
    assert main(["apply", str(audit), "--fdr", "0.25", "--out", str(out)]) == 0
    removed = pd.read_csv(out / "removed.csv", dtype=str)
    assert removed["pair_id"].tolist() == ["0", "1", "2"]  # q-values 0, 0.1 and 0.2
    assert main(["apply", str(audit), "--threshold", "0.45", "--out", str(tmp_path / "t")]) == 0
    assert pd.read_csv(tmp_path / "t" / "removed.csv", dtype=str)["pair_id"].tolist() == ["5"]
    refused(["apply", str(audit), "--out", str(tmp_path / "none")], capsys, "--fdr / --threshold")
    assert not (tmp_path / "none").exists()


def test_the_coco_writer_refuses_what_the_coco_reader_refuses(tmp_path, monkeypatch):
    """A captions JSON of more values than the reader builds (a 20 MB list of zeros is ~27x that
    once built) is refused by the writer before it is parsed, as the reader refuses it."""
    path = write_form("coco", tmp_path / "in")
    before = read(path, "coco")
    text = path.read_text(encoding="utf-8")
    path.write_text(text[:-1] + ', "x": [' + "0," * 2000 + "0]}", encoding="utf-8")
    monkeypatch.setenv("MISPAIR_LIMIT_MAX_JSON_ELEMENTS", "1000")
    out = tmp_path / "out"
    out.mkdir()
    for attempt in (lambda: read(path, "coco"), lambda: write(path, "coco", dict.fromkeys(before), out)):
        with pytest.raises(DataError, match="values"):
            attempt()
    assert not list(out.iterdir())
