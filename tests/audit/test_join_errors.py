"""Join errors (issue 65): shift runs against a brute-force loop and planted truth on synthetic
embeddings, repeated captions, the repair's decisions, and ``apply --repair`` end to end."""

import itertools
import json

import numpy as np
import pandas as pd
import pytest

from mispair.audit.join_errors import (
    agreement,
    find_shifts,
    maximal_segments,
    picture_looks,
    repeated_captions,
)
from mispair.audit.join_findings import JoinFindings, Shift, read_structure
from mispair.audit.repair import repair_frame, with_repair
from mispair.audit.result import AuditResult
from mispair.cli import main
from mispair.errors import ConfigError, DataError

from .test_apply import TINY, write_feature_folder


def unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def collection(n: int = 600, d: int = 24, noise: float = 0.8, seed: int = 0):
    """Pictures and captions near them (caption ``i`` written for picture ``i``)."""
    rng = np.random.default_rng(seed)
    pictures = unit(rng.normal(size=(n, d)))
    captions = unit(pictures + noise * rng.normal(size=(n, d)) / np.sqrt(d))
    return captions, pictures


def shifted(captions: np.ndarray, runs) -> np.ndarray:
    """Captions with each run ``(start, stop, k)`` planted: row ``i`` carries row ``i + k``'s."""
    out = captions.copy()
    for start, stop, k in runs:
        out[start : stop + 1] = captions[start + k : stop + 1 + k]
    return out


def test_agreement_matches_a_loop_over_rows_and_offsets():
    captions, pictures = collection(n=40, noise=2.0, seed=3)
    looks = np.arange(40) // 2  # pictures alike in pairs: those offsets tell nothing
    rows = np.random.default_rng(1).permutation(40)
    found = agreement(captions, pictures, looks, rows, 3)
    for j, k in enumerate(found.offsets):
        for i in range(40):
            window = [o for o in range(-3, 4) if o and 0 <= i + o < 40]
            if i + k not in range(40):
                assert not found.hit[j, i] and not found.informative[j, i]
                continue
            sim = {o: captions[rows[i]] @ pictures[rows[i + o]] for o in window}
            own = captions[rows[i]] @ pictures[rows[i]]
            informative = looks[rows[i + k]] != looks[rows[i]]
            best = max(sim.values())
            assert found.informative[j, i] == informative
            assert found.hit[j, i] == (informative and sim[k] >= best and sim[k] > own)
            assert found.gain[j, i] == pytest.approx(sim[k] - own)


def test_maximal_segments_are_disjoint_positive_and_hold_the_best_subarray():
    rng = np.random.default_rng(0)
    for _ in range(50):
        scores = rng.normal(size=30) - 0.3
        found = maximal_segments(scores)
        best = max(scores[a:b].sum() for a in range(30) for b in range(a + 1, 31))
        sums = [scores[a:b].sum() for a, b in found]
        assert all(s > 0 for s in sums)
        assert all(b1 <= a2 for (_, b1), (a2, _) in itertools.pairwise(found))
        assert max(sums, default=0.0) == pytest.approx(max(best, 0.0))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_planted_runs_are_found_with_their_rows_and_offsets(seed):
    captions, pictures = collection(seed=seed)
    runs = [(100, 249, 1), (400, 429, -2), (500, 539, 5)]
    scan = find_shifts(shifted(captions, runs), pictures, np.arange(600), [np.arange(600)])
    assert [(r.start, r.stop, r.offset) for r in scan.runs] == runs
    assert all(r.p_value <= 0.01 and r.gain > 0 for r in scan.runs)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_deleted_cell_shifting_half_the_rows_weakly_is_found(seed):
    # A caption cell deleted at row 150 of 300: every row below carries the next row's caption,
    # and only 30% of them agree (a weak model). Measured over every row, the rate at +1 would
    # be doubled by the run itself and hide it (regression: the new-user trial on 300 icons);
    # the rate at -1, which a shift of +1 does not raise, is the null.
    captions, pictures = collection(n=300, noise=4.0, seed=seed)
    planted = shifted(captions, [(150, 298, 1)])
    runs = find_shifts(planted, pictures, np.arange(300), [np.arange(300)]).runs
    assert [r.offset for r in runs] == [1]
    assert runs[0].start <= 152 and runs[0].stop >= 280
    assert find_shifts(captions, pictures, np.arange(300), [np.arange(300)]).runs == []


@pytest.mark.parametrize("seed", range(5))
def test_a_clean_collection_reports_no_run_even_sorted_by_content(seed):
    captions, pictures = collection(seed=seed, noise=1.5)
    order = np.argsort(pictures[:, 0])  # neighbours alike: a collection sorted by content
    assert find_shifts(captions, pictures, np.arange(600), [order]).runs == []


def test_runs_stay_within_files_and_span_rows_that_repeat_a_picture():
    rng = np.random.default_rng(4)
    pictures = unit(rng.normal(size=(150, 24)))
    image = np.repeat(np.arange(150), 4)  # four captions a picture, consecutive rows
    captions = unit(pictures[image] + 0.8 * rng.normal(size=(600, 24)) / np.sqrt(24))
    looks = image
    planted = shifted(captions, [(120, 279, 4)])  # one picture down: a deleted picture's row block
    files = [np.arange(300), np.arange(300, 600)]
    scan = find_shifts(planted, pictures[image], looks, files)
    assert [(r.file, r.start, r.stop, r.offset) for r in scan.runs] == [(0, 120, 279, 4)]
    assert find_shifts(captions, pictures[image], looks, files).runs == []


def test_a_caption_on_many_unlike_pictures_is_one_group_and_on_near_duplicates_none():
    captions = [f"caption {k}" for k in range(60)]
    for k in range(10, 22):
        captions[k] = "  A  Frog. " if k % 2 else "a frog."
    for k in range(30, 45):
        captions[k] = "one picture"
    looks = np.arange(60)
    looks[30:45] = 30  # near-duplicates of one picture
    groups = repeated_captions(captions, looks)
    assert len(groups) == 1 and groups[0].pairs.tolist() == list(range(10, 22))
    assert groups[0].pictures == 12
    assert repeated_captions(captions, looks, min_pictures=13) == []


def test_picture_looks_join_a_picture_with_its_near_duplicate():
    assert picture_looks(np.array([-1, 3, -1, 1])).tolist() == [0, 1, 2, 1]


def a_shift(moves, lost) -> JoinFindings:
    ids = sorted({*[a for a, _ in moves], *lost}, key=int)
    shift = Shift("captions.csv", ids[0], ids[-1], 1, len(ids), 3, 3, 0.2, 1e-6, 0, ids, moves, lost)
    return JoinFindings(shifts=[shift])


def test_the_repair_replaces_each_receiving_pair_and_drops_the_lost_ones_unless_decided():
    pairs = pd.DataFrame({"pair_id": ["0", "1", "2", "3", "4"], "caption": ["a", "b", "=c", "d", "e"]})
    found = a_shift([("1", "2"), ("2", "3")], ["1"])
    frame = repair_frame(found, pairs)
    decided = frame[["pair_id", "decision"]].values.tolist()
    assert decided == [["2", "replace"], ["3", "replace"], ["1", "drop"]]
    mine = pd.DataFrame({"pair_id": ["1", "4"], "decision": ["keep", "drop"], "caption": ["", ""]})
    merged = with_repair(found, pairs, mine, None).set_index("pair_id")
    assert merged.loc["1", "decision"] == "keep" and merged.loc["4", "decision"] == "drop"
    assert merged.loc["3", "caption"] == "'=c"  # spreadsheet-safe: apply reads it back as "=c"


@pytest.fixture(scope="module")
def audited(tmp_path_factory):
    from mispair.audit import audit_collection
    from mispair.data.synthetic import write_synthetic_dataset

    base = tmp_path_factory.mktemp("join")
    precomp = write_synthetic_dataset(base / "precomp", n_train=60, n_dev=20, n_test=20)
    folder = write_feature_folder(base / "collection", precomp)
    result = audit_collection(folder, base / "audit", overrides=TINY, progress=False, log=lambda _: None)
    return folder, base / "audit", result


def test_an_audit_writes_structure_json_and_its_summary_part(audited):
    _, audit, _ = audited
    data = json.loads((audit / "structure.json").read_text())
    assert {"shifts", "repeated_captions", "method", "share_after_repair"} <= set(data)
    summary = json.loads((audit / "summary.json").read_text())
    assert summary["join_errors"]["shifts"] == len(data["shifts"])
    assert "structure.json" in summary["files"] and (audit / "repair.csv").is_file()
    assert read_structure(audit).to_dict() == data


def test_apply_repair_moves_each_caption_back_and_changes_nothing_else(audited, tmp_path):
    folder, audit, _ = audited
    rows = pd.read_csv(folder / "captions.csv", dtype=str)
    moves, lost = [(str(i), str(i + 1)) for i in range(10, 20)], ["10"]
    a_shift(moves, lost).save(audit)
    main(["apply", str(audit), "--repair", "--out", str(tmp_path / "fixed")])
    fixed = pd.read_csv(tmp_path / "fixed" / "captions.csv", dtype=str)
    expected = rows.copy()
    expected.loc[11:20, "caption"] = rows.loc[10:19, "caption"].to_numpy()
    assert fixed.to_dict("records") == expected.drop(index=10).reset_index(drop=True).to_dict("records")
    mine = tmp_path / "mine.csv"
    pd.DataFrame({"pair_id": ["10"], "decision": ["keep"]}).to_csv(mine, index=False)
    kept = AuditResult.load(audit).apply(mine, tmp_path / "kept", repair=True)
    assert kept.removed == 0 and kept.replaced == 10


def test_a_damaged_structure_json_is_one_line(audited, tmp_path):
    _, audit, _ = audited
    (audit / "structure.json").write_text('{"shifts": [{"offset": 1}], "repeated_captions": []}')
    with pytest.raises(DataError, match=r"not a structure\.json the audit writes"):
        AuditResult.load(audit)
    (audit / "structure.json").unlink()
    with pytest.raises(ConfigError, match=r"no structure\.json"):
        AuditResult.load(audit).apply(None, tmp_path / "x", repair=True)


def test_a_missing_row_keeps_its_place_in_the_row_order_and_unknown_gaps_are_not_searched():
    """A refused or unaudited row inside a table numbered by rows keeps its place (-1, its id
    kept); a gap of MAX_OFFSET rows or more, which no offset reaches across, cuts the file; ids
    that do not say a row's place leave the file out of the search."""
    from mispair.audit.join_errors import MAX_OFFSET
    from mispair.audit.join_findings import _table_rows

    index = {str(k): k for k in range(10) if k != 4}  # row 4 refused, row 7 not audited
    del index["7"]
    listed = [str(k) for k in range(10) if k != 4]
    order = _table_rows(listed, ["4"], index, "captions.csv")
    assert [part.tolist() for part in order.files] == [[0, 1, 2, 3, -1, 5, 6, -1, 8, 9]]
    assert order.unread == [{4: "4", 7: "7"}] and not order.unsearched
    far = [0, 1, 2, 2 + MAX_OFFSET, 3 + MAX_OFFSET, 4 + 2 * MAX_OFFSET]  # gaps of MAX_OFFSET - 1, MAX_OFFSET
    ids = [str(r) for r in far]
    cut = _table_rows(ids, [], {p: k for k, p in enumerate(ids)}, "t.csv")
    assert [part.tolist() for part in cut.files] == [[0, 1, 2, *[-1] * (MAX_OFFSET - 1), 3, 4], [5]]
    own = {p: k for k, p in enumerate(["b", "a", "c"])}
    assert _table_rows(["b", "a", "c"], [], own, "t.csv").files[0].tolist() == [0, 1, 2]
    assert _table_rows(["b", "a", "c"], ["z"], own, "t.csv").unsearched == ["t.csv"]
    shuffled = {p: k for k, p in enumerate(["3", "1", "2"])}  # digits, not rising: not row numbers
    assert _table_rows(["3", "1", "2"], ["0"], shuffled, "t.csv").unsearched == ["t.csv"]


def test_a_shards_refused_sample_keeps_its_place_in_the_row_order(tmp_path):
    """A WebDataset shard keeps a refused sample's place (its members' order): the samples before
    and after it are one sequence in the shard's order with a row not read between them; so does
    a sample nobody audited, and every shard is apart."""
    import io
    import tarfile

    from mispair.audit.join_findings import row_order
    from mispair.config import DataConfig
    from mispair.data.readers.webdataset import shard_keys

    def shard(path, keys):
        with tarfile.open(path, "w") as tar:
            for key, suffixes in keys:
                for suffix in suffixes:
                    blob = f"{key}{suffix}".encode()
                    info = tarfile.TarInfo(f"{key}{suffix}")
                    info.size = len(blob)
                    tar.addfile(info, io.BytesIO(blob))

    keys = [(f"{k:03d}", (".txt", ".png")) for k in range(8)]
    keys[3] = ("003", (".txt",))  # no picture: refused by the reader
    shard(tmp_path / "a.tar", keys)
    shard(tmp_path / "b.tar", [(f"{k:03d}", (".png", ".txt")) for k in range(4)])
    assert shard_keys(tmp_path / "a.tar") == [f"{k:03d}" for k in range(8)]
    audited = [f"a/{k:03d}" for k in (7, 6, 5, 4, 2, 1, 0)] + ["b/000", "b/001", "b/003"]  # b/002 not audited
    order = row_order(audited, np.zeros(len(audited)), DataConfig(root=str(tmp_path), source="webdataset"))
    assert [[audited[k] if k >= 0 else None for k in part] for part in order.files] == [
        ["a/000", "a/001", "a/002", None, "a/004", "a/005", "a/006", "a/007"],
        ["b/000", "b/001", None, "b/003"],
    ]
    assert order.unread == [{3: "a/003"}, {2: "b/002"}]
    assert order.names == ["shard a", "shard b"] and not order.unsearched


def test_the_page_names_the_join_errors_with_their_captions_escaped(tmp_path):
    """A caption pasted on 12 unlike pictures: the page lists the finding (its caption escaped, never
    markup) above the review."""
    from mispair.audit import audit_collection
    from mispair.data.synthetic import write_synthetic_dataset

    precomp = write_synthetic_dataset(tmp_path / "precomp", n_train=60, n_dev=20, n_test=20)
    folder = write_feature_folder(tmp_path / "collection", precomp)
    rows = pd.read_csv(folder / "captions.csv", dtype=str)
    pasted = "<b>pasted</b> & caption"
    first_of_each = rows[rows["split"] == "train"].drop_duplicates("image").index[:12]
    rows.loc[first_of_each, "caption"] = pasted
    rows.to_csv(folder / "captions.csv", index=False)
    result = audit_collection(folder, tmp_path / "audit", overrides=TINY, progress=False, log=lambda _: None)
    assert any(pasted in finding for finding in result.summary.join_errors.findings)
    page = (tmp_path / "audit" / "report.html").read_text(encoding="utf-8")
    listed = page.split('<ul id="join-errors">', 1)[1].split("</ul>", 1)[0]
    assert "&lt;b&gt;pasted&lt;/b&gt; &amp; caption" in listed and pasted not in page


@pytest.mark.parametrize("seed", range(6))
def test_five_captions_a_picture_that_agree_together_are_not_a_run(seed):
    """A weak model on a COCO-like file (five alike captions a picture, unrelated to the pictures):
    a picture's captions pick the same neighbour together, so counting rows as independent
    reported false runs (49 over 30 such collections); the test counts pairs of pictures."""
    rng = np.random.default_rng(seed)
    pictures, topics = unit(rng.normal(size=(100, 16))), unit(rng.normal(size=(100, 16)))
    captions = unit(np.repeat(topics, 5, axis=0) + 0.05 * rng.normal(size=(500, 16)))
    looks = np.repeat(np.arange(100), 5)
    assert find_shifts(captions, np.repeat(pictures, 5, axis=0), looks, [np.arange(500)]).runs == []


def test_units_are_a_segments_pairs_of_pictures_counted_by_their_majority():
    from mispair.audit.join_errors import _units

    unit_of = np.array([7, 7, 7, 3, 3, 9])
    hits = np.array([True, True, False, False, True, True])
    assert _units(unit_of, hits) == (3, 2)  # 7: 2 of 3 agree; 3: 1 of 2 (no majority); 9: 1 of 1


def test_the_headline_marks_the_repair_as_not_checked():
    """A repair is the scores' word until a person looks: the headline says so beside repair.csv."""
    from mispair.audit.summary import JoinErrors

    found = JoinErrors(
        shifts=1,
        shifted_pairs=30,
        suspected_in_findings=12,
        share_after_repair=0.1,
        share_after_repair_interval=[0.04, 0.13],
        findings=["x"],
    )
    lines = found.lines(20)
    assert (
        lines[0] == "join error: x" and "8 of the 20 suspected pairs are outside these findings" in lines[1]
    )
    assert "not checked by any answer" in lines[1]
    assert "about 10% (95% interval 4–13%) of the pairs would remain" in lines[1]


def test_the_share_after_repair_counts_the_untouched_pairs_not_the_shifted_pairs_probabilities():
    """The share after repair is Storey's estimate over the pairs no shift touches, counted over
    the pairs that remain: a brute-force count of the untouched pairs scoring like the lowest 30%
    of the decoys. A final run that learned half the shifted pairs (they score as matched) does
    not move it, and the truth (50 mismatched pairs left of 999) lies in its interval."""
    from mispair.audit.join_findings import _explained
    from mispair.audit.pair_table import AuditedPairs

    rng = np.random.default_rng(0)
    n, null = 1000, rng.normal(size=4000)
    score = rng.normal(size=n) + 6.0  # matched: far above the decoys
    outside = np.r_[0:400, 901:1000]
    mismatched = rng.choice(outside, size=50, replace=False)
    score[mismatched] = rng.normal(size=50)  # as a decoy scores
    score[400:900:2] = rng.normal(size=250)  # half the shifted pairs unlearned, half learned
    ids = [str(i) for i in range(n)]
    audited = AuditedPairs(None, np.zeros(n), ids, score, None, None, False, (null,), n)  # type: ignore[arg-type]
    moves = [(str(i), str(i + 1)) for i in range(400, 900)]
    found = a_shift(moves, ["400"])
    _explained(found, audited, np.zeros(n, dtype=bool), 0.3)

    kept = np.r_[0:400, 901:1000]  # no shift's pair and no receiving one (900 receives 899's)
    below = sum(sum(d <= s for d in null) + 1 <= 0.3 * (len(null) + 1) for s in score[kept])
    assert found.share_after_repair == pytest.approx(below / (len(kept) * 0.3) * len(kept) / 999, abs=1e-6)
    low, high = found.share_after_repair_interval
    assert low <= 50 / 999 <= high and high - low < 0.08
    summary = JoinFindings.from_dict(found.to_dict(), "structure.json")
    assert summary.share_after_repair_interval == found.share_after_repair_interval
    for damaged in ([0.1], [0.1, 0.2, 0.3], "ab", [None, 0.2]):
        with pytest.raises(DataError, match=r"^structure\.json: not a structure\.json the audit writes"):
            damaged_file = {**found.to_dict(), "share_after_repair_interval": damaged}
            JoinFindings.from_dict(damaged_file, "structure.json")


@pytest.mark.parametrize(
    ("moves", "lost", "message"),
    [
        ([("10", "15")], [], r"shift 1 moves the caption of pair '10' to pair '15', which is not \+1 rows"),
        ([("10", "11"), ("9999", "12")], [], r"names the pair '9999', which the audit does not hold"),
        ([("10", "11")], ["8888"], r"names the pair '8888'"),
    ],
)
def test_a_forged_structure_json_is_refused_before_anything_moves(audited, tmp_path, moves, lost, message):
    """A well-formed structure.json whose moves are not its offset's rows of the collection (or name
    pairs the audit does not hold) is refused in one line, and nothing is written."""
    _, audit, _ = audited
    a_shift(moves, lost).save(audit)
    with pytest.raises(DataError, match=message):
        AuditResult.load(audit).apply(None, tmp_path / "fixed", repair=True)
    assert not (tmp_path / "fixed").exists()
    assert main(["apply", str(audit), "--repair", "--out", str(tmp_path / "fixed")]) == 2


def marked(marks: str, k: int, max_offset: int = 2):
    """One file's :class:`Agreement` at offset ``k`` drawn from ``marks``, a letter a row: ``H``
    agrees, ``.`` does not (its own picture fits), ``o`` agrees with another offset, ``u`` tells
    nothing (the picture ``k`` rows away is alike); rows whose ``i + k`` is outside the file tell
    nothing at any offset."""
    from mispair.audit.join_errors import Agreement

    m = len(marks)
    offsets = np.array([o for o in range(-max_offset, max_offset + 1) if o], dtype=np.int64)
    inside = np.array([[0 <= i + o < m for i in range(m)] for o in offsets])
    hit, informative = np.zeros_like(inside), inside.copy()
    j, other = int(np.flatnonzero(offsets == k)[0]), int(np.flatnonzero(offsets == -k)[0])
    for i, mark in enumerate(marks):
        hit[j, i] = mark == "H" and inside[j, i]
        hit[other, i] = mark == "o" and inside[other, i]
        informative[j, i] &= mark != "u"
    zeros = np.zeros(inside.shape)
    return Agreement(offsets, hit, informative, zeros, zeros.astype(np.int64), np.ones(m, dtype=bool))


def core(start: int, stop: int, k: int, file: int = 0, p: float = 1e-6):
    from mispair.audit.join_errors import ShiftRun

    return ShiftRun(file, start, stop, k, stop - start + 1, stop - start + 1, 0.3, p)


def grown(marks: str, k: int, cores, wording=None):
    from mispair.audit.join_errors import _extended

    found = marked(marks, k)
    words = np.arange(len(marks)) if wording is None else np.asarray(wording)
    return [(r.start, r.stop, r.offset, r.edge_rows) for r in _extended(cores, [found], [words])]


def test_a_run_grows_a_row_at_a_time_while_the_next_row_agrees_and_stops_at_one_that_does_not():
    # rows:  0123456789012345
    marks = "H.uuHHHHHHHuu.HH"  # the core 5-9: rows 4 and 10 agree; 2-3 and 11-12 tell nothing
    assert grown(marks, 1, [core(5, 9, 1)]) == [(4, 10, 1, 2)]  # not 1 (disagrees), nor 0 beyond it
    assert grown("o" + marks[1:], 1, [core(5, 9, 1)]) == [(4, 10, 1, 2)]
    assert grown(marks, 1, [core(5, 10, 1)]) == [(4, 10, 1, 1)]  # 11-12 spanned only up to a row that fits
    assert grown("H" + "o" + marks[2:], 1, [core(5, 9, 1)]) == [(4, 10, 1, 2)]  # another offset's stops it
    assert grown("HHHHHH", 2, [core(1, 2, 2)]) == [(0, 3, 2, 2)]  # the file's end: no picture 2 below row 4
    assert grown("HHHHHH", -2, [core(3, 4, -2)]) == [(2, 5, -2, 2)]  # and the file's start
    assert grown("HHHHHHHHHH", 1, [core(1, 3, 1), core(6, 7, 1, p=1e-9)]) == [(0, 8, 1, 4)]  # met: one


def test_another_run_stops_a_run_and_runs_of_one_offset_brought_together_are_one():
    from mispair.audit.join_errors import _extended

    runs = _extended([core(1, 3, 1), core(6, 8, -1)], [marked("HHHHHHHHHH", 1)], [np.arange(10)])
    assert [(r.start, r.stop, r.offset) for r in runs] == [(0, 5, 1), (6, 8, -1)]  # up to the other run
    cores = [core(1, 2, 1, p=1e-3), core(5, 7, 1, p=1e-9)]
    joined = _extended(cores, [marked("HHHuuHHHH.", 1)], [np.arange(10)])
    assert [(r.start, r.stop, r.offset, r.edge_rows) for r in joined] == [(0, 8, 1, 4)]  # 3-4 tell nothing
    assert (joined[0].agreeing, joined[0].p_value) == (5, 1e-9)  # the cores' evidence, the stronger p
    assert grown("HHH.uHHHH.", 1, [core(1, 2, 1), core(5, 7, 1)]) == [(0, 2, 1, 1), (5, 8, 1, 1)]


def test_a_run_written_over_the_rows_keeps_the_rows_whose_caption_sits_twice_at_its_far_end():
    """A run of +2 written over rows 3-8 leaves the captions of rows 9 and 10 twice (rows 7-8 and
    9-10): those rows of the run fit though they do not agree; not at the run's other end, not
    the other way, and not a caption on a third row too."""
    words = np.array([0, 1, 2, 5, 6, 7, 8, 9, 10, 9, 10, 11])  # rows 7, 8 carry the captions of 9, 10
    marks = "....HHH....."
    assert grown(marks, 2, [core(4, 6, 2)], words) == [(4, 8, 2, 2)]
    assert grown(marks, 2, [core(4, 6, 2)], np.arange(12)) == [(4, 6, 2, 0)]  # no caption twice: the core
    third = words.copy()
    third[0] = 10  # the caption of row 10 on row 0 too: a repeated caption, not a run's trace
    assert grown(marks, 2, [core(4, 6, 2)], third) == [(4, 7, 2, 1)]
    before = np.array([0, 1, 2, 3, 2, 3, 6, 7, 8, 9, 10, 11])  # rows 4, 5 carry the captions of 2, 3
    assert grown("......HHH...", 2, [core(6, 8, 2)], before) == [(6, 8, 2, 0)]
    assert grown("......HHH...", -2, [core(6, 8, -2)], before) == [(4, 8, -2, 2)]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_run_whose_last_captions_the_model_learned_on_both_pictures_is_found_to_its_end(seed):
    """A run of +2 written over rows 100-149 of 300: rows 148-149 carry the captions of rows 150-151,
    which carry them too, and their own pictures fit them as well (a model trained on both pairs):
    the segment stops before them, the extension takes them (their captions sit twice, 2 rows
    apart), and nothing else."""
    captions, pictures = collection(n=300, seed=seed)
    for i in (148, 149):  # the caption of row i + 2 learned on the picture of row i as well
        captions[i + 2] = unit((captions[i + 2] + 1.5 * pictures[i])[None])[0]
    planted = shifted(captions, [(100, 149, 2)])
    scan = find_shifts(planted, pictures, np.arange(300), [np.arange(300)])
    assert [(r.start, r.stop, r.offset, r.edge_rows) for r in scan.runs] == [(100, 149, 2, 2)]
    cores = find_shifts(planted, pictures, np.arange(300), [np.arange(300)], wording=np.arange(300))
    assert [(r.start, r.stop) for r in cores.runs] == [(100, 147)]
    assert scan.runs[0].p_value == cores.runs[0].p_value  # the evidence is the core's


def test_structure_json_keeps_a_runs_edge_rows_and_reads_an_older_file_without_them(tmp_path):
    ids = [str(i) for i in range(10, 21)]
    moves = [(str(i), str(i + 1)) for i in range(10, 20)]
    shift = Shift("captions.csv", "10", "20", 1, 11, 8, 9, 0.2, 1e-6, 0, ids, moves, ["10"], 2)
    assert "11 rows, 2 of them added at its ends row by row, 8 of 9 in its core agree" in shift.sentence()
    JoinFindings(shifts=[shift]).save(tmp_path)
    assert read_structure(tmp_path).shifts == [shift]
    data = json.loads((tmp_path / "structure.json").read_text())
    del data["shifts"][0]["edge_rows"]  # written before runs grew at their ends
    assert JoinFindings.from_dict(data, "x").shifts[0].edge_rows == 0
    assert "11 rows, 8 of 9 agree" in JoinFindings.from_dict(data, "x").shifts[0].sentence()
    data["shifts"][0]["edge_rows"] = -1
    with pytest.raises(DataError, match="edge_rows -1"):
        JoinFindings.from_dict(data, "x")
