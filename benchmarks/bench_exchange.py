"""How long the exchange with FiftyOne and Label Studio takes on a larger audit.

A synthetic audit (``--pairs`` pairs over ``--images`` pictures, no training) is written once;
then, each timed in this process: ``mispair export --to label-studio`` of the first ``--sample``
pairs of its random sample with inline thumbnails, the import of a Label Studio JSON export of
two annotators' answers on them; and, where FiftyOne is installed (``.venv-integrations``),
``export --to fiftyone`` (the dataset and its map) and ``import --from fiftyone`` (with a tenth of
the pictures tagged). The FiftyOne database starts before the clock (its start is not the
export's). Prints a Markdown table.

Run::

    .venv-integrations/bin/python benchmarks/bench_exchange.py [--pairs 20000 --images 5000]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from mispair.audit.synthetic import synthetic_audit
from mispair.cli import main


def timed(argv: list[str]) -> float:
    """Seconds ``mispair ARGV`` took (its output kept quiet); it must succeed."""
    start = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()) as err:
        code = main(argv)
    assert code == 0, err.getvalue()
    return time.perf_counter() - start


def studio_export(tasks: Path, out: Path) -> None:
    """A Label Studio JSON export of two annotators' answers on every task of ``tasks``."""
    rows = []
    for number, task in enumerate(json.loads(tasks.read_text()), 1):
        answers = [
            {
                "id": number * 2 + k,
                "completed_by": k + 1,
                "was_cancelled": False,
                "result": [
                    {
                        "from_name": "judgement",
                        "to_name": "caption",
                        "type": "choices",
                        "value": {"choices": ["mismatched" if (number + k) % 7 == 0 else "correct"]},
                    }
                ],
            }
            for k in range(2)
        ]
        rows.append({"id": number, "data": task["data"], "annotations": answers})
    out.write_text(json.dumps(rows))


def fiftyone_cases(audit: Path, work: Path) -> list[tuple[str, float]]:
    try:
        import fiftyone as fo
    except ImportError:
        return []
    fo.list_datasets()  # the database starts here, before the clock
    name = "mispair-bench-exchange"
    seconds = timed(["export", str(audit), "--to", "fiftyone", "--name", name, "--overwrite"])
    dataset = fo.load_dataset(name)
    view = dataset.match({"caption_count": 1}).take(max(1, len(dataset) // 10), seed=0)
    view.tag_samples("mismatched")
    out = work / "fo-decisions.csv"
    back = timed(
        ["import", str(audit), "--from", "fiftyone", "--name", name, "--out", str(out), "--overwrite"]
    )
    pictures = len(dataset)
    fo.delete_dataset(name)
    return [
        (f"export --to fiftyone ({pictures:,} pictures, map)", seconds),
        ("import --from fiftyone", back),
    ]


def main_bench() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=20_000)
    parser.add_argument("--images", type=int, default=5_000)
    parser.add_argument("--sample", type=int, default=2_000)
    args = parser.parse_args()
    os.environ.setdefault("FIFTYONE_DO_NOT_TRACK", "true")
    with tempfile.TemporaryDirectory(prefix="bench-exchange-") as tmp:
        work = Path(tmp)
        start = time.perf_counter()
        synthetic_audit(work, pairs=args.pairs, images=args.images, suggestions=3)
        took = time.perf_counter() - start
        print(f"synthetic audit of {args.pairs:,} pairs over {args.images:,} pictures: {took:.1f} s")
        audit = work / "audit"
        ls = work / "ls"
        cases = [
            (
                f"export --to label-studio --sample {args.sample:,} (inline)",
                timed(
                    [
                        "export",
                        str(audit),
                        "--to",
                        "label-studio",
                        "--sample",
                        str(args.sample),
                        "--out",
                        str(ls),
                    ]
                ),
            )
        ]
        size = (ls / "tasks.json").stat().st_size
        studio_export(ls / "tasks.json", work / "export.json")
        labels = work / "labels.csv"
        argv = [
            "import",
            str(audit),
            "--from",
            "label-studio",
            str(work / "export.json"),
            "--out",
            str(labels),
        ]
        cases.append((f"import --from label-studio ({args.sample:,} tasks, 2 annotators)", timed(argv)))
        cases += fiftyone_cases(audit, work)
    print(f"tasks.json: {size / 2**20:.1f} MB\n\n| step | seconds |\n|---|---|")
    for what, seconds in cases:
        print(f"| {what} | {seconds:.1f} |")


if __name__ == "__main__":
    main_bench()
