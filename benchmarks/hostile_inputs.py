"""Run ``mispair`` against hostile or mistaken inputs and print what each one did, how long it took
and how much memory it peaked at.

Every case is a real command in a fresh process, on files written into a temporary folder. The
expected outcome is one of: ``error`` (exit status 2 and a single line ``mispair: error: ...``
naming the problem), ``warn`` (exit status 0 and a one-line warning naming the problem) or ``ok``
(exit status 0; a check of the output is run when the case has one). A case may also name a path
that must not exist afterwards (nothing written). Cases are grouped by the reliability principle
they test (docs/reliability.md). The table is class | case | expected | got | time | peak memory |
verdict; the script exits 1 when any verdict is ``FAIL``.

    python benchmarks/hostile_inputs.py            # about 16 minutes on 2 CPU cores (every case)
    python benchmarks/hostile_inputs.py 50.        # only the classes whose name starts so
"""

from __future__ import annotations

import csv
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).parent))
import hostile_apply
import hostile_cache
import hostile_fixtures as fx
import hostile_serve
import hostile_shared
import hostile_wave5
from mispair.data.precomp import write_precomp
from mispair.data.synthetic import make_synthetic

SMALL = [
    "data.synthetic_images=40",
    "model.text_encoder=bigru",
    "model.image_pooling=fragments",
    "model.embed_dim=16",
    "model.word_dim=8",
    "train.epochs=1",
    "train.batch_size=20",
    "train.threads=1",
]
AUDIT = [
    "model.text_encoder=bigru",
    "model.image_pooling=fragments",
    "model.embed_dim=16",
    "model.word_dim=8",
    "train.epochs=1",
    "division.folds=2",
    "division.rounds=1",  # nested trust's two rounds need three folds
    "division.epochs=1",
    "division.repeats=1",
]
TIMEOUT = 300  # seconds: a case still running then is a FAIL (a hang)


@dataclass
class Case:
    kind: str  # the principle it tests
    name: str
    argv: list[str]
    expect: str  # error | warn | ok
    fragment: str = ""  # must appear in the first line of stderr (error, warn), or in stderr (ok)
    check: Callable[[], bool] | None = None  # for ok: the output is as it should be
    setup: Callable[[], object] = field(default=lambda: None)
    absent: Path | None = None  # must not exist afterwards: nothing was written
    missing: str = ""  # must not appear in stderr


def mispair(*argv: object) -> list[str]:
    return [sys.executable, "-m", "mispair.cli", *map(str, argv)]


def build_cases(tmp: Path) -> list[Case]:
    fixtures = _Fixtures(tmp)
    return [
        *_decoder_cases(tmp),
        *_link_cases(tmp, fixtures),
        *_stale_cases(tmp, fixtures),
        *_config_cases(tmp),
        *_svg_cases(tmp),
        *_text_cases(tmp, fixtures),
        *_model_cases(tmp, fixtures),
        *_number_cases(tmp, fixtures),
        *_corrupt_cases(tmp, fixtures),
        *_os_cases(tmp, fixtures),
        *_validate_first_cases(tmp, fixtures),
        *_ownership_cases(tmp, fixtures),
        *_form_cases(tmp),
        *hostile_shared.cases(tmp, fixtures, Case, mispair, SMALL, AUDIT),
        *hostile_cache.cases(tmp, fixtures, Case, mispair, SMALL, AUDIT),
        *hostile_serve.cases(tmp, fixtures, Case, mispair, SMALL, AUDIT),
        *hostile_apply.cases(tmp, fixtures, Case, mispair, SMALL, AUDIT),
        *hostile_wave5.cases(tmp, fixtures, Case, mispair, SMALL, AUDIT),
    ]


class _Fixtures:
    """What several cases share: precomputed collections, a trained run, an index, a folder."""

    def __init__(self, tmp: Path) -> None:
        self.precomp, self.grid = tmp / "toy_precomp", tmp / "grid_precomp"
        for split, seed in (("train", 0), ("dev", 1), ("test", 2)):
            write_precomp(make_synthetic(20, 2, seed=seed), self.precomp, split)
            pairs = make_synthetic(20, 2, seed=seed)
            pairs.images = np.random.default_rng(seed).normal(size=(20, 49, 32)).astype(np.float32)
            write_precomp(pairs, self.grid, split)
        self.run = tmp / "run"
        _quiet(mispair("train", "data.source=synthetic", *SMALL, "--out", self.run, "--quiet"))
        self.index = tmp / "synthetic.index"
        self.synthetic = tmp / "synthetic_precomp"
        _quiet(mispair("prepare", "synthetic", "--out", self.synthetic, "--quiet"))
        _quiet(mispair("index", self.run / "best.pt", self.synthetic, "--split", "test", "--out", self.index))
        self.folder = tmp / "folder"
        (self.folder / "feats").mkdir(parents=True)
        for k in range(30):
            np.save(
                self.folder / "feats" / f"{k}.npy",
                np.random.default_rng(k).normal(size=(4, 8)).astype(np.float32),
            )
        self.base = [
            (f"feats/{k}.npy", f"a caption number {k}", ("train", "dev", "test")[k % 3]) for k in range(30)
        ]

    def captions(self, rows: list[tuple[str, str, str]]) -> Callable[[], None]:
        def write() -> None:
            with (self.folder / "captions.csv").open("w", newline="", encoding="utf-8") as handle:
                writer = csv.writer(handle)
                writer.writerow(["image", "caption", "split"])
                writer.writerows(rows)

        return write

    def folder_train(self, out: Path, *extra: object) -> list[str]:
        return mispair(
            "train",
            "data.source=folder",
            f"data.root={self.folder}",
            *SMALL,
            "--out",
            out,
            "--no-resume",
            "--quiet",
            *extra,
        )


def _quiet(argv: list[str]) -> None:
    subprocess.run(argv, check=True, capture_output=True)


# --- 1. decoders chosen by content, from an allow-list --------------------------------------------


def _decoder_cases(tmp: Path) -> list[Case]:
    kind = "1 decoders"
    bad = [
        ("PostScript named .png", {f"eps{k}.png": fx.EPS for k in range(4)}),
        ("DOS EPS named .jpg", {f"eps{k}.jpg": b"\xc5\xd0\xd3\xc6" + fx.EPS for k in range(4)}),
        ("TIFF named .png", {f"tif{k}.png": fx.png((1, 2, 3), fmt="TIFF") for k in range(4)}),
    ]
    cases = []
    for name, files in bad:
        folder = fx.picture_folder(tmp / f"dec-{len(cases)}", files)
        cases.append(
            Case(
                kind,
                f"audit: {name} (4 of 7)",
                mispair("audit", folder, "--out", tmp / f"dec-out{len(cases)}", "--quiet", *AUDIT),
                "error",
                "not a readable picture",
                absent=tmp / f"dec-out{len(cases)}",
            )
        )
    return cases


# --- 2. no link in an output folder is followed -------------------------------------------------


def _link_cases(tmp: Path, f: _Fixtures) -> list[Case]:
    kind = "2 links"
    victim = tmp / "victim.txt"
    victim.write_text("precious\n")
    cases = []
    for name in ("log.jsonl", ".mispair.lock", "log.jsonl as a FIFO"):
        out = tmp / f"links-{len(cases)}"
        out.mkdir()
        if name.endswith("FIFO"):
            fx.fifo(out / "log.jsonl")
        else:
            os.symlink(victim, out / name)
        cases.append(
            Case(
                kind,
                f"train: {name} planted in --out",
                mispair("train", "data.source=synthetic", *SMALL, "--out", out, "--quiet"),
                "error",
                "regular file" if "FIFO" in name else "symbolic link",
                check=lambda: victim.read_text() == "precious\n",
            )
        )
    return cases


# --- 3. no stale result -----------------------------------------------------------------------


def _stale_cases(tmp: Path, f: _Fixtures) -> list[Case]:
    kind = "3 stale"
    root, out = tmp / "stale_precomp", tmp / "stale-run"
    for split, seed in (("train", 0), ("dev", 1), ("test", 2)):
        write_precomp(make_synthetic(20, 2, seed=seed), root, split)
    train = mispair("train", "data.source=precomp", f"data.root={root}", *SMALL, "--out", out)

    def first_run() -> None:
        _quiet(train)

    def change_captions() -> None:
        caps = root / "train_caps.txt"
        caps.write_text(caps.read_text().replace("a ", "one ", 1))

    def change_features() -> None:
        images = np.load(root / "train_ims.npy")
        np.save(root / "train_ims.npy", images[::-1].copy())

    again = "training it again"
    return [
        Case(kind, "train again, nothing changed: reused", train, "ok", setup=first_run, missing="epoch 1/1"),
        Case(kind, "train again after a caption changed", train, "ok", again, setup=change_captions),
        Case(kind, "train again after the features changed", train, "ok", again, setup=change_features),
    ]


# --- 4 and 13. configs bounded where they enter ----------------------------------------------------


def _config_cases(tmp: Path) -> list[Case]:
    kind = "4/13 configs"
    aliases = ['a: &a ["x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    aliases += [
        f"{chr(97 + k)}: &{chr(97 + k)} [" + ", ".join([f"*{chr(96 + k)}"] * 9) + "]" for k in range(1, 12)
    ]
    (tmp / "bomb.yaml").write_text("\n".join(aliases) + "\n")
    (tmp / "few.yaml").write_text(fx.few_aliases_bomb())
    (tmp / "deep.yaml").write_text("a: " + "[" * 50_000 + "]" * 50_000 + "\n")
    (tmp / "huge.yaml").write_text("name: x\n" + "# padding\n" * 120_000)
    fx.sparse_file(tmp / "sparse.yaml", 20 << 30)
    (tmp / "latin1.yaml").write_bytes("name: caf\xe9\n".encode("latin-1"))
    x = tmp / "x"
    return [
        Case(
            kind, "YAML alias bomb (99 aliases)", mispair("train", tmp / "bomb.yaml"), "error", "YAML aliases"
        ),
        Case(
            kind,
            "40 aliases expanding to 4^10",
            mispair("train", tmp / "few.yaml"),
            "error",
            "expands to more",
        ),
        Case(
            kind, "nested 50,000 deep", mispair("train", tmp / "deep.yaml"), "error", "nested deeper than 32"
        ),
        Case(kind, "over 1 MB", mispair("train", tmp / "huge.yaml"), "error", "bytes (at most 1,000,000"),
        Case(
            kind,
            "20 GB sparse file (sized, not read)",
            mispair("train", tmp / "sparse.yaml"),
            "error",
            "21,474,836,480 bytes",
        ),
        Case(
            kind,
            "a FIFO as the config",
            mispair("train", tmp / "pipe.yaml"),
            "error",
            "not a regular file",
            setup=lambda: fx.fifo(tmp / "pipe.yaml"),
        ),
        Case(kind, "not UTF-8", mispair("train", tmp / "latin1.yaml"), "error", "not UTF-8"),
        Case(
            kind,
            "201 overrides",
            mispair("train", *["train.epochs=1"] * 201, "--out", x),
            "error",
            "201 key=value",
        ),
        Case(
            kind,
            "an override of 20,000 characters",
            mispair("train", "name=" + "n" * 20_000, "--out", x),
            "error",
            "characters (at most 10,000",
        ),
        Case(
            kind,
            "option: wrong type",
            mispair("train", "method.margin=abc", "--out", x),
            "error",
            "method.margin",
        ),
        Case(
            kind,
            "option: infinite learning rate",
            mispair("train", "train.lr=.inf", "--out", x),
            "error",
            "train.lr",
        ),
        Case(
            kind,
            "option: negative noise rate",
            mispair("train", "data.noise.rate=-0.1", "--out", x),
            "error",
            "data.noise.rate",
        ),
        Case(
            kind,
            "scorer options: unknown key",
            mispair("train", "division.scorer_options.bogus=1", *SMALL, "--out", x),
            "error",
            "division.scorer_options",
            absent=x,
        ),
    ]


# --- 5. images inside images ------------------------------------------------------------------


def _svg_cases(tmp: Path) -> list[Case]:
    kind = "5 nested images"
    bad = [
        ("400-megapixel PNG in a data: URI", {f"big{k}.svg": fx.svg_with(fx.huge_png()) for k in range(4)}),
        ("PostScript in a data: URI", {f"eps{k}.svg": fx.svg_with(fx.EPS) for k in range(4)}),
        ("gzip SVG inflating to 200 MB", {f"gz{k}.svg": fx.gzip_bomb_svg() for k in range(4)}),
        (
            "gzip SVG inside a data: URI",
            {f"in{k}.svg": fx.svg_with(fx.gzip_bomb_svg(), "image/svg+xml") for k in range(4)},
        ),
    ]
    cases = []
    for name, files in bad:
        folder = fx.picture_folder(tmp / f"svg-{len(cases)}", files)
        out = tmp / f"svg-out{len(cases)}"
        cases.append(
            Case(
                kind,
                f"audit: {name} (4 of 7)",
                mispair("audit", folder, "--out", out, "--quiet", *AUDIT),
                "error",
                "not a readable picture",
                absent=out,
            )
        )
    return cases


# --- 6. every text bounded ----------------------------------------------------------------------


def _text_cases(tmp: Path, f: _Fixtures) -> list[Case]:
    kind = "6 text"
    root = tmp / "long_precomp"

    def long_precomp() -> None:
        for split, seed in (("train", 0), ("dev", 1), ("test", 2)):
            write_precomp(make_synthetic(20, 2, seed=seed), root, split)
        caps = root / "train_caps.txt"
        lines = caps.read_text().splitlines()
        lines[0] = "w" * 20_000_000
        caps.write_text("\n".join(lines) + "\n")

    long = "x" * 1_000_000
    return [
        Case(
            kind,
            "precomp: a caption line of 20 MB",
            mispair(
                "train", "data.source=precomp", f"data.root={root}", *SMALL, "--out", tmp / "t1", "--quiet"
            ),
            "warn",
            "longer than 1000 characters",
            setup=long_precomp,
        ),
        Case(
            kind,
            "folder csv: a caption of 1 MB",
            f.folder_train(tmp / "t2"),
            "warn",
            "1000 characters",
            setup=f.captions([*f.base, ("feats/0.npy", long, "train")]),
        ),
        Case(
            kind,
            "parquet: a caption of 1 MB",
            mispair("train", tmp / "t3.parquet", *SMALL, "--out", tmp / "t3", "--quiet"),
            "warn",
            "1000 characters",
            setup=lambda: fx.parquet_collection(
                tmp / "t3.parquet", caption_of=lambda k: long if k == 0 else None
            ),
        ),
        Case(
            kind,
            "webdataset: a caption of 1 MB",
            mispair("train", tmp / "t4", *SMALL, "--out", tmp / "t4-run", "--quiet"),
            "warn",
            "1000 characters",
            setup=lambda: fx.webdataset_collection(tmp / "t4", caption_of=lambda k: long if k == 0 else None),
        ),
        Case(
            kind,
            "COCO json: a caption of 1 MB",
            mispair(
                "train", tmp / "t5" / "captions_train2017.json", *SMALL, "--out", tmp / "t5-run", "--quiet"
            ),
            "warn",
            "1000 characters",
            setup=lambda: fx.coco_collection(tmp / "t5", caption_of=lambda k: long if k == 0 else None),
        ),
    ]


# --- 7. degenerate models never score -----------------------------------------------------------


def _model_cases(tmp: Path, f: _Fixtures) -> list[Case]:
    kind = "7 degenerate"
    best = f.run / "best.pt"
    nan, huge = tmp / "nan.pt", tmp / "huge.pt"
    return [
        Case(
            kind,
            "eval: a NaN weight",
            mispair("eval", nan),
            "error",
            "holds NaN or infinite",
            setup=lambda: fx.tampered_checkpoint(best, nan, value=float("nan")),
        ),
        Case(
            kind,
            "eval: weights of 1e30",
            mispair("eval", huge),
            "error",
            "beyond 1,000,000",
            setup=lambda: fx.tampered_checkpoint(best, huge, value=1e30),
        ),
        Case(
            kind,
            "index: a NaN checkpoint",
            mispair("index", nan, f.synthetic, "--out", tmp / "nan.index"),
            "error",
            "holds NaN",
            absent=tmp / "nan.index",
        ),
        Case(
            kind,
            "search: an index whose checkpoint became NaN",
            mispair("search", f.index, "a picture", "--checkpoint", nan),
            "error",
            "holds NaN",
        ),
    ]


# --- 8. numbers in the ranges the help states ---------------------------------------------------


def _number_cases(tmp: Path, f: _Fixtures) -> list[Case]:
    kind = "8 numbers"
    best = f.run / "best.pt"
    return [
        Case(kind, "train --nproc 100000", mispair("train", "--nproc", "100000"), "error", "--nproc"),
        Case(
            kind,
            "index --hnsw-m 1e9",
            mispair(
                "index",
                best,
                f.synthetic,
                "--out",
                tmp / "n.index",
                "--kind",
                "hnsw",
                "--hnsw-m",
                "1000000000",
            ),
            "error",
            "--hnsw-m",
            absent=tmp / "n.index",
        ),
        Case(
            kind,
            "index --nlist 0",
            mispair("index", best, f.synthetic, "--out", tmp / "n.index", "--nlist", "0"),
            "error",
            "--nlist",
        ),
        Case(kind, "search --top-k 0", mispair("search", f.index, "x", "--top-k", "0"), "error", "--top-k"),
        Case(
            kind,
            "audit --seed -1",
            mispair("audit", f.folder, "--out", tmp / "n", "--seed", "-1"),
            "error",
            "--seed",
        ),
        Case(
            kind,
            "train.seed=-1",
            mispair("train", "train.seed=-1", "--out", tmp / "n"),
            "error",
            "train.seed",
        ),
        Case(kind, "eval: --folds 0", mispair("eval", best, "--folds", "0"), "error", "--folds"),
        Case(kind, "eval: --device tpu", mispair("eval", best, "--device", "tpu"), "error", "--device"),
    ]


# --- 9. corrupt run folders, checkpoints and indexes ---------------------------------------------


def _corrupt_cases(tmp: Path, f: _Fixtures) -> list[Case]:
    kind = "9 corrupt files"
    run = tmp / "corrupt-run"
    index = tmp / "corrupt.index"
    train = mispair("train", "data.source=synthetic", *SMALL, "--out", run, "--quiet")

    def damaged(name: str, content: bytes) -> Callable[[], None]:
        def write() -> None:
            shutil.rmtree(run, ignore_errors=True)
            _quiet(train)
            (run / name).write_bytes(content)

        return write

    def tampered(name: str, content: Callable[[], bytes]) -> Callable[[], None]:
        def write() -> None:
            _quiet(mispair("index", f.run / "best.pt", f.synthetic, "--split", "test", "--out", index))
            fx.tamper_index(index, name, content())

        return write

    (tmp / "pickled.pt").parent.mkdir(exist_ok=True)
    torch.save({"models": [torch.nn.Linear(2, 2)]}, tmp / "pickled.pt")
    nested = b"[" * 200_000 + b"]" * 200_000
    return [
        Case(
            kind,
            "run: config.json nested 100,000 deep",
            train,
            "error",
            "config.json: JSON nested deeper",
            setup=damaged("config.json", b"[" * 100_000 + b"]" * 100_000),
        ),
        Case(
            kind,
            "run: log.jsonl with a damaged line",
            train,
            "error",
            "log.jsonl",
            setup=damaged("log.jsonl", b"garbage\n"),
        ),
        Case(
            kind,
            "run: last.pt truncated",
            train,
            "error",
            "last.pt: not a readable mispair checkpoint",
            setup=damaged("last.pt", b"PK\x03\x04"),
        ),
        Case(
            kind,
            "checkpoint: pickled objects",
            mispair("eval", tmp / "pickled.pt"),
            "error",
            "pickled Python",
        ),
        Case(
            kind,
            "checkpoint: no config",
            mispair("eval", tmp / "noconfig.pt"),
            "error",
            "'config' is missing",
            setup=lambda: fx.tampered_checkpoint(f.run / "best.pt", tmp / "noconfig.pt", drop="config"),
        ),
        Case(
            kind,
            "checkpoint: other feature size",
            mispair("eval", f.run / "best.pt", "--data-root", f.grid),
            "error",
            "dimension 32",
        ),
        Case(
            kind,
            "index: collection.json nested (digest updated)",
            mispair("search", index, "x"),
            "error",
            "collection.json: JSON nested deeper",
            setup=tampered("collection.json", lambda: nested),
        ),
        Case(
            kind,
            "index: image_of_caption out of range (digest updated)",
            mispair("search", index, "x"),
            "error",
            "names images outside",
            setup=tampered(
                "image_of_caption.npy", lambda: fx.npy_bytes(np.load(index / "image_of_caption.npy") + 10**6)
            ),
        ),
        Case(
            kind,
            "index: images.faiss garbage (digest updated)",
            mispair("search", index, "x"),
            "error",
            "images.faiss",
            setup=tampered("images.faiss", lambda: b"\x00" * 64),
        ),
    ]


# --- 10. operating-system errors ------------------------------------------------------------------


def _os_cases(tmp: Path, f: _Fixtures) -> list[Case]:
    kind = "10 OS errors"
    (tmp / "a_file").write_text("not a folder")
    long_rows = [
        *f.base,
        ("a" * 300 + ".npy", "a name too long", "train"),
        ("/".join(["b" * 200] * 30) + ".npy", "a path too long", "train"),
    ]
    return [
        Case(
            kind,
            "train --out a file",
            mispair("train", *SMALL, "--out", tmp / "a_file"),
            "error",
            "is a file",
        ),
        Case(
            kind,
            "train --out under a file",
            mispair("train", *SMALL, "--out", tmp / "a_file" / "run"),
            "error",
            "a_file",
        ),
        Case(
            kind,
            "prepare --out a file",
            mispair("prepare", "synthetic", "--out", tmp / "a_file"),
            "error",
            "is a file",
        ),
        Case(
            kind,
            "folder: image paths of 300-byte names and 6 kB",
            f.folder_train(tmp / "os1"),
            "ok",
            setup=f.captions(long_rows),
        ),
        Case(kind, "search --image a folder", mispair("search", f.index, "--image", tmp), "error", ""),
        Case(
            kind,
            "search --image of 5,000 characters",
            mispair("search", f.index, "--image", "c" * 5000 + ".png"),
            "error",
            "",
        ),
    ]


# --- 11. validate before writing ------------------------------------------------------------------


def _validate_first_cases(tmp: Path, f: _Fixtures) -> list[Case]:
    kind = "11 validate first"
    out1, out2, out3 = tmp / "v1", tmp / "v2", tmp / "v3"
    most_missing = fx.picture_folder(tmp / "v-coll", {f"gone{k}.png": b"" for k in range(4)})
    return [
        Case(
            kind,
            "head: SGR sized for 36 regions on a 7x7 grid",
            mispair(
                "train", "data.source=precomp", f"data.root={f.grid}", "model.head=sgr", *SMALL, "--out", out1
            ),
            "error",
            "num_regions=49",
            absent=out1,
        ),
        Case(
            kind,
            "audit: most rows unreadable",
            mispair("audit", most_missing, "--out", out2, "--quiet", *AUDIT),
            "error",
            "rows refused",
            absent=out2,
        ),
        Case(
            kind,
            "train --export-pairs into no folder",
            mispair("train", *SMALL, "--out", out3, "--export-pairs", tmp / "nowhere" / "p.csv"),
            "error",
            "--export-pairs",
            absent=out3,
        ),
        Case(
            kind,
            "noise file: index out of range",
            mispair(
                "train",
                "data.source=precomp",
                f"data.root={f.precomp}",
                f"data.noise.file={tmp}/noise_out_of_range.npy",
                *SMALL,
                "--out",
                tmp / "v4",
            ),
            "error",
            "noise",
            absent=tmp / "v4",
            setup=lambda: np.save(tmp / "noise_out_of_range.npy", np.array([0, 1, 999], dtype=np.int64)),
        ),
        Case(
            "0 confinement",
            "folder: path with ..: the row refused, the rest trained",
            f.folder_train(tmp / "v5"),
            "ok",
            setup=f.captions([*f.base, ("../a_file", "escape", "train")]),
        ),
        Case(
            "0 confinement",
            "folder: absolute path: the row refused, the rest trained",
            f.folder_train(tmp / "v6"),
            "ok",
            setup=f.captions([*f.base, ("/etc/passwd", "escape", "train")]),
        ),
    ]


# --- 12. output folders owned -------------------------------------------------------------------


def _ownership_cases(tmp: Path, f: _Fixtures) -> list[Case]:
    kind = "12 ownership"
    theirs = tmp / "theirs"

    def foreign(folder: Path) -> Callable[[], None]:
        def write() -> None:
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "thesis.tex").write_text("mine")

        return write

    def index_with_notes() -> None:
        _quiet(
            mispair("index", f.run / "best.pt", f.synthetic, "--split", "test", "--out", tmp / "own.index")
        )
        (tmp / "own.index" / "notes.txt").write_text("mine")

    kept = lambda folder: lambda: (folder / "thesis.tex").read_text() == "mine"  # noqa: E731
    return [
        Case(
            kind,
            "train into a folder of other files",
            mispair("train", *SMALL, "--out", theirs),
            "error",
            "did not create",
            setup=foreign(theirs),
            check=kept(theirs),
        ),
        Case(
            kind,
            "audit into a folder of other files",
            mispair("audit", f.folder, "--out", theirs, *AUDIT),
            "error",
            "did not create",
            setup=foreign(theirs),
        ),
        Case(
            kind,
            "audit --overwrite keeps the other files",
            mispair("audit", f.folder, "--out", tmp / "over", "--overwrite", "--quiet", *AUDIT),
            "ok",
            setup=foreign(tmp / "over"),
            check=kept(tmp / "over"),
        ),
        Case(
            kind,
            "index rebuild over a folder with other files",
            mispair(
                "index",
                f.run / "best.pt",
                f.synthetic,
                "--split",
                "test",
                "--out",
                tmp / "own.index",
                "--quiet",
            ),
            "error",
            "did not write",
            setup=index_with_notes,
            check=lambda: (tmp / "own.index" / "notes.txt").is_file(),
        ),
    ]


# --- 14. the input forms of this wave ------------------------------------------------------------


def _form_cases(tmp: Path) -> list[Case]:
    kind = "14 input forms"
    eps = lambda k: fx.EPS if k % 4 else None  # noqa: E731  (3 of every 4 rows)
    nested = b'{"images": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    return [
        Case(
            kind,
            "parquet: image bytes that are PostScript",
            mispair("audit", tmp / "f1.parquet", "--out", tmp / "f1", "--quiet", *AUDIT),
            "error",
            "not a readable picture",
            setup=lambda: fx.parquet_collection(tmp / "f1.parquet", bytes_of=eps),
            absent=tmp / "f1",
        ),
        Case(
            kind,
            "webdataset: members that are PostScript",
            mispair("audit", tmp / "f2", "--out", tmp / "f2-out", "--quiet", *AUDIT),
            "error",
            "not a readable picture",
            setup=lambda: fx.webdataset_collection(tmp / "f2", bytes_of=eps),
            absent=tmp / "f2-out",
        ),
        Case(
            kind,
            "webdataset: a member linking to /etc/passwd",
            mispair("train", tmp / "f3", *SMALL, "--out", tmp / "f3-run", "--quiet"),
            "ok",
            setup=lambda: fx.webdataset_collection(tmp / "f3", link=True),
        ),
        Case(
            kind,
            "COCO json nested 100,000 deep",
            mispair(
                "audit", tmp / "f4" / "captions_train2017.json", "--out", tmp / "f4-out", "--quiet", *AUDIT
            ),
            "error",
            "not valid JSON",
            setup=lambda: fx.coco_collection(tmp / "f4", raw=nested),
            absent=tmp / "f4-out",
        ),
        Case(
            kind,
            "COCO json of 3 GB (sized, not read)",
            mispair("audit", tmp / "f5.json", "--out", tmp / "f5-out", "data.source=coco"),
            "error",
            "bytes",
            setup=lambda: fx.sparse_file(tmp / "f5.json", 3 << 30),
            absent=tmp / "f5-out",
        ),
    ]


# --- running ----------------------------------------------------------------------------------


@dataclass
class Outcome:
    code: int
    first: str
    lines: int
    stderr: str
    seconds: float
    peak_mb: float


# Started from a small launcher, so that the command's peak memory is its own: a process forked
# from this one (torch loaded) would start its count from this one's size.
LAUNCHER = """import os, sys
pid = os.fork()
if pid == 0:
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
    os.execv(sys.argv[1], sys.argv[1:])
_, status, usage = os.wait4(pid, 0)
print(usage.ru_maxrss)
sys.exit(os.waitstatus_to_exitcode(status))
"""


def run_case(argv: list[str], cwd: Path) -> Outcome:
    """Run ``argv``; its exit status, stderr (notes left out), wall time and peak resident memory."""
    with tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        process = subprocess.Popen(
            [sys.executable, "-S", "-c", LAUNCHER, *argv],
            stdout=subprocess.PIPE,
            stderr=err,
            cwd=cwd,
            start_new_session=True,
        )
        timer = threading.Timer(TIMEOUT, lambda: os.killpg(process.pid, 9))
        timer.start()
        peak_kb = process.communicate()[0].decode().strip()
        timer.cancel()
        seconds = time.perf_counter() - start
        err.seek(0)
        stderr = err.read().decode("utf-8", "replace")
    lines = [
        line
        for line in stderr.splitlines()
        if line.strip()
        and not line.startswith("note: ")
        and not line.startswith(("features:", "vse on", "holdout on", "epoch ", "audit:"))
    ]
    first = lines[0] if lines else ""
    peak_mb = int(peak_kb) / 1024 if peak_kb.isdigit() else float("nan")
    return Outcome(process.returncode, first, len(lines), stderr, seconds, peak_mb)


def verdict(case: Case, got: Outcome) -> str:
    if case.expect == "error":
        good = (
            got.code == 2
            and got.lines == 1
            and got.first.startswith("mispair: error: ")
            and case.fragment in got.first
        )
    elif case.expect == "warn":
        good = got.code == 0 and got.first.startswith("mispair: warning: ") and case.fragment in got.first
    else:
        good = got.code == 0 and case.fragment in got.stderr
    if case.check is not None:
        good = good and case.check()
    if case.absent is not None:
        good = good and not case.absent.exists()
    if case.missing:
        good = good and case.missing not in got.stderr
    return "ok" if good and got.seconds < TIMEOUT else "FAIL"


def main(argv: list[str] | None = None) -> int:
    only = (argv if argv is not None else sys.argv[1:])[:1]  # a class prefix, e.g. "50." (default: all)
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        for case in build_cases(tmp):
            if only and not case.kind.startswith(only[0]):
                continue
            case.setup()
            got = run_case(case.argv, tmp)
            rows.append((case, got, verdict(case, got)))
            print(f"{case.kind}: {case.name}: {rows[-1][2]}", file=sys.stderr)
        tmp_text = str(tmp)
    print("| class | case | expected | got | time (s) | peak memory (MB) | verdict |")
    print("|---|---|---|---|---|---|---|")
    for case, got, result in rows:
        first = (got.first or _last_line(got.stderr)).replace(tmp_text, "$TMP").replace("|", "/")[:120]
        print(
            f"| {case.kind} | {case.name} | {case.expect} | {got.code}: {first} | {got.seconds:.1f} | "
            f"{got.peak_mb:.0f} | {result} |"
        )
    return 1 if any(r[-1] == "FAIL" for r in rows) else 0


def _last_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


if __name__ == "__main__":
    sys.exit(main())
