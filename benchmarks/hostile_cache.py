"""The cases of ``hostile_inputs.py`` for mispair's cache folder (issue 58, class 1): whoever can
write the cache decides the audit unless every entry is checked. Each case starts from the cache a
clean audit of the same collection filled (a copy), poisons it, and audits again: the audit must
say what the clean audit said (the poisoned entry computed again, one warning line), or refuse a
cache that is not the user's alone. docs/reliability.md ("Issue 58: the cache") states the
promises."""

from __future__ import annotations

import csv
import io
import os
import pickle
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import numpy as np

import hostile_fixtures as fx

KIND = "58.1 cache"
ENTRIES = "features-v2/*/*"
"""The pictures' feature entries (either form) in a cache folder
(:data:`mispair.data.picture_store.STORE`)."""


def cases(tmp: Path, f, Case, mispair, small: list[str], audit: list[str]) -> list:
    """Every case of class 58.1 (``f``: the shared fixtures, unused here)."""
    base = _Base(tmp / "c58", mispair, audit)
    return [*_feature_cases(base, Case), *_folder_cases(base, Case), *_text_cases(base, Case)]


class _Base:
    """A folder collection, the clean audits of it (image features; MiniLM text states) and their
    caches, made once, on the first case's setup."""

    def __init__(self, root: Path, mispair, audit: list[str]) -> None:
        self.root, self.mispair = root, mispair
        self.audit = [*audit, "division.rounds=1"]  # (two folds hold no nested rounds)
        self.collection = root / "collection"
        self.minilm = [o for o in self.audit if not o.startswith("model.text_encoder")] + [
            "model.text_encoder=minilm",
            "model.text_precision=float32",  # (no line saying bfloat16 was chosen)
        ]
        self._made = False

    def argv(self, name: str, *, text: bool = False, collection: Path | None = None) -> list[str]:
        overrides = self.minilm if text else self.audit
        cache = self.root / name / "cache"
        out = self.root / name / "out"
        return self.mispair(
            "audit", collection or self.collection, "--out", out, f"data.cache_dir={cache}", *overrides
        )

    def made(self) -> None:
        if self._made:
            return
        self.collection.mkdir(parents=True, exist_ok=True)
        with (self.collection / "captions.csv").open("w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle)
            writer.writerow(["image", "caption"])
            for name, blob, caption in fx.colour_pictures():
                (self.collection / name).write_bytes(blob)
                writer.writerow([name, caption])
        for name, text in (("clean", False), ("clean-text", True)):
            done = subprocess.run(self.argv(name, text=text), capture_output=True, text=True)
            if done.returncode != 0:
                raise RuntimeError(f"the clean audit failed: {done.stderr[-2000:]}")
        self._made = True

    def poisoned(
        self, name: str, poison: Callable[[Path], object], *, text: bool = False
    ) -> Callable[[], None]:
        """The setup of case ``name``: the clean cache copied to ``name/cache``, then ``poison(its
        cache folder, or of text shards)``."""

        def setup() -> None:
            self.made()
            clean = self.root / ("clean-text" if text else "clean") / "cache"
            shutil.rmtree(self.root / name, ignore_errors=True)
            shutil.copytree(clean, self.root / name / "cache", symlinks=True)
            poison(self.shards(name) if text else self.root / name / "cache")

        return setup

    def shards(self, name: str) -> Path:
        [folder] = (self.root / name / "cache" / "text").iterdir()
        return folder

    def same_as_clean(self, name: str, *, text: bool = False) -> Callable[[], bool]:
        """The audit of ``name`` wrote the pairs the clean audit wrote (every column but the
        audit's id)."""

        def check() -> bool:
            clean = _pairs(self.root / ("clean-text" if text else "clean") / "out" / "pairs.csv")
            got = _pairs(self.root / name / "out" / "pairs.csv")
            if (self.root / "pwned").exists() or clean is None or got is None:
                return False
            return clean == got if not text else _close(clean, got)

        return check


def _pairs(path: Path) -> list[dict[str, str]] | None:
    if not path.is_file():
        return None
    with path.open(encoding="utf-8", newline="") as handle:
        return [{k: v for k, v in row.items() if "audit" not in k} for row in csv.DictReader(handle)]


def _close(clean: list[dict[str, str]], got: list[dict[str, str]]) -> bool:
    """The same rows, numbers equal within 1e-4: MiniLM's states computed in another process
    differ from those a run computed before by float rounding (1e-6), with or without a cache."""

    def same(a: str, b: str) -> bool:
        try:
            return abs(float(a) - float(b)) <= 1e-4
        except ValueError:
            return a == b

    return len(clean) == len(got) and all(
        row.keys() == other.keys() and all(same(row[k], other[k]) for k in row)
        for row, other in zip(clean, got)
    )


def _first(folder: Path, pattern: str) -> Path:
    return sorted(folder.glob(pattern))[0]


def _rewritten(path: Path, change: Callable[[dict], dict]) -> None:
    """The entry's header kept (its digest), its arrays replaced by ``change(arrays)``: an edit
    made without the user's key."""
    from mispair.data import cache_files

    arrays = cache_files.read_arrays(path)
    buffer = io.BytesIO()
    np.savez(buffer, **change(arrays))
    head = path.read_bytes()[: len(cache_files.MAGIC) + cache_files.DIGEST_BYTES]
    path.write_bytes(head + buffer.getvalue())


def _forged(path: Path, change: Callable[[dict], dict]) -> None:
    """The entry rewritten with a valid digest (as this user's mispair would write it), its
    arrays ``change(arrays)``: NaN reaches the finiteness check."""
    from mispair.data import cache_files

    buffer = io.BytesIO()
    np.savez(buffer, **change(cache_files.read_arrays(path)))
    payload = buffer.getvalue()
    path.write_bytes(cache_files.MAGIC + cache_files._digest(path.name, payload) + payload)


class _Pickle:
    def __init__(self, target: Path) -> None:
        self.target = target

    def __reduce__(self):
        return (Path.write_text, (self.target, "pwned"))


def _feature_cases(base: _Base, Case) -> list:
    def permuted(folder: Path) -> None:
        _rewritten(_first(folder, ENTRIES), lambda a: {**a, "features": a["features"][:, ::-1].copy()})

    def pickled(folder: Path) -> None:
        chunk = _first(folder, ENTRIES)
        buffer = io.BytesIO()
        np.savez(buffer, features=np.array([_Pickle(base.root / "pwned")], dtype=object))
        chunk.write_bytes(b"mispair-cache-1\n" + bytes(32) + buffer.getvalue())
        chunk.with_name("x.chunk").write_bytes(pickle.dumps(_Pickle(base.root / "pwned")))

    def short(folder: Path) -> None:
        chunk = _first(folder, ENTRIES)
        chunk.write_bytes(chunk.read_bytes()[:1000])

    def replaced(how: Callable[[Path], object]) -> Callable[[Path], None]:
        def poison(folder: Path) -> None:
            chunk = _first(folder, ENTRIES)
            chunk.unlink()
            how(chunk)

        return poison

    def nan(folder: Path) -> None:
        def change(arrays: dict) -> dict:
            features = arrays["features"].copy()
            features[0, 3] = np.nan
            return {**arrays, "features": features}

        _forged(_first(folder, ENTRIES), change)

    rows = [
        (
            "values permuted within a picture's stored features",
            "rows",
            permuted,
            "does not match its digest",
        ),
        (
            "a feature entry of random bytes",
            "garbage",
            lambda d: _first(d, ENTRIES).write_bytes(os.urandom(5000)),
            "not an entry",
        ),
        ("a feature entry holding a pickle payload", "pickle", pickled, "does not match its digest"),
        ("a feature entry cut short", "short", short, "does not match its digest"),
        ("a FIFO in place of a feature entry", "fifo", replaced(os.mkfifo), "not a regular file"),
        (
            "a link to /dev/zero in place of a feature entry",
            "zero",
            replaced(lambda c: c.symlink_to("/dev/zero")),
            "symbolic link",
        ),
        ("NaN in a feature entry whose digest is valid", "nan", nan, "NaN or infinite"),
    ]
    return [
        Case(
            KIND,
            title,
            base.argv(name),
            "warn",
            fragment=fragment,
            setup=base.poisoned(name, poison),
            check=base.same_as_clean(name),
        )
        for title, name, poison, fragment in rows
    ]


def _folder_cases(base: _Base, Case) -> list:
    def rewritten_picture() -> None:
        """The collection copied, one picture rewritten with another's bytes at its own size and
        time; the cache filled by a clean audit of the copy."""
        base.made()
        copy = base.root / "same-stat" / "collection"
        shutil.rmtree(base.root / "same-stat", ignore_errors=True)
        shutil.copytree(base.collection, copy)
        for picture in copy.glob("*.png"):  # all one size (decoders stop at the PNG's end)
            picture.write_bytes(picture.read_bytes().ljust(4096, b"\0"))
        subprocess.run(base.argv("same-stat", collection=copy), capture_output=True, check=True)
        first, other = copy / "p00.png", copy / "p05.png"
        before = first.stat()
        first.write_bytes(other.read_bytes())
        os.utime(first, ns=(before.st_atime_ns, before.st_mtime_ns))

    def recomputed() -> bool:
        """The rewritten picture is read by its content now: p05's features (stored, not encoded)."""
        from mispair.data.picture_features import extract_folder_features

        copy, cache = base.root / "same-stat" / "collection", base.root / "same-stat" / "cache"
        found = extract_folder_features(
            copy, ["p00.png", "p05.png"], cache_dir=cache, progress=False, form="mean"
        )
        return bool((found.features[0] == found.features[1]).all())

    def open_to_all(folder: Path) -> None:
        folder.chmod(0o777)

    def shipped() -> None:
        base.made()
        copy = base.root / "shipped" / "collection"
        shutil.rmtree(base.root / "shipped", ignore_errors=True)
        shutil.copytree(base.collection, copy)
        shutil.copytree(base.root / "clean" / "cache", copy / ".mispair_cache")
        _rewritten(_first(copy / ".mispair_cache", ENTRIES), lambda a: {**a, "features": a["features"] * 0})

    cases = [
        Case(
            KIND,
            "a picture rewritten with the same name, size and modification time",
            base.argv("same-stat", collection=base.root / "same-stat" / "collection"),
            "ok",
            setup=rewritten_picture,
            check=recomputed,
        ),
        Case(
            KIND,
            "a cache folder every user may write",
            base.argv("open"),
            "error",
            fragment="may be written by other users (mode 0777)",
            setup=base.poisoned("open", open_to_all),
        ),
        Case(
            KIND,
            "a .mispair_cache shipped inside the collection (its features zeroed)",
            base.mispair(
                "audit",
                base.root / "shipped" / "collection",
                "--out",
                base.root / "shipped" / "out",
                *base.audit,
            ),
            "warn",
            fragment="a cache folder inside the collection, ignored",
            setup=shipped,
            check=lambda: (
                _pairs(base.root / "shipped" / "out" / "pairs.csv")
                == _pairs(base.root / "clean" / "out" / "pairs.csv")
            ),
        ),
    ]
    if os.geteuid() == 0:  # only root can give a folder to another user
        cases.append(
            Case(
                KIND,
                "a cache folder another user owns",
                base.argv("foreign"),
                "error",
                fragment="belongs to another user (uid 65534)",
                setup=base.poisoned("foreign", lambda folder: os.chown(folder, 65534, 65534)),
            )
        )
    return cases


def _text_cases(base: _Base, Case) -> list:
    def sorted_first(folder: Path) -> None:
        shard = _first(folder, "*.states")
        planted = shard.with_name("0" + shard.name)
        shutil.copyfile(shard, planted)
        _rewritten_from(planted, shard, lambda a: {**a, "states": a["states"][::-1].copy()})

    def truncated(folder: Path) -> None:
        shard = _first(folder, "*.states")
        shard.write_bytes(shard.read_bytes()[: shard.stat().st_size // 2])

    rows = [
        (
            "a second text shard with the same keys, sorted first",
            "second",
            sorted_first,
            "does not match its digest",
        ),
        ("a text shard cut in half", "truncated", truncated, "does not match its digest"),
    ]
    return [
        Case(
            KIND,
            title,
            base.argv(name, text=True),
            "warn",
            fragment=fragment,
            setup=base.poisoned(name, poison, text=True),
            check=base.same_as_clean(name, text=True),
        )
        for title, name, poison, fragment in rows
    ]


def _rewritten_from(path: Path, source: Path, change: Callable[[dict], dict]) -> None:
    """``path`` made ``source``'s header with ``change(source's arrays)``."""
    from mispair.data import cache_files

    buffer = io.BytesIO()
    np.savez(buffer, **change(cache_files.read_arrays(source)))
    path.write_bytes(
        source.read_bytes()[: len(cache_files.MAGIC) + cache_files.DIGEST_BYTES] + buffer.getvalue()
    )
