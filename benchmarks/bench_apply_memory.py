"""Peak memory of ``mispair apply`` writing a large collection in its own form.

Two collections of random (incompressible) picture bytes, written once into ``--folder``:

- ``pairs.parquet``: ``--gb`` GB of rows ``{image: {bytes, path}, caption}`` (100 KB a
  picture; the pair id is the row number), in row groups of ``--row-group-mb`` MB (default 10:
  the 100 rows of pictures a row group ``datasets`` writes; 0: the whole file one row group),
  each column chunk one page (as pyarrow writes fewer than 1,024 rows: the input's page is what
  a reader must hold);
- ``shards/00000..000NN.tar``: ``--shards`` WebDataset shards of ``--shard-mb`` MB each
  (``.jpg`` of 100 KB, ``.txt``, ``.json`` a sample).

For each, an audit folder is made as ``mispair audit`` leaves it (``summary.json``, the pairs,
the run's ``config.json``; no scores are needed to apply decisions) and ``apply_decisions`` runs in
a fresh process on decisions that drop every tenth pair and replace every hundredth caption.
The process's peak resident memory is printed (``VmHWM``; ``ru_maxrss`` would count the
parent's at the fork), before apply and at its end, with the wall time. The process imports
what ``apply_decisions`` needs (``read_audit_folder``, what ``AuditResult.load`` reads; that
module also imports the summary's and with it torch, about 500 MiB more). For the shards, the
order in which the output shards were finished (their modification times: one shard is streamed
at a time).

Run::

    PYTHONPATH=src python benchmarks/bench_apply_memory.py --folder /tmp/apply-bench \\
        [--gb 1] [--row-group-mb 64] [--shards 10] [--shard-mb 100]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

PICTURE = 100_000


def make_parquet(path: Path, gb: float, row_group_mb: int) -> int:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = int(gb * 1e9 // PICTURE)
    per_group = rows if row_group_mb == 0 else max(1, row_group_mb * 1_000_000 // PICTURE)
    image = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    schema = pa.schema([("image", image), ("caption", pa.string())])
    with pq.ParquetWriter(path, schema, compression="snappy") as out:
        for start in range(0, rows, per_group):
            n = min(per_group, rows - start)
            cells = [{"bytes": os.urandom(PICTURE), "path": f"img/{start + k:06d}.jpg"} for k in range(n)]
            captions = [f"picture number {start + k}" for k in range(n)]
            out.write_table(pa.table({"image": cells, "caption": captions}, schema), row_group_size=n)
    return rows


def make_shards(folder: Path, shards: int, shard_mb: int) -> list[str]:
    folder.mkdir(parents=True, exist_ok=True)
    ids = []
    per_shard = shard_mb * 1_000_000 // (PICTURE + 2048)
    for s in range(shards):
        with tarfile.open(folder / f"{s:05d}.tar", "w") as tar:
            for k in range(per_shard):
                key = f"{s:05d}{k:04d}"
                caption = f"picture {key}"
                for suffix, blob in (
                    (".jpg", os.urandom(PICTURE)),
                    (".txt", caption.encode()),
                    (".json", json.dumps({"key": key, "caption": caption}).encode()),
                ):
                    info = tarfile.TarInfo(key + suffix)
                    info.size = len(blob)
                    tar.addfile(info, io.BytesIO(blob))
                ids.append(f"{s:05d}/{key}")
    return ids


def make_audit(folder: Path, collection: Path, source: str, ids: list[str], cache: Path) -> None:
    """An audit folder as ``mispair audit`` leaves it, for apply (its pictures in mispair's cache)."""
    import pandas as pd

    view = cache / "collections" / "bench" / "views" / "v"
    view.mkdir(parents=True, exist_ok=True)
    (folder / "run").mkdir(parents=True, exist_ok=True)
    data = {
        "source": source,
        "image_column": None,
        "caption_column": None,
        "id_column": None,
        "split_column": None,
    }
    (folder / "run" / "config.json").write_text(json.dumps({"data": data}))
    summary = {
        "collection": str(collection.resolve()),
        "image_root": str(view.resolve()),
        "run": str((folder / "run").resolve()),
        "threshold": 0.5,
        "pairs": len(ids),
    }
    (folder / "summary.json").write_text(json.dumps(summary))
    pairs = pd.DataFrame(
        {
            "pair_id": ids,
            "image_id": [f"{i}.jpg" for i in ids],
            "caption": [f"caption {i}" for i in ids],
            "mismatch_probability": 0.1,
        }
    )
    pairs.to_parquet(folder / "pairs.parquet", index=False)


MEASURE = """
import sys, time
def hwm():  # this process's peak resident memory in MiB (VmHWM: unlike ru_maxrss, not the parent's at fork)
    line = next(l for l in open("/proc/self/status") if l.startswith("VmHWM:"))
    return int(line.split()[1]) / 1024
import pandas as pd
from mispair.audit.apply import apply_decisions
from mispair.audit.audit_folder import read_audit_folder
audit, out = sys.argv[1], sys.argv[2]
loaded = read_audit_folder(audit)  # what AuditResult.load reads, without the summary's imports
ids = loaded.pairs["pair_id"].tolist()
drop, replace = ids[::10], ids[5::100]
decisions = pd.DataFrame({
    "pair_id": drop + replace,
    "decision": ["drop"] * len(drop) + ["replace"] * len(replace),
    "caption": [""] * len(drop) + ["a replaced caption"] * len(replace),
})
before = hwm()
start = time.perf_counter()
applied = apply_decisions(loaded.pairs, loaded.summary, decisions, out)
seconds = time.perf_counter() - start
peak = hwm()
print(f"{applied.form} {applied.kept} kept {applied.replaced} replaced {applied.removed} removed; "
      f"peak RSS before apply {before:.0f} MiB, at the end {peak:.0f} MiB; {seconds:.1f} s")
"""


def measure(audit: Path, out: Path, env: dict) -> str:
    done = subprocess.run(
        [sys.executable, "-c", MEASURE, str(audit), str(out)], capture_output=True, text=True, env=env
    )
    if done.returncode:
        raise SystemExit(done.stderr)
    return done.stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folder", type=Path, required=True)
    parser.add_argument("--gb", type=float, default=1.0)
    parser.add_argument("--row-group-mb", type=int, default=10)
    parser.add_argument("--shards", type=int, default=10)
    parser.add_argument("--shard-mb", type=int, default=100)
    parser.add_argument("--skip", choices=("parquet", "shards"), help="measure only the other")
    args = parser.parse_args()
    folder, cache = args.folder, args.folder / "cache"
    env = {**os.environ, "MISPAIR_CACHE": str(cache)}
    os.environ["MISPAIR_CACHE"] = str(cache)
    if args.skip != "parquet":
        table = folder / f"pairs-{args.gb:g}gb-rg{args.row_group_mb}.parquet"
        rows = make_parquet(table, args.gb, args.row_group_mb) if not table.is_file() else None
        if rows is None:
            import pyarrow.parquet as pq

            rows = pq.ParquetFile(table).metadata.num_rows
        audit = folder / f"audit-{table.stem}"
        make_audit(audit, table, "table", [str(k) for k in range(rows)], cache)
        out = folder / f"clean-{table.stem}"
        subprocess.run(["rm", "-rf", str(out)], check=True)
        groups = __import__("pyarrow.parquet").parquet.ParquetFile(table).metadata.num_row_groups
        print(
            f"parquet {table.stat().st_size / 1e9:.2f} GB, {rows} rows in {groups} row group(s): "
            + measure(audit, out, env)
        )
        print(f"  output {(out / table.name).stat().st_size / 1e9:.2f} GB")
    if args.skip != "shards":
        shards = folder / f"shards-{args.shards}x{args.shard_mb}"
        if not shards.is_dir():
            make_shards(shards, args.shards, args.shard_mb)
        ids = []
        for shard in sorted(shards.glob("*.tar")):
            with tarfile.open(shard) as tar:
                ids += list(dict.fromkeys(f"{shard.stem}/{m.name.partition('.')[0]}" for m in tar))
        audit = folder / f"audit-{shards.name}"
        make_audit(audit, shards, "webdataset", ids, cache)
        out = folder / f"clean-{shards.name}"
        subprocess.run(["rm", "-rf", str(out)], check=True)
        total = sum(p.stat().st_size for p in shards.glob("*.tar")) / 1e9
        print(f"shards {args.shards} x {args.shard_mb} MB ({total:.2f} GB): " + measure(audit, out, env))
        finished = sorted(out.glob("*.tar"), key=lambda p: p.stat().st_mtime_ns)
        print("  output shards finished in the order", " ".join(p.stem for p in finished))


if __name__ == "__main__":
    main()
