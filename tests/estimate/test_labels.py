"""The labels module against brute force: every two reviewers' κ equal to scikit-learn's, the
merge equal to a table of pairs by reviewers, the summary equal to a sort, on random reviewers
with missing, unsure and one-sided answers; and the labels file bounded in values, not only
bytes (NUL bytes, long lines, many rows, long ids, many reviewers), each refusal one short line."""

import time

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import cohen_kappa_score

from mispair.errors import DataError
from mispair.estimate.labels import (
    KAPPA_WORST,
    LABELS,
    answers_text,
    kappa_summary,
    merge_labels,
    read_labels,
)


def random_reviewers(seed: int, reviewers: int = 7, pairs: int = 40) -> list[pd.DataFrame]:
    rng = np.random.default_rng(seed)
    tables = []
    for k in range(reviewers):
        ids = rng.choice(pairs, size=int(rng.integers(0, pairs)), replace=False)
        p = [0.5, 0.4, 0.1] if k % 3 else [1.0, 0.0, 0.0]  # every third says correct throughout
        tables.append(
            pd.DataFrame({"pair_id": [f"p{i}" for i in ids], "label": rng.choice(LABELS, size=len(ids), p=p)})
        )
    tables[1] = tables[1].iloc[:1]  # one answer: κ undefined with everyone
    return tables


def reference_kappa(a: dict, b: dict) -> float | None:
    both = [p for p in a if p in b and a[p] != "unsure" and b[p] != "unsure"]
    first, second = [a[p] for p in both], [b[p] for p in both]
    if len(both) < 2 or len(set(first) | set(second)) < 2:
        return None
    return float(cohen_kappa_score(first, second))


@pytest.mark.parametrize("seed", range(6))
def test_every_kappa_is_scikit_learns(seed):
    tables = random_reviewers(seed)
    names = [f"r{k}" for k in range(len(tables))]
    merged = merge_labels(tables, names)
    answers = [dict(zip(t["pair_id"], t["label"])) for t in tables]
    assert len(merged.kappa) == len(names) * (len(names) - 1) // 2
    for i in range(len(names)):
        for j in range(i + 1, len(names)):
            expected, got = reference_kappa(answers[i], answers[j]), merged.kappa[f"r{i} / r{j}"]
            assert (expected is None) == (got is None), (i, j, expected, got)
            assert expected is None or got == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("seed", range(4))
def test_the_merge_is_the_table_of_pairs_by_reviewers(seed):
    tables = random_reviewers(seed)
    names = [f"r{k}" for k in range(len(tables))]
    merged = merge_labels(tables, names)
    by_pair: dict[str, dict[str, str]] = {}
    for name, table in zip(names, tables):
        for pair, label in zip(table["pair_id"], table["label"]):
            by_pair.setdefault(pair, {})[name] = label
    assert merged.labels["pair_id"].tolist() == list(by_pair), "every pair, in the order first seen"
    expected = {
        p: next(iter(set(a.values()))) if len(set(a.values())) == 1 else "unsure" for p, a in by_pair.items()
    }
    assert dict(zip(merged.labels["pair_id"], merged.labels["label"])) == expected
    split = {p: a for p, a in by_pair.items() if len(set(a.values())) > 1}
    assert dict(zip(merged.disagreements["pair_id"], merged.disagreements["answers"])) == split


def test_the_summary_is_a_sort_of_them_all():
    kappa = {f"a{k} / b{k}": (None if k % 7 == 0 else float(np.sin(k))) for k in range(500)}
    summary = kappa_summary(kappa)
    defined = sorted((v, k) for k, v in kappa.items() if v is not None)
    assert summary.pairs == 500 and summary.defined == len(defined)
    assert summary.low == defined[0][0]
    assert summary.median == pytest.approx(float(np.median([v for v, _ in defined])))
    assert [v for _, v in summary.worst] == [v for v, _ in defined[:KAPPA_WORST]]
    text = summary.text()
    assert "min -1.00" in text and f"({500 - len(defined)} undefined" in text and len(text) < 600
    assert (
        kappa_summary({"a / b": None})
        .text()
        .endswith("undefined for all (too few pairs judged firmly by both)")
    )


def test_two_hundred_reviewers_merge_at_once():
    rng = np.random.default_rng(0)
    ids = [f"p{i}" for i in range(100)]
    tables = [pd.DataFrame({"pair_id": ids, "label": rng.choice(LABELS[:2], size=100)}) for _ in range(200)]
    start = time.perf_counter()
    merged = merge_labels(tables)
    assert time.perf_counter() - start < 10, "19,900 κ values, no call per two reviewers"
    assert len(merged.kappa) == 19_900 and len(merged.agreement().text()) < 600


def test_more_reviewers_than_the_limit_are_refused(monkeypatch):
    monkeypatch.setenv("MISPAIR_LIMIT_MAX_REVIEWERS", "3")
    table = pd.DataFrame({"pair_id": ["a"], "label": ["correct"]})
    with pytest.raises(DataError, match="4 reviewers, more than the 3 merged at once"):
        merge_labels([table] * 4)


def test_a_disagreement_prints_a_bounded_line():
    answers = {f"reviewer\x1b[31m{k}" + "x" * 100: "correct" for k in range(200)}
    text = answers_text(answers)
    assert "\x1b" not in text and "and 190 more" in text and len(text) < 1000


def write(path, text: str | bytes):
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    return path


def refusal(path, audit: str = "0123456789abcdef") -> str:
    with pytest.raises(DataError) as caught:
        read_labels(path, audit=audit)
    message = str(caught.value)
    assert "\n" not in message and len(message) < 600, message[:600]
    return message


def test_a_file_of_nul_bytes_is_refused_before_pandas(tmp_path):
    # the file was 450 MB of NUL (a MemoryError at 2.7 GB); any NUL byte is refused
    assert "not a text file (it holds NUL bytes)" in refusal(write(tmp_path / "nul.csv", b"\0" * 2_000_000))


def test_a_long_line_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("MISPAIR_LIMIT_MAX_LINE_CHARS", "1000")
    path = write(tmp_path / "long.csv", "pair_id,label\n" + "p" * 2000 + ",correct\n")
    assert "a line of more than 1,000 characters" in refusal(path)


def test_more_rows_than_the_limit_are_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("MISPAIR_LIMIT_MAX_TABLE_ROWS", "10")
    path = write(tmp_path / "rows.csv", "pair_id,label\n" + "".join(f"p{k},correct\n" for k in range(20)))
    assert "21 rows, more than the 10" in refusal(path)


def test_a_long_pair_id_is_refused_and_never_repeated_whole(tmp_path, monkeypatch):
    path = write(tmp_path / "id.csv", "pair_id,label\n" + "q" * 100_000 + ",correct\n")
    monkeypatch.setenv("MISPAIR_LIMIT_MAX_ID_CHARS", "1000")
    assert "row 2: a pair_id of 100,000 characters, more than the 1,000" in refusal(path)
    monkeypatch.delenv("MISPAIR_LIMIT_MAX_ID_CHARS")
    write(path, "pair_id,label\n" + "q" * 4000 + ",maybe\n")
    assert "q" * 200 + "…" in refusal(path), "the id cut, with an ellipsis"


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("a" * 5000 + "," + "b" * 5000 + "\n1,2\n", "columns found: " + "a" * 40 + "…"),
        ("pair_id,label\np1," + "m" * 5000 + "\n", "has label '" + "m" * 40 + "…'"),
        (
            "pair_id,label,audit_id\np1,correct," + "f" * 5000 + "\n",
            "answers given on audit " + "f" * 40 + "…",
        ),
        ("Pair_ID,label,pair_id \np1,correct,p2\n", "the column 'pair_id' appears twice"),
        ("pair_id,label\np1,correct\np2,\x1b[2Jmismatched\n", "\\x1b[2jmismatched"),
    ],
)
def test_each_value_an_error_names_is_cut_and_terminal_safe(tmp_path, text, fragment):
    message = refusal(write(tmp_path / "labels.csv", text))
    assert fragment in message and "\x1b" not in message


def test_only_the_labels_columns_are_kept(tmp_path):
    header = ",".join(["pair_id", "label", *(f"extra{k}" for k in range(2000))])
    row = ",".join(["p1", "correct", *("x" * 2000)])
    table = read_labels(write(tmp_path / "wide.csv", f"{header}\n{row}\n"))
    assert table.to_dict(orient="records") == [{"pair_id": "p1", "label": "correct"}]
