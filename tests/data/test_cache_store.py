"""Issue 66.1: each picture's features stored once per content (the mean alone where the run reads
only it), with least-recently-used eviction, old caches encoded again, and ``mispair cache``."""

from __future__ import annotations

import itertools
import shutil
from collections import OrderedDict
from pathlib import Path

import numpy as np
import pytest

from mispair.cli import main
from mispair.data import picture_features, picture_store
from mispair.data.cache_files import read_arrays
from mispair.data.features import extract_grid_features, file_key
from mispair.data.pairset import PairSet
from mispair.data.picture_features import extract_folder_features
from mispair.data.picture_store import STORE, entries, evict, least_recent
from mispair.errors import DataError
from tests.data.test_cache_trust import TinyGrid, caught, folder, forged

pytest.importorskip("PIL.Image")


def extract(root: Path, names: list[str], cache: Path, encoder: TinyGrid, form: str = "mean"):
    return extract_folder_features(root, names, cache_dir=cache, encoder=encoder, progress=False, form=form)


def test_the_same_picture_in_two_folders_and_twice_in_one_is_encoded_once(tmp_path):
    root, names = folder(tmp_path)
    copy = tmp_path / "copy"
    copy.mkdir()
    for k, name in enumerate(names):  # the same pictures under other names
        shutil.copyfile(root / name, copy / f"other-{k}.png")
    shutil.copyfile(root / names[0], root / "again.png")  # and one twice in the first folder
    encoder = TinyGrid()
    first = extract(root, [*names, "again.png"], tmp_path / "cache", encoder)
    assert encoder.pictures == len(names)  # "again.png" is names[0]'s content
    np.testing.assert_array_equal(first.features[-1], first.features[0])
    second = extract(copy, [f"other-{k}.png" for k in range(len(names))], tmp_path / "cache", encoder)
    assert encoder.pictures == len(names)  # nothing encoded for the second folder
    np.testing.assert_array_equal(second.features, first.features[:-1])
    assert second.digests == first.digests[:-1]
    assert len(list(entries(tmp_path / "cache" / STORE))) == len(names)


def test_chunks_stored_while_the_next_is_encoded_are_every_one_stored_in_order(tmp_path, monkeypatch):
    """The writer thread stores chunk k while chunk k + 1 is encoded: with chunks of 2, every one
    of 7 pictures is stored and returned in its row, as one chunk of all gives them; a failure to
    store reaches the caller as the store's own one-line error."""
    root, names = folder(tmp_path, n=7)
    whole = extract(root, names, tmp_path / "whole", TinyGrid())
    monkeypatch.setattr(picture_features, "CHUNK", 2)
    chunked = extract(root, names, tmp_path / "chunked", TinyGrid())
    assert chunked.features.tobytes() == whole.features.tobytes() and chunked.digests == whole.digests
    assert len(list(entries(tmp_path / "chunked" / STORE))) == 7
    encoder = TinyGrid()
    again = extract(root, names, tmp_path / "chunked", encoder)  # every entry read back
    assert encoder.pictures == 0 and again.features.tobytes() == whole.features.tobytes()

    def full(self, content, entry):
        raise DataError("image feature cache: no space left on the device")

    monkeypatch.setattr(picture_store.PictureStore, "save", full)
    with pytest.raises(DataError, match=r"^image feature cache: no space left on the device$"):
        extract(root, names, tmp_path / "full", TinyGrid())


def test_the_mean_entry_is_what_the_run_read_from_the_grid_bit_for_bit(tmp_path):
    root, names = folder(tmp_path)
    grid = extract(root, names, tmp_path / "cache", TinyGrid(), form="grid")
    mean = extract(root, names, tmp_path / "cache", TinyGrid(), form="mean")
    reference = PairSet(grid.features, [], np.zeros(0, dtype=np.int64)).with_mean_fragment().images
    assert mean.features.dtype == np.float32 and mean.features.shape == (len(names), 1, 4)
    assert mean.features.tobytes() == reference.tobytes()
    assert mean.digests == grid.digests  # the content order does not depend on the form


def test_eviction_keeps_the_most_recently_used_entries_as_a_simulated_lru_cache(tmp_path, monkeypatch):
    """Pictures read in a seeded order through the store (each read records its use on a
    counter clock), then the store cut to a cap: the entries kept are those a brute-force LRU
    cache (an ordered dict, least recent dropped first) keeps under that cap."""
    clock = itertools.count(1)
    monkeypatch.setattr(
        picture_store, "_touch", lambda path: picture_store.os.utime(path, ns=(0, next(clock)))
    )
    root, names = folder(tmp_path, 8)
    cache = tmp_path / "cache"
    for name in names:  # written in the order of the names, each at its own time
        extract(root, [name], cache, TinyGrid())
        [entry] = [s for s in entries(cache / STORE) if s.used > 10**12]  # the one just written
        picture_store.os.utime(entry.path, ns=(0, next(clock)))
    reference: OrderedDict[str, int] = OrderedDict((n, 0) for n in names)
    rng = np.random.default_rng(0)
    for k in rng.integers(0, len(names), 20):
        extract(root, [names[k]], cache, TinyGrid())
        reference.move_to_end(names[k])
    size_of = {s.path: s.size for s in entries(cache / STORE)}
    path_of = {n: _entry_of(root / n, cache) for n in names}
    cap = sum(size_of[path_of[n]] for n in list(reference)[-5:]) + 10  # room for the 5 most recent
    kept = list(reference)
    while sum(size_of[path_of[n]] for n in kept) > cap:
        kept.pop(0)
    evict(cache / STORE, cap)
    assert {s.path for s in entries(cache / STORE)} == {path_of[n] for n in kept}


def _entry_of(picture: Path, cache: Path) -> Path:
    """The mean entry of ``picture`` for :class:`TinyGrid`."""
    from mispair.data.features import PREPROCESS_VERSION
    from mispair.data.picture_features import content_key

    store = picture_store.PictureStore(cache, f"{TinyGrid.cache_name}\n{PREPROCESS_VERSION}", "mean")
    return store.path(content_key(picture))


def test_least_recent_against_every_order_of_removal():
    """Brute force: of all the sets the removal could leave under the limit, the kept one is the
    most recently used suffix that fits (every kept entry used after every removed one)."""
    rng = np.random.default_rng(1)
    for _ in range(50):
        stored = [
            picture_store.Stored(Path(f"e{k}"), int(s), int(u))
            for k, (s, u) in enumerate(zip(rng.integers(1, 100, 6), rng.permutation(6)))
        ]
        limit = int(rng.integers(0, 400))
        gone = {s.path for s in least_recent(stored, limit)}
        kept = [s for s in stored if s.path not in gone]
        assert sum(s.size for s in kept) <= limit
        assert all(k.used > g.used for k in kept for g in stored if g.path in gone)
        fewer = [
            s for s in stored if s.path not in gone or s.used == max(g.used for g in stored if g.path in gone)
        ]
        assert not gone or sum(s.size for s in fewer) > limit  # removing one fewer would not fit


def test_an_old_chunk_cache_is_never_read_and_an_entry_of_another_form_is_refused(tmp_path):
    root, names = folder(tmp_path)
    cache = tmp_path / "cache"
    old = cache / "collections" / "pictures-0123"
    keys = [file_key(root / n) for n in names]
    grid, _ = extract_grid_features(keys, lambda i: None, old, TinyGrid(), progress=False)  # zeros
    assert list(old.glob("*.chunk"))
    encoder = TinyGrid()
    new = extract(root, names, cache, encoder, form="grid")
    assert encoder.pictures == len(names) and not np.array_equal(new.features, grid)  # encoded again
    mean_path = _entry_of(root / names[0], cache)
    mean_path.parent.mkdir(mode=0o700, exist_ok=True)
    forged(mean_path, read_arrays(next(iter(sorted((cache / STORE).rglob("*.grid"))))))
    encoder = TinyGrid()
    again, messages = caught(lambda: extract(root, names, cache, encoder, form="mean"))
    assert any("are not a mean entry's" in m for m in messages), messages
    assert again.features.dtype == np.float32 and again.features.shape[1] == 1


def test_mispair_cache_shows_and_prunes(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MISPAIR_CACHE", str(tmp_path / "cache"))
    root, names = folder(tmp_path)
    extract(root, names, tmp_path / "cache", TinyGrid())
    extract(root, names[:2], tmp_path / "cache", TinyGrid(), form="grid")
    chunks = tmp_path / "cache" / "collections" / "old-1"
    chunks.mkdir(parents=True)
    (chunks / "a.chunk").write_bytes(b"x" * 1000)
    assert main(["cache"]) == 0
    [line] = capsys.readouterr().out.splitlines()
    assert "8 pictures' features" in line and "(6 mean, 2 grid)" in line
    assert "1 old-format chunks, 1000 B" in line and "mispair cache prune" in line
    assert main(["cache", "prune", "--max-size", "0"]) == 0
    done, shown = capsys.readouterr().out.splitlines()
    assert "removed 1 old-format chunks (1000 B) and 8 least recently used" in done
    assert "no pictures' features" in shown and "old-format" not in shown
    assert not (chunks / "a.chunk").exists()
