"""``AuditResult.to_dataset()``: the audited Hugging Face ``Dataset`` with the audit's columns
added, row by row in the input's order (not the ranking's), so that what a person writes next is
``ds.filter(lambda row: not row["suspected"])`` or ``ds.push_to_hub(...)``.

The dataset is the one given to ``mispair.audit`` (kept on the result), else the ``save_to_disk``
folder the audit read (loaded with ``datasets.load_from_disk``); a ``DatasetDict`` comes back as a
``DatasetDict``. Each row's pairs are found as the reader found them
(:func:`~mispair.data.readers.hf_dataset.row_pair_ids`, with the columns the audit's run read):
a row of one caption gets one value per column, a row with a list of captions a list of values,
one per caption in the list's order. A pair the audit refused (see ``refused.csv``) gets None
(its ``pair_id`` is still given). A column of the dataset named like one of :data:`AUDIT_COLUMNS`
(an earlier audit's) is replaced.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from mispair.data.readers.columns import Columns
from mispair.data.readers.hf_dataset import dataset_columns, dataset_parts, load_saved, row_pair_ids
from mispair.errors import ConfigError

if TYPE_CHECKING:
    import pandas as pd

    from mispair.audit.summary import AuditSummary

AUDIT_COLUMNS = ("pair_id", "rank", "mismatch_probability", "suspected", "q_value", "held_out_score")
"""The audit's columns added to every row (``pair_id`` first: what ``mispair apply`` and a
decisions file name a pair by)."""
COLUMN_KEYS = ("image_column", "caption_column", "id_column", "split_column")


def audited_dataset(pairs: pd.DataFrame, summary: AuditSummary, dataset: Any = None) -> Any:
    """``dataset`` (else the audited ``save_to_disk`` folder) with :data:`AUDIT_COLUMNS` added
    from ``pairs`` (the audit's rows, any order), aligned with the dataset's rows."""
    from mispair.audit.audit_folder import read_run_data

    data = read_run_data(summary.to_dict())
    if data is None or data.get("source") != "hf":
        raise ConfigError(
            "to_dataset: this audit did not read a Hugging Face dataset (a Dataset given to "
            "mispair.audit, or a save_to_disk folder); result.pairs holds its rows"
        )
    columns = Columns(**{key.removesuffix("_column"): data.get(key) for key in COLUMN_KEYS})
    source = load_saved(Path(summary.collection)) if dataset is None else dataset
    by_id = pairs.set_index(pairs["pair_id"].astype(str))[list(AUDIT_COLUMNS[1:])]
    values = {name: by_id[name].to_dict() for name in by_id.columns}
    parts = [
        (split, _annotated(split, part, columns, values))
        for split, part in dataset_parts(source, "to_dataset")
    ]
    if len(parts) == 1 and parts[0][0] == "":
        return parts[0][1]
    return type(source)(dict(parts))


def _annotated(split: str, part: Any, columns: Columns, values: dict[str, dict]) -> Any:
    """``part`` with the audit's columns (one value per row, or a list per row of listed captions)."""
    names = dataset_columns(part, columns, f"to_dataset/{split}" if split else "to_dataset")
    rows = [ids for _, ids in row_pair_ids(split, part, names)]
    added: dict[str, list] = {"pair_id": [ids if names.listed else ids[0] for ids in rows]}
    for name, by_pair in values.items():
        cells = [[_plain(by_pair.get(pair_id)) for pair_id in ids] for ids in rows]
        added[name] = cells if names.listed else [cell[0] for cell in cells]
    present = [name for name in added if name in part.column_names]
    if present:
        part = part.remove_columns(present)
    for name, column in added.items():
        part = part.add_column(name, column)
    return part


def _plain(value: object) -> object:
    """A cell as a plain Python value (numpy scalars unwrapped; NaN and missing as None)."""
    if value is None:
        return None
    item = getattr(value, "item", None)
    value = item() if callable(item) else value
    return None if isinstance(value, float) and value != value else value
