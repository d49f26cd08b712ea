"""``mispair export`` and ``mispair import``: what is refused before any library loads, in one
line, and FiftyOne missing named with the extra that installs it."""

import importlib.util

import pytest

from mispair.cli import main
from tests.exchange.audit_folder import exchange_audit


@pytest.fixture(scope="module")
def audit(tmp_path_factory):
    return exchange_audit(tmp_path_factory.mktemp("cli"), pairs=12, images=6)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["export", "{audit}", "--to", "fiftyone"], "--to fiftyone needs --name NAME"),
        (["export", "{audit}", "--to", "label-studio", "--sample", "3"], "needs --out DIR"),
        (["export", "{tmp}", "--to", "label-studio", "--out", "x"], "not a finished audit folder"),
        (["import", "{audit}", "--from", "fiftyone", "--out", "{tmp}/d.csv"], "--from fiftyone takes --name"),
        (["import", "{audit}", "--from", "label-studio", "--out", "{tmp}/l.csv"], "takes the export"),
        (["import", "{audit}", "--from", "cvat", "--out", "{tmp}/l.csv"], "--from cvat: one of fiftyone"),
        (
            ["import", "{audit}", "--from", "label-studio", "{tmp}/none.json", "--out", "{tmp}/l.csv"],
            "none.json",
        ),
    ],
)
def test_a_mistake_is_one_line(audit, tmp_path, capsys, argv, message):
    code = main([a.format(audit=audit, tmp=tmp_path) for a in argv])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("mispair: error: ") and message in err and err.count("\n") == 1
    assert not (tmp_path / "l.csv").exists() and not (tmp_path / "d.csv").exists()


@pytest.mark.skipif(importlib.util.find_spec("fiftyone") is not None, reason="FiftyOne is installed here")
def test_without_fiftyone_the_extra_is_named(audit, capsys):
    assert main(["export", str(audit), "--to", "fiftyone", "--name", "x"]) == 2
    assert "pip install 'mispair[fiftyone]'" in capsys.readouterr().err
