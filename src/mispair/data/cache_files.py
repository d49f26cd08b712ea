"""The one reader and writer of every file in mispair's cache: each entry checked before use.

What the cache holds decides what an audit says (a feature chunk's rows, a caption's states), so
an entry is read as untrusted input and used only when it is what it claims to be:

- a regular file (a link, a FIFO or a device is never opened through), of at most
  ``MAX_ARRAY_BYTES`` (:mod:`mispair.limits`), its size known before a byte is read;
- written by this user's mispair under this name: the file is ``MAGIC``, a keyed digest and the
  arrays (``.npz`` bytes); the digest is HMAC-SHA-256 of the entry's name and the arrays, keyed by
  a secret kept in the cache root (:func:`cache_key`, ``0600``), so a file copied in, edited,
  renamed, cut short or planted fails the check, and the name already says what the entry was
  computed from (a feature chunk: its pictures' paths, sizes, times and content digests);
- arrays read without pickles, every float finite, and the counts the caller expects
  (:class:`BadEntry` from ``check``).

An entry that fails is set aside (deleted from the user's own cache folder) and computed again;
:class:`Rejected` gathers them so that the caller says so in one warning line.

>>> import numpy as np, tempfile
>>> folder = Path(tempfile.mkdtemp())
>>> write_arrays(folder / "one.entry", {"x": np.arange(3.0)})
>>> read_arrays(folder / "one.entry")["x"].tolist()
[0.0, 1.0, 2.0]
"""

from __future__ import annotations

import hashlib
import hmac
import io
import os
import secrets
import stat
import warnings
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from mispair.atomic import atomic_write
from mispair.data.cache_folder import cache_root, private_folder
from mispair.errors import DataError
from mispair.limits import limit

MAGIC = b"mispair-cache-1\n"
"""The first bytes of every cache entry (a file an older mispair wrote lacks them)."""
DIGEST_BYTES = 32
KEY_FILE = "key"
"""The file in the cache root holding this user's secret (:func:`cache_key`)."""


class BadEntry(Exception):
    """A cache entry that is not what it claims to be; the message says why."""


def write_arrays(path: str | Path, arrays: dict[str, np.ndarray], *, compress: bool = False) -> None:
    """Write ``arrays`` as the cache entry ``path`` (atomically; see the module's docstring),
    deflated when ``compress`` (a picture's mean feature: half its zeros, 5.1 → 2.4 KB; inflated
    only once the entry's digest passed, so only this user's mispair decides what is inflated).

    Raises:
        DataError: an array holds NaN or infinity (nothing is written), or the file cannot be
            written.
    """
    path = Path(path)
    for name, array in arrays.items():
        if _not_finite(array):
            raise DataError(f"{path}: {name} holds NaN or infinite values; not cached")
    buffer = io.BytesIO()
    (np.savez_compressed if compress else np.savez)(buffer, allow_pickle=False, **arrays)
    payload = buffer.getvalue()
    atomic_write(path, lambda f: f.write(MAGIC + _digest(path.name, payload) + payload))


def read_arrays(
    path: str | Path, check: Callable[[dict[str, np.ndarray]], None] | None = None
) -> dict[str, np.ndarray]:
    """The arrays of the cache entry ``path`` once it passed every check of the module's
    docstring and ``check`` (which raises :class:`BadEntry` for an entry of the wrong counts).

    Raises:
        FileNotFoundError: there is no entry ``path``.
        BadEntry: there is one, and it fails a check (the message says which).
    """
    path = Path(path)
    if not os.path.lexists(path):
        raise FileNotFoundError(path)
    try:
        data = _read_regular(path)
    except DataError as exc:
        raise BadEntry(_reason(exc, path)) from None
    view = memoryview(data)  # (slices of it are not copies: a chunk is read once, then hashed)
    head, mac, payload = (
        bytes(view[: len(MAGIC)]),
        bytes(view[len(MAGIC) : len(MAGIC) + DIGEST_BYTES]),
        view[len(MAGIC) + DIGEST_BYTES :],
    )
    if head != MAGIC:
        raise BadEntry("not an entry this mispair wrote")
    if not hmac.compare_digest(mac, _digest(path.name, payload)):
        raise BadEntry("its content does not match its digest (changed, cut short, or written elsewhere)")
    arrays = _unpack(payload)
    for name, array in arrays.items():
        if _not_finite(array):
            raise BadEntry(f"{name} holds NaN or infinite values")
    if check is not None:
        check(arrays)
    return arrays


def _read_regular(path: Path) -> bytearray:
    """The bytes of ``path``, a regular file (not a link) of at most ``MAX_ARRAY_BYTES``, read
    into one buffer of its size (a file that changes size while read is refused)."""
    from mispair.safe_io import open_input

    fd = open_input(path, limit("MAX_ARRAY_BYTES"), "a cache entry", links=False)
    try:
        data = bytearray(os.fstat(fd).st_size)
        view, done = memoryview(data), 0
        while done < len(data) and (count := os.readv(fd, [view[done:]])):
            done += count
        if done != len(data) or os.read(fd, 1):
            raise DataError(f"{path}: changed size while read")
        return data
    except OSError as exc:
        raise DataError(f"{path}: cannot read ({exc.strerror or exc})") from None
    finally:
        os.close(fd)


def _reason(exc: DataError, path: Path) -> str:
    text = str(exc)
    return text[len(str(path)) + 2 :] if text.startswith(f"{path}: ") else text


def _unpack(payload: bytes | memoryview) -> dict[str, np.ndarray]:
    try:
        with np.load(io.BytesIO(payload), allow_pickle=False) as npz:
            return {name: npz[name] for name in npz.files}
    except (ValueError, OSError, EOFError, KeyError, zipfile.BadZipFile) as exc:
        raise BadEntry(f"arrays not readable ({type(exc).__name__})") from None


def _not_finite(array: np.ndarray) -> bool:
    """``array`` holds NaN or infinity (float16 by its exponent bits: 4× ``np.isfinite``'s speed)."""
    if array.dtype == np.float16:
        exponent = np.uint16(0x7C00)  # all ones: infinity or NaN
        return bool(((array.view(np.uint16) & exponent) == exponent).any())
    return array.dtype.kind in "fc" and not bool(np.isfinite(array).all())


def _digest(name: str, payload: bytes | memoryview) -> bytes:
    """HMAC-SHA-256 of the entry's name and its arrays under :func:`cache_key` (SHA-256: twice
    BLAKE2b's speed where the CPU computes it, as most do: 630 against 290 MB/s here)."""
    digest = hmac.new(cache_key(), digestmod=hashlib.sha256)
    digest.update(name.encode("utf-8", "surrogateescape") + b"\0")
    digest.update(payload)
    return digest.digest()


_KEYS: dict[str, bytes] = {}


def cache_key() -> bytes:
    """This user's secret for the digests of cache entries: 32 random bytes in ``key`` of the
    cache root (``0600``), made on first use. Where the root cannot hold it, a key of this process
    alone (its entries are then computed again by the next run, as one warning says)."""
    root = cache_root()
    if str(root) not in _KEYS:
        try:
            _KEYS[str(root)] = _stored_key(private_folder(root, "cache folder") / KEY_FILE)
        except DataError as exc:
            warnings.warn(f"{exc}; cache entries written now are trusted by this process only", stacklevel=2)
            _KEYS[str(root)] = secrets.token_bytes(DIGEST_BYTES)
    return _KEYS[str(root)]


def _stored_key(path: Path) -> bytes:
    """The key in ``path``, made there first when missing (a file of the wrong size, or one
    another user could read or write, is replaced)."""
    for _ in range(3):
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except FileNotFoundError:
            _make_key(path)
            continue
        except OSError as exc:
            raise DataError(f"{path}: cannot read the cache's key ({exc.strerror or exc})") from None
        try:
            info = os.fstat(fd)
            key = os.read(fd, DIGEST_BYTES + 1)
        finally:
            os.close(fd)
        private = stat.S_ISREG(info.st_mode) and info.st_uid == os.geteuid() and not info.st_mode & 0o077
        if private and len(key) == DIGEST_BYTES:
            return key
        os.unlink(path)  # not ours alone: a new key (every entry is computed again)
    raise DataError(f"{path}: the cache's key keeps changing; remove the file")


def _make_key(path: Path) -> None:
    """Write a new key to ``path`` whole, unless another process made one meanwhile."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        os.write(fd, secrets.token_bytes(DIGEST_BYTES))
    finally:
        os.close(fd)
    try:
        os.link(tmp, path)  # fails when another process linked its key first: that one is read
    except FileExistsError:
        pass
    finally:
        os.unlink(tmp)


@dataclass
class Rejected:
    """The entries of one cache folder that failed their check (path, reason), to be said in one
    warning line (:meth:`warn`) once they are computed again."""

    what: str
    entries: list[tuple[Path, str]] = field(default_factory=list)

    def load(
        self,
        path: Path,
        check: Callable[[dict[str, np.ndarray]], None] | None = None,
        *,
        discard: bool = True,
    ) -> dict[str, np.ndarray] | None:
        """:func:`read_arrays` of ``path``; None when there is no entry, or when it fails its
        check (then noted here, and removed when ``discard``: a folder of the user's own cache)."""
        try:
            return read_arrays(path, check)
        except FileNotFoundError:
            return None
        except BadEntry as exc:
            self.entries.append((path, str(exc)))
            if discard:
                discard_entry(path)
            return None

    def warn(self) -> None:
        """One warning line naming the first rejected entry and how many there were (none: no
        line)."""
        if self.entries:
            path, reason = self.entries[0]
            more = f" (and {len(self.entries) - 1} more)" if len(self.entries) > 1 else ""
            warnings.warn(
                f"{path}: an entry of the {self.what} failed its check ({reason}){more}; computed again",
                stacklevel=2,
            )
            self.entries.clear()


def discard_entry(path: Path) -> None:
    """Remove the name ``path`` (a file, a link or a FIFO: never what a link points to); a folder
    or a name that cannot be removed stays (the entry is then computed again on every run)."""
    try:
        if not stat.S_ISDIR(os.lstat(path).st_mode):
            os.unlink(path)
    except OSError:
        pass
