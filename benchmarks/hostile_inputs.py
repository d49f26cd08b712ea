"""Run ``mispair`` against a list of hostile or mistaken inputs and print what each one did.

Every case is a real command in a fresh process, on files written into a temporary folder. The
expected outcome is one of: ``error`` (exit status 2 and a single line ``mispair: error: ...``),
``warn`` (exit status 0 and a one-line warning naming the problem) or ``ok`` (exit status 0; a
check of the output is run when the case has one). The table is case | exit status | first line
| verdict; the script exits 1 when any verdict is ``FAIL``.

    python benchmarks/hostile_inputs.py            # about two minutes on 2 CPU cores
"""

from __future__ import annotations

import csv
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from mispair.data.precomp import write_precomp
from mispair.data.synthetic import make_synthetic

SMALL = ["data.synthetic_images=40", "model.text_encoder=bigru", "model.image_pooling=fragments",
         "model.embed_dim=16", "model.word_dim=8", "train.epochs=1", "train.batch_size=20",
         "train.threads=1"]  # fmt: skip


@dataclass
class Case:
    name: str
    argv: list[str]
    expect: str  # error | warn | ok
    fragment: str = ""  # must appear in the first line of stderr (error, warn)
    check: Callable[[], bool] | None = None  # for ok: the output is as it should be
    setup: Callable[[], None] = field(default=lambda: None)


def mispair(*argv: object) -> list[str]:
    return [sys.executable, "-m", "mispair.cli", *map(str, argv)]


def build_cases(tmp: Path) -> list[Case]:
    precomp, grid = tmp / "toy_precomp", tmp / "grid_precomp"
    for split, seed in (("train", 0), ("dev", 1), ("test", 2)):
        write_precomp(make_synthetic(20, 2, seed=seed), precomp, split)
        pairs = make_synthetic(20, 2, seed=seed)
        pairs.images = np.random.default_rng(seed).normal(size=(20, 49, 32)).astype(np.float32)
        write_precomp(pairs, grid, split)
    run = tmp / "run"
    train_small = mispair("train", "data.source=synthetic", *SMALL, "--out", run, "--quiet")
    subprocess.run(train_small, check=True, capture_output=True)

    aliases = ['a: &a ["x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    aliases += [
        f"{chr(97 + k)}: &{chr(97 + k)} [" + ", ".join([f"*{chr(96 + k)}"] * 9) + "]" for k in range(1, 12)
    ]
    (tmp / "bomb.yaml").write_text("\n".join(aliases) + "\n")
    (tmp / "huge.yaml").write_text("name: x\n" + "# padding\n" * 120_000)
    (tmp / "latin1.yaml").write_bytes("name: caf\xe9\n".encode("latin-1"))
    (tmp / "a_file").write_text("not a folder")
    np.save(tmp / "noise_out_of_range.npy", np.array([0, 1, 999], dtype=np.int64))
    (tmp / "empty.npy").write_bytes(b"")
    torch.save({"models": [torch.nn.Linear(2, 2)]}, tmp / "pickled.pt")

    folder = tmp / "folder"
    (folder / "feats").mkdir(parents=True)
    for k in range(30):
        np.save(
            folder / "feats" / f"{k}.npy", np.random.default_rng(k).normal(size=(4, 8)).astype(np.float32)
        )

    def captions(rows: list[tuple[str, str, str]], name: str = "captions.csv") -> Callable[[], None]:
        def write() -> None:
            with (folder / name).open("w", newline="", encoding="utf-8") as handle:
                writer = csv.writer(handle)
                writer.writerow(["image", "caption", "split"])
                writer.writerows(rows)

        return write

    base = [(f"feats/{k}.npy", f"a caption number {k}", ("train", "dev", "test")[k % 3]) for k in range(30)]
    folder_train = mispair("train", "data.source=folder", f"data.root={folder}", *SMALL, "--out", tmp / "f",
                           "--no-resume", "--quiet")  # fmt: skip
    export = tmp / "pairs.csv"

    def formula_neutralised() -> bool:
        text = export.read_text(encoding="utf-8")
        return "'=HYPERLINK" in text and ",=HYPERLINK" not in text

    return [
        Case("config: YAML alias bomb", mispair("train", tmp / "bomb.yaml"), "error", "YAML aliases"),
        Case("config: over 1 MB", mispair("train", tmp / "huge.yaml"), "error", "characters (at most"),
        Case("config: not UTF-8", mispair("train", tmp / "latin1.yaml"), "error", "not UTF-8"),
        Case(
            "option: wrong type",
            mispair("train", "method.margin=abc", "--out", tmp / "x"),
            "error",
            "method.margin",
        ),
        Case(
            "option: infinite learning rate",
            mispair("train", "train.lr=.inf", "--out", tmp / "x"),
            "error",
            "train.lr",
        ),
        Case(
            "option: negative noise rate",
            mispair("train", "data.noise.rate=-0.1", "--out", tmp / "x"),
            "error",
            "data.noise.rate",
        ),
        Case("output: a file", mispair("train", *SMALL, "--out", tmp / "a_file"), "error", "is a file"),
        Case(
            "output: under a file",
            mispair("train", *SMALL, "--out", tmp / "a_file" / "run"),
            "error",
            "a_file",
        ),
        Case(
            "noise file: index out of range",
            mispair(
                "train",
                "data.source=precomp",
                f"data.root={precomp}",
                f"data.noise.file={tmp}/noise_out_of_range.npy",
                *SMALL,
                "--out",
                tmp / "x",
            ),
            "error",
            "noise",
        ),
        Case(
            "noise file: zero bytes",
            mispair(
                "train",
                "data.source=precomp",
                f"data.root={precomp}",
                f"data.noise.file={tmp / 'empty.npy'}",
                *SMALL,
                "--out",
                tmp / "x",
            ),
            "error",
            "empty.npy",
        ),
        Case(
            "folder: path with ..",
            folder_train,
            "error",
            "outside",
            setup=captions([*base, ("../a_file", "escape", "train")]),
        ),
        Case(
            "folder: absolute path",
            folder_train,
            "error",
            "outside",
            setup=captions([*base, ("/etc/passwd", "escape", "train")]),
        ),
        Case(
            "folder: missing image file",
            folder_train,
            "error",
            "missing.npy",
            setup=captions([*base, ("feats/missing.npy", "gone", "train")]),
        ),
        Case(
            "folder: a caption of 1 MB",
            folder_train,
            "warn",
            "1000 characters",
            setup=captions([*base, ("feats/0.npy", "x" * 1_000_000, "train")]),
        ),
        Case(
            "checkpoint: pickled objects",
            mispair("eval", tmp / "pickled.pt"),
            "error",
            "pickled Python objects",
        ),
        Case(
            "checkpoint: other feature size",
            mispair("eval", run / "best.pt", "--data-root", grid),
            "error",
            "dimension 32",
        ),
        Case("eval: --folds 0", mispair("eval", run / "best.pt", "--folds", "0"), "error", "--folds"),
        Case("eval: --device tpu", mispair("eval", run / "best.pt", "--device", "tpu"), "error", "--device"),
        Case(
            "head: SGR sized for 36 regions on a 7x7 grid",
            mispair(
                "train",
                "data.source=precomp",
                f"data.root={grid}",
                "model.head=sgr",
                *SMALL,
                "--out",
                tmp / "x",
            ),
            "error",
            "num_regions=49",
        ),
        Case(
            "export: a caption that is a formula",
            mispair(
                "train",
                "data.source=folder",
                f"data.root={folder}",
                *SMALL,
                "--out",
                tmp / "g",
                "--quiet",
                "--export-pairs",
                export,
            ),
            "ok",
            check=formula_neutralised,
            setup=captions([*base, ("feats/1.npy", '=HYPERLINK("http://x")', "train")]),
        ),
    ]


def verdict(case: Case, code: int, first: str, lines: int) -> str:
    if case.expect == "error":
        good = code == 2 and lines == 1 and first.startswith("mispair: error: ") and case.fragment in first
    elif case.expect == "warn":
        good = code == 0 and first.startswith("mispair: warning: ") and case.fragment in first
    else:
        good = code == 0 and (case.check is None or case.check())
    return "ok" if good else "FAIL"


def main() -> int:
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        for case in build_cases(tmp):
            case.setup()
            done = subprocess.run(case.argv, capture_output=True, text=True, cwd=tmp)
            # a "note:" (e.g. the synthetic fallback) may precede the outcome; it is not counted
            err = [
                line for line in done.stderr.splitlines() if line.strip() and not line.startswith("note: ")
            ]
            first = err[0] if err else ""
            lines = len(err)
            rows.append(
                (case.name, done.returncode, first[:110], verdict(case, done.returncode, first, lines))
            )
    print("| case | exit status | first line | verdict |")
    print("|---|---|---|---|")
    for name, code, first, result in rows:
        print(f"| {name} | {code} | {first.replace('|', '/')} | {result} |")
    return 1 if any(r[-1] == "FAIL" for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
