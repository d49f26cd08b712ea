"""Join errors across rows the audit did not read (issue 65): a refused sample or an unaudited row
keeps its place in the row arithmetic, tells nothing, and never gives or receives a caption.

The references are brute-force loops over the rows and the planted truth: a run found across the
unread rows covers exactly the planted rows that can tell (the row and its partner read), the
repair's moves applied to the planted captions give each receiving row its own caption, and a
clean collection with unread rows reports nothing."""

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from mispair.audit.join_errors import Agreement, ShiftRun, _extended, agreement, find_shifts
from mispair.audit.join_findings import JoinFindings, RowOrder, Shift, _named, read_structure
from mispair.audit.repair import repaired

from .test_join_errors import collection, shifted


def unread_rows(n: int, share: float, seed: int) -> np.ndarray:
    """``[n]`` bool: the rows the audit did not read (about ``share`` of them, as Tux Paint's
    ``.svg`` stamps in shards: 165 of 950)."""
    return np.random.default_rng(seed).random(n) < share


def audited_file(unread: np.ndarray) -> np.ndarray:
    """The file's row order over the audited pairs: each read row's index among the read rows,
    ``-1`` for a row not read."""
    return np.where(unread, -1, np.cumsum(~unread) - 1)


def test_agreement_with_unread_rows_matches_a_loop():
    """A row not read, or whose picture ``k`` rows away is not read, tells nothing at ``k``; the best
    picture around a caption is looked for among the rows read."""
    captions, pictures = collection(n=40, noise=2.0, seed=5)
    rows = audited_file(unread_rows(40, 0.25, 1))
    looks = np.arange(40)
    found = agreement(captions, pictures, looks, rows, 3)
    assert found.read.tolist() == (rows >= 0).tolist()
    for j, k in enumerate(found.offsets):
        for i in range(40):
            window = [o for o in range(-3, 4) if o and 0 <= i + o < 40 and rows[i + o] >= 0]
            if rows[i] < 0 or k not in window:
                assert not found.hit[j, i] and not found.informative[j, i]
                continue
            sim = {o: captions[rows[i]] @ pictures[rows[i + o]] for o in window}
            own = captions[rows[i]] @ pictures[rows[i]]
            assert found.informative[j, i]
            assert found.hit[j, i] == (sim[k] >= max(sim.values()) and sim[k] > own)
            assert found.gain[j, i] == pytest.approx(sim[k] - own)


def planted_with_unread(seed: int, runs, share: float = 1 / 6, n: int = 600):
    """A collection of ``n`` rows with ``runs`` planted over every row, then the rows not read left
    out of the audit: the audited captions and pictures, the file's row order and the mask."""
    captions, pictures = collection(n=n, seed=seed)
    unread = unread_rows(n, share, seed + 10)
    planted = shifted(captions, runs)
    return planted[~unread], pictures[~unread], audited_file(unread), unread


def tellers(start: int, stop: int, k: int, unread: np.ndarray) -> list[int]:
    """The rows of a planted run that can tell: the row and its picture ``k`` rows away both read."""
    return [i for i in range(start, stop + 1) if not unread[i] and not unread[i + k]]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_run_is_found_across_unread_rows_with_its_offset(seed):
    """One row in six not read, inside and around three planted runs: each run is found whole, from
    its first row that can tell to its last, with its offset, and nothing else; cut at each unread
    row (the rule before), the short stretches find fewer of the planted rows."""
    runs = [(100, 249, 1), (400, 459, -2), (500, 559, 5)]
    captions, pictures, rows, unread = planted_with_unread(seed, runs)
    scan = find_shifts(captions, pictures, np.arange(len(captions)), [rows])
    expected = [(min(t), max(t), k) for (a, b, k), t in zip(runs, [tellers(*r, unread) for r in runs])]
    assert [(r.start, r.stop, r.offset) for r in scan.runs] == expected
    assert all(unread[r.start : r.stop + 1].any() for r in scan.runs)  # across unread rows
    assert all(r.p_value <= 0.01 for r in scan.runs)
    cuts = np.flatnonzero(rows < 0)
    stretches = [part[part >= 0] for part in np.split(rows, cuts) if (part >= 0).any()]
    cut = find_shifts(captions, pictures, np.arange(len(captions)), stretches)
    assert sum(r.rows for r in cut.runs) < sum(r.rows for r in scan.runs) / 2


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("sort", [False, True])
def test_a_clean_collection_with_unread_rows_reports_no_run(seed, sort):
    """Unread rows keep their place and tell nothing: the chance test over the longer sequences
    still reports nothing on a clean collection, in a random order or sorted by content."""
    captions, pictures = collection(seed=seed, noise=1.5)
    order = np.argsort(pictures[:, 0]) if sort else np.arange(600)
    unread = unread_rows(600, 1 / 6, seed)
    rows = np.where(unread, -1, order)
    assert find_shifts(captions, pictures, np.arange(600), [rows]).runs == []


def named(rows: np.ndarray, run: ShiftRun, unread_ids: dict[int, str]) -> Shift:
    """The run as ``structure.json`` names it (pair ids ``p<index>``)."""
    ids = [f"p{k}" for k in range(int(rows.max()) + 1)]
    order = RowOrder([rows], ["shard a"], unread=[unread_ids])
    none = np.zeros(len(ids), dtype=bool)
    return _named(run, order, SimpleNamespace(pair_id=ids), none, none)


@pytest.mark.parametrize("k", [1, -1, 2, -3])
def test_the_repair_never_moves_a_caption_to_or_from_an_unread_row(k):
    """A run of offset ``k`` over rows 5-24 of 30 with rows 8, 9, 15 and 22 not read. Applied to
    the planted captions, every move gives a row its own caption; the rows left without one are
    exactly those whose own caption was on an unread row or outside the run (``lost``: dropped);
    no move or drop names an unread row, which ``unread`` lists."""
    n, start, stop = 30, 5, 24
    unread = np.zeros(n, dtype=bool)
    unread[[8, 9, 15, 22]] = True
    rows = audited_file(unread)
    run = ShiftRun(0, start, stop, k, 10, 12, 0.3, 1e-6)
    shift = named(rows, run, {int(i): f"refused/{i}" for i in np.flatnonzero(unread)})
    row_of = {f"p{rows[i]}": i for i in range(n) if rows[i] >= 0}
    carried = {i: i + k if start <= i <= stop else i for i in range(n)}  # the caption's own row
    after = dict(carried)
    for source, target in shift.moves:
        assert row_of[target] - row_of[source] == k
        after[row_of[target]] = carried[row_of[source]]
    moved = {row_of[t] for _, t in shift.moves}
    assert all(after[i] == i for i in moved)  # each moved caption on its own picture
    inside = [i for i in range(start, stop + 1) if not unread[i]]
    stranded = [i for i in inside if unread[i - k] or not start <= i - k <= stop]
    assert sorted(row_of[p] for p in shift.lost) == stranded
    assert set(inside) == (moved & set(inside)) | set(stranded) and not moved & set(stranded)
    assert shift.unread == [f"refused/{i}" for i in (8, 9, 15, 22)]
    assert shift.pairs == len(shift.pair_ids) == len(inside)
    touched = {*(p for m in shift.moves for p in m), *shift.lost}
    assert touched <= set(row_of) and not any(p.startswith("refused") for p in touched)
    pairs = pd.DataFrame({"pair_id": list(row_of), "caption": [f"c{carried[i]}" for i in row_of.values()]})
    decided = repaired(JoinFindings(shifts=[shift]), pairs)
    assert {p for p, r in decided.items() if r.decision == "drop"} == set(shift.lost)
    assert all(r.caption == f"c{row_of[p]}" for p, r in decided.items() if r.decision == "replace")


def test_a_run_grows_across_an_unread_row_and_counts_only_the_rows_read():
    """The core 4-7 of offset +1; row 3 not read, row 2 agrees, row 1 does not: the run grows to
    row 2 across row 3 and counts one edge row (row 2), not two."""
    m, offsets = 10, np.array([-1, 1])
    read = np.ones(m, dtype=bool)
    read[3] = False
    inside = np.array([[0 <= i + o < m and read[i] and read[i + o] for i in range(m)] for o in offsets])
    hit = np.zeros_like(inside)
    hit[1, [2, 4, 5, 6, 7]] = True
    zeros = np.zeros(inside.shape)
    found = Agreement(offsets, hit, inside, zeros, zeros.astype(np.int64), read)
    words = np.arange(m)
    grown = _extended([ShiftRun(0, 4, 7, 1, 4, 4, 0.3, 1e-6)], [found], [words])
    assert [(r.start, r.stop, r.edge_rows) for r in grown] == [(2, 7, 1)]


def test_structure_json_keeps_a_runs_unread_rows_and_reads_an_older_file_without_them(tmp_path):
    ids = [str(i) for i in (10, 11, 13, 14)]  # row 12 not read: 11 keeps its caption, 13 loses its own
    moves = [("10", "11"), ("13", "14")]
    shift = Shift("shard a", "10", "14", 1, 4, 3, 3, 0.2, 1e-6, 0, ids, moves, ["10", "13"], 0, ["a/12"])
    assert "(4 rows, and 1 not read between them, 3 of 3 agree" in shift.sentence()
    JoinFindings(shifts=[shift]).save(tmp_path)
    assert read_structure(tmp_path).shifts == [shift]
    data = JoinFindings(shifts=[shift]).to_dict()
    del data["shifts"][0]["unread"]  # written before runs crossed unread rows
    assert JoinFindings.from_dict(data, "x").shifts[0].unread == []
