"""Checkpoints: plain data and tensors only, written atomically, loaded without unpickling objects."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import torch

from mispair.atomic import atomic_write
from mispair.errors import MispairError
from mispair.sanity import check_weights

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
    _check_fields(payload, path)
    for k, weights in enumerate(payload["models"]):
        check_weights(weights, f"{path} (model {k + 1})")
    return payload


FIELDS = {"config": dict, "models": list, "feature_dim": int, "vocab_size": int, "vocab": list}
"""What every checkpoint holds to rebuild its models, with the type of each."""


def _check_fields(payload: dict[str, Any], path: Path) -> None:
    """A one-line error naming ``path`` for a missing or mistyped field, or a model that is not a
    mapping of names to tensors (a damaged or hand-made file)."""
    for key, kind in FIELDS.items():
        if not isinstance(payload.get(key), kind) or isinstance(payload.get(key), bool):
            raise MispairError(f"{path}: a damaged checkpoint ({key!r} missing or not a {kind.__name__}); "
                               "use the best.pt or last.pt a mispair run wrote")  # fmt: skip
    models = payload["models"]
    if not models or not all(isinstance(w, dict) and all(isinstance(t, torch.Tensor) for t in w.values())
                             for w in models):  # fmt: skip
        raise MispairError(f"{path}: a damaged checkpoint (its models are not name → tensor mappings)")
