"""``mispair estimate`` with many reviewers and hostile names: every printed line bounded (κ of
each two up to ten reviewers, a one-line summary beyond: 200 reviewers printed 19,900 κ values,
570,000 characters on one line), every name printed terminal-safe (a file name with ESC, BEL,
U+202E and a newline forged a ``mispair: error:`` line), estimate.json still holding every κ."""

import csv
import json

import pytest

from mispair.audit.synthetic import synthetic_audit
from mispair.cli import main

EVIL = "evil\x1b[2J\x07\u202e\nmispair: error: forged"


@pytest.fixture(scope="module")
def audit(tmp_path_factory):
    folder = tmp_path_factory.mktemp("reviewers")
    result = synthetic_audit(folder, pairs=60, images=20, seed=5)
    return folder / "audit", result.sample["pair_id"].tolist()


def reviewer_file(path, ids, flip):
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(("pair_id", "label"))
        writer.writerows((i, ("correct", "mismatched")[(k + flip) % 3 == 0]) for k, i in enumerate(ids))
    return str(path)


def printed_lines(capsys, argv):
    assert main(argv) in (0, None)
    out = capsys.readouterr().out
    return out.splitlines()


def test_two_hundred_reviewers_print_a_summary(audit, tmp_path, capsys):
    folder, order = audit
    files = [reviewer_file(tmp_path / f"r{k}.csv", order[:20], k % 5) for k in range(200)]
    lines = printed_lines(capsys, ["estimate", str(folder), "--labels", *files])
    assert len(lines) < 30 and max(map(len, lines)) < 2000, (len(lines), max(map(len, lines)))
    summary = next(line for line in lines if "200 reviewers" in line)
    assert "Cohen's κ of 19,900 pairs of reviewers: min" in summary and "median" in summary
    assert "lowest: " in summary and "(estimate.json: kappa)" in summary
    written = json.loads((folder / "estimate.json").read_text())
    assert len(written["kappa"]) == 19_900 and written["disagreements"] == len(written["disagreed_pairs"])


def test_ten_reviewers_print_each_kappa(audit, tmp_path, capsys):
    folder, order = audit
    files = [reviewer_file(tmp_path / f"r{k}.csv", order[:20], k % 5) for k in range(10)]
    lines = printed_lines(capsys, ["estimate", str(folder), "--labels", *files])
    line = next(line for line in lines if "10 reviewers" in line)
    assert line.count(" κ ") == 45 and "r0.csv / r9.csv κ" in line


def test_a_hostile_file_name_is_printed_terminal_safe(audit, tmp_path, capsys):
    folder, order = audit
    files = [
        reviewer_file(tmp_path / f"{EVIL}.csv", order[:20], 0),
        reviewer_file(tmp_path / "b.csv", order[:20], 1),
    ]
    lines = printed_lines(capsys, ["estimate", str(folder), "--labels", *files])
    text = "\n".join(lines)
    assert not any(ch in text for ch in "\x1b\x07\u202e"), "control characters reach the terminal"
    assert not any(line.startswith("mispair: error:") for line in lines), "a forged error line"
    assert "evil\\x1b[2J\\x07\\u202e\\nmispair: error: forged.csv / b.csv κ" in text
    disagreement = next(line for line in lines if line.startswith("    ") and ": mismatched" in line)
    assert "\\x1b" in disagreement
