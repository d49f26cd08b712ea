"""COCO captions JSON (``images`` with ``id`` and ``file_name``, ``annotations`` with
``image_id`` and ``caption``) and the Karpathy split JSON (``images`` with ``filepath``,
``filename``, ``split`` and ``sentences``; ``val`` is dev, ``restval`` train).

Image paths are relative to the JSON's folder, or to ``data.image_root``. Pair ids are the
annotation ids (COCO) or ``sentid`` (Karpathy).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mispair.data.readers.base import READERS
from mispair.data.readers.table import CollectionTable, TableReader, checked_table
from mispair.errors import DataError
from mispair.limits import limit, raise_hint
from mispair.safe_io import read_input
from mispair.safe_parse import check_json_elements

if TYPE_CHECKING:
    import pandas as pd

    from mispair.config import DataConfig

"""A captions JSON larger than this is refused before it is read."""


@READERS.register("coco")
class CocoReader(TableReader):
    name = "coco"
    priority = 35
    describes = "COCO captions JSON or the Karpathy split JSON (dataset_coco.json, dataset_flickr30k.json)"

    def detect(self, path: Path) -> bool:
        if not (path.is_file() and path.suffix.lower() == ".json"):
            return False
        with open(path, "rb") as f:
            head = f.read(1 << 16)
        return b'"images"' in head

    def table(self, data: DataConfig) -> CollectionTable:
        path = Path(data.root)
        document = load_document(path)
        frame = _karpathy(document) if _is_karpathy(document) else _coco(document, path)
        return checked_table(frame, Path(data.image_root or path.parent), str(path))


def load_document(path: Path) -> dict[str, Any]:
    """The captions JSON at ``path`` read as every reader and writer of it must: bounded in bytes
    (``MAX_COCO_JSON_BYTES``) and in values counted on the text before it is built
    (``MAX_JSON_ELEMENTS``), a regular file, UTF-8, an object with an ``images`` list."""
    size = path.stat().st_size
    bound = limit("MAX_COCO_JSON_BYTES")
    if size > bound:
        raise DataError(
            f"{path}: {size:,} bytes, more than the {bound:,} read at once "
            f"({raise_hint('MAX_COCO_JSON_BYTES')})"
        )
    try:
        data = read_input(path, bound, "a captions JSON", hint=raise_hint("MAX_COCO_JSON_BYTES"))
        check_json_elements(data, path)  # counted on the text: built, JSON grows ~27x
        document = json.loads(data.decode("utf-8-sig"))
    except UnicodeDecodeError:
        raise DataError(f"{path}: not UTF-8 text") from None
    except (ValueError, RecursionError):
        raise DataError(f"{path}: not valid JSON") from None
    if not isinstance(document, dict) or not isinstance(document.get("images"), list):
        raise DataError(f"{path}: not COCO captions or Karpathy JSON (no 'images' list)")
    return document


def _is_karpathy(document: dict) -> bool:
    return "annotations" not in document


def _coco(document: dict, path: Path) -> pd.DataFrame:
    import pandas as pd

    annotations = document.get("annotations")
    if not isinstance(annotations, list):
        raise DataError(f"{path}: COCO JSON without an 'annotations' list")
    file_of = {
        str(image.get("id")): str(image.get("file_name") or "")
        for image in document["images"]
        if isinstance(image, dict)
    }
    rows = [
        {
            "pair_id": str(a.get("id", n)),
            "image": file_of.get(str(a.get("image_id")), ""),
            "caption": str(a.get("caption") or ""),
            "split": "",
        }
        for n, a in enumerate(annotations)
        if isinstance(a, dict)
    ]
    return pd.DataFrame(rows, columns=["pair_id", "image", "caption", "split"])


def _karpathy(document: dict) -> pd.DataFrame:
    import pandas as pd

    rows = []
    for image in document["images"]:
        if not isinstance(image, dict):
            continue
        name = "/".join(p for p in (_text(image.get("filepath")), _text(image.get("filename"))) if p)
        sentences = image.get("sentences")
        for sentence in sentences if isinstance(sentences, list) else []:
            if isinstance(sentence, dict):
                tokens = sentence.get("tokens")
                words = " ".join(map(_text, tokens)) if isinstance(tokens, list) else _text(tokens)
                rows.append(
                    {
                        "pair_id": _text(sentence.get("sentid", len(rows))),
                        "image": name,
                        "caption": _text(sentence.get("raw")) or words,
                        "split": _text(image.get("split")),
                    }
                )
    return pd.DataFrame(rows, columns=["pair_id", "image", "caption", "split"])


def _text(value: Any) -> str:
    """A JSON field as text: a string as it is, a number as written, anything else (a list, an
    object, null) empty, so that a field of the wrong type is a refused row, not a traceback."""
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    return ""
