"""Checkpoints: plain data and tensors only, written atomically, loaded without unpickling objects."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import torch

from mispair.atomic import atomic_write
from mispair.errors import MispairError

FORMAT_VERSION = 1


def save_checkpoint(path: str | Path, payload: dict[str, Any]) -> None:
    """Write ``payload`` (tensors, numbers, strings, lists, dicts) to ``path`` atomically."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, lambda f: torch.save({"format": FORMAT_VERSION, **payload}, f))


def load_checkpoint(path: str | Path) -> dict[str, Any]:
    """Read a checkpoint written by :func:`save_checkpoint` with ``weights_only=True``."""
    path = Path(path)
    if not path.is_file():
        raise MispairError(f"{path}: checkpoint not found")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError:
        raise MispairError(f"{path}: holds pickled Python objects, which mispair never loads "
                           "(a mispair checkpoint holds tensors and plain data only)") from None  # fmt: skip
    except Exception as exc:
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise MispairError(f"{path}: not a readable mispair checkpoint ({first_line})") from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT_VERSION:
        raise MispairError(f"{path}: not a mispair checkpoint (format {FORMAT_VERSION})")
    return payload
