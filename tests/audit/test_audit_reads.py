"""The train → audit hand-off in memory (issue 49): an audit reads each split of its collection
once, opens its run's ``best.pt`` once and takes the held-out scores from the run it just trained
(``pair_scores.npz`` is written for resuming, not read back); the audit's numbers are those of the
run folder read again."""

from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from mispair.audit import audit_collection
from mispair.audit.collection import audit_config
from mispair.audit.pair_table import audited_pairs
from mispair.data.readers import reader_of
from mispair.data.synthetic import write_synthetic_dataset
from mispair.division.scores import DivisionScores
from mispair.engine import trained
from mispair.engine.trained import TrainedRun
from tests.audit.test_audit_run import TINY


@pytest.fixture(scope="module")
def collection(tmp_path_factory):
    return write_synthetic_dataset(
        tmp_path_factory.mktemp("reads") / "toy_precomp", n_train=60, n_dev=20, n_test=20
    )


def test_an_audit_reads_each_split_once_and_opens_best_pt_once(collection, tmp_path, monkeypatch):
    out = tmp_path / "audit"
    reader = type(reader_of(audit_config(collection, out, overrides=TINY, plant=0.3).data))
    splits, checkpoints, scores_read = Counter(), Counter(), []
    read_split, load_checkpoint, read_scores = reader.read_split, trained.load_checkpoint, DivisionScores.read

    def counted_split(self, data, split):
        splits[split] += 1
        return read_split(self, data, split)

    def counted_checkpoint(path):
        checkpoints[Path(path).name] += 1
        return load_checkpoint(path)

    def counted_scores(path, key=None):
        found = read_scores(path, key)
        scores_read.append(found is not None)
        return found

    monkeypatch.setattr(reader, "read_split", counted_split)
    monkeypatch.setattr(trained, "load_checkpoint", counted_checkpoint)
    monkeypatch.setattr(DivisionScores, "read", staticmethod(counted_scores))
    result = audit_collection(collection, out, overrides=TINY, plant=0.3, progress=False, log=lambda _: None)
    assert splits == {"train": 1, "dev": 1, "test": 1}  # before: 7 reads of 3 splits
    assert checkpoints == {"best.pt": 1}  # before: 2
    assert not any(scores_read)  # the cache looked up on a fresh run finds nothing; none read back
    monkeypatch.undo()
    again = audited_pairs(TrainedRun.best_of(audit_config(collection, out, overrides=TINY, plant=0.3)))
    order = result.pairs.sort_values("pair_id")
    by_id = dict(zip(again.pair_id, again.score))
    np.testing.assert_allclose(order["held_out_score"], [by_id[k] for k in order["pair_id"]], atol=1e-6)
