"""``mispair apply`` in the collection's own form (``--format same``) on an audit folder someone
else wrote: the summary's collection and the run's ``config.json`` are untrusted input too. The
run is the audit folder's own ``run/`` (a recorded path elsewhere is never opened); its config a
regular bounded file naming the summary's collection; the collection still of the form the run
read it as; the pictures linked beside it inside it. Anything else is one error line, and nothing
is written (nor ``--out``). Audits written without training (see ``test_apply_hostile``)."""

import json
import os
import shutil

import pandas as pd
import pytest

from mispair.audit.apply import apply_decisions
from mispair.audit.result import AuditResult
from mispair.errors import DataError
from tests.audit.test_apply_hostile import N, apply, everything, fake_audit, save
from tests.cli_errors import one_line_error


def run_config(collection, **data):
    return {
        "data": {
            "source": "table",
            "root": str(collection),
            "image_root": None,
            "image_column": "image",
            "caption_column": "caption",
            "id_column": None,
            "split_column": None,
            **data,
        }
    }


def write_run(audit, config):
    (audit / "run").mkdir(exist_ok=True)
    (audit / "run" / "config.json").write_text(json.dumps(config))


@pytest.fixture
def native(tmp_path):
    """A table file audited in its own form: ``collection/pairs.csv``, the audit's run config
    naming it (``data.source=table``)."""
    folder, audit, pairs, summary = fake_audit(tmp_path)
    table = folder / "pairs.csv"
    shutil.copy(folder / "captions.csv", table)
    summary = {**summary, "collection": str(table), "run": str(audit / "run")}
    save(audit, pairs, summary)
    write_run(audit, run_config(table))
    decisions = tmp_path / "decisions.csv"
    pd.DataFrame({"pair_id": ["1"], "decision": ["drop"], "caption": [""]}).to_csv(decisions, index=False)
    return tmp_path, table, audit, pairs, summary, decisions


def test_the_fake_table_audit_applies_in_its_own_form(native):
    tmp, _, audit, _, _, decisions = native
    applied = AuditResult.load(audit).apply(decisions, tmp / "clean")
    assert applied.form == "table" and applied.files == ["pairs.csv"]
    written = pd.read_csv(tmp / "clean" / "pairs.csv", dtype=str)
    assert len(written) == N - 1 and (tmp / "clean" / "pics" / "0.png").read_bytes() == b"picture 0"


def copy_collection_to(name):
    """The summary names a copy of the collection elsewhere (its image root too, so the summary
    is consistent in itself), while the run read the original."""

    def change(tmp, table, audit, pairs, summary):
        shutil.copytree(table.parent, tmp / name)
        save(
            audit,
            pairs,
            {**summary, "collection": str(tmp / name / "pairs.csv"), "image_root": str(tmp / name)},
        )

    return change


def config_file(kind):
    def change(tmp, table, audit, pairs, summary):
        config = audit / "run" / "config.json"
        config.unlink()
        if kind == "fifo":
            os.mkfifo(config)
        elif kind == "link":
            (tmp / "theirs.json").write_text(json.dumps(run_config(table)))
            os.symlink(tmp / "theirs.json", config)
        elif kind == "large":
            config.write_text(json.dumps({**run_config(table), "pad": "x" * 1_100_000}))
        else:
            config.write_text(kind)

    return change


def source_changed(source, **more):
    def change(tmp, table, audit, pairs, summary):
        write_run(audit, run_config(table, source=source, **more))

    return change


def run_folder_link(tmp, table, audit, pairs, summary):
    shutil.move(audit / "run", tmp / "their-run")
    os.symlink(tmp / "their-run", audit / "run")


def pictures_beside(tmp, table, audit, pairs, summary):
    """The summary's image root is an --images folder outside the collection (which the plain
    folder accepts), but the table's own form would link pictures that are not the table's."""
    shutil.copytree(table.parent / "pics", tmp / "other" / "pics")
    save(audit, pairs, {**summary, "image_root": str(tmp / "other"), "pictures": str(tmp / "other")})


def picture_named(name, folder=False):
    """A kept pair's image id names a regular file of the collection that apply writes too (the
    table, the folder's captions file, a report): linked, it would replace the cleaned one."""

    def change(tmp, table, audit, pairs, summary):
        named = pairs.assign(image_id=pairs["image_id"].where(pairs.index > 0, name))
        if not (table.parent / name).exists():
            (table.parent / name).write_bytes(b"a picture named keep.csv")
        if folder:
            write_run(audit, run_config(table.parent, source="folder"))
            summary = {**summary, "collection": str(table.parent)}
        save(audit, named, summary)

    return change


HOSTILE = {
    "summary: the collection copied elsewhere": (copy_collection_to("elsewhere"), "summary.json names"),
    "summary: the collection another user's file": (
        lambda tmp, table, audit, pairs, summary: save(
            audit, pairs, {**summary, "collection": "/etc/passwd"}
        ),
        "not the audited collection",
    ),
    "run: config.json a FIFO": (config_file("fifo"), "not a regular file"),
    "run: config.json a link": (config_file("link"), "symbolic link"),
    "run: config.json over its bound": (config_file("large"), "more than the 1,000,000"),
    "run: config.json not JSON": (config_file("{"), "not valid JSON"),
    "run: config.json a list": (config_file("[1]"), "no data section"),
    "run: a column that is a number": (source_changed("table", image_column=3), "no data section"),
    "run: the run folder a link": (run_folder_link, "not its own run folder"),
    "run: data.source coco": (source_changed("coco"), "not a coco collection"),
    "run: data.source webdataset": (source_changed("webdataset"), "not a webdataset collection"),
    "run: data.source folder": (source_changed("folder"), "not a folder collection"),
    "summary: pictures outside the collection": (pictures_beside, "not inside the collection"),
    "pairs: a picture named like the table": (picture_named("pairs.csv"), "named like a file apply writes"),
    "pairs: a picture named like the folder's captions file": (
        picture_named("captions.csv", folder=True),
        "named like a file apply writes",
    ),
    "pairs: a picture named like a report": (picture_named("keep.csv"), "named like a file apply writes"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_hostile_native_audit_is_one_error_line_and_writes_nothing(native, capsys, case):
    tmp, table, audit, pairs, summary, decisions = native
    change, message = HOSTILE[case]
    change(tmp, table, audit, pairs, summary)
    before = everything(tmp)
    one_line_error(apply(audit, decisions, tmp / "clean"), capsys.readouterr().err, message)
    assert everything(tmp) == before  # nothing outside --out, and no --out


def test_a_run_recorded_outside_the_audit_folder_is_never_opened(native):
    tmp, _, audit, pairs, summary, decisions = native
    (tmp / "their-run").mkdir()
    os.mkfifo(tmp / "their-run" / "config.json")  # would block a reader that opened it
    save(audit, pairs, {**summary, "run": str(tmp / "their-run")})
    loaded = AuditResult.load(audit)
    assert loaded.summary.run == str(audit.resolve() / "run")  # the folder's own run
    applied = loaded.apply(decisions, tmp / "clean")
    assert applied.form == "table" and len(pd.read_csv(tmp / "clean" / "pairs.csv")) == N - 1


def test_a_summary_handed_in_directly_must_name_the_audits_own_run(native):
    tmp, _, audit, pairs, summary, decisions = native
    (tmp / "x").mkdir()
    shutil.copytree(audit / "run", tmp / "x" / "their-run")
    with pytest.raises(DataError, match="not its own run folder"):
        apply_decisions(pairs, {**summary, "run": str(tmp / "x" / "their-run")}, decisions, tmp / "clean")
    os.symlink(audit / "run", tmp / "x" / "run")
    with pytest.raises(DataError, match="not its own run folder"):
        apply_decisions(pairs, {**summary, "run": str(tmp / "x" / "run")}, decisions, tmp / "clean")
    assert not (tmp / "clean").exists()


def test_a_moved_audit_folder_still_applies_in_the_collections_form(native):
    tmp, _, audit, _, _, decisions = native
    moved = tmp / "sent" / "audit"
    moved.parent.mkdir()
    shutil.move(audit, moved)  # the summary still records the old run
    applied = AuditResult.load(moved).apply(decisions, tmp / "clean")
    assert applied.form == "table" and len(pd.read_csv(tmp / "clean" / "pairs.csv")) == N - 1


def test_an_audit_without_its_run_folder_applies_as_apply_s_folder(native):
    tmp, _, audit, _, _, decisions = native
    shutil.rmtree(audit / "run")
    applied = AuditResult.load(audit).apply(decisions, tmp / "clean")
    assert applied.form == "folder" and (tmp / "clean" / "captions.csv").is_file()


def test_pictures_in_the_folder_the_run_read_them_from_are_linked(native):
    tmp, table, audit, pairs, summary, decisions = native
    shutil.move(table.parent / "pics", tmp / "pictures" / "pics")
    write_run(audit, run_config(table, image_root=str(tmp / "pictures")))
    save(audit, pairs, {**summary, "image_root": str(tmp / "pictures")})
    applied = AuditResult.load(audit).apply(decisions, tmp / "clean")
    assert applied.form == "table" and (tmp / "clean" / "pics" / "0.png").is_file()


def test_the_fake_folder_audit_applies_as_the_same_folder(native):
    """The collection's folder audited as a folder (``data.source=folder``): its ``captions.csv``
    comes back under its name with its own columns (no ``pair_id`` added), the kept rows only."""
    tmp, table, audit, pairs, summary, decisions = native
    write_run(audit, run_config(table.parent, source="folder"))
    save(audit, pairs, {**summary, "collection": str(table.parent)})
    applied = AuditResult.load(audit).apply(decisions, tmp / "clean")
    assert applied.form == "folder" and applied.files == ["captions.csv"]
    source = (table.parent / "captions.csv").read_bytes().splitlines(keepends=True)
    assert (tmp / "clean" / "captions.csv").read_bytes() == b"".join(source[:2] + source[3:])  # row 1 dropped
    assert not (tmp / "clean" / "pics" / "1.png").exists() and (tmp / "clean" / "pics" / "0.png").is_file()
