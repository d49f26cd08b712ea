"""Every CSV a person opens that mispair writes neutralises spreadsheet formulas: ``pairs.csv``,
``refused.csv``, ``keep.csv``, ``removed.csv``, ``--export-pairs`` and the report's downloaded
decisions; a cell starting with ``=``, ``+``, ``-``, ``@``, a tab or a CR gets a leading ``'``.
(The cleaned collection's ``captions.csv`` is data mispair reads back, written as typed, like the
collection it came from; apply reads the report's ``'=...`` back as ``=...``.) Error lines escape
terminal control characters."""

import csv
import io
import json
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from mispair.audit.apply import read_decisions
from mispair.audit.result import AuditResult
from mispair.audit.summary import AuditSummary
from mispair.errors import DataError
from mispair.safe_io import FORMULA_STARTS, spreadsheet_text
from tests.audit.test_apply_hostile import N, fake_audit, save

HOSTILE = [f'{start}HYPERLINK("http://x")' for start in FORMULA_STARTS]
HOSTILE += ["\r=1+1", "a\n=1+1", "a\r=1+1"]  # a line break inside a cell must not start a row
REPORT_JS = Path(__file__).parents[1] / "src" / "mispair" / "audit" / "report.js"


def cells(path: Path) -> list[str]:
    with path.open(encoding="utf-8", newline="") as handle:
        return [cell for row in csv.reader(handle) for cell in row]


def no_formula(values: list[str]) -> None:
    assert not [v for v in values if v.startswith(FORMULA_STARTS)], values


def test_every_csv_writer_neutralises_formulas(tmp_path):
    _, audit, pairs, summary = fake_audit(tmp_path)
    ids = [HOSTILE[k % len(HOSTILE)] + str(k) for k in range(N)]
    pairs = pairs.assign(pair_id=ids, caption=[HOSTILE[k % len(HOSTILE)] for k in range(N)])
    save(audit, pairs, summary)
    refused = pd.DataFrame({"pair_id": HOSTILE, "reason": HOSTILE})
    AuditResult(pairs, AuditSummary.from_dict(summary), "", refused).save(tmp_path / "saved")
    for name in ("pairs.csv", "refused.csv"):
        written = cells(tmp_path / "saved" / name)
        no_formula(written)
        assert "'" + HOSTILE[0] in written
    decisions = pd.DataFrame({"pair_id": ids[:2], "decision": ["drop", "keep"], "caption": ["", ""]})
    applied = AuditResult.load(audit).apply(decisions, tmp_path / "clean")
    for name in ("keep.csv", "removed.csv"):
        written = cells(applied.folder / name)
        no_formula(written)
        assert {spreadsheet_text(c) for c in written} & set(ids)


def test_the_export_of_training_pairs_neutralises_formulas():
    from mispair.engine.export import pairs_csv

    rows = [{"caption_index": k, "image_id": h, "caption": h} for k, h in enumerate(HOSTILE)]
    no_formula(cells_of(pairs_csv(rows)))


def cells_of(text: str) -> list[str]:
    return [cell for row in csv.reader(io.StringIO(text)) for cell in row]


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node to run the report's script")
def test_the_reports_decisions_download_neutralises_formulas_and_apply_reads_them_back(tmp_path):
    source = REPORT_JS.read_text(encoding="utf-8")
    start = source.index("  function csvField(value) {")
    end = source.index("\n  }\n", start) + 4
    script = source[start:end] + f"\nconsole.log(JSON.stringify({json.dumps(HOSTILE)}.map(csvField)));\n"
    fields = json.loads(
        subprocess.run(["node", "-e", script], capture_output=True, check=True, text=True).stdout
    )
    no_formula(cells_of(",".join(fields)))
    path = tmp_path / "decisions-0123456789abcdef.csv"
    rows = [f"{k},replace,{field}" for k, field in enumerate(fields)]
    path.write_text("\r\n".join(["pair_id,decision,caption", *rows]) + "\r\n", encoding="utf-8")
    read = read_decisions(path, "0123456789abcdef")
    assert read["caption"].tolist() == [h.strip() for h in HOSTILE]


def test_an_error_line_escapes_terminal_control_characters():
    message = str(DataError("captions.csv: pair 1: '\x1b]8;;http://x\x1b\\\x1b[2J\u202e\n'"))
    assert message.isprintable() and "\\x1b[2J" in message and "\\u202e" in message
