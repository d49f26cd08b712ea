"""The cases of ``hostile_inputs.py`` for shared audit folders and the bounds on what readers
build (issue 50): an audit folder, a decisions file or an index someone else wrote, a collection
that is small on disk and huge once built, data that reaches another program (a spreadsheet, a
terminal), and bad input that used to be a traceback or silently wrong data. Classes 50.1-50.8
follow the issue's classes; docs/reliability.md states the promise each case checks."""

from __future__ import annotations

import csv
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np

import hostile_fixtures as fx

ESC = "\x1b"


def cases(tmp: Path, f, Case, mispair, small: list[str], audit: list[str]) -> list:
    """Every case of classes 50.1 to 50.8 (``f``: the shared fixtures of hostile_inputs.py)."""
    built = [
        *_trusting_apply(tmp, Case, mispair),
        *_trusting_native_apply(tmp, Case, mispair),
        *_owned_output(tmp, Case, mispair),
        *_bombs(tmp, Case, mispair, audit),
        *_checked_files(tmp, f, Case, mispair),
        *_confined(tmp, Case, mispair, small),
        *_injection(tmp, Case, mispair, audit),
        *_tracebacks(tmp, Case, mispair, audit),
        *_silent(tmp, f, Case, mispair, small),
    ]
    return built


def _apply(audit: Path, decisions: Path, out: Path, mispair) -> list[str]:
    return mispair("apply", audit, "--decisions", decisions, "--out", out)


def _nothing_outside(tmp: Path, base: str) -> Callable[[], bool]:
    """Nothing was written next to the case's folder (where a traversing id would land)."""

    def check() -> bool:
        return not (tmp / "outside.png").exists() and not (tmp / base / "outside.png").exists()

    return check


# --- 50.1 apply reads the audit folder as untrusted input ----------------------------------------


def _trusting_apply(tmp: Path, Case, mispair) -> list:
    kind = "50.1 audit folder"
    decisions = tmp / "a50" / "decisions.csv"

    def audit_with(name: str, **options) -> Callable[[], None]:
        return lambda: (fx.fake_audit(tmp / name, **options), fx.decisions_file(decisions))

    def planted_link() -> None:
        fx.fake_audit(tmp / "a50-link")
        fx.decisions_file(decisions)
        (tmp / "a50-secret.txt").write_text("the key")
        picture = tmp / "a50-link" / "collection" / "pics" / "2.png"
        picture.unlink()
        picture.symlink_to(tmp / "a50-secret.txt")

    def damaged(name: str, file: str, content: bytes) -> Callable[[], None]:
        def write() -> None:
            fx.fake_audit(tmp / name)
            fx.decisions_file(decisions)
            (tmp / name / "audit" / file).write_bytes(content)

        return write

    rows = [
        (
            "a traversing image id",
            "a50-up",
            {"image_of": lambda k: "../../../outside.png" if k == 2 else None},
            "plain relative name",
        ),
        (
            "an absolute image id",
            "a50-abs",
            {"image_of": lambda k: "/etc/passwd" if k == 2 else None},
            "absolute path outside",
        ),
        ("summary: image root '/'", "a50-root", {"summary": {"image_root": "/"}}, "image root"),
        ("summary: threshold as text", "a50-type", {"summary": {"threshold": "0.5"}}, "'threshold'"),
    ]
    built = [
        Case(
            kind,
            f"apply: {name}",
            _apply(tmp / folder / "audit", decisions, tmp / f"{folder}-out", mispair),
            "error",
            fragment,
            setup=audit_with(folder, **options),
            absent=tmp / f"{folder}-out",
            check=_nothing_outside(tmp, folder),
        )
        for name, folder, options, fragment in rows
    ]
    return [
        *built,
        Case(
            kind,
            "apply: a link planted in the collection after the audit",
            _apply(tmp / "a50-link" / "audit", decisions, tmp / "a50-link-out", mispair),
            "error",
            "symbolic link",
            setup=planted_link,
            absent=tmp / "a50-link-out",
        ),
        Case(
            kind,
            "apply: summary.json truncated",
            _apply(tmp / "a50-cut" / "audit", decisions, tmp / "a50-cut-out", mispair),
            "error",
            "not valid JSON",
            setup=damaged("a50-cut", "summary.json", b'{"collection": "/x", "thre'),
            absent=tmp / "a50-cut-out",
        ),
        Case(
            kind,
            "apply: pairs.parquet truncated",
            _apply(tmp / "a50-pq" / "audit", decisions, tmp / "a50-pq-out", mispair),
            "error",
            "not a readable Parquet",
            setup=damaged("a50-pq", "pairs.parquet", b"PAR1\0\0\0"),
            absent=tmp / "a50-pq-out",
        ),
    ]


def _native_audit(base: Path, source: str = "table") -> Path:
    """:func:`hostile_fixtures.fake_audit` of a table file (``collection/pairs.csv``), with the
    run config ``apply`` writes the table's own form from (``data.source``: ``source``)."""
    audit = fx.fake_audit(base)
    table = base / "collection" / "pairs.csv"
    with table.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["image", "caption"])
        writer.writerows((f"pics/{k}.png", f"caption {k}") for k in range(6))
    summary = json.loads((audit / "summary.json").read_text())
    (audit / "summary.json").write_text(
        json.dumps({**summary, "collection": str(table), "run": str(audit / "run")})
    )
    (audit / "run").mkdir(exist_ok=True)
    data = {"source": source, "root": str(table), "image_column": "image", "caption_column": "caption"}
    (audit / "run" / "config.json").write_text(json.dumps({"data": data}))
    return audit


def _trusting_native_apply(tmp: Path, Case, mispair) -> list:
    """``apply`` in the collection's own form reads the summary's collection and the run's config:
    both checked as the audit's own (the run the folder's ``run/``, never a path elsewhere)."""
    kind = "50.1 audit folder"
    decisions = tmp / "a50" / "decisions.csv"

    def native(name: str, change: Callable[[Path], None], source: str = "table") -> Callable[[], None]:
        def write() -> None:
            change(_native_audit(tmp / name, source))
            fx.decisions_file(decisions)

        return write

    def elsewhere(audit: Path) -> None:  # a copy of the collection, named by the summary alone
        copy = audit.parent / "elsewhere"
        shutil.copytree(audit.parent / "collection", copy)
        summary = json.loads((audit / "summary.json").read_text())
        moved = {"collection": str(copy / "pairs.csv"), "image_root": str(copy)}
        (audit / "summary.json").write_text(json.dumps({**summary, **moved}))

    def config_fifo(audit: Path) -> None:
        (audit / "run" / "config.json").unlink()
        fx.fifo(audit / "run" / "config.json")

    def config_zero(audit: Path) -> None:
        (audit / "run" / "config.json").unlink()
        os.symlink("/dev/zero", audit / "run" / "config.json")

    def run_outside(audit: Path) -> None:  # recorded elsewhere: a FIFO there would hang a reader
        (audit.parent / "their-run").mkdir()
        fx.fifo(audit.parent / "their-run" / "config.json")
        summary = json.loads((audit / "summary.json").read_text())
        (audit / "summary.json").write_text(json.dumps({**summary, "run": str(audit.parent / "their-run")}))

    def table_written() -> bool:
        written = tmp / "n50-out-out" / "pairs.csv"
        return written.is_file() and len(written.read_text().splitlines()) == 6  # header and 5 kept

    rows = [
        ("the summary names a copy of the collection", "n50-copy", elsewhere, "table", "summary.json names"),
        ("the run's config.json a FIFO", "n50-fifo", config_fifo, "table", "not a regular file"),
        ("the run's config.json a link to /dev/zero", "n50-zero", config_zero, "table", "symbolic link"),
        (
            "the run's data.source altered to coco",
            "n50-coco",
            lambda a: None,
            "coco",
            "not a coco collection",
        ),
    ]
    return [
        *(
            Case(
                kind,
                f"apply (own form): {name}",
                _apply(tmp / folder / "audit", decisions, tmp / f"{folder}-out", mispair),
                "error",
                fragment,
                setup=native(folder, change, source),
                absent=tmp / f"{folder}-out",
            )
            for name, folder, change, source, fragment in rows
        ),
        Case(
            kind,
            "apply (own form): a run recorded outside the audit folder is never opened",
            _apply(tmp / "n50-out" / "audit", decisions, tmp / "n50-out-out", mispair),
            "ok",
            setup=native("n50-out", run_outside),
            check=table_written,
        ),
    ]


# --- 50.2 apply replaces only its own folders -----------------------------------------------------


def _owned_output(tmp: Path, Case, mispair) -> list:
    kind = "50.2 apply's folders"
    decisions = tmp / "o50" / "decisions.csv"
    mine = tmp / "o50-mine"
    names = ("captions.csv", "keep.csv", "removed.csv", "thesis.tex")

    def users_folder() -> None:
        fx.fake_audit(tmp / "o50")
        fx.decisions_file(decisions)
        mine.mkdir(exist_ok=True)
        for name in names:
            (mine / name).write_text(f"my {name}")

    def cleaned_with_notes() -> None:
        fx.fake_audit(tmp / "o50b")
        fx.decisions_file(decisions)
        import subprocess

        subprocess.run(
            _apply(tmp / "o50b" / "audit", decisions, tmp / "o50b-clean", mispair),
            check=True,
            capture_output=True,
        )
        (tmp / "o50b-clean" / "my-notes.txt").write_text("mine")

    def audit_folder_as_out() -> None:
        fx.fake_audit(tmp / "o50c")
        fx.decisions_file(decisions)
        other = tmp / "o50c-other"
        other.mkdir(exist_ok=True)
        (other / ".mispair-output").write_text("mispair audit output\n")
        (other / "summary.json").write_text("{}")

    untouched = lambda: all((mine / n).read_text() == f"my {n}" for n in names)  # noqa: E731
    return [
        Case(
            kind,
            "apply into a user's folder holding captions.csv, keep.csv, removed.csv and more",
            _apply(tmp / "o50" / "audit", decisions, mine, mispair),
            "error",
            "did not create",
            setup=users_folder,
            check=untouched,
        ),
        Case(
            kind,
            "apply twice into a cleaned folder the user added to",
            _apply(tmp / "o50b" / "audit", decisions, tmp / "o50b-clean", mispair),
            "error",
            "earlier `mispair apply`",
            setup=cleaned_with_notes,
            check=lambda: (tmp / "o50b-clean" / "my-notes.txt").read_text() == "mine",
        ),
        Case(
            kind,
            "apply into another command's output folder",
            _apply(tmp / "o50c" / "audit", decisions, tmp / "o50c-other", mispair),
            "error",
            "did not create",
            setup=audit_folder_as_out,
            check=lambda: (tmp / "o50c-other" / "summary.json").read_text() == "{}",
        ),
    ]


# --- 50.3 readers bounded by what they build -------------------------------------------------------


def _bombs(tmp: Path, Case, mispair, audit: list[str]) -> list:
    kind = "50.3 bombs"

    def npy_folder() -> None:
        folder = tmp / "b50-npy"
        (folder / "feats").mkdir(parents=True, exist_ok=True)
        for k in range(6):
            np.save(folder / "feats" / f"{k}.npy", np.ones((4, 8), np.float32) * k)
        fx.npy_header_bomb(folder / "feats" / "6.npy")
        with (folder / "captions.csv").open("w", newline="") as handle:
            csv.writer(handle).writerows(
                [("image", "caption"), *((f"feats/{k}.npy", f"caption {k}") for k in range(7))]
            )

    return [
        Case(
            kind,
            "audit: Parquet of 0.6 MB holding 100 M dictionary-encoded rows",
            mispair("audit", tmp / "b50-rows.parquet", "--out", tmp / "b50-rows", "--quiet", *audit),
            "error",
            "100,000,000 rows, more than",
            setup=lambda: fx.parquet_row_bomb(tmp / "b50-rows.parquet"),
            absent=tmp / "b50-rows",
        ),
        Case(
            kind,
            "audit: a 200 KB tar of sparse members (6 GB unpacked)",
            mispair("audit", tmp / "b50-sparse", "--out", tmp / "b50-sparse-out", "--quiet", *audit),
            "error",
            "sparse tar member",
            setup=lambda: fx.sparse_tar(tmp / "b50-sparse"),
            absent=tmp / "b50-sparse-out",
        ),
        Case(
            kind,
            "audit: a brace pattern naming 10^8 shards",
            mispair("audit", tmp / "s{0..9999}-{0..9999}.tar", "--out", tmp / "b50-brace", "--quiet", *audit),
            "error",
            "100,000,000 shards",
            absent=tmp / "b50-brace",
        ),
        Case(
            kind,
            "audit: COCO JSON of 80 MB that grows ~27x once built",
            mispair(
                "audit",
                tmp / "b50-coco" / "captions_train2017.json",
                "--out",
                tmp / "b50-coco-out",
                "--quiet",
                *audit,
            ),
            "error",
            "JSON values, more than",
            setup=lambda: fx.coco_element_bomb(tmp / "b50-coco", 40_000_000),
            absent=tmp / "b50-coco-out",
        ),
        Case(
            kind,
            "audit: a .npy header declaring 37 GB",
            mispair("audit", tmp / "b50-npy", "--out", tmp / "b50-npy-out", "--quiet", *audit),
            "error",
            "more than the",
            setup=npy_folder,
            absent=tmp / "b50-npy-out",
        ),
        Case(
            kind,
            "audit: image structs whose bytes field is 10^10",
            mispair("audit", tmp / "b50-struct.parquet", "--out", tmp / "b50-struct", "--quiet", *audit),
            "error",
            "not bytes",
            setup=lambda: fx.image_struct_parquet(tmp / "b50-struct.parquet", 10**10),
            absent=tmp / "b50-struct",
        ),
    ]


# --- 50.4 index folders and decisions files checked before they are read --------------------------


def _checked_files(tmp: Path, f, Case, mispair) -> list:
    kind = "50.4 files checked first"

    def index_with(name: str, change: Callable[[Path], None]) -> Callable[[], None]:
        def write() -> None:
            copy = tmp / name
            shutil.rmtree(copy, ignore_errors=True)
            shutil.copytree(f.index, copy)
            change(copy / "images.faiss")

        return write

    def fifo(path: Path) -> None:
        path.unlink()
        os.mkfifo(path)

    def dev_zero(path: Path) -> None:
        path.unlink()
        path.symlink_to("/dev/zero")

    def sparse(path: Path) -> None:
        with path.open("r+b") as handle:
            handle.truncate(8 << 30)

    def decisions_of(kind_: str) -> Callable[[], None]:
        def write() -> None:
            fx.fake_audit(tmp / "c50")
            path = tmp / "c50" / f"decisions-{kind_}.csv"
            if kind_ == "fifo":
                path.unlink(missing_ok=True)
                os.mkfifo(path)
            else:
                fx.sparse_file(path, 3 << 30)

        return write

    search = lambda name: mispair("search", tmp / name, "a picture")  # noqa: E731
    return [
        Case(
            kind,
            "search: a FIFO named in the manifest",
            search("i50-fifo"),
            "error",
            "not a regular file",
            setup=index_with("i50-fifo", fifo),
        ),
        Case(
            kind,
            "search: an index file linking to /dev/zero",
            search("i50-zero"),
            "error",
            "symbolic link",
            setup=index_with("i50-zero", dev_zero),
        ),
        Case(
            kind,
            "search: an index file made a sparse 8 GB file",
            search("i50-sparse"),
            "error",
            "more than the",
            setup=index_with("i50-sparse", sparse),
        ),
        Case(
            kind,
            "apply: a decisions file of 3 GB (sized, not read)",
            _apply(tmp / "c50" / "audit", tmp / "c50" / "decisions-big.csv", tmp / "c50-out", mispair),
            "error",
            "more than the 500,000,000",
            setup=decisions_of("big"),
            absent=tmp / "c50-out",
        ),
        Case(
            kind,
            "apply: a FIFO as the decisions file",
            _apply(tmp / "c50" / "audit", tmp / "c50" / "decisions-fifo.csv", tmp / "c50-out", mispair),
            "error",
            "decisions",
            setup=decisions_of("fifo"),
            absent=tmp / "c50-out",
        ),
    ]


# --- 50.5 embedding paths confined like picture paths ---------------------------------------------


def _confined(tmp: Path, Case, mispair, small: list[str]) -> list:
    kind = "50.5 confinement"
    secret = tmp / "e50-secret.npy"

    def table(name: str, bad: str) -> Callable[[], None]:
        def write() -> None:
            folder = tmp / name
            (folder / "e").mkdir(parents=True, exist_ok=True)
            np.save(secret, np.ones(8, np.float32))
            for k in range(20):
                np.save(folder / "e" / f"{k}.npy", np.random.default_rng(k).normal(size=8).astype(np.float32))
            if not (folder / "e" / "link.npy").is_symlink():
                (folder / "e" / "link.npy").symlink_to(secret)
            with (folder / "t.csv").open("w", newline="") as handle:
                rows = [(f"caption {k}", f"e/{k}.npy") for k in range(20)] + [("escape", bad)]
                csv.writer(handle).writerows([("caption", "emb"), *rows])

        return write

    def train(name: str) -> list[str]:
        run = tmp / f"{name}-run"
        return mispair("train", tmp / name / "t.csv", "data.image_embedding_column=emb", *small, "--out", run)

    return [
        Case(
            kind,
            "train: an embedding path with ..",
            train("e50-up"),
            "error",
            "outside the collection",
            setup=table("e50-up", "../e50-secret.npy"),
            absent=tmp / "e50-up-run",
        ),
        Case(
            kind,
            "train: an absolute embedding path",
            train("e50-abs"),
            "error",
            "outside the collection",
            setup=table("e50-abs", str(secret)),
            absent=tmp / "e50-abs-run",
        ),
        Case(
            kind,
            "train: an embedding path through a link out",
            train("e50-link"),
            "error",
            "outside the collection",
            setup=table("e50-link", "e/link.npy"),
            absent=tmp / "e50-link-run",
        ),
    ]


# --- 50.6 injection into other programs -----------------------------------------------------------


def _injection(tmp: Path, Case, mispair, audit: list[str]) -> list:
    kind = "50.6 injection"
    formulas = ["=1+1", "+1", "-1", "@SUM(A1)", "\t=1", "\r=1"]

    def no_formula(*paths: Path) -> Callable[[], bool]:
        def check() -> bool:
            for path in paths:
                with path.open(encoding="utf-8", newline="") as handle:
                    if any(_formula(cell) for row in csv.reader(handle) for cell in row):
                        return False
            return True

        return check

    def formula_audit() -> None:
        fx.fake_audit(tmp / "j50", pair_ids=formulas)
        fx.decisions_file(tmp / "j50" / "decisions.csv", [(formulas[0], "drop", "")])

    def formula_folder() -> None:
        (tmp / "j50-coll").mkdir(exist_ok=True)
        pictures = fx.colour_pictures(30)
        for name, blob, _ in pictures:
            (tmp / "j50-coll" / name).write_bytes(blob)
        with (tmp / "j50-coll" / "captions.csv").open("w", newline="", encoding="utf-8") as handle:
            rows = [
                (name, formulas[k % len(formulas)] + f" colour {k}")
                for k, (name, _, _) in enumerate(pictures)
            ]
            csv.writer(handle).writerows([("image", "caption"), *rows])

    return [
        Case(
            kind,
            "apply: pair ids that are formulas in keep.csv and removed.csv",
            _apply(tmp / "j50" / "audit", tmp / "j50" / "decisions.csv", tmp / "j50-out", mispair),
            "ok",
            setup=formula_audit,
            check=no_formula(tmp / "j50-out" / "keep.csv", tmp / "j50-out" / "removed.csv"),
        ),
        Case(
            kind,
            "audit: captions that are formulas in pairs.csv",
            mispair("audit", tmp / "j50-coll", "--out", tmp / "j50-audit", "--quiet", *audit),
            "ok",
            setup=formula_folder,
            check=no_formula(tmp / "j50-audit" / "pairs.csv"),
        ),
        Case(
            kind,
            "audit: a path holding terminal escapes, printed escaped",
            mispair("audit", tmp / f"j50-{ESC}[2J{ESC}]0;pwned\a", "--out", tmp / "j50-esc", *audit),
            "error",
            "\\x1b[2J",
            missing=ESC,
            absent=tmp / "j50-esc",
        ),
    ]


def _formula(cell: str) -> bool:
    """A cell a spreadsheet would run: it starts with a formula character and is not a number."""
    try:
        float(cell)
        return False
    except ValueError:
        return cell.startswith(("=", "+", "-", "@", "\t", "\r"))


# --- 50.7 bad input is one line, not a traceback --------------------------------------------------


def _tracebacks(tmp: Path, Case, mispair, audit: list[str]) -> list:
    kind = "50.7 tracebacks"

    def karpathy() -> None:
        folder = tmp / "t50-k"
        folder.mkdir(exist_ok=True)
        images = [
            {"filename": 5, "sentences": 7},
            {"filename": "a.png", "sentences": [{"raw": 3, "tokens": 9}]},
        ]
        (folder / "dataset_coco.json").write_text(json.dumps({"images": images * 4}))

    def nested_jsonl() -> None:
        (tmp / "t50.jsonl").write_text(
            '{"image": "a.png", "caption": ' + "[" * 100_000 + "]" * 100_000 + "}\n"
        )

    def identical() -> None:
        pictures = fx.colour_pictures(1) * 24
        folder = tmp / "t50-same"
        folder.mkdir(exist_ok=True)
        with (folder / "captions.csv").open("w", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(["image", "caption"])
            for k, (_, blob, caption) in enumerate(pictures):
                (folder / f"{k}.png").write_bytes(blob)
                writer.writerow([f"{k}.png", f"{caption} {k}"])

    return [
        Case(
            kind,
            "audit: Karpathy JSON with fields of the wrong types",
            mispair(
                "audit", tmp / "t50-k" / "dataset_coco.json", "--out", tmp / "t50-k-out", "--quiet", *audit
            ),
            "error",
            "rows refused",
            setup=karpathy,
            absent=tmp / "t50-k-out",
        ),
        Case(
            kind,
            "audit: JSONL nested 100,000 deep",
            mispair("audit", tmp / "t50.jsonl", "--out", tmp / "t50-j-out", "--quiet", *audit),
            "error",
            "not a JSON object",
            setup=nested_jsonl,
            absent=tmp / "t50-j-out",
        ),
        Case(
            kind,
            "audit: image structs whose bytes are text",
            mispair("audit", tmp / "t50-s.parquet", "--out", tmp / "t50-s-out", "--quiet", *audit),
            "error",
            "not bytes",
            setup=lambda: fx.image_struct_parquet(tmp / "t50-s.parquet", "not bytes"),
            absent=tmp / "t50-s-out",
        ),
        Case(
            kind,
            "audit: every picture the same",
            mispair("audit", tmp / "t50-same", "--out", tmp / "t50-same-out", "--quiet", *audit),
            "error",
            "different contents",
            setup=identical,
            absent=tmp / "t50-same-out",
        ),
    ]


# --- 50.8 nothing silently wrong ------------------------------------------------------------------


def _silent(tmp: Path, f, Case, mispair, small: list[str]) -> list:
    kind = "50.8 silent"

    def long_tsv() -> None:
        folder = tmp / "s50-tsv"
        folder.mkdir(exist_ok=True)
        rows = []
        for k, (name, blob, caption) in enumerate(fx.colour_pictures()):
            (folder / name).write_bytes(blob)
            rows.append(f"{name}\t{'x' * 300_000 if k == 0 else caption}")
        (folder / "t.tsv").write_text("image\tcaption\n" + "\n".join(rows) + "\n")

    return [
        Case(
            kind,
            "train: a shard holding keys twice: the repeats refused, said",
            mispair("train", tmp / "s50-dup", *small, "--out", tmp / "s50-dup-run", "--quiet"),
            "warn",
            "appears more than once",
            setup=lambda: fx.duplicate_key_tar(tmp / "s50-dup", 60, every=6),  # 20 of 70 samples
        ),
        Case(
            kind,
            "train: one caption of 300,000 characters in a TSV: cut",
            mispair("train", tmp / "s50-tsv" / "t.tsv", *small, "--out", tmp / "s50-tsv-run", "--quiet"),
            "warn",
            "were cut",
            setup=long_tsv,
        ),
        Case(
            kind,
            "train: a folder row pointing outside: refused, said",
            f.folder_train(tmp / "s50-out"),
            "warn",
            "1 of 31 rows refused",
            setup=f.captions([*f.base, ("../a_file", "escape", "train")]),
        ),
    ]
