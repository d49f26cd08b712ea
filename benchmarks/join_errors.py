"""Join errors found and repaired? Shifts and pasted captions planted into Tux Paint (issue 65).

The collection: Tux Paint's 950 stamps with their English descriptions
(:func:`audit_calibration.tuxpaint_pairs`), in the package's order (sorted by category: the
neighbours of a row are often alike, the hard case for a shift). Planted, each variant apart:

- ``clean``: nothing;
- ``shift1``: one run of 1% of the rows, offset +1;
- ``shift10``: 10% of the rows in runs of offsets +1, -1, +2, -2 and 5;
- ``shift30``: 30% of the rows in three runs of offsets +1, -2 and 5;
- ``pasted``: one caption pasted on 20 rows and another on 200.

A run ``(start, stop, k)`` makes row ``i`` carry the caption of row ``i + k`` (the issue's
convention). ``--shuffle`` first puts the collection's rows in a random order (seeded), as a join
of web-crawled rows would be: a row's neighbours are then unrelated to it, the case the detector
is built for; the shifts are planted after. Each variant is written as a folder (``images/`` +
``captions.csv``), a Parquet table of image bytes and two WebDataset shards (rows in order),
audited with a short schedule, and ``mispair apply AUDIT --repair --out DIR`` run on it; the
captions it writes are read back and compared with the truth: the planted rows inside a reported
run of the right offset (recall), the captions the repair moved and the share of them that is
the row's own original caption, the planted rows that got their own caption back, the rows
dropped, the rows outside every planted run whose caption the repair changed or dropped, the
pasted groups found and the groups reported.

    python benchmarks/join_errors.py --variants clean shift10 shift30 pasted --forms folder
    python benchmarks/join_errors.py --shuffle --variants clean shift1 shift10 shift30 --forms folder
    python benchmarks/join_errors.py            # every variant in every form (about 15 audits)

``--join-cost`` audits each variant and form again, twice in turn: with the search for join errors
and with it replaced by an empty finding (nothing else changed), and prints the audits' seconds
side by side with the search's own part of ``summary.json``'s ``timings`` (``join_errors``):

    python benchmarks/join_errors.py --shuffle --variants shift30 --forms folder --join-cost
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
WORK = Path("runs/join_errors")
SHORT = ["division.rounds=1", "division.repeats=1", "train.epochs=6"]
"""The short audit schedule (one round of 5 scorers, 6 epochs of the final run)."""
VARIANTS: dict[str, dict] = {
    "clean": {"runs": [], "pasted": []},
    "shift1": {"runs": [(300, 309, 1)], "pasted": []},
    "shift10": {
        "runs": [(100, 119, 1), (250, 269, -1), (400, 419, 2), (550, 569, -2), (700, 714, 5)],
        "pasted": [],
    },
    "shift30": {"runs": [(50, 149, 1), (300, 399, -2), (600, 694, 5)], "pasted": []},
    "pasted": {"runs": [], "pasted": [20, 200]},
}
FORMS = ("folder", "table", "shards")
JOIN_OFF = (
    "import sys; import mispair.audit.run as run; from mispair.audit.join_findings import JoinFindings; "
    "run.join_findings = lambda *args: JoinFindings(note='not searched (benchmark)'); "
    "from mispair.cli import main; sys.exit(main(sys.argv[1:]))"
)
"""``mispair audit`` with the search for join errors replaced by an empty finding."""


def planted(variant: str, captions: list[str], seed: int = 0) -> tuple[list[str], np.ndarray, dict]:
    """The captions with the variant planted, each row's true offset (0: its own caption) and the
    pasted groups' rows."""
    spec, rng = VARIANTS[variant], np.random.default_rng(seed)
    new, offset = list(captions), np.zeros(len(captions), dtype=int)
    for start, stop, k in spec["runs"]:
        for i in range(start, stop + 1):
            new[i], offset[i] = captions[i + k], k
    pasted: dict[str, list[int]] = {}
    for n, size in enumerate(spec["pasted"]):
        taken = [i for rows in pasted.values() for i in rows]
        free = np.flatnonzero((offset == 0) & ~np.isin(np.arange(len(captions)), taken))
        rows = rng.choice(free, size=size, replace=False)
        text = f"Pasted placeholder text number {n + 1}."
        for i in rows:
            new[i] = text
        offset[rows] = 0
        pasted[text] = sorted(int(i) for i in rows)
    return new, offset, pasted


def write_forms(
    variant: str, work: Path, shuffle: bool = False
) -> tuple[dict[str, Path], list[str], np.ndarray, dict]:
    """The variant as a folder, a Parquet table of image bytes and two shards (rows in order;
    ``shuffle``: the clean rows put in a random order first)."""
    import pandas as pd

    from audit_calibration import tuxpaint_pairs, write_collection

    base = work / "clean-folder"
    if not (base / "captions.csv").is_file():
        write_collection(base, tuxpaint_pairs(), 0.0, 0)
    frame = pd.read_csv(base / "captions.csv", dtype=str)
    if shuffle:
        frame = frame.iloc[np.random.default_rng(65).permutation(len(frame))].reset_index(drop=True)
    original = frame["caption"].tolist()
    captions, offset, pasted = planted(variant, original)
    root = work / ("shuffled" if shuffle else "sorted") / variant
    folder = root / "folder"
    if not folder.is_dir():
        folder.mkdir(parents=True)
        subprocess.run(["cp", "-al", str(base / "images"), str(folder / "images")], check=True)
        frame.assign(caption=captions).to_csv(folder / "captions.csv", index=False)
    blobs = [(base / name).read_bytes() for name in frame["image"]]
    table = root / "table.parquet"
    if not table.is_file():
        rows = [
            {"image": {"bytes": b, "path": n}, "caption": c}
            for b, n, c in zip(blobs, frame["image"], captions)
        ]
        pd.DataFrame(rows).to_parquet(table, index=False)
    shards = root / "shards"
    if not shards.is_dir():
        shards.mkdir()
        for s, chunk in enumerate(np.array_split(np.arange(len(frame)), 2)):
            with tarfile.open(shards / f"{s:05d}.tar", "w") as tar:
                for k in chunk:
                    suffix = Path(frame["image"][k]).suffix
                    for ext, blob in ((suffix, blobs[k]), (".txt", captions[k].encode())):
                        info = tarfile.TarInfo(f"{int(k):06d}{ext}")
                        info.size = len(blob)
                        tar.addfile(info, io.BytesIO(blob))
    return {"folder": folder, "table": table, "shards": shards}, original, offset, pasted


def audit(path: Path, out: Path, join: bool = True) -> float:
    """``mispair audit path --out out`` with the short schedule (made once; ``join``: with the search
    for join errors); its seconds."""
    if not (out / "summary.json").is_file():
        command = ["-m", "mispair.cli"] if join else ["-c", JOIN_OFF]
        argv = [sys.executable, *command, "audit", str(path), "--out", str(out), "--quiet", *SHORT]
        subprocess.run(argv, check=True, env={**os.environ, "HF_HUB_OFFLINE": "1"}, stdout=subprocess.DEVNULL)
    return float(json.loads((out / "summary.json").read_text())["timings"]["total"])


def repaired(audit: Path, form: str, folder: Path) -> dict[int, str]:
    """``mispair apply audit --repair`` (made once): each kept row's caption in the collection it
    writes (``folder``: the collection's folder form, to read a row from its picture's name)."""
    import pandas as pd

    out = audit.parent / f"repaired-{form}"
    if not out.is_dir():
        argv = [sys.executable, "-m", "mispair.cli", "apply", str(audit), "--repair", "--out", str(out)]
        subprocess.run(argv, check=True, env={**os.environ, "HF_HUB_OFFLINE": "1"}, stdout=subprocess.DEVNULL)
    row = {name: k for k, name in enumerate(pd.read_csv(folder / "captions.csv", dtype=str)["image"])}
    if form == "folder":
        frame = pd.read_csv(out / "captions.csv", dtype=str, keep_default_na=False)
        return {row[name]: c for name, c in zip(frame["image"], frame["caption"])}
    if form == "table":
        frame = pd.read_parquet(out / "table.parquet")
        return {row[image["path"]]: c for image, c in zip(frame["image"], frame["caption"])}
    captions = {}
    for shard in sorted(out.glob("*.tar")):
        with tarfile.open(shard) as tar:
            for member in tar.getmembers():
                if member.name.endswith(".txt"):
                    text = tar.extractfile(member).read().decode()  # type: ignore[union-attr]
                    captions[int(Path(member.name).name.split(".")[0])] = text
    return captions


def row_of(pair_id: str) -> int:
    """The collection row of a pair id (the row number; ``shard/key`` with the key the row)."""
    return int(pair_id.rsplit("/", 1)[-1])


def measure(variant: str, form: str, work: Path, shuffle: bool = False) -> dict:
    import pandas as pd

    forms, original, offset, pasted = write_forms(variant, work, shuffle)
    out = forms["folder"].parent / f"audit-{form}"
    seconds = audit(forms[form], out)
    structure = json.loads((out / "structure.json").read_text())
    found = np.zeros(len(original), dtype=int)
    for shift in structure["shifts"]:
        for pair in shift["pair_ids"]:
            found[row_of(pair)] = shift["offset"]
    planted_rows = offset != 0
    recall = float((found[planted_rows] == offset[planted_rows]).mean()) if planted_rows.any() else None
    shown = [original[i + offset[i]] for i in range(len(original))]  # the caption each row carries
    read = {row_of(p) for p in pd.read_csv(out / "pairs.csv", dtype=str)["pair_id"]}  # refused rows left out
    written = repaired(out, form, forms["folder"])  # row: its caption after `apply --repair`
    changed = [i for i in sorted(read) if written.get(i) != shown[i]]  # a new caption, or dropped
    kept_changed = [i for i in changed if i in written]
    restored = [i for i in np.flatnonzero(offset != 0) if written.get(int(i)) == original[i]]
    changed_outside = int(sum(offset[i] == 0 for i in changed))
    groups = [set(map(row_of, r["pair_ids"])) for r in structure["repeated_captions"]]
    pasted_found = sum(any(set(rows) & read <= g for g in groups) for rows in pasted.values())
    return {
        "rows": "shuffled" if shuffle else "sorted",
        "variant": variant,
        "form": form,
        "planted rows": int(planted_rows.sum()),
        "runs reported": len(structure["shifts"]),
        "rows in runs": int((found != 0).sum()),
        "recall (right offset)": recall,
        "captions moved": len(kept_changed),
        "moved right": (sum(written[i] == original[i] for i in kept_changed) / len(kept_changed))
        if kept_changed
        else None,
        "planted rows restored": (len(restored) / int(planted_rows.sum())) if planted_rows.any() else None,
        "dropped": len(changed) - len(kept_changed),
        "changed outside runs": changed_outside,
        "pasted found": f"{pasted_found} of {len(pasted)}",
        "groups reported": len(groups),
        "seconds": round(seconds),
    }


def join_cost(variant: str, form: str, work: Path, shuffle: bool = False, repeats: int = 2) -> list[dict]:
    """The audit of one collection with and without the search for join errors, in turn
    (``repeats`` times each, fresh folders): seconds in all and the search's own part."""
    forms, *_ = write_forms(variant, work, shuffle)
    rows = []
    for n in range(repeats):
        for join in (True, False):
            out = forms["folder"].parent / f"cost-{form}-{'with' if join else 'without'}-{n}"
            seconds = audit(forms[form], out, join=join)
            timings = json.loads((out / "summary.json").read_text())["timings"]
            rows.append(
                {
                    "rows": "shuffled" if shuffle else "sorted",
                    "variant": variant,
                    "form": form,
                    "join search": "with" if join else "without",
                    "try": n + 1,
                    "audit seconds": round(seconds, 1),
                    "join_errors part": timings.get("join_errors"),
                    "ranking part": timings.get("ranking"),
                }
            )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    parser.add_argument("--forms", nargs="+", default=list(FORMS), choices=FORMS)
    parser.add_argument("--work", type=Path, default=WORK)
    parser.add_argument("--shuffle", action="store_true", help="put the rows in a random order first")
    parser.add_argument("--join-cost", action="store_true", help="time the audit with and without the search")
    args = parser.parse_args()
    started, rows = time.time(), []
    for variant in args.variants:
        for form in args.forms:
            found = join_cost(variant, form, args.work, args.shuffle) if args.join_cost else []
            rows += found or [measure(variant, form, args.work, args.shuffle)]
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    columns = list(rows[0])
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    for row in rows:
        cells = [f"{v:.3f}" if isinstance(v, float) else ("–" if v is None else str(v)) for v in row.values()]
        print("| " + " | ".join(cells) + " |")
    print(f"\n{time.time() - started:.0f} s in all")


if __name__ == "__main__":
    main()
