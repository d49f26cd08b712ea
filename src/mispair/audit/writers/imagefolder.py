"""A folder collection written back as one: a folder with a captions file (``captions.csv`` /
``.tsv`` / ``.jsonl``) or a Hugging Face ``imagefolder`` (``metadata.csv`` / ``.jsonl`` /
``.parquet``, in the folder or in each split's sub-folder). Each captions or metadata file is
written in its own form at the same place, under the same name (:mod:`mispair.audit.writers.table`:
the same columns in the same order, other cells as they were, the kept rows, the replaced
captions; no column added), and the kept pairs' pictures linked at the same relative paths.

Pair ids are the reader's: the id column, else the row number counted across the split files in
the order the reader reads them (``train``, ``validation``, ``val``, ``dev``, ``test``).
"""

from __future__ import annotations

from pathlib import Path

from mispair.audit.writers.base import WriteRequest, Written
from mispair.audit.writers.table import write_table_file
from mispair.data.readers.folder import captions_files
from mispair.safe_io import made_parents


def write_folder(request: WriteRequest, folder: Path) -> Written:
    """The folder ``request.collection`` (captions file or imagefolder) with the decisions
    applied, into ``folder``."""
    root = request.collection
    written = Written()
    for path, _split in captions_files(root):
        relative = path.relative_to(root)
        target = made_parents(folder, relative.as_posix())  # no link, nothing outside ``folder``
        part = write_table_file(path, target, request.columns, request.decided, row_offset=written.read)
        part.files = [relative.as_posix()]
        written.add(part)
    counts = request.link_pictures(folder, written.files)
    written.linked, written.copied = counts.get("linked", 0), counts.get("copied", 0)
    return written


write_imagefolder = write_folder


def is_imagefolder(root: Path) -> bool:
    """``root`` is a Hugging Face imagefolder (metadata files, or one per split sub-folder),
    not a folder with a ``captions`` file."""
    files = captions_files(root)
    return bool(files) and (files[0][1] != "" or files[0][0].name.startswith("metadata."))


def folder_form(root: Path) -> str:
    """The name of the form a folder collection is written back in: ``imagefolder`` or ``folder``."""
    return "imagefolder" if is_imagefolder(root) else "folder"
