"""An index whose files were tampered with, even with their digests updated, is a one-line error."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

from tests.cli_errors import one_line_error
from tests.search.conftest import run_cli


@pytest.fixture(scope="module")
def built(test_split_index):
    """The package's index of the test split (tests/search/conftest.py): only copied here."""
    return test_split_index


def _tamper(built, tmp_path, name: str, content: bytes):
    """A copy of the index with ``name`` replaced by ``content`` and the manifest's digest updated."""
    folder = tmp_path / "idx"
    folder.mkdir()
    for path in built.iterdir():
        (folder / path.name).write_bytes(path.read_bytes())
    (folder / name).write_bytes(content)
    if name != "manifest.json":
        manifest = json.loads((folder / "manifest.json").read_text())
        manifest["files"][name] = hashlib.sha256(content).hexdigest()
        manifest.get("sizes", {})[name] = len(content)
        (folder / "manifest.json").write_text(json.dumps(manifest))
    return folder


def _npy(array) -> bytes:
    import io

    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


NESTED = b"[" * 200_000 + b"]" * 200_000


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("collection.json", NESTED, "collection.json: JSON nested deeper than 64"),
        ("collection.json", b'{"image_ids": 5, "captions": []}', "damaged"),
        ("collection.json", b"\xff\xfe not json", "collection.json: not valid JSON"),
        ("manifest.json", NESTED, "manifest.json: JSON nested deeper than 64"),
        ("image_of_caption.npy", None, "image_of_caption.npy: names images outside the index"),
        ("images.faiss", b"\x00" * 64, "images.faiss"),
    ],
    ids=["nested", "wrong types", "not UTF-8", "nested manifest", "out of range", "garbage"],
)
def test_a_tampered_file_is_one_line_naming_it(built, tmp_path, name, content, message):
    if content is None:
        original = np.load(built / name)
        content = _npy(original + 10**6)
    folder = _tamper(built, tmp_path, name, content)
    code, _, err = run_cli("search", folder, "a red apple", "--quiet")
    one_line_error(code, err, message)
