"""What the offline sources share: finding the installed data, seeded splits, idempotent output.

Output: each prepared directory holds a ``prepare.json`` manifest with one fingerprint per split
(a hash of its features, captions, ids, metadata and extra arrays). A split whose fingerprint
and files are unchanged is not rewritten; the manifest is written last, so a killed run leaves
the splits it did not finish out of date and the next run rewrites them.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

from mispair.atomic import atomic_text, atomic_write, ensure_directory
from mispair.data.pairset import PairSet
from mispair.data.precomp import write_precomp
from mispair.errors import DataError

MANIFEST = "prepare.json"


def find_source_dir(given: Path | str | None, default: Path, package: str) -> tuple[Path, bool]:
    """The data directory to read and whether it is trusted (the Debian package's own files).

    Raises:
        DataError: the directory is missing; names the Debian package to install.
    """
    if given is None:
        if not default.is_dir():
            raise DataError(f"{default}: not found; install it with 'apt-get install {package}'")
        return default, True
    given = Path(given)
    if not given.is_dir():
        raise DataError(f"{given}: no such directory")
    return given, default.is_dir() and given.resolve() == default.resolve()


def seeded_order(keys: list[str], seed: int) -> np.ndarray:
    """A permutation of ``range(len(keys))`` fixed by ``seed`` and the keys themselves.

    Each key is ranked by a hash of ``(seed, key)``, so adding or removing an item never moves
    the others between splits.
    """
    ranks = [hashlib.sha256(f"{seed}:{key}".encode()).hexdigest() for key in keys]
    return np.array(sorted(range(len(keys)), key=ranks.__getitem__), dtype=np.int64)


def write_splits(
    out: Path,
    splits: dict[str, PairSet],
    params: dict,
    extras: dict[str, dict[str, np.ndarray]] | None = None,
) -> list[str]:
    """Write every split of ``splits`` that is not already up to date; returns those written.

    ``extras[split][name]`` is saved as ``{split}_{name}.npy`` beside the precomputed files.
    Files of splits that a previous run wrote and this one does not are removed.
    """
    ensure_directory(out, "dataset folder")
    extras = extras or {}
    old = _read_manifest(out)
    entries, written = {}, []
    for name, pairs in splits.items():
        split_extras = extras.get(name, {})
        entry = {"fingerprint": _fingerprint(pairs, split_extras, params)}
        entry["files"] = _files(out, name, pairs, split_extras)
        entry.update(n_images=pairs.n_images, n_captions=pairs.n_captions)
        entries[name] = entry
        if old.get("splits", {}).get(name) != entry or not _exist(out, entry["files"]):
            _write_split(out, name, pairs, split_extras)
            written.append(name)
    _remove_stale(out, old, entries)
    manifest = {"params": params, "splits": entries}
    if written or old != manifest:
        atomic_text(out / MANIFEST, json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return written


def _fingerprint(pairs: PairSet, extras: dict[str, np.ndarray], params: dict) -> str:
    digest = hashlib.blake2b(digest_size=16)
    digest.update(json.dumps(params, sort_keys=True).encode())
    images = np.ascontiguousarray(pairs.images)
    digest.update(f"{images.dtype}{images.shape}".encode())
    digest.update(images.data)
    text = [pairs.captions, pairs.image_ids, pairs.image_meta, sorted(extras)]
    digest.update(json.dumps(text, sort_keys=True, ensure_ascii=False).encode())
    for key in sorted(extras):
        digest.update(np.ascontiguousarray(extras[key]).tobytes())
    return digest.hexdigest()


def _files(out: Path, split: str, pairs: PairSet, extras: dict[str, np.ndarray]) -> list[str]:
    files = [f"{split}_ims.npy", f"{split}_caps.txt"]
    files += [f"{split}_ids.txt"] if pairs.image_ids is not None else []
    files += [f"{split}_meta.json"] if pairs.image_meta else []
    return files + [f"{split}_{key}.npy" for key in sorted(extras)]


def _exist(out: Path, files: list[str]) -> bool:
    return all((out / name).is_file() for name in files)


def _write_split(out: Path, split: str, pairs: PairSet, extras: dict[str, np.ndarray]) -> None:
    write_precomp(pairs, out, split)
    for key, array in extras.items():
        atomic_write(out / f"{split}_{key}.npy", lambda f, array=array: np.save(f, array))


def _remove_stale(out: Path, old: dict, entries: dict) -> None:
    keep = {name for entry in entries.values() for name in entry["files"]}
    for entry in old.get("splits", {}).values():
        for name in entry.get("files", []):
            if name not in keep:
                (out / name).unlink(missing_ok=True)


def _read_manifest(out: Path) -> dict:
    try:
        return json.loads((out / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
