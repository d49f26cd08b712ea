"""Search a collection with a trained model: ``mispair index`` / ``mispair search``.

An :class:`Index` embeds every image and caption of a folder or precomputed collection with a
checkpoint's encoders into FAISS (``pip install 'mispair[search]'``): exact by default, IVF or
HNSW for large collections (:class:`IndexSpec`). It searches by text or by picture, reranks the
first candidates with the checkpoint's own head, and evaluates the retrieval protocol from top-k
lists (:func:`evaluate_index`) when the full similarity matrix would not fit in memory.
"""

from mispair.ann import IndexSpec
from mispair.search.evaluation import evaluate_index
from mispair.search.index import Hit, Index, hits_table

__all__ = ["Hit", "Index", "IndexSpec", "evaluate_index", "hits_table"]
