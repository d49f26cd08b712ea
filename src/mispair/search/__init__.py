"""Search a collection with a trained model: ``mispair index`` / ``mispair search`` / ``mispair serve``.

An :class:`Index` embeds every image and caption of a folder or precomputed collection with a
checkpoint's encoders into FAISS (``pip install 'mispair[search]'``): exact by default, IVF or
HNSW for large collections (:class:`IndexSpec`). It searches by text or by picture, many texts in
one batch (:meth:`Index.search_texts`), reranks the first candidates with the checkpoint's own
head, and evaluates the retrieval protocol from top-k lists (:func:`evaluate_index`) when the full
similarity matrix would not fit in memory; :mod:`mispair.search.serve` answers searches over HTTP.

The names below are imported on first use: the command line reads :mod:`mispair.search.storage`
to refuse a missing index before torch and FAISS load.
"""

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mispair.ann import IndexSpec
    from mispair.search.evaluation import evaluate_index
    from mispair.search.index import Hit, Index, hits_table

__all__ = ["Hit", "Index", "IndexSpec", "evaluate_index", "hits_table"]

_HOMES = {
    "IndexSpec": "mispair.ann",
    "evaluate_index": "mispair.search.evaluation",
    "Hit": "mispair.search.index",
    "Index": "mispair.search.index",
    "hits_table": "mispair.search.index",
}


def __getattr__(name: str) -> Any:
    if name in _HOMES:
        value = getattr(importlib.import_module(_HOMES[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOMES})
