"""FiftyOne round trip (``pytest -m integrations``, run by ``scripts/integrations_env.sh``): an
audit exported as a dataset in FiftyOne's bundled database (no network), tagged and edited
through FiftyOne's Python API as a person would in the App, imported back: the decisions file
says exactly that. The database runs in a folder of the test's own (``FIFTYONE_DATABASE_DIR``
set before FiftyOne is imported)."""

import atexit
import importlib.util
import os
import shutil
import tempfile

import pandas as pd
import pytest

pytestmark = [pytest.mark.integrations, pytest.mark.slow]

if "FIFTYONE_DATABASE_DIR" not in os.environ and importlib.util.find_spec("fiftyone") is not None:
    DATABASE = tempfile.mkdtemp(prefix="mispair-fiftyone-")  # never the user's own ~/.fiftyone database
    os.environ["FIFTYONE_DATABASE_DIR"] = DATABASE
    atexit.register(shutil.rmtree, DATABASE, ignore_errors=True)  # no folder left behind per run
os.environ.setdefault("FIFTYONE_DO_NOT_TRACK", "true")


def _fiftyone():
    if os.environ.get("MISPAIR_REQUIRE_INTEGRATIONS") == "1":
        import fiftyone

        return fiftyone
    return pytest.importorskip("fiftyone")


fo = _fiftyone()

from mispair.audit.apply import read_decisions  # noqa: E402
from mispair.audit.result import AuditResult  # noqa: E402
from mispair.cli import main  # noqa: E402
from mispair.estimate.labels import read_labels  # noqa: E402
from tests.exchange.audit_folder import audit_id, exchange_audit  # noqa: E402


@pytest.fixture(scope="module")
def audit(tmp_path_factory):
    return exchange_audit(tmp_path_factory.mktemp("fo"), pairs=18, images=12)


@pytest.fixture
def name(request):
    name = f"mispair-test-{request.node.name}"[:60]
    yield name
    if fo.dataset_exists(name):
        fo.delete_dataset(name)


def test_the_dataset_holds_the_audit(audit, name, capsys):
    assert main(["export", str(audit), "--to", "fiftyone", "--name", name]) == 0
    assert f"fiftyone app launch {name}" in capsys.readouterr().out
    pairs = pd.read_parquet(audit / "pairs.parquet")
    dataset = fo.load_dataset(name)
    assert dataset.persistent and len(dataset) == pairs["image_id"].nunique()
    for sample in dataset:
        own = pairs[pairs["image_id"] == sample["image_id"]].set_index("pair_id")
        assert sample.filepath == str(audit.parent / "pictures" / sample["image_id"])
        labels = {c.pair_id: c for c in sample["captions"].classifications}
        assert set(labels) == set(own.index) == set(sample["pair_ids"])
        for pair_id, label in labels.items():
            row = own.loc[pair_id]
            assert label.label == row["caption"]
            assert label.mismatch_probability == pytest.approx(row["mismatch_probability"])
            assert label.q_value == pytest.approx(row["q_value"])
            assert label.suspected == bool(row["suspected"])
            assert label.suggested_captions == [row[f"suggested_caption_{k}"] for k in (1, 2, 3)]
            assert label.duplicate_image_of == row["duplicate_image_of"]
        assert sample["max_mismatch_probability"] == pytest.approx(own["mismatch_probability"].max())
    results = dataset.load_brain_results("map")
    points = dict(zip(results.current_sample_ids, results.current_points.tolist()))
    first = pairs.drop_duplicates("image_id").set_index("image_id")
    for sample in dataset:
        expected = first.loc[sample["image_id"], ["map_image_x", "map_image_y"]].tolist()
        assert points[sample.id] == pytest.approx(expected)


def test_tags_and_an_edited_caption_come_back_as_decisions(audit, name, tmp_path, capsys):
    dataset = AuditResult.load(audit).to_fiftyone(name)
    single = [s for s in dataset if len(s["captions"].classifications) == 1]
    several = [s for s in dataset if len(s["captions"].classifications) > 1]
    assert len(single) >= 2 and len(several) >= 2, "the fixture has pictures of one and of several captions"
    # a person in the App: two single-caption pictures tagged, one caption of a picture with
    # several tagged on its own, one caption edited, and a many-caption picture tagged as a whole
    single[0].tags.append("mismatched")
    single[0].save()
    single[1].tags.append("correct")
    single[1].save()
    tagged = several[0]["captions"].classifications[1]
    tagged.tags.append("mismatched")
    edited = several[1]["captions"].classifications[0]
    edited.label = "a blue square on a table, seen from above"
    several[0].save()
    several[1].save()
    several[2].tags.append("correct")
    several[2].save()
    decisions, labels = tmp_path / "decisions.csv", tmp_path / "labels.csv"
    args = ["import", str(audit), "--from", "fiftyone", "--name", name, "--out", str(decisions)]
    assert main([*args, "--labels", str(labels)]) == 0
    captured = capsys.readouterr()
    assert "1 picture(s) with several captions tagged as a whole were not read" in captured.err
    assert several[2]["image_id"] in captured.err
    got = read_decisions(decisions, audit_id(audit))
    expected = {
        single[0]["captions"].classifications[0].pair_id: ("drop", ""),
        single[1]["captions"].classifications[0].pair_id: ("keep", ""),
        tagged.pair_id: ("drop", ""),
        edited.pair_id: ("replace", "a blue square on a table, seen from above"),
    }
    assert {p: (d, c) for p, d, c in got.itertuples(index=False)} == expected
    read = read_labels(labels, audit=audit_id(audit))
    assert dict(zip(read["pair_id"], read["label"])) == {
        p: "correct" if d == "keep" else "mismatched" for p, (d, _) in expected.items()
    }


def test_a_contradiction_and_another_audit_are_refused(audit, name, tmp_path, capsys):
    dataset = AuditResult.load(audit).to_fiftyone(name)
    sample = next(s for s in dataset if len(s["captions"].classifications) == 1)
    sample.tags += ["correct", "mismatched"]
    sample.save()
    out = tmp_path / "decisions.csv"
    assert main(["import", str(audit), "--from", "fiftyone", "--name", name, "--out", str(out)]) == 2
    assert "is judged both correct and mismatched" in capsys.readouterr().err and not out.exists()
    dataset.info["mispair_audit_id"] = "ffffffffffffffff"
    dataset.save()
    assert main(["import", str(audit), "--from", "fiftyone", "--name", name, "--out", str(out)]) == 2
    assert "made from audit ffffffffffffffff" in capsys.readouterr().err
    assert main(["export", str(audit), "--to", "fiftyone", "--name", name]) == 2
    assert "--overwrite" in capsys.readouterr().err
