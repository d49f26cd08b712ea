"""A Hugging Face ``datasets`` collection saved with ``save_to_disk`` (``data.source: hf``): a
``Dataset``'s folder, or a ``DatasetDict``'s whose splits are the collection's splits (its rows'
split column, when they have one, takes precedence: Flickr30k on the Hub is one ``test`` split
whose ``split`` column names train, val and test). Columns and pair ids:
:mod:`mispair.data.readers.hf_dataset`.

The Arrow files are read in batches of raw cells (nothing decoded by ``datasets``): each
picture's bytes are unpacked once into the cache folder as Parquet image bytes are
(:func:`~mispair.data.readers.files.write_image_bytes`); a cell without bytes but with a ``path``
(``Image(decode=False)`` of files, or a column of paths) is read from that file, relative to
``data.image_root`` or the dataset's folder, and refused when it lies outside it (unless
``data.folder_allow_outside``). The image's id is the cell's ``path`` (``save_to_disk`` keeps its
file name), else the row's id.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from mispair.data.readers.base import READERS
from mispair.data.readers.columns import columns_of
from mispair.data.readers.files import _cell, _image_bytes, _struct_path, unpacked_view, write_image_bytes
from mispair.data.readers.hf_dataset import (
    BATCH_ROWS,
    DatasetColumns,
    dataset_columns,
    dataset_parts,
    is_saved_dataset,
    load_saved,
    row_pair_ids,
)
from mispair.data.readers.table import CollectionTable, TableReader, checked_table
from mispair.errors import DataError
from mispair.limits import limit
from mispair.safe_io import read_input
from mispair.safe_parse import check_rows

if TYPE_CHECKING:
    from mispair.config import DataConfig


@READERS.register("hf")
class HFDatasetReader(TableReader):
    name = "hf"
    priority = 15
    describes = "a Hugging Face datasets folder written by save_to_disk (a Dataset or a DatasetDict)"

    def detect(self, path: Path) -> bool:
        return is_saved_dataset(path)

    def stamp(self, data: DataConfig) -> tuple:
        root = Path(data.root or "")
        files = sorted(p for p in root.rglob("*") if p.is_file())
        return tuple((str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in files)

    def table(self, data: DataConfig) -> CollectionTable:
        root = Path(data.root or "")
        where = str(root)
        base = Path(data.image_root) if data.image_root else root
        pairs = _Pairs(base.resolve(), data.folder_allow_outside, self.cache_dir(data) / "images")
        for split, part in dataset_parts(load_saved(root), where):
            check_rows(pairs.rows + len(part), root)
            names = dataset_columns(part, columns_of(data), f"{where}/{split}" if split else where)
            pairs.read(split, part, names)
        return pairs.table(self.cache_dir(data), where)


class _Pairs:
    """The pairs of a dataset as they are read, with their unpacked pictures."""

    def __init__(self, base: Path, allow_outside: bool, images: Path) -> None:
        self.base, self.allow_outside, self.images = base, allow_outside, images
        self.rows = 0
        self.columns: dict[str, list[str]] = {
            k: [] for k in ("pair_id", "caption", "split", "wanted", "stored")
        }
        self.refused: list[dict] = []

    def read(self, split: str, part: Any, names: DatasetColumns) -> None:
        """Every row of ``part`` (the split ``split`` of a ``DatasetDict``, or "")."""
        wanted = [c for c in dict.fromkeys((names.image, names.caption, names.split)) if c is not None]
        ids = row_pair_ids(split, part, names)
        for batch in part.select_columns(wanted).with_format("arrow").iter(BATCH_ROWS):
            images = batch.column(names.image).to_pylist()
            captions = batch.column(names.caption).to_pylist()
            splits = batch.column(names.split).to_pylist() if names.split else [split] * batch.num_rows
            for image, caption, row_split in zip(images, captions, splits):
                base, pair_ids = next(ids)
                texts = (caption or [""]) if names.listed else [caption]
                self._row(base, pair_ids, image, [t or "" for t in texts], _cell(row_split))
            self.rows += batch.num_rows

    def _row(self, base: str, pair_ids: list[str], image: Any, captions: list[str], split: str) -> None:
        if isinstance(image, (bytes, bytearray)):
            cell = {"bytes": image, "path": None}
        else:
            cell = image if isinstance(image, dict) else {"bytes": None, "path": image}
        path = _struct_path(cell)
        stored, reason = self._picture(cell, path)
        for pair_id, caption in zip(pair_ids, captions):
            if not stored:
                self.refused.append({"pair_id": pair_id, "image": path, "caption": caption, "reason": reason})
                continue
            self.columns["pair_id"].append(pair_id)
            self.columns["caption"].append(caption)
            self.columns["split"].append(split)
            self.columns["wanted"].append(PurePosixPath(path).name if path else base)
            self.columns["stored"].append(stored)

    def _picture(self, cell: dict, path: str) -> tuple[str, str]:
        """The picture's file name in the cache (written once) and "", or "" and why there is none."""
        if cell.get("bytes") is not None:
            blob = _image_bytes(cell)
        elif path:
            blob = self._file_bytes(path)
        else:
            return "", "no image"
        if isinstance(blob, str):
            return "", blob
        suffix = PurePosixPath(path).suffix.lower()[:10] if path else ""
        return write_image_bytes(self.images, blob, suffix), ""

    def _file_bytes(self, path: str) -> bytes | str:
        if "://" in path:
            return "a remote URL is not fetched: download the images first (e.g. with img2dataset)"
        file = (self.base / path).resolve()
        if not self.allow_outside and not file.is_relative_to(self.base):
            return (
                "the image lies outside the dataset's folder (set data.folder_allow_outside=true to "
                "read it anyway)"
            )
        if not file.is_file():
            return "image file not found"
        try:
            return read_input(file, limit("MAX_IMAGE_BYTES"), "a picture")
        except DataError as exc:
            return str(exc)

    def table(self, cache_dir: Path, where: str) -> CollectionTable:
        import pandas as pd

        root, image_ids, names = unpacked_view(cache_dir, self.columns["wanted"], self.columns["stored"])
        frame = pd.DataFrame(
            {
                "pair_id": self.columns["pair_id"],
                "image": image_ids,
                "image_name": names,
                "caption": self.columns["caption"],
                "split": self.columns["split"],
            },
            dtype=object,
        )
        return checked_table(frame.astype(str), root, where, trusted_paths=True, refused=self.refused)
