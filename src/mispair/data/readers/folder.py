"""A folder of images with a captions file: ``captions.csv`` / ``.tsv`` / ``.jsonl``, or the
Hugging Face ``imagefolder`` convention (``metadata.csv`` / ``.jsonl`` / ``.parquet`` with a
``file_name`` column, in the folder or in one sub-folder per split: ``train/``, ``validation/``,
``test/``).

Image paths are relative to the folder (to the split's sub-folder for split sub-folders). See
:mod:`mispair.data.readers.files` for the columns and :mod:`mispair.data.readers.table` for what
is refused.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from mispair.data.readers.base import READERS
from mispair.data.readers.columns import columns_of
from mispair.data.readers.files import frame_table, read_frame
from mispair.data.readers.table import CollectionTable, TableReader
from mispair.errors import DataError

if TYPE_CHECKING:
    from mispair.config import DataConfig

CAPTION_FILES = (
    "captions.csv",
    "captions.tsv",
    "captions.jsonl",
    "metadata.csv",
    "metadata.jsonl",
    "metadata.parquet",
)
SPLIT_FOLDERS = ("train", "validation", "val", "dev", "test")


def captions_files(root: Path) -> list[tuple[Path, str]]:
    """``(file, split)`` of the folder's captions files: its own (split "" = from a column), or
    one per split sub-folder (split = the sub-folder's name); empty when it has none."""
    own = next((root / name for name in CAPTION_FILES if (root / name).is_file()), None)
    if own is not None:
        return [(own, "")]
    found = []
    for split in SPLIT_FOLDERS:
        path = next((root / split / name for name in CAPTION_FILES if (root / split / name).is_file()), None)
        if path is not None:
            found.append((path, split))
    return found


@READERS.register("folder")
class FolderReader(TableReader):
    name = "folder"
    priority = 20
    describes = "a folder with captions.csv/.tsv/.jsonl or Hugging Face imagefolder metadata"

    def detect(self, path: Path) -> bool:
        return path.is_dir() and bool(captions_files(path))

    def stamp(self, data: DataConfig) -> tuple:
        files = [path for path, _ in captions_files(Path(data.root))]
        return tuple((str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in files)

    def table(self, data: DataConfig) -> CollectionTable:
        import pandas as pd

        root = Path(data.root)
        files = captions_files(root)
        if not files:
            raise DataError(f"{root}: no {', '.join(CAPTION_FILES)} (nor in train/, validation/, test/)")
        if len(files) == 1 and not files[0][1]:
            return frame_table(
                read_frame(files[0][0]),
                columns_of(data),
                Path(data.image_root or root),
                self.cache_dir(data),
                str(files[0][0]),
            )
        frames = []
        for path, split in files:
            frame = read_frame(path)
            names = columns_of(data).resolve([str(c) for c in frame.columns], str(path))
            if names.image is not None:  # (None: images given as vectors)
                frame[names.image] = frame[names.image].map(lambda cell, s=split: _in_split(cell, s))
            frames.append(frame.assign(**{names.split or "split": split}))
        return frame_table(
            pd.concat(frames, ignore_index=True), columns_of(data), root, self.cache_dir(data), str(root)
        )


def _in_split(cell: object, split: str) -> object:
    """An image cell of a split sub-folder's metadata with its path made relative to the folder
    (image bytes kept, the path beside them prefixed)."""
    if isinstance(cell, dict):
        return {**cell, "path": f"{split}/{cell['path']}"} if cell.get("path") else cell
    if isinstance(cell, (bytes, bytearray)):
        return cell
    return f"{split}/{cell}"
