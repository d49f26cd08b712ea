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

``--vectors-probe`` (issue 65) reads each variant's folder audit back and measures the evidence the
shift search sees with two kinds of vectors: the final run's (what the audit uses: it trained on
every training pair, the shifted ones as they are) and cross-fitted ones (the audited pairs dealt
in halves by content, a scorer of the audit's held-out kind trained on each, each caption scored
against the pictures around it by the scorer that did not train on it): per planted run, the rows
that agree with its offset, the null rate there, how often the picture ``k`` rows away beats the
row's own (inside the run, outside every run), how often a caption's own picture fits it best of
its window (outside every run: the training pairs, the dev and test pairs), and the runs
:func:`~mispair.audit.join_errors.find_shifts` reports:

    python benchmarks/join_errors.py --variants clean shift30 --vectors-probe
    python benchmarks/join_errors.py --shuffle --variants clean shift30 --vectors-probe
    python benchmarks/join_errors.py --variants shift30 --vectors-probe --probe-folds 5 --probe-epochs 20

``--edge-probe`` (issue 65) reads each variant's folder audit back (the final run's vectors, as the
search reads them) and grows the same run cores with other rules for a run's edges: the audit's
(the next row agrees, or carries a caption twice), "k beats own" (also a row whose picture ``k``
rows away fits its caption better than its own) and a two-level likelihood ratio (agree: strong,
k beats own: weak, neither: against; each outcome's rate inside the run from its core and outside
from the rows outside every core, at ``k`` and ``-k`` the lower; the end moved to the best
positive prefix of the next 8 informative rows): the planted rows inside a run of the right
offset and the rows inside a run that are not planted at its offset; then, per planted row the
audit's runs miss, what evidence it has (its gain at ``k``, the rank of the picture ``k`` rows
away among the 17 of the window for its caption, and of its caption among the window's captions
for that picture):

    python benchmarks/join_errors.py --shuffle --variants clean shift1 shift10 shift30 --edge-probe
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


def final_vectors(run, audited) -> tuple[np.ndarray, np.ndarray]:
    """``([n, d], [n, d])`` each pair's caption vector and its own picture's, by the final run (as
    the audit's search reads them)."""
    from mispair.search.model import SearchModel

    model = SearchModel(run)
    pictures = model.image_vectors(audited.pairs.pairs)[audited.pairs.image_of_caption]
    return model.text_vectors(audited.pairs.tokens), pictures


def cross_fitted(
    run, audited, folds: int = 2, seed: int = 0, epochs: int | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``([n, folds·d], [n, folds·d], [n])``: the audited pairs dealt into ``folds`` parts by content,
    one held-out scorer (the audit's kind) per part, trained on the other parts; a caption's vector
    is its part's scorer's, in that scorer's block (zeros elsewhere), a picture's is every
    scorer's: a dot product is the cosine under the scorer that held the caption out.
    ``epochs``: the scorers' (default: the audit's ``division.epochs``). The parts last."""
    from dataclasses import replace

    from mispair.data.content import content_folds, fold_groups
    from mispair.engine.held_out.plan import HeldOutScoring
    from mispair.engine.held_out.scorers import ScorerRun, trained_scorers

    pairs, scorer = audited.pairs, HeldOutScoring.of(run.config).scorer
    scorer = replace(scorer, train=replace(scorer.train, epochs=epochs or scorer.train.epochs))
    content = fold_groups(pairs.pairs.images, pairs.tokens, pairs.image_of_caption, folds)
    part = content_folds(content, pairs.image_of_caption, folds, seed)
    jobs = [
        ScorerRun(h, replace(scorer, train=replace(scorer.train, seed=seed + h)), np.flatnonzero(part != h))
        for h in range(folds)
    ]
    models = [model for _, model in trained_scorers(jobs, run.data, pairs, run.device)]
    captions, pictures = [], []
    for h, model in enumerate(models):
        vectors = final_vectors(replace(run, models=[model]), audited)
        captions.append(np.where((part == h)[:, None], vectors[0], 0.0))
        pictures.append(vectors[1])
    return np.concatenate(captions, axis=1), np.concatenate(pictures, axis=1), part


def audit_inputs(variant: str, work: Path, shuffle: bool = False):
    """The variant's folder audit (made once) read back as its shift search reads it: the final
    run, the audited pairs, each pair's picture's class of near-duplicates, the row order; and
    each row's planted offset."""
    from mispair.audit.duplicates import find_duplicates
    from mispair.audit.join_errors import picture_looks
    from mispair.audit.join_findings import row_order
    from mispair.audit.pair_table import audited_pairs
    from mispair.engine.trained import TrainedRun

    forms, _, offset, _ = write_forms(variant, work, shuffle)
    out = forms["folder"].parent / "audit-folder"
    audit(forms["folder"], out)
    run = TrainedRun.open(out / "run" / "best.pt", "cpu")
    audited = audited_pairs(run)
    pairs = audited.pairs
    duplicates = find_duplicates(
        pairs.pairs.images,
        pairs.pairs.captions,
        pairs.image_of_caption,
        audited.split,
        train_split=run.config.data.train_split,
    )
    looks = picture_looks(duplicates.duplicate_of)[pairs.image_of_caption]
    order = row_order(audited.pair_id, audited.split, run.config.data)
    return run, audited, looks, order, offset


def vectors_probe(
    variant: str, work: Path, shuffle: bool = False, folds: int = 2, epochs: int | None = None
) -> list[dict]:
    """The evidence of the variant's folder audit with the final run's and cross-fitted vectors
    (module description; ``folds`` parts, scorers of ``epochs`` epochs)."""
    from mispair.engine.held_out.plan import HeldOutScoring

    run, audited, looks, order, offset = audit_inputs(variant, work, shuffle)
    started = time.time()
    crossed = cross_fitted(run, audited, folds, epochs=epochs)[:2]
    kinds = {"final run": final_vectors(run, audited)}
    scorers = f"{folds} parts, {epochs or HeldOutScoring.of(run.config).scorer.train.epochs} epochs"
    kinds[f"cross-fitted ({scorers}, {time.time() - started:.0f} s)"] = crossed
    described = {"rows": "shuffled" if shuffle else "sorted", "variant": variant}
    return [
        {**described, "vectors": name, **row}
        for name, vectors in kinds.items()
        for row in _evidence(*vectors, looks, order, audited, offset, VARIANTS[variant]["runs"])
    ]


def _evidence(captions, pictures, looks, order, audited, offset, runs) -> list[dict]:
    """One row per planted run (one row without any) of the evidence :func:`vectors_probe` lists."""
    from mispair.audit.join_errors import agreement, caption_wording, find_shifts

    wording = caption_wording(audited.pairs.pairs.captions)
    scan = find_shifts(captions, pictures, looks, order.files, wording=wording)
    file = order.files[0]  # the folder: one file, its pair ids the row numbers
    row = np.array([row_of(audited.pair_id[p]) if p >= 0 else -1 for p in file])
    found = agreement(captions, pictures, looks, file, 8)
    outside = (offset[np.maximum(row, 0)] == 0) & (file >= 0)
    trained = audited.split[np.maximum(file, 0)] == "train"
    best = ((found.gain < 0) | ~found.informative).all(axis=0) & found.informative.any(axis=0)
    told = found.informative.any(axis=0) & outside
    own_best = f"{best[told & trained].mean():.3f} / {best[told & ~trained].mean():.3f}"
    reported = ", ".join(f"{row[r.start]}–{row[r.stop]} ({r.offset:+d})" for r in scan.runs) or "none"
    rates = scan.null_rate.values()
    if not runs:
        null = f"{min(rates):.3f}–{max(rates):.3f}"
        return [
            {
                "planted run": "–",
                "null rate": null,
                "own best of window: train / dev+test": own_best,
                "runs reported": reported,
            }
        ]
    rows = []
    for start, stop, k in runs:
        j = int(np.flatnonzero(found.offsets == k)[0])
        inside = (row >= start) & (row <= stop) & found.informative[j]
        beyond = outside & found.informative[j]
        beats = f"{(found.gain[j, inside] > 0).mean():.2f} / {(found.gain[j, beyond] > 0).mean():.2f}"
        rows.append(
            {
                "planted run": f"{start}–{stop} ({k:+d})",
                "agree inside": f"{int(found.hit[j, inside].sum())} of {int(inside.sum())}",
                "agree outside": f"{found.hit[j, beyond].mean():.3f}",
                "null rate": f"{scan.null_rate[k]:.3f}",
                "k beats own: inside / outside": beats,
                "own best of window: train / dev+test": own_best,
                "runs reported": reported,
            }
        )
    return rows


def edge_probe(variant: str, work: Path, shuffle: bool = False) -> list[dict]:
    """The variant's folder audit's runs grown with each edge rule, and the evidence of the planted
    rows the audit's runs miss (module description)."""
    import mispair.audit.join_errors as join_errors
    from mispair.audit.join_errors import agreement, caption_wording, find_shifts

    run, audited, looks, order, offset = audit_inputs(variant, work, shuffle)
    captions, pictures = final_vectors(run, audited)
    wording = caption_wording(audited.pairs.pairs.captions)
    file = order.files[0]  # the folder: one file, its pair ids the row numbers
    row = np.array([row_of(audited.pair_id[p]) if p >= 0 else -1 for p in file])
    truth = np.where(row >= 0, offset[np.maximum(row, 0)], 0)
    audit_edge, audit_extended = join_errors._edge, join_errors._extended
    join_errors._extended = lambda runs, agree, wording: runs  # the cores, not grown
    try:
        cores = find_shifts(captions, pictures, looks, order.files, wording=wording).runs
    finally:
        join_errors._extended = audit_extended
    rules = {"agree (the audit's)": audit_edge, "k beats own": _beats_edge, "two-level LLR": _llr_edge(cores)}
    described, rows = {"rows": "shuffled" if shuffle else "sorted", "variant": variant}, []
    for name, rule in rules.items():
        join_errors._edge = rule
        try:
            runs = find_shifts(captions, pictures, looks, order.files, wording=wording).runs
        finally:
            join_errors._edge = audit_edge
        found = np.zeros(len(file), dtype=int)
        for r in runs:
            found[r.start : r.stop + 1] = r.offset
        found[row < 0] = 0
        missed = np.flatnonzero((truth != 0) & (found != truth) & (row >= 0))
        rows.append(
            {
                **described,
                "edge rule": name,
                "planted rows": int((truth != 0).sum()),
                "in a run of the right offset": int(((truth != 0) & (found == truth)).sum()),
                "in a run, not planted there": int(((found != 0) & (found != truth)).sum()),
                "runs": ", ".join(f"{row[r.start]}–{row[r.stop]} ({r.offset:+d})" for r in runs) or "none",
                "missed": _listed([str(row[i]) for i in missed]),
            }
        )
        if name == "agree (the audit's)":
            evidence = [_row_evidence(captions, pictures, file, row, int(i), int(truth[i])) for i in missed]
    evident = agreement(captions, pictures, looks, file, join_errors.MAX_OFFSET)
    outside = (truth == 0) & (row >= 0)
    beats = {
        int(k): float((evident.gain[j] > 0)[outside & evident.informative[j]].mean())
        for j, k in enumerate(evident.offsets)
    }
    rows.append(
        {
            **described,
            "edge rule": "evidence of the missed rows (gain, caption rank, picture rank)",
            "missed": _listed(evidence, sep="; "),
            "k beats own outside the planted runs": f"{min(beats.values()):.3f}–{max(beats.values()):.3f}",
        }
    )
    return rows


def _beats_edge(found, wording, counts, j, edge, step, taken) -> int:
    """:func:`mispair.audit.join_errors._edge` with one more kind of row that fits: its picture ``k``
    rows away fits its caption better than its own (``gain > 0``)."""
    k, m = int(found.offsets[j]), found.hit.shape[1]
    i = edge + step
    while 0 <= i < m and 0 <= i + k < m and not taken[i]:
        c = _outcome(found, wording, counts, j, i, step)
        if c in "ab":
            edge = i
        elif c == "n":
            break
        i += step
    return edge


def _outcome(found, wording, counts, j, i, step) -> str:
    """Row ``i`` at offset ``found.offsets[j]``: ``a`` agrees (or carries a caption twice, going the
    way of ``k``), ``b`` the picture ``k`` rows away beats its own, ``n`` neither, ``-`` tells nothing."""
    k = int(found.offsets[j])
    twice = step * k > 0 and wording[i] == wording[i + k] and counts[wording[i]] == 2
    if found.hit[j, i] or twice:
        return "a"
    if not found.informative[j, i]:
        return "-"
    return "b" if found.gain[j, i] > 0 else "n"


def _llr_edge(cores, window: int = 8):
    """An edge rule scoring each next row by the log-likelihood ratio of its outcome (:func:`_outcome`)
    inside the run (rates from the run's core) against outside (rates over the rows outside every
    core, the lower of ``k`` and ``-k``); the end moves to the best positive prefix of the next
    ``window`` informative rows, again until none is positive."""

    def edge_rule(found, wording, counts, j, edge, step, taken) -> int:
        k, m = int(found.offsets[j]), found.hit.shape[1]
        core = next(r for r in cores if r.offset == k and (r.start == edge or r.stop == edge))
        inside = np.zeros(m, dtype=bool)
        inside[core.start : core.stop + 1] = True
        outside = np.ones(m, dtype=bool)
        for r in cores:
            outside[r.start : r.stop + 1] = False

        def rates(where, j):
            informative = found.informative[j] & where
            hits = (found.hit[j] & informative).sum()
            beats = ((found.gain[j] > 0) & ~found.hit[j] & informative).sum()
            n = informative.sum() + 2
            return (hits + 1) / n, (beats + 1) / n

        p = rates(inside, j)
        q = np.minimum(rates(outside, j), rates(outside, len(found.offsets) - 1 - j))
        score = {
            "a": np.log(p[0] / q[0]),
            "b": np.log(p[1] / q[1]),
            "n": np.log((1 - sum(p)) / (1 - sum(q))),
            "-": 0.0,
        }
        while True:
            i, total, best, best_at, seen = edge + step, 0.0, 0.0, None, 0
            while 0 <= i < m and 0 <= i + k < m and not taken[i] and seen < window:
                c = _outcome(found, wording, counts, j, i, step)
                total, seen = total + score[c], seen + (c != "-")
                if c != "-" and total > best:
                    best, best_at = total, i
                i += step
            if best_at is None:
                return edge
            edge = best_at

    return edge_rule


def _row_evidence(captions, pictures, file, row, i, k, window: int = 8) -> str:
    """``row (k): gain, caption rank, picture rank`` of a planted row: its caption's similarity gain
    with the picture ``k`` rows away, that picture's rank for its caption among the window's
    pictures (its own included), and its caption's rank for that picture among the window's
    captions (0: the best)."""
    m = len(file)

    def around(c):
        return [file[c + o] for o in range(-window, window + 1) if 0 <= c + o < m and file[c + o] >= 0]

    def rank(scores, mine):  # one product for all: the row's own score compared exactly
        return int((scores > scores[mine]).sum())

    caption, theirs = captions[file[i]], pictures[file[i + k]]
    by_caption = pictures[around(i)] @ caption
    gain = by_caption[around(i).index(file[i + k])] - by_caption[around(i).index(file[i])]
    cap_rank = rank(by_caption, around(i).index(file[i + k]))
    pic_rank = rank(captions[around(i + k)] @ theirs, around(i + k).index(file[i]))
    return f"{row[i]} ({k:+d}): {gain:+.2f}, {cap_rank}, {pic_rank}"


def _listed(items: list[str], most: int = 12, sep: str = ", ") -> str:
    """The first ``most`` items, then how many there are in all."""
    shown = sep.join(items[:most]) or "none"
    return shown if len(items) <= most else f"{shown} … ({len(items)} in all)"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    parser.add_argument("--forms", nargs="+", default=list(FORMS), choices=FORMS)
    parser.add_argument("--work", type=Path, default=WORK)
    parser.add_argument("--shuffle", action="store_true", help="put the rows in a random order first")
    parser.add_argument("--join-cost", action="store_true", help="time the audit with and without the search")
    parser.add_argument(
        "--vectors-probe",
        action="store_true",
        help="the search's evidence with final-run and cross-fitted vectors",
    )
    parser.add_argument("--probe-folds", type=int, default=2, help="--vectors-probe: parts of the pairs")
    parser.add_argument("--probe-epochs", type=int, help="--vectors-probe: the scorers' epochs")
    parser.add_argument("--edge-probe", action="store_true", help="grow the runs with other edge rules")
    args = parser.parse_args()
    started, rows = time.time(), []
    for variant in args.variants:
        if args.edge_probe:
            rows += edge_probe(variant, args.work, args.shuffle)
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
            continue
        if args.vectors_probe:
            rows += vectors_probe(variant, args.work, args.shuffle, args.probe_folds, args.probe_epochs)
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
            continue
        for form in args.forms:
            found = join_cost(variant, form, args.work, args.shuffle) if args.join_cost else []
            rows += found or [measure(variant, form, args.work, args.shuffle)]
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    columns = list(dict.fromkeys(c for row in rows for c in row))  # a clean variant's probe has fewer
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    for row in rows:
        values = [row.get(c) for c in columns]
        cells = [f"{v:.3f}" if isinstance(v, float) else ("–" if v is None else str(v)) for v in values]
        print("| " + " | ".join(cells) + " |")
    print(f"\n{time.time() - started:.0f} s in all")


if __name__ == "__main__":
    main()
