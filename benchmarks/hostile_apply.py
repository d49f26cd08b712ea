"""The cases of ``hostile_inputs.py`` for ``--nproc``, ``apply``, the older cases still open and a
new user's first audits (issue 58, classes 3, 4, 6 and 7): a launcher port open to the network, a
small collection that fails on two processes, samples or captions lost or changed by ``apply``, a
picture changed since the audit carried silently, decisions of another audit applied, features
that overflow, another run's checkpoint, a vocabulary that is a string, a refusal that comes after
training, repeated shard keys, a rerun refused for how ``--out`` was spelled, a headline that hides
refused rows, a review list out of order, ids of another type than the caller's. docs/reliability.md
("Issue 58: --nproc, apply, older cases, a new user") states the promise each case checks.

``python benchmarks/hostile_apply.py watch COMMAND...`` runs a command and fails it (one error line,
exit 2) if any process it starts listens on an address other than loopback."""

from __future__ import annotations

import csv
import io
import itertools
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

import hostile_fixtures as fx
from listening import listening_tree, loopback

NPROC, APPLY, OLDER, NEW_USER = "58.3 nproc", "58.4 apply", "58.6 older", "58.7 new user"


def cases(tmp: Path, f, Case, mispair, small: list[str], audit: list[str]) -> list:
    """Every case of classes 58.3, 58.4, 58.6 and 58.7 (``f``: the shared fixtures)."""
    base = _Base(tmp / "a58", mispair, [*audit, "division.folds=3", "division.rounds=1"])
    return [
        *_nproc(base, Case),
        *_apply_shards(base, Case),
        *_apply_folder(base, Case),
        *_older(base, f, Case, small),
        *_new_user(base, Case, small),
    ]


class _Base:
    """A 24-picture folder (no split column: one dev picture), made on first use."""

    def __init__(self, root: Path, mispair, audit: list[str]) -> None:
        self.root, self.mispair, self.audit = root, mispair, audit
        self.pictures = root / "p24"

    def folder(self, broken: int = 0) -> Path:
        """The 24 pictures with ``captions.csv`` (and ``broken`` rows naming missing files)."""
        folder = self.pictures if not broken else self.root / f"p24-{broken}"
        if not (folder / "captions.csv").exists():
            folder.mkdir(parents=True, exist_ok=True)
            rows = fx.colour_pictures(24)
            for name, blob, _ in rows:
                (folder / name).write_bytes(blob)
            listed = [(n, c) for n, _, c in rows] + [(f"gone{k}.png", f"gone {k}") for k in range(broken)]
            _write_csv(folder / "captions.csv", [("image", "caption"), *listed])
        return folder

    def audited(self, collection: Path | str, out: Path) -> Path:
        subprocess.run(
            self.mispair("audit", collection, "--out", out, *self.audit, "--quiet"),
            check=True,
            capture_output=True,
        )
        return out


def _write_csv(path: Path, rows: list) -> None:
    with path.open("w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows(rows)


def _pairs(out: Path) -> list[dict[str, str]]:
    with (out / "pairs.csv").open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def _rows(out: Path, n: int) -> Callable[[], bool]:
    return lambda: (out / "pairs.csv").is_file() and len(_pairs(out)) == n


# --- 58.3 --nproc: loopback only, any process count ------------------------------------------------


def _nproc(b: _Base, Case) -> list:
    watch = [sys.executable, str(Path(__file__).resolve()), "watch"]
    out = [b.root / f"n{k}" for k in range(3)]
    return [
        Case(
            NPROC,
            "audit --nproc 2: every listening socket on loopback (watched in /proc)",
            [*watch, *b.mispair("audit", b.pictures, "--out", out[0], "--nproc", "2", *b.audit, "--quiet")],
            "ok",
            setup=b.folder,
            check=_rows(out[0], 24),
        ),
        Case(
            NPROC,
            "audit --nproc 3 of 24 pictures (one dev picture: fewer than processes)",
            b.mispair("audit", b.pictures, "--out", out[1], "--nproc", "3", *b.audit, "--quiet"),
            "ok",
            setup=b.folder,
            check=_rows(out[1], 24),
        ),
        Case(
            NPROC,
            "train --nproc 2 on 24 pictures: loopback only",
            [
                *watch,
                *b.mispair(
                    "train", f"data.root={b.pictures}", *b.audit, "--out", out[2], "--nproc", "2", "--quiet"
                ),
            ],
            "ok",
            setup=b.folder,
            check=lambda: (out[2] / "best.pt").is_file(),
        ),
    ]


def watch(argv: list[str]) -> int:
    """Run ``argv``; exit 2 with one error line if a process of it listens beyond loopback."""
    seen: set[str] = set()
    with subprocess.Popen(argv) as run:
        while run.poll() is None:
            seen |= listening_tree(run.pid)
            time.sleep(0.05)
    outside = sorted(a for a in seen if not loopback(a))
    if outside:
        print(
            f"mispair: error: listening beyond loopback on {outside} (hex, as /proc writes them)",
            file=sys.stderr,
        )
        return 2
    return run.returncode


# --- 58.4 apply keeps every sample -----------------------------------------------------------------


def _shards(folder: Path, parts: list[tuple[str, int, int]], sparse_key: int | None = None) -> None:
    """Tar shards ``(relative name, first key, count)`` of the colour pictures; the sample
    ``sparse_key`` also gets a 1 GB GNU sparse ``.bin`` member (nothing stored)."""
    pictures = fx.colour_pictures(24)
    for name, first, count in parts:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        with tarfile.open(folder / name, "w", format=tarfile.GNU_FORMAT) as tar:
            for k in range(first, first + count):
                for suffix, data in ((".png", pictures[k][1]), (".txt", pictures[k][2].encode())):
                    info = tarfile.TarInfo(f"{k:05d}{suffix}")
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
                if k == sparse_key:
                    info = tarfile.TarInfo(f"{k:05d}.bin")
                    info.type, info.sparse, info.size = tarfile.GNUTYPE_SPARSE, [(0, 0)], 0
                    tar.fileobj.write(fx._sparse_header(info.tobuf(tarfile.GNU_FORMAT), 1 << 30))
                    tar.offset += 512


def _members(path: Path) -> list[str]:
    with tarfile.open(path) as tar:
        return tar.getnames()


def _apply_shards(b: _Base, Case) -> list:
    root = b.root / "wds"
    pattern = root / "twice" / "{a,b}" / "shard-000.tar"
    decisions = root / "keep-all.csv"

    def two_names() -> None:
        _shards(root / "twice", [("a/shard-000.tar", 0, 12), ("b/shard-000.tar", 12, 12)])
        b.audited(pattern, root / "twice-audit")
        _write_csv(decisions, [("pair_id", "decision", "caption")])

    def two_back() -> bool:
        out = root / "twice-out"
        names = [out / "a" / "shard-000.tar", out / "b" / "shard-000.tar"]
        return all(p.is_file() for p in names) and sum(len(_members(p)) for p in names) == 48

    def sparse() -> None:
        _shards(root / "sparse", [("shard-000.tar", 0, 24)], sparse_key=5)
        b.audited(root / "sparse", root / "sparse-audit")
        _write_csv(decisions, [("pair_id", "decision", "caption")])

    def sparse_kept() -> bool:
        shard = root / "sparse-out" / "shard-000.tar"
        if not shard.is_file() or shard.stat().st_size > 1 << 20:
            return False
        with tarfile.open(shard) as tar:
            return tar.getmember("00005.bin").issparse()

    return [
        Case(
            APPLY,
            "apply: two shards named alike in two folders come back as two, every sample",
            b.mispair("apply", root / "twice-audit", "--decisions", decisions, "--out", root / "twice-out"),
            "ok",
            setup=two_names,
            check=two_back,
        ),
        Case(
            APPLY,
            "apply: a kept sample's sparse 1 GB member copied as stored",
            b.mispair("apply", root / "sparse-audit", "--decisions", decisions, "--out", root / "sparse-out"),
            "ok",
            setup=sparse,
            check=sparse_kept,
        ),
    ]


def _apply_folder(b: _Base, Case) -> list:
    root = b.root / "fake"
    own = {"audit_id": "0123456789abcdef"}

    def fake(
        name: str, *rows: tuple[str, str, str], digests: bool = False, summary=None
    ) -> Callable[[], None]:
        def write() -> None:
            audit = fx.fake_audit(root / name, summary=summary)
            if digests:
                import pandas as pd

                from mispair.audit.picture_digests import with_picture_digests

                pairs = pd.read_parquet(audit / "pairs.parquet")
                with_picture_digests(pairs, root / name / "collection", False).to_parquet(
                    audit / "pairs.parquet"
                )
            header = ("pair_id", "decision", "caption", *(["audit_id"] if len(rows[0]) > 3 else []))
            _write_csv(root / name / "decisions.csv", [header, *rows])

        return write

    def changed() -> None:
        fake("changed", ("1", "drop", ""), digests=True)()
        picture = root / "changed" / "collection" / "pics" / "3.png"
        stamp = picture.stat()
        picture.write_bytes(fx.png((200, 20, 30)))
        os.utime(picture, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))

    def cr_back() -> bool:
        import pandas as pd

        path = root / "cr" / "out" / "captions.csv"
        return path.is_file() and pd.read_csv(path, dtype=str)["caption"].tolist()[1:4] == [
            "one\rtwo",
            "a\r\nb",
            'say "hi", then',
        ]

    def linked() -> None:
        fake("link", ("1", "drop", ""))()
        (root / "link" / "out").symlink_to(root / "link" / "nowhere" / "clean")

    def apply(name: str, *extra: object) -> list[str]:
        audit, out = root / name / "audit", root / name / "out"
        return b.mispair("apply", audit, "--out", out, *extra)

    decisions = lambda name: ["--decisions", root / name / "decisions.csv"]  # noqa: E731
    return [
        Case(
            APPLY,
            "apply: replaced captions with a bare CR, CRLF, quotes and commas read back identical",
            apply("cr", *decisions("cr"), "--format", "folder"),
            "ok",
            setup=fake(
                "cr",
                ("1", "replace", "one\rtwo"),
                ("2", "replace", "a\r\nb"),
                ("3", "replace", 'say "hi", then'),
            ),
            check=cr_back,
        ),
        Case(
            APPLY,
            "apply: --out a dangling link",
            apply("link", *decisions("link")),
            "error",
            "symbolic link",
            setup=linked,
            absent=root / "link" / "nowhere",
        ),
        Case(
            APPLY,
            "apply: a picture rewritten since the audit (same size and time)",
            apply("changed", *decisions("changed")),
            "error",
            "changed since the audit",
            setup=changed,
            absent=root / "changed" / "out",
        ),
        Case(
            APPLY,
            "apply: another audit's decisions saved as decisions.csv",
            apply("other", *decisions("other")),
            "error",
            "not of this audit",
            setup=fake("other", ("1", "drop", "", "feedfacefeedface"), summary=own),
            absent=root / "other" / "out",
        ),
        Case(
            APPLY,
            "apply AUDIT --threshold 0.45 without --decisions (as the README writes it)",
            apply("bare", "--threshold", "0.45"),
            "ok",
            setup=fake("bare", ("1", "keep", "")),
            check=lambda: (root / "bare" / "out" / "removed.csv").read_text().count("\n") == 2,
        ),
    ]


# --- 58.6 older cases ------------------------------------------------------------------------------


def _older(b: _Base, f, Case, small: list[str]) -> list:
    root = b.root / "older"

    def overflowing() -> None:
        from mispair.data.precomp import write_precomp
        from mispair.data.synthetic import make_synthetic

        for split, seed in (("train", 0), ("dev", 1), ("test", 2)):
            pairs = make_synthetic(20, 2, seed=seed)
            pairs.images = pairs.images.astype(np.float64)
            pairs.images[3] *= 1e300 if split == "train" else 1.0
            write_precomp(pairs, root / "overflow", split)

    def other_last() -> None:
        for name, dim in (("a", 16), ("b", 32)):
            subprocess.run(
                b.mispair(
                    "train",
                    "data.source=synthetic",
                    *small,
                    f"model.embed_dim={dim}",
                    "--out",
                    root / name,
                    "--quiet",
                ),
                check=True,
                capture_output=True,
            )
        shutil.copy(root / "a" / "last.pt", root / "b" / "last.pt")

    def string_vocab() -> None:
        import torch

        state = torch.load(f.run / "best.pt", weights_only=True)
        state["vocab"] = "".join(state["vocab"])
        root.mkdir(parents=True, exist_ok=True)
        torch.save(state, root / "vocab.pt")

    def repeated() -> None:
        folder = root / "repeated"
        folder.mkdir(parents=True, exist_ok=True)
        pictures = fx.colour_pictures(24)
        with tarfile.open(folder / "shard-000.tar", "w") as tar:
            for k, (_, blob, caption) in enumerate(pictures):
                key = f"{k:05d}" if k < 20 else "shared"
                for suffix, data in ((".png", blob), (".txt", caption.encode())):
                    info = tarfile.TarInfo(key + suffix)
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))

    return [
        Case(
            OLDER,
            "audit: float64 features of 1e300 (infinite in float32)",
            b.mispair("audit", root / "overflow", "--out", root / "overflow-audit", *b.audit),
            "error",
            "features beyond",
            setup=overflowing,
            absent=root / "overflow-audit" / "pairs.csv",
        ),
        Case(
            OLDER,
            "train: resuming where another run's last.pt lies",
            b.mispair(
                "train", "data.source=synthetic", *small, "model.embed_dim=32", "--out", root / "b", "--quiet"
            ),
            "error",
            "a checkpoint of another run",
            setup=other_last,
        ),
        Case(
            OLDER,
            "eval: a checkpoint whose vocabulary is a string",
            b.mispair("eval", root / "vocab.pt"),
            "error",
            "'vocab' is not a list of words",
            setup=string_vocab,
        ),
        Case(
            OLDER,
            "train --export-pairs into an existing folder: refused before training",
            b.mispair(
                "train",
                "data.source=synthetic",
                *small,
                "--out",
                root / "x",
                "--export-pairs",
                root,
                "--quiet",
            ),
            "error",
            "a folder",
            setup=lambda: root.mkdir(parents=True, exist_ok=True),
            absent=root / "x" / "best.pt",
        ),
        Case(
            OLDER,
            "train: a shard holding one key four times: the four refused, said",
            b.mispair("train", root / "repeated", *small, "--out", root / "repeated-run", "--quiet"),
            "warn",
            "4 samples",
            setup=repeated,
        ),
    ]


# --- 58.7 a new user's first audits ----------------------------------------------------------------


def _new_user(b: _Base, Case, small: list[str]) -> list:
    root = b.root / "new"
    stamp: dict[str, int] = {}

    def relative_run() -> None:
        root.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            b.mispair("train", "data.source=synthetic", *small, "--out", "rel-run", "--quiet"),
            check=True,
            capture_output=True,
            cwd=root,
        )
        stamp["mtime"] = (root / "rel-run" / "last.pt").stat().st_mtime_ns

    def headline() -> bool:
        from mispair.audit.summary import AuditSummary

        out = root / "refused-audit"
        summary = AuditSummary.from_dict(json.loads((out / "summary.json").read_text()))
        return "24 of 28 rows" in summary.lines(out)[0] and "4 refused" in summary.lines(out)[0]

    def ordered() -> bool:
        shown = [float(r["mismatch_probability"]) for r in _pairs(root / "order-audit")]
        return len(shown) == 24 and all(a >= b for a, b in itertools.pairwise(shown))

    def aliased() -> None:
        """The 24 pictures as a Parquet of image bytes, then 4 rows holding the bytes of the
        first two under paths of their own (as an icon theme's links to one file read)."""
        import pandas as pd

        rows = fx.colour_pictures(24)
        named = [(n, blob, c) for n, blob, c in rows]
        named += [(f"copies/alias-{k}.png", rows[k % 2][1], f"{rows[k % 2][2]} again {k}") for k in range(4)]
        root.mkdir(parents=True, exist_ok=True)
        pd.DataFrame(
            {"image": [{"bytes": blob, "path": n} for n, blob, _ in named], "caption": [c for *_, c in named]}
        ).to_parquet(root / "aliased.parquet", index=False)

    def own_names() -> bool:
        shown = {r["pair_id"]: r["image_id"] for r in _pairs(root / "aliased-audit")}
        return shown == {str(24 + k): f"copies/alias-{k}.png" for k in range(4)} | {
            str(k): name for k, (name, _, _) in enumerate(fx.colour_pictures(24))
        }

    typed = (
        "import sys, pandas as pd, mispair\n"
        f"folder = {str(b.pictures)!r}\n"
        "frame = pd.read_csv(folder + '/captions.csv')\n"
        "frame.insert(0, 'key', range(100, 100 + len(frame)))\n"
        f"result = mispair.audit(frame, {str(root / 'typed-audit')!r}, progress=False, image_root=folder,\n"
        f"    id_column='key', overrides={b.audit!r})\n"
        "joined = frame.merge(result.pairs, left_on='key', right_on='pair_id')\n"
        "sys.exit(0 if len(joined) == len(frame) else 2)\n"
    )
    return [
        Case(
            NEW_USER,
            "train again with --out spelled absolute (first relative): resumed",
            b.mispair("train", "data.source=synthetic", *small, "--out", root / "rel-run", "--quiet"),
            "ok",
            setup=relative_run,
            check=lambda: (root / "rel-run" / "last.pt").stat().st_mtime_ns == stamp["mtime"],
        ),
        Case(
            NEW_USER,
            "audit of 28 rows, 4 refused: the headline counts the rows given",
            b.mispair("audit", b.root / "p24-4", "--out", root / "refused-audit", *b.audit, "--quiet"),
            "ok",
            setup=lambda: b.folder(broken=4),
            check=headline,
        ),
        Case(
            NEW_USER,
            "audit: the review list by mismatch probability, highest first",
            b.mispair("audit", b.pictures, "--out", root / "order-audit", *b.audit, "--quiet"),
            "ok",
            setup=b.folder,
            check=ordered,
        ),
        Case(
            NEW_USER,
            "audit: image bytes under two paths each show the row's own path",
            b.mispair(
                "audit", root / "aliased.parquet", "--out", root / "aliased-audit", *b.audit, "--quiet"
            ),
            "ok",
            setup=aliased,
            check=own_names,
        ),
        Case(
            NEW_USER,
            "mispair.audit(df) with integer ids: pair_id joins back to the frame",
            [sys.executable, "-c", typed],
            "ok",
            setup=b.folder,
        ),
    ]


if __name__ == "__main__" and sys.argv[1:2] == ["watch"]:
    sys.exit(watch(sys.argv[2:]))
