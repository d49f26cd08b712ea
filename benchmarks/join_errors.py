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
convention). Each variant is written as a folder (``images/`` + ``captions.csv``), a Parquet table
of image bytes and two WebDataset shards (rows in order), audited with a short schedule, and
``mispair apply --repair`` run on it. Measured against the planted truth: the planted rows inside
a reported run of the right offset (recall), the rows whose caption the repair moved that got
their own original caption, the runs and pasted groups reported on ``clean``, and the rows outside
every run whose caption the repair changed.

    python benchmarks/join_errors.py --variants clean shift10 shift30 pasted --forms folder
    python benchmarks/join_errors.py            # every variant in every form (about 15 audits)
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


def planted(variant: str, captions: list[str], seed: int = 0) -> tuple[list[str], np.ndarray, dict]:
    """The captions with the variant planted, each row's true offset (0: its own caption) and the
    pasted groups' rows."""
    spec, rng = VARIANTS[variant], np.random.default_rng(seed)
    new, offset = list(captions), np.zeros(len(captions), dtype=int)
    for start, stop, k in spec["runs"]:
        for i in range(start, stop + 1):
            new[i], offset[i] = captions[i + k], k
    pasted = {}
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


def write_forms(variant: str, work: Path) -> tuple[dict[str, Path], list[str], np.ndarray, dict]:
    """The variant as a folder, a Parquet table of image bytes and two shards (rows in order)."""
    import pandas as pd

    from audit_calibration import tuxpaint_pairs, write_collection

    base = work / "clean-folder"
    if not (base / "captions.csv").is_file():
        write_collection(base, tuxpaint_pairs(), 0.0, 0)
    frame = pd.read_csv(base / "captions.csv", dtype=str)
    original = frame["caption"].tolist()
    captions, offset, pasted = planted(variant, original)
    root = work / variant
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


def audit(path: Path, out: Path) -> float:
    """``mispair audit path --out out`` with the short schedule (made once); its seconds."""
    if not (out / "summary.json").is_file():
        argv = [sys.executable, "-m", "mispair.cli", "audit", str(path), "--out", str(out), "--quiet", *SHORT]
        subprocess.run(argv, check=True, env={**os.environ, "HF_HUB_OFFLINE": "1"}, stdout=subprocess.DEVNULL)
    return float(json.loads((out / "summary.json").read_text())["timings"]["total"])


def row_of(pair_id: str) -> int:
    """The collection row of a pair id (the row number; ``shard/key`` with the key the row)."""
    return int(pair_id.rsplit("/", 1)[-1])


def measure(variant: str, form: str, work: Path) -> dict:
    import pandas as pd

    forms, original, offset, pasted = write_forms(variant, work)
    out = work / variant / f"audit-{form}"
    seconds = audit(forms[form], out)
    structure = json.loads((out / "structure.json").read_text())
    found = np.zeros(len(original), dtype=int)
    for shift in structure["shifts"]:
        for pair in shift["pair_ids"]:
            found[row_of(pair)] = shift["offset"]
    planted_rows = offset != 0
    recall = float((found[planted_rows] == offset[planted_rows]).mean()) if planted_rows.any() else None
    moved = {row_of(to): row_of(source) for s in structure["shifts"] for source, to in s["moves"]}
    shown = {i: original[i + offset[i]] for i in range(len(original))}  # the caption each row carries
    repaired_right = [shown[source] == original[target] for target, source in moved.items()]
    lost = [row_of(p) for s in structure["shifts"] for p in s["lost"]]
    changed_outside = sum(shown[moved[t]] != shown[t] for t in moved if offset[t] == 0)
    changed_outside += sum(offset[t] == 0 for t in lost)  # a row of no run dropped
    groups = [set(map(row_of, r["pair_ids"])) for r in structure["repeated_captions"]]
    read = {row_of(p) for p in pd.read_csv(out / "pairs.csv", dtype=str)["pair_id"]}  # refused rows left out
    pasted_found = sum(any(set(rows) & read <= g for g in groups) for rows in pasted.values())
    return {
        "variant": variant,
        "form": form,
        "planted rows": int(planted_rows.sum()),
        "runs reported": len(structure["shifts"]),
        "rows in runs": int((found != 0).sum()),
        "recall (right offset)": recall,
        "repaired right": (sum(repaired_right) / len(repaired_right)) if repaired_right else None,
        "changed outside runs": changed_outside,
        "pasted found": f"{pasted_found} of {len(pasted)}",
        "groups reported": len(groups),
        "seconds": round(seconds),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    parser.add_argument("--forms", nargs="+", default=list(FORMS), choices=FORMS)
    parser.add_argument("--work", type=Path, default=WORK)
    args = parser.parse_args()
    started, rows = time.time(), []
    for variant in args.variants:
        for form in args.forms:
            rows.append(measure(variant, form, args.work))
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
