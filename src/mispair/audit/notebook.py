"""``mispair.audit(source, ...)``: the audit of a collection given as a path or a DataFrame.

>>> import mispair                                                          # doctest: +SKIP
>>> result = mispair.audit("icons/", out="runs/icons-audit")                # doctest: +SKIP
>>> result.pairs.head()            # one row per input pair, most suspect first   # doctest: +SKIP
>>> clean = result.keep()          # the pairs below the audit's mismatch threshold # doctest: +SKIP
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mispair.audit.run import audit_collection
from mispair.data.readers.hf_dataset import is_dataset_object
from mispair.notebook import as_before_on_failure, keyword_overrides, quiet_unless, silent, source_path

if TYPE_CHECKING:
    import pandas as pd
    from datasets import Dataset, DatasetDict

    from mispair.audit.result import AuditResult


def audit(
    source: str | Path | pd.DataFrame | Dataset | DatasetDict,
    out: str | Path | None = None,
    *,
    plant: float | None = None,
    seed: int = 0,
    clean_run: bool = False,
    config: str | Path | None = None,
    overrides: Sequence[str] = (),
    progress: bool = True,
    fdr: float = 0.1,
    labels: Sequence[str | Path] = (),
    **options: Any,
) -> AuditResult:
    """Audit every pair of ``source`` (a collection's path in any form ``mispair audit`` reads, a
    DataFrame with an image and a caption column, or a Hugging Face ``Dataset`` / ``DatasetDict``
    with an ``Image`` column: saved as ``out/input_dataset``, its columns back with
    ``result.to_dataset()``) into the folder ``out`` (default: a new temporary folder, kept) and
    return the :class:`~mispair.audit.AuditResult`.

    A DataFrame's relative picture paths are resolved against ``image_root`` when given (a
    folder), else against the working folder (``os.getcwd()``); a path source's against its own
    folder, or ``image_root``. The DataFrame is saved as ``out/input.parquet``; an audit that
    fails leaves ``out`` as it was (removed when the call made it). ``fdr``: the suspected pairs
    are the cut at this estimated false-discovery rate (``mispair audit --fdr``). ``labels``: your
    answers (labels files), fixed for the held-out scorers and estimated from when they are the
    first pairs of this audit's sample (``mispair audit --labels``; ``result.estimate(labels)``).

    ``options``: ``image_column``, ``caption_column``, ``id_column``, ``split_column``,
    ``image_root``, ``image_embedding_column``, ``text_embedding_column``, ``embeddings_aligned``
    (a table's own vectors: ``docs/encoders.md``), ``encoder_runtime`` (``"onnx"``: ONNX
    Runtime), ``cache_dir`` (where features are cached; default the user's cache folder,
    ``$MISPAIR_CACHE`` or ``~/.cache/mispair``), and any config section as a mapping, e.g.
    ``train={"epochs": 5}`` (the same as the override ``train.epochs=5``). ``progress=False``
    writes nothing to standard output or error (warnings are kept in
    ``result.summary.warnings``).
    """
    new = out is None
    out = Path(tempfile.mkdtemp(prefix="mispair-audit-")) if out is None else Path(out)
    with (
        as_before_on_failure(out, new=new, replacing=not isinstance(source, (str, Path))),
        quiet_unless(progress) as caught,
    ):
        data, reading = source_path(source, out, options)
        result = audit_collection(
            data,
            out,
            config_path=None if config is None else str(config),
            overrides=[*reading, *keyword_overrides(options), *overrides],
            plant=plant,
            seed=seed,
            clean_run=clean_run,
            progress=progress,
            log=print if progress else silent,
            fdr=fdr,
            labels=labels,
        )
    if caught:
        result.summary.warnings = caught
    result.pairs = input_ids(result.pairs, source, options.get("id_column"))
    if is_dataset_object(source):
        result.dataset = source  # to_dataset() adds the audit's columns to the caller's own Dataset
    return result


def input_ids(pairs: pd.DataFrame, source: object, id_column: str | None) -> pd.DataFrame:
    """``pairs`` with ``pair_id`` of the type the caller's DataFrame ``source`` gives its ids: its
    integer ``id_column``, or its row numbers when it names none (the ids are read as text, and
    a text id never joins back to an integer column). Any other source, or ids of another type,
    as they are; ``pairs.csv`` keeps the text."""
    import pandas as pd

    if not isinstance(source, pd.DataFrame) or (id_column is not None and id_column not in source):
        return pairs
    if id_column is not None and not pd.api.types.is_integer_dtype(source[id_column].dtype):
        return pairs
    dtype = source[id_column].dtype if id_column is not None else "int64"
    try:
        return pairs.assign(pair_id=pairs["pair_id"].astype(dtype))
    except (TypeError, ValueError, OverflowError):
        return pairs
