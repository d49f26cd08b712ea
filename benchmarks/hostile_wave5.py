"""The cases of ``hostile_inputs.py`` for wave 5's surfaces (issue 64): answers fed back to an audit
(another audit's, and answers the scores contradict), decisions files that are not decisions (the
audit's own ``pairs.csv``, ``estimate_pairs.csv`` with ``suspected`` edited to yes/no), exports
and imports that break the output rules (a user's folder, a link, one file for two outputs, a
split named ``../../x``), readers unbounded in values (NUL bytes, empty objects, a 10 MB id,
200 reviewers, hostile names, fields of another type), a second command into a folder another
run holds, captions without a space in the review page's sample view, and the same pairs audited
in another form or row order (the same numbers). Classes 64.2-64.8 follow the issue's items;
docs/reliability.md ("Issue 64") states the promise each case checks.

    python benchmarks/hostile_inputs.py 64.    # only these cases
"""

from __future__ import annotations

import base64
import csv
import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import hostile_fixtures as fx

SAMPLE, ANSWERS, DECISIONS = "64.1 sample", "64.2 answers", "64.3 decisions"
SAME_PAIRS = "64.6 same verdict"
OUTPUTS, BOUNDED = "64.4 exchange outputs", "64.5 bounded readers"
RUN_LOCK, SAMPLE_VIEW = "64.7 run lock", "64.8 sample view"
HOLD = """
import sys, time
from mispair.atomic import folder_lock
with folder_lock(sys.argv[1]):
    print("holding", flush=True)
    time.sleep(float(sys.argv[2]))
"""
VIEWPORT = 1000  # px: the page's width in the browser; a caption must wrap within it


def cases(tmp: Path, f, Case, mispair, small: list[str], audit: list[str]) -> list:
    """Every case of classes 64.1-64.8 (``f``: the shared fixtures, unused here)."""
    return [
        *_sample(tmp / "w64-sample", Case, mispair),
        *_answers(tmp / "w64-answers", Case, mispair, audit),
        *_decisions(tmp / "w64-decisions", Case, mispair),
        *_outputs(tmp / "w64-outputs", Case, mispair),
        *_bounded(tmp / "w64-bounded", Case, mispair),
        *_same_pairs(tmp / "w64-same", Case, mispair, audit),
        *_run_lock(tmp / "w64-lock", Case, mispair, small, audit),
        *_sample_view(tmp / "w64-view", Case, mispair, audit),
    ]


def _write_csv(path: Path, rows: list) -> None:
    with path.open("w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows(rows)


def _colour_folder(folder: Path, caption_of: Callable[[int, str], str] = lambda k, c: c) -> Path:
    """The 24 colour pictures with ``captions.csv`` (``caption_of(k, caption)`` for each row)."""
    folder.mkdir(parents=True, exist_ok=True)
    rows = fx.colour_pictures(24)
    for name, blob, _ in rows:
        (folder / name).write_bytes(blob)
    _write_csv(
        folder / "captions.csv",
        [("image", "caption"), *((n, caption_of(k, c)) for k, (n, _, c) in enumerate(rows))],
    )
    return folder


# --- 64.2 answers fed back to an audit ------------------------------------------------------------


class _Answered:
    """A folder of 30 feature files audited once (made on first use), and labels files on that
    audit's ranking: its most suspect pairs judged correct, its least suspect judged mismatched,
    or answers another audit's id names."""

    def __init__(self, root: Path, mispair, audit: list[str]) -> None:
        self.root, self.mispair, self.audit = root, mispair, audit
        self.collection, self.first = root / "features", root / "first"

    def audited(self) -> None:
        if (self.first / "summary.json").is_file():
            return
        import numpy as np

        (self.collection / "feats").mkdir(parents=True, exist_ok=True)
        rows = [("image", "caption", "split")]
        for k in range(30):
            features = np.random.default_rng(k).normal(size=(4, 8)).astype(np.float32)
            np.save(self.collection / "feats" / f"{k}.npy", features)
            rows.append((f"feats/{k}.npy", f"a caption number {k}", ("train", "dev", "test")[k % 3]))
        _write_csv(self.collection / "captions.csv", rows)
        argv = self.command(self.first)
        subprocess.run(argv, check=True, capture_output=True)

    def command(self, out: Path, *labels: Path) -> list[str]:
        more = ["--labels", *labels] if labels else []
        return self.mispair("audit", self.collection, *self.audit, "--out", out, "--quiet", *more)

    def labels(self, name: str, label: str, *, audit: str | None = None) -> Callable[[], None]:
        """Write ``name``: the first audit's 3 most suspect pairs (``correct``) or 3 least suspect
        (``mismatched``) judged ``label``, each row with the first audit's id or ``audit``."""

        def write() -> None:
            import json

            import pandas as pd

            self.audited()
            ranked = pd.read_csv(self.first / "pairs.csv", dtype=str)["pair_id"].tolist()
            ids = ranked[:3] if label == "correct" else ranked[-3:]
            own = json.loads((self.first / "summary.json").read_text())["audit_id"]
            _write_csv(
                self.root / name, [("pair_id", "label", "audit_id"), *((i, label, audit or own) for i in ids)]
            )

        return write

    def verdicts(self, out: str, label: str) -> Callable[[], bool]:
        """Whether the audit ``out`` shows the answered pairs as answered: in ``pairs.csv``, the
        page's data, ``apply --fdr`` and ``summary.json``'s count."""

        def check() -> bool:
            import json

            import pandas as pd

            from mispair.audit.page_data import FIELDS
            from mispair.audit.result import AuditResult

            folder = self.root / out
            answered = pd.read_csv(self.root / f"{label}.csv", dtype=str)["pair_id"].tolist()
            mismatched = label == "mismatched"
            pairs = pd.read_csv(folder / "pairs.csv", dtype=str).set_index("pair_id").loc[answered]
            table = (pairs["suspected"] == str(mismatched)).all()
            table &= (pairs["mismatch_probability"].astype(float) == float(mismatched)).all()
            script = (folder / "pairs.js").read_text(encoding="utf-8")
            data = json.loads(script.removeprefix("window.mispairAudit = ").removesuffix(";\n"))
            shown = {r[FIELDS.index("pair_id")]: r[FIELDS.index("suspected")] for r in data["rows"]}
            page = all(shown[i] is mismatched for i in answered)
            clean = self.root / f"{out}-clean"
            shutil.rmtree(clean, ignore_errors=True)
            AuditResult.load(folder).apply(None, clean, fdr=0.5)
            removed = set(pd.read_csv(clean / "removed.csv", dtype=str)["pair_id"])
            applied = set(answered) <= removed if mismatched else not set(answered) & removed
            counted = json.loads((folder / "summary.json").read_text()).get("answers", {}).get(label) == 3
            return bool(table and page and applied and counted)

        return check


def _answers(root: Path, Case, mispair, audit: list[str]) -> list:
    base = _Answered(root, mispair, audit)
    return [
        Case(
            ANSWERS,
            "audit --labels with another audit's answers (its audit_id on every row)",
            base.command(root / "other", root / "other.csv"),
            "error",
            "answers given on audit 0123456789abcdef, not on this audit",
            setup=base.labels("other.csv", "correct", audit="0123456789abcdef"),
            absent=root / "other" / "run" / "best.pt",
        ),
        Case(
            ANSWERS,
            "audit --labels: the 3 most suspect pairs judged correct",
            base.command(root / "kept", root / "correct.csv"),
            "ok",
            setup=base.labels("correct.csv", "correct"),
            check=base.verdicts("kept", "correct"),
        ),
        Case(
            ANSWERS,
            "audit --labels: the 3 least suspect pairs judged mismatched",
            base.command(root / "dropped", root / "mismatched.csv"),
            "ok",
            setup=base.labels("mismatched.csv", "mismatched"),
            check=base.verdicts("dropped", "mismatched"),
        ),
    ]


# --- 64.3 decisions files --------------------------------------------------------------------------


def _sample(root: Path, Case, mispair) -> list:
    """A forged or foreign sample: ``sample.csv`` rewritten so the likely-correct pairs come first
    (then answered truthfully), ``summary.json``'s seed changed, and answers without an
    ``audit_id`` given in another collection's order (the same pair ids): each refused in one
    line by ``mispair estimate``."""
    from mispair.audit.synthetic import synthetic_audit

    def rows_of(path: Path) -> list[dict[str, str]]:
        with open(path, encoding="utf-8", newline="") as handle:
            return list(csv.DictReader(handle))

    def audited(name: str, images: int) -> Path:
        """An audit of 30 pairs over ``images`` pictures, its sample drawn from seed 3: two such
        audits share their pair ids and their seed, not their pairs."""
        if not (root / name / "audit").is_dir():
            synthetic_audit(root / name, pairs=30, images=images, seed=3)
        return root / name / "audit"

    def copy(name: str) -> Path:
        target = root / name
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(audited("a", 10), target)
        return target

    def first_answered(audit: Path, labels: Path, n: int = 10) -> None:
        order = sorted(rows_of(audit / "sample.csv"), key=lambda r: int(r["order"]))
        _write_csv(labels, [("pair_id", "label"), *((r["pair_id"], "correct") for r in order[:n])])

    def forged_order() -> None:
        audit = copy("forged")
        probability = {r["pair_id"]: float(r["mismatch_probability"]) for r in rows_of(audit / "pairs.csv")}
        rows = sorted(rows_of(audit / "sample.csv"), key=lambda r: probability[r["pair_id"]])
        columns = list(rows[0])  # an older sample.csv has no stratum
        _write_csv(
            audit / "sample.csv",
            [columns, *([{**r, "order": str(k + 1)}[c] for c in columns] for k, r in enumerate(rows))],
        )
        first_answered(audit, root / "forged.csv")

    def reseeded() -> None:
        audit = copy("reseeded")
        summary = json.loads((audit / "summary.json").read_text())
        summary["sample"]["seed"] += 1
        (audit / "summary.json").write_text(json.dumps(summary))
        first_answered(audit, root / "reseeded.csv")

    def foreign() -> None:
        audited("a", 10)
        first_answered(audited("b", 12), root / "foreign.csv")

    estimate = lambda audit, labels: mispair("estimate", audit, "--labels", labels)  # noqa: E731
    return [
        Case(
            SAMPLE,
            "sample.csv rewritten: the likeliest correct pairs first, answered truthfully",
            estimate(root / "forged", root / "forged.csv"),
            "error",
            "sample.csv is not the order this audit drew from its seed",
            setup=forged_order,
            absent=root / "forged" / "estimate.json",
        ),
        Case(
            SAMPLE,
            "summary.json's sample seed changed (the order no longer drawn from it)",
            estimate(root / "reseeded", root / "reseeded.csv"),
            "error",
            "sample.csv is not the order this audit drew from its seed",
            setup=reseeded,
            absent=root / "reseeded" / "estimate.json",
        ),
        Case(
            SAMPLE,
            "answers without audit_id in another collection's order (the same pair ids)",
            estimate(root / "a" / "audit", root / "foreign.csv"),
            "error",
            "judge the pairs in the sample's order",
            setup=foreign,
            absent=root / "a" / "audit" / "estimate.json",
        ),
    ]


def _decisions(root: Path, Case, mispair) -> list:
    audit = root / "synthetic" / "audit"

    def audited() -> None:
        from mispair.audit.synthetic import synthetic_audit

        if not audit.is_dir():
            synthetic_audit(root / "synthetic", pairs=30, images=10, seed=3)

    def estimate_pairs(name: str, flags: list[str]) -> Callable[[], None]:
        """An ``estimate_pairs.csv`` of the audit's first pairs with ``suspected`` as given."""

        def write() -> None:
            import json

            import pandas as pd

            audited()
            ids = pd.read_csv(audit / "pairs.csv", dtype=str)["pair_id"].tolist()[: len(flags)]
            audit_id = json.loads((audit / "summary.json").read_text())["audit_id"]
            header = ("pair_id", "mismatch_probability", "suspected", "label", "audit_id")
            _write_csv(root / name, [header, *((i, "0.5", s, "", audit_id) for i, s in zip(ids, flags))])

        return write

    def dropped_exactly(name: str, n: int) -> Callable[[], bool]:
        def check() -> bool:
            import pandas as pd

            first = pd.read_csv(audit / "pairs.csv", dtype=str)["pair_id"].tolist()[:n]
            removed = root / name / "removed.csv"
            return removed.is_file() and sorted(pd.read_csv(removed, dtype=str)["pair_id"]) == sorted(first)

        return check

    apply = lambda decisions, out: mispair("apply", audit, "--decisions", decisions, "--out", root / out)  # noqa: E731
    return [
        Case(
            DECISIONS,
            "apply --decisions AUDIT/pairs.csv (the audit's unchecked score-only cut)",
            apply(audit / "pairs.csv", "out-pairs"),
            "error",
            "pairs.csv, not decisions",
            setup=audited,
            absent=root / "out-pairs",
        ),
        Case(
            DECISIONS,
            "apply: estimate_pairs.csv with suspected edited to yes/no",
            apply(root / "yes-no.csv", "out-yes-no"),
            "error",
            "has suspected 'yes'",
            setup=estimate_pairs("yes-no.csv", ["yes", "no", "yes", "no"]),
            absent=root / "out-yes-no",
        ),
        Case(
            DECISIONS,
            "apply: estimate_pairs.csv with suspected TRUE, True, 1, false, 0",
            apply(root / "cases.csv", "out-cases"),
            "ok",
            setup=estimate_pairs("cases.csv", ["TRUE", "True", "1", "false", "0"]),
            check=dropped_exactly("out-cases", 3),
        ),
    ]


# --- 64.4 exports and imports keep the output rules ------------------------------------------------


class _Exchanged:
    """A synthetic audit of picture files (made on first use) and a Label Studio export of
    answers on it, written as each case needs them."""

    def __init__(self, root: Path) -> None:
        self.root, self.audit = root, root / "synthetic" / "audit"

    def audited(self) -> None:
        from mispair.audit.synthetic import synthetic_audit

        if not (self.audit / "summary.json").is_file():
            synthetic_audit(self.root / "synthetic", pairs=30, images=10, seed=4)

    def sample(self, n: int) -> list[str]:
        import pandas as pd

        self.audited()
        return pd.read_csv(self.audit / "sample.csv", dtype=str)["pair_id"].tolist()[:n]

    def studio(self, name: str, annotators: Callable[[int], list[tuple[object, str]]], n: int = 10) -> Path:
        """A Label Studio JSON export: the sample's first ``n`` tasks, each annotated by
        ``annotators(k)`` (``completed_by``, label)."""
        import json

        def annotation(who: object, label: str) -> dict:
            region = {
                "from_name": "judgement",
                "to_name": "caption",
                "type": "choices",
                "value": {"choices": [label]},
            }
            return {"id": 1, "completed_by": who, "result": [region], "was_cancelled": False}

        tasks = [
            {
                "id": k,
                "data": {"pair_id": p, "source": "sample"},
                "annotations": [annotation(*a) for a in annotators(k)],
            }
            for k, p in enumerate(self.sample(n))
        ]
        path = self.root / name
        path.write_text(json.dumps(tasks), encoding="utf-8")
        return path


SPLIT_AUDIT = """
import io, sys
import datasets, mispair
from PIL import Image
from mispair.errors import MispairError
picture = io.BytesIO()
Image.new("RGB", (8, 8), "red").save(picture, format="PNG")
features = datasets.Features({"image": datasets.Image(), "caption": datasets.Value("string")})
part = datasets.Dataset.from_dict(
    {"image": [{"bytes": picture.getvalue(), "path": "a.png"}] * 4, "caption": ["a red square"] * 4},
    features=features,
)
try:
    mispair.audit(datasets.DatasetDict({"train": part, "../../x": part}), out=sys.argv[1], progress=False)
except MispairError as exc:
    print(f"mispair: error: {exc}", file=sys.stderr)
    sys.exit(2)
"""


def _outputs(root: Path, Case, mispair) -> list:
    base = _Exchanged(root)
    users, real, link = root / "users", root / "real", root / "link"
    export = lambda out: mispair("export", base.audit, "--to", "label-studio", "--sample", "5", "--out", out)  # noqa: E731

    def users_folder() -> None:
        base.audited()
        users.mkdir(parents=True, exist_ok=True)
        (users / "tasks.json").write_text("my own tasks\n")
        (users / "config.xml").write_text("my own config\n")

    def linked() -> None:
        base.audited()
        real.mkdir(parents=True, exist_ok=True)
        if not link.is_symlink():
            link.symlink_to(real)

    def one_file() -> None:
        base.studio("answers.csv.json", lambda k: [(1, "correct")])

    split_root = root / "split"
    return [
        Case(
            OUTPUTS,
            "export --to label-studio --out a folder holding the user's own tasks.json and config.xml",
            export(users),
            "error",
            "a folder that mispair did not create",
            setup=users_folder,
            check=lambda: (
                (users / "tasks.json").read_text() == "my own tasks\n"
                and (users / "config.xml").read_text() == "my own config\n"
            ),
        ),
        Case(
            OUTPUTS,
            "export --to label-studio --out a symbolic link to a folder",
            export(link),
            "error",
            "the output folder is a symbolic link",
            setup=linked,
            check=lambda: not any(real.iterdir()),
        ),
        Case(
            OUTPUTS,
            "import --from label-studio ... --out a.csv --decisions a.csv",
            mispair(
                "import",
                base.audit,
                "--from",
                "label-studio",
                root / "answers.csv.json",
                "--out",
                root / "a.csv",
                "--decisions",
                root / "a.csv",
            ),
            "error",
            "the same file as --out",
            setup=one_file,
            absent=root / "a.csv",
        ),
        Case(
            OUTPUTS,
            "mispair.audit(DatasetDict with a split named ../../x)",
            [sys.executable, "-c", SPLIT_AUDIT, str(split_root / "work" / "audit")],
            "error",
            "the split '../../x': not a plain name",
            setup=lambda: split_root.mkdir(parents=True, exist_ok=True),
            check=lambda: not any(split_root.iterdir()),
        ),
    ]


# --- 64.5 readers bounded in values, every printed line bounded and terminal-safe ------------------

EVIL = "evil\x1b[2J\x07\u202e\nmispair: error: forged"


def _printed(out: Path, argv: list[str]) -> list[str]:
    """``argv`` run with its standard output kept in ``out`` (the runner discards it)."""
    return ["/bin/sh", "-c", f'exec "$0" "$@" > "{out}"', *argv]


def _bounded_output(out: Path, lines: int, chars: int, *, fragment: str = "") -> Callable[[], bool]:
    def check() -> bool:
        text = out.read_text(encoding="utf-8") if out.is_file() else ""
        printed = text.splitlines()
        raw = any(ch in text for ch in "\x1b\x07\u202e")
        forged = any(line.startswith("mispair: error:") for line in printed)
        return (
            bool(printed)
            and len(printed) <= lines
            and max(map(len, printed)) <= chars
            and not raw
            and not forged
            and fragment in text
        )

    return check


def _bounded(root: Path, Case, mispair) -> list:
    base = _Exchanged(root)
    huge_id = "q" * 10_000_000

    def nul_labels() -> None:
        base.audited()
        with (root / "nul.csv").open("wb") as handle:
            for _ in range(450):
                handle.write(bytes(1_000_000))

    def empty_objects() -> None:
        base.audited()
        with (root / "empty.json").open("wb") as handle:
            handle.write(b"[")
            for _ in range(188):
                handle.write(b"{}," * 333_333 + b"{},")
            handle.write(b"{}]")

    def long_id() -> None:
        import json

        path = base.studio("long-id.json", lambda k: [(1, "correct")])
        tasks = json.loads(path.read_text())
        tasks[0]["data"]["pair_id"] = huge_id
        path.write_text(json.dumps(tasks))

    reviewer_files = [root / "reviewers" / f"r{k:03d}.csv" for k in range(200)]

    def reviewers() -> None:
        ids = base.sample(20)
        (root / "reviewers").mkdir(parents=True, exist_ok=True)
        for k, path in enumerate(reviewer_files):
            answers = [(i, ("correct", "mismatched")[(j + k) % 3 == 0]) for j, i in enumerate(ids)]
            _write_csv(path, [("pair_id", "label"), *answers])

    def result_number() -> None:
        import json

        path = base.studio("result-number.json", lambda k: [(1, "correct")])
        tasks = json.loads(path.read_text())
        tasks[0]["annotations"][0]["result"] = 5
        path.write_text(json.dumps(tasks))

    annotators, hostile, estimated = root / "annotators.txt", root / "hostile.txt", root / "estimate.txt"

    def studio(name: str, out: str) -> list[str]:
        return mispair("import", base.audit, "--from", "label-studio", root / name, "--out", root / out)

    return [
        Case(
            BOUNDED,
            "estimate --labels a 450 MB file of NUL bytes",
            mispair("estimate", base.audit, "--labels", root / "nul.csv"),
            "error",
            "not a text file (it holds NUL bytes)",
            setup=nul_labels,
        ),
        Case(
            BOUNDED,
            "import a 188 MB Label Studio export of empty objects",
            studio("empty.json", "empty-labels.csv"),
            "error",
            "JSON values, more than the 30,000,000 built at once",
            setup=empty_objects,
            absent=root / "empty-labels.csv",
        ),
        Case(
            BOUNDED,
            "import: a Label Studio task whose pair id is 10 MB",
            studio("long-id.json", "long-id.csv"),
            "error",
            "data.pair_id of 10,000,000 characters, more than the 4,096 an id may have",
            setup=long_id,
            missing="q" * 1000,
        ),
        Case(
            BOUNDED,
            "import: a Label Studio annotation whose result is a number",
            studio("result-number.json", "number-labels.csv"),
            "error",
            "'result' is a number (5), not a list of regions",
            setup=result_number,
            absent=root / "number-labels.csv",
        ),
        Case(
            BOUNDED,
            "import: 200 annotators (19,900 pairs of them)",
            _printed(annotators, studio("annotators.json", "annotators.csv")),
            "ok",
            setup=lambda: base.studio(
                "annotators.json",
                lambda k: [
                    ({"id": a, "email": f"a{a}@example.org"}, ("correct", "mismatched")[(a + k) % 3 == 0])
                    for a in range(200)
                ],
            ),
            check=_bounded_output(
                annotators, 20, 2000, fragment="Cohen's κ of 19,900 pairs of reviewers: min"
            ),
        ),
        Case(
            BOUNDED,
            "estimate --labels 200 reviewers' files (19,900 pairs of them)",
            _printed(estimated, mispair("estimate", base.audit, "--labels", *reviewer_files)),
            "ok",
            setup=reviewers,
            check=_bounded_output(
                estimated, 30, 2000, fragment="Cohen's κ of 19,900 pairs of reviewers: min"
            ),
        ),
        Case(
            BOUNDED,
            "import: annotator names with ESC, BEL, U+202E and a newline",
            _printed(hostile, studio("hostile.json", "hostile.csv")),
            "ok",
            setup=lambda: base.studio(
                "hostile.json",
                lambda k: [({"id": 1, "email": EVIL}, "correct"), (2, ("correct", "mismatched")[k % 2])],
            ),
            check=_bounded_output(
                hostile, 20, 2000, fragment="evil\\x1b[2J\\x07\\u202e\\nmispair: error: forged"
            ),
        ),
    ]


# --- 64.6 the same pairs in another form or row order: the same numbers --------------------------


class _SamePairs:
    """The 24 colour pictures as a folder (no split column), audited once (made on first use);
    each case writes the same pairs in another form or row order, audits it, and checks that
    every pair, known by its picture's digest and its caption, has the folder's numbers."""

    def __init__(self, root: Path, mispair, audit: list[str]) -> None:
        self.root, self.mispair, self.audit = root, mispair, audit
        self.folder, self.reference = root / "folder", root / "folder-audit"

    def command(self, path: Path, out: str) -> list[str]:
        return self.mispair("audit", path, *self.audit, "--out", self.root / out, "--quiet")

    def audited(self) -> None:
        if (self.reference / "pairs.csv").is_file():
            return
        _colour_folder(self.folder)
        subprocess.run(self.command(self.folder, "folder-audit"), check=True, capture_output=True)

    def pairs(self) -> list[tuple[bytes, str]]:
        """``(picture bytes, caption)`` of the folder's rows, in its order."""
        return [(blob, caption) for _, blob, caption in fx.colour_pictures(24)]

    def setup(self, write: Callable[[list[tuple[bytes, str]]], None]) -> Callable[[], None]:
        def run() -> None:
            self.audited()
            write(self.pairs())

        return run

    def same(self, out: str) -> Callable[[], bool]:
        def check() -> bool:
            import pandas as pd

            tables = []
            for folder in (self.reference, self.root / out):
                pairs = pd.read_csv(folder / "pairs.csv", dtype={"pair_id": str, "caption": str})
                tables.append(pairs.set_index(["image_digest", "caption"]).sort_index())
            mine, theirs = tables
            from mispair.audit.pair_table import verdict_columns

            columns = verdict_columns(list(mine.columns))
            if not mine.index.equals(theirs.index) or len(mine) != 24:
                return False
            return bool(mine[columns].fillna("").astype(str).equals(theirs[columns].fillna("").astype(str)))

        return check


def _same_pairs(root: Path, Case, mispair, audit: list[str]) -> list:
    base = _SamePairs(root, mispair, audit)
    shuffled = [7, 19, 3, 22, 0, 14, 9, 1, 17, 23, 5, 12, 20, 2, 16, 8, 11, 21, 4, 15, 10, 6, 18, 13]

    def table(pairs: list[tuple[bytes, str]]) -> None:
        import pandas as pd

        rows = [{"image": {"bytes": b, "path": None}, "caption": c} for b, c in pairs]
        pd.DataFrame(rows[::-1]).to_parquet(root / "pairs.parquet", index=False)

    def shards(pairs: list[tuple[bytes, str]]) -> None:
        import io
        import tarfile

        (root / "shards").mkdir(parents=True, exist_ok=True)
        for s, part in enumerate((shuffled[:12], shuffled[12:])):
            with tarfile.open(root / "shards" / f"{s:05d}.tar", "w") as tar:
                for k in part:
                    for suffix, blob in ((".png", pairs[k][0]), (".txt", pairs[k][1].encode())):
                        info = tarfile.TarInfo(f"s{s}k{k:03d}{suffix}")
                        info.size = len(blob)
                        tar.addfile(info, io.BytesIO(blob))

    def renamed(pairs: list[tuple[bytes, str]]) -> None:
        folder = root / "renamed"
        folder.mkdir(parents=True, exist_ok=True)
        rows = [("caption", "file_name")]
        for k in reversed(range(len(pairs))):
            (folder / f"picture-{99 - k}.png").write_bytes(pairs[k][0])
            rows.append((pairs[k][1], f"picture-{99 - k}.png"))
        _write_csv(folder / "captions.csv", rows)

    return [
        Case(
            SAME_PAIRS,
            "the folder's pairs as a Parquet table of the pictures' bytes, no names, rows reversed",
            base.command(root / "pairs.parquet", "table-audit"),
            "ok",
            setup=base.setup(table),
            check=base.same("table-audit"),
        ),
        Case(
            SAME_PAIRS,
            "the folder's pairs as two WebDataset shards, rows shuffled",
            base.command(root / "shards", "shards-audit"),
            "ok",
            setup=base.setup(shards),
            check=base.same("shards-audit"),
        ),
        Case(
            SAME_PAIRS,
            "the folder with its pictures renamed, its columns swapped and its rows reversed",
            base.command(root / "renamed", "renamed-audit"),
            "ok",
            setup=base.setup(renamed),
            check=base.same("renamed-audit"),
        ),
    ]


# --- 64.7 the run lock taken before any work ------------------------------------------------------


class _Holder:
    """A process holding a folder's lock as a running ``train`` or ``audit`` does, started by the
    case's setup (the folder holding ``files`` first) and ended by its check, which says whether
    the refused command encoded anything (a new file in the collection's cache) or touched the
    folder."""

    def __init__(self, folder: Path, collection: Path, files: dict[str, str]) -> None:
        self.folder, self.collection, self.files = folder, collection, files
        self.process: subprocess.Popen | None = None
        self.cached: set[Path] = set()

    def start(self) -> None:
        if not (self.collection / "captions.csv").is_file():
            _colour_folder(self.collection)
        self.folder.mkdir(parents=True, exist_ok=True)
        for name, text in self.files.items():
            (self.folder / name).write_text(text)
        self.cached = self._cache()
        self.process = subprocess.Popen(
            [sys.executable, "-c", HOLD, str(self.folder), "120"], stdout=subprocess.PIPE, text=True
        )
        assert self.process.stdout is not None and self.process.stdout.readline().strip() == "holding"

    def untouched(self) -> bool:
        assert self.process is not None
        self.process.kill()
        self.process.wait()
        held = {p.name: p.read_text() for p in self.folder.iterdir() if p.name != ".mispair.lock"}
        return not self._cache() - self.cached and held == self.files

    def _cache(self) -> set[Path]:
        from mispair.config import DataConfig
        from mispair.data.cache_folder import collection_cache

        return set(collection_cache(DataConfig(root=str(self.collection))).rglob("*"))


def _run_lock(root: Path, Case, mispair, small: list[str], audit: list[str]) -> list:
    pictures, train = root / "pictures", [s for s in small if not s.startswith("data.synthetic")]
    running = {".mispair-output": "mispair train output\n", "note.txt": "the running command's\n"}
    cases = [
        ("train", "train into a folder another run holds", ["train", *train], running),
        ("audit", "audit into a folder another run holds", ["audit", *audit], running),
        (
            "reading",
            "train --overwrite into a folder whose run is still reading (no marker yet)",
            ["train", *train, "--overwrite"],
            {},
        ),
    ]
    built = []
    for folder, name, argv, files in cases:
        holder = _Holder(root / folder, pictures, files)
        built.append(
            Case(
                RUN_LOCK,
                f"{name}: refused before a picture is encoded, the folder untouched",
                mispair(argv[0], pictures, *argv[1:], "--out", root / folder, "--quiet"),
                "error",
                "in use by another mispair run",
                setup=holder.start,
                check=holder.untouched,
            )
        )
    return built


# --- 64.8 long captions wrap in the sample view ---------------------------------------------------


def _sample_view(root: Path, Case, mispair, audit: list[str]) -> list:
    long = {
        "word": "W" * 1000,
        "cut": "M" * 5000,  # cut to 1,000 characters by the reader, with a warning
        "uri": "data:image/png;base64," + base64.b64encode(bytes(37 * k % 251 for k in range(700))).decode(),
    }

    def collection(name: str) -> Callable[[], None]:
        return lambda: _colour_folder(root / name, lambda k, c: long[name] if k == 5 else c)

    def wraps(name: str) -> Callable[[], bool]:
        def check() -> bool:
            widths = _page_widths(root / f"{name}-audit" / "report.html", long[name][:900])
            return widths is not None and max(widths) <= VIEWPORT

        return check

    names = {
        "word": "a caption of 1,000 characters without a space: the review and the sample view wrap it",
        "cut": "a caption of 5,000 characters without a space (cut to 1,000): wrapped",
        "uri": "a pasted data: URI of 958 characters as the caption: wrapped",
    }
    expect = {"word": ("ok", ""), "cut": ("warn", "were cut"), "uri": ("ok", "")}
    return [
        Case(
            SAMPLE_VIEW,
            names[name],
            mispair("audit", root / name, "--out", root / f"{name}-audit", *audit, "--quiet"),
            *expect[name],
            setup=collection(name),
            check=wraps(name),
        )
        for name in long
    ]


def _page_widths(report: Path, caption: str) -> tuple[int, int] | None:
    """The page's scroll width in the review, and in the sample view once the pair with
    ``caption`` is shown (the others answered "not sure"); None without Chromium or the pair."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None or not report.is_file():
        return None
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": VIEWPORT, "height": 900})
        page.route("http*://**/*", lambda route: route.abort())
        page.goto(report.as_uri())
        page.wait_for_selector("body[data-ready='1']")
        review = page.evaluate("document.documentElement.scrollWidth")
        page.click("#sample-start")
        for _ in range(30):
            if caption in (page.text_content("#sample-pair") or ""):
                sample = page.evaluate("document.documentElement.scrollWidth")
                browser.close()
                return review, sample
            page.keyboard.press("s")
        browser.close()
    return None
