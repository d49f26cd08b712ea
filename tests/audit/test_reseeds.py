"""``mispair audit --reseeds K``: each pair's count of suspicions over the K audits equals a count
over the reseeded runs' own verdicts (each run's folder judged again, as the audit judges its
own), the spread's numbers against brute force, the audit's own numbers those of its seed, and a
count out of range refused in one line."""

import itertools

import numpy as np
import pandas as pd
import pytest

from mispair.audit import audit_collection
from mispair.audit.reseeds import ReseedVerdict, reseed_spread
from mispair.cli import main
from mispair.data.synthetic import write_synthetic_dataset
from tests.audit.test_audit_run import TINY


def test_the_spread_is_its_counts_and_overlaps_by_brute_force():
    rng = np.random.default_rng(2)
    ids = np.array([f"p{k}" for k in range(60)])
    audits = [ReseedVerdict(ids, rng.random(60) < 0.3, float(rng.random())) for _ in range(4)]
    audits[2] = ReseedVerdict(ids[::-1][:50], rng.random(50) < 0.3, None)  # another order, fewer pairs
    counts, spread = reseed_spread(audits[0], audits[1:])
    sets = [set(a.pair_id[a.suspected]) for a in audits]
    for k, pair in enumerate(ids):
        assert counts[k] == sum(pair in s for s in sets)
    jaccards = [len(a & b) / len(a | b) for a, b in itertools.combinations(sets, 2)]
    assert spread.jaccard_mean == pytest.approx(np.mean(jaccards), abs=1e-4)
    assert spread.jaccard_min == pytest.approx(min(jaccards), abs=1e-4)
    mine = counts[audits[0].suspected]
    assert spread.suspected_in_all == int((mine == 4).sum()) and spread.suspected_in_most == int(
        (mine > 2).sum()
    )
    assert spread.suspects == [len(s) for s in sets] and spread.shares[2] is None
    assert "4 audits with other seeds" in spread.line() and "suspected_in_reseeds" in spread.line()


@pytest.fixture(scope="module")
def thrice(tmp_path_factory):
    """A collection audited once and with ``--reseeds 3``: the second audit's folder and result,
    the first's result."""
    base = tmp_path_factory.mktemp("reseeds")
    collection = write_synthetic_dataset(base / "toy_precomp", n_train=40, n_dev=10, n_test=10)
    once = audit_collection(
        collection, base / "once", overrides=TINY, plant=0.4, progress=False, log=lambda _: None
    )
    out = base / "thrice"
    result = audit_collection(
        collection, out, overrides=TINY, plant=0.4, progress=False, log=lambda _: None, reseeds=3
    )
    return out, result, once


def test_reseeds_count_each_pairs_suspicions_over_the_runs(thrice):
    out, result, once = thrice
    table = result.pairs
    # the audit's own numbers are its seed's
    assert np.array_equal(
        table["mismatch_probability"].to_numpy(), once.pairs["mismatch_probability"].to_numpy()
    )
    # each reseeded run's verdicts, judged again from its folder
    from mispair.audit.pair_table import audited_pairs
    from mispair.audit.run import Verdicts
    from mispair.engine.trained import TrainedRun

    expected = table["suspected"].astype(int).to_numpy().copy()
    by_id = {p: k for k, p in enumerate(table["pair_id"].astype(str))}
    for k in (1, 2):
        run = TrainedRun.open(out / "reseeds" / f"seed-{k}" / "best.pt")
        audited = audited_pairs(run)
        verdicts = Verdicts.of(audited, 0.5, 0.1)
        for pair, suspected in zip(audited.pair_id, verdicts.suspected):
            expected[by_id[str(pair)]] += int(suspected)
    assert table["suspected_in_reseeds"].tolist() == expected.tolist()
    saved = pd.read_csv(out / "pairs.csv")
    assert saved["suspected_in_reseeds"].between(0, 3).all()
    assert result.summary.reseeds is not None and result.summary.reseeds.audits == 3
    assert any(line.startswith("reseeds: 3 audits") for line in result.summary.lines(out))


@pytest.mark.parametrize("count", ["0", "11"])
def test_a_reseed_count_out_of_range_is_one_line(tmp_path, capsys, count):
    collection = write_synthetic_dataset(tmp_path / "toy_precomp", n_train=20, n_dev=5, n_test=5)
    status = main(["audit", str(collection), "--out", str(tmp_path / "a"), "--reseeds", count, *TINY])
    err = capsys.readouterr().err
    assert status == 2 and "--reseeds: the audits in all, 1 to 10" in err and "Traceback" not in err


def test_the_page_states_the_spread(thrice):
    out, result, _ = thrice
    page = (out / "report.html").read_text(encoding="utf-8")
    spread = result.summary.reseeds
    assert f"({spread.audits} audits in all, <code>--reseeds</code>)" in page
    assert (
        f"{spread.suspected_in_all} of these {spread.suspects[0]} suspects are suspected in every one" in page
    )
