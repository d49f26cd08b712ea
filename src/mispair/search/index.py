"""An index of a collection, built with a checkpoint's encoders, searched by text or by picture.

It holds two FAISS indexes of the same kind (:class:`~mispair.ann.IndexSpec`): the
images' vectors, searched by a text (text → images), and the captions' vectors, searched by a
picture (image → captions); each vector is the items' pooled embedding
(:class:`~mispair.search.model.SearchModel`). ``rerank=K`` rescores the first ``K`` candidates
with the checkpoint's own similarity head (SGR, SAF, OMIT, CAM: heads too slow to score a whole
collection) through the all-pairs engine, and orders them by that score.

An index records the fingerprints of the checkpoint and of the collection it was built from and
refuses any other (a one-line error): the checkpoint encodes the queries, so another one would
search vectors it did not make; the collection supplies the features of candidates to rerank.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from mispair.ann import IndexSpec, build_ann, from_bytes, search_ann, to_bytes
from mispair.config import DataConfig
from mispair.data.pairset import PairSet
from mispair.errors import ConfigError, DataError
from mispair.sanity import check_finite
from mispair.search import query_encoder
from mispair.search.collection import Collection, open_collection
from mispair.search.queries import ONE_KIND_OF_QUERY, check_rerank, cut_queries
from mispair.search.storage import (
    MANIFEST,
    array_bytes,
    array_from_bytes,
    json_bytes,
    json_from_bytes,
    read_index_folder,
    write_index_folder,
)
from mispair.search.terminal import printable
from mispair.version import __version__

if TYPE_CHECKING:  # torch: imported when the checkpoint is opened, not for a text search
    from mispair.nn.embedding import Fragments
    from mispair.search.cache import EncodedItems
    from mispair.search.model import SearchModel

TARGETS = ("images", "captions")


@dataclass
class Hit:
    """One search result: image ``image`` of the collection (its id, split and, for a caption hit,
    the caption ``caption_index``; for an image hit, its first caption) and its score."""

    rank: int
    score: float
    image: int
    image_id: str
    split: str
    caption: str
    caption_index: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return dict(vars(self))


ENCODING_FIELDS = (
    "image_encoder",
    "image_encoder_options",
    "caption_encoder",
    "caption_encoder_options",
    "image_embedding_column",
    "text_embedding_column",
    "embeddings_aligned",
)
"""The data fields that decide how a collection becomes features: an index reads its collection
as the run read its own."""


def encoding_options(data: DataConfig) -> dict[str, Any]:
    """The run's :data:`ENCODING_FIELDS` that differ from the defaults."""
    default = DataConfig()
    return {f: getattr(data, f) for f in ENCODING_FIELDS if getattr(data, f) != getattr(default, f)}


class Index:
    """A searchable index (see the module docstring); build with :meth:`build`, keep with
    :meth:`save`, open with :meth:`load`.

    Example:
        >>> Index.build("runs/vse/best.pt", "data/openclipart_precomp").save("oc.index")  # doctest: +SKIP
        >>> [h.image_id for h in Index.load("oc.index").search("a red bicycle", k=3)]  # doctest: +SKIP
    """

    def __init__(
        self,
        manifest: dict[str, Any],
        model: SearchModel | Callable[[], SearchModel],
        anns: dict[str, Any],
        image_ids: list[str],
        captions: list[str],
        image_of_caption: np.ndarray,
        *,
        path: Path | None = None,
        collection: Collection | None = None,
        data_root: str | Path | None = None,
        queries: query_encoder.OnnxQueries | None = None,
        query_files: dict[str, bytes] | None = None,
    ) -> None:
        self.manifest, self.anns = manifest, anns
        self._model, self._open_model = (None, model) if callable(model) else (model, None)
        self.queries, self._query_files = queries, query_files or {}
        self.image_ids, self.captions = image_ids, captions
        self.image_of_caption = np.asarray(image_of_caption, dtype=np.int64)
        self.path, self._collection, self._data_root = path, collection, data_root
        self._encoded_items: dict[str, EncodedItems] = {}
        counts = manifest["collection"]["split_images"]
        self.image_splits = [s for s, n in zip(manifest["collection"]["splits"], counts) for _ in range(n)]
        first = np.full(len(image_ids), -1, dtype=np.int64)
        images, positions = np.unique(self.image_of_caption, return_index=True)
        first[images] = positions
        self._first_caption = first

    # --- building, saving, loading ------------------------------------------------------------

    @classmethod
    def build(
        cls,
        checkpoint: str | Path,
        data: str | Path,
        *,
        split: str = "all",
        spec: IndexSpec | None = None,
        device: str = "auto",
        progress: bool = False,
        log: Callable[[str], None] = print,
        data_options: dict[str, Any] | None = None,
    ) -> Index:
        """Embed every image and caption of ``split`` (a name, names separated by commas, or
        ``all``) of the folder or precomputed dataset ``data`` with the models of ``checkpoint``
        and index them as ``spec`` says (default: exact); ``data_options``: the collection's
        columns and other data fields, over the run's own encoders (:func:`encoding_options`: the
        collection is encoded as the run's was), recorded so that the index reopens it alike."""
        spec = spec or IndexSpec()
        from mispair.search.model import SearchModel

        model = SearchModel.load(checkpoint, device)
        data_options = {**encoding_options(model.config.data), **(data_options or {})}
        collection = open_collection(data, split, data_options)
        for part in collection.parts:
            model.check_inputs(part)
        tokens = [ids for part in collection.parts for ids in model.tokens(part)]
        model.prepare_texts(collection.data, tokens, progress=progress, log=log)
        vectors = {
            "images": np.concatenate([model.image_vectors(p, progress) for p in collection.parts]),
            "captions": model.text_vectors(tokens, progress),
        }
        for target in TARGETS:  # a degenerate model never becomes an index
            check_finite(vectors[target], f"{target[:-1]} vectors", checkpoint)
        anns = {target: build_ann(vectors[target], spec) for target in TARGETS}
        exported = query_encoder.export_query_encoder(model, collection.captions[:64], log, vectors["images"])
        manifest: dict[str, Any] = {
            "mispair": __version__,
            "checkpoint": {"path": str(Path(checkpoint).resolve()), "fingerprint": model.fingerprint},
            "collection": {
                "root": str(collection.root),
                "source": collection.data.source,
                "options": data_options,
                "splits": collection.splits,
                "split_images": [p.n_images for p in collection.parts],
                "n_captions": collection.n_captions,
                "fingerprint": collection.fingerprint(),
            },
            "index": spec.to_dict(),
            "dim": model.dim,
        }
        if exported is not None:
            manifest["query_encoder"] = exported[0]
        return cls(
            manifest,
            model,
            anns,
            collection.image_ids(),
            collection.captions,
            collection.image_of_caption,
            collection=collection,
            query_files=exported[1] if exported else None,
        )

    def save(self, path: str | Path) -> None:
        """Write the index to the folder ``path`` (atomically; an older index there is replaced)."""
        files = {f"{target}.faiss": to_bytes(self.anns[target]) for target in TARGETS}
        files["collection.json"] = json_bytes({"image_ids": self.image_ids, "captions": self.captions})
        files["image_of_caption.npy"] = array_bytes(self.image_of_caption)
        files.update(self._query_files)
        write_index_folder(path, self.manifest, files)
        self.path = Path(path)

    @classmethod
    def load(
        cls,
        path: str | Path,
        *,
        checkpoint: str | Path | None = None,
        data: str | Path | None = None,
        device: str = "auto",
    ) -> Index:
        """The index in the folder ``path``, with the checkpoint it was built from (the one it
        records, or ``checkpoint`` when it moved); ``data``: where its collection is now (read
        only to rerank). Any other checkpoint is a one-line error. An index holding its own query
        encoder (:mod:`~mispair.search.query_encoder`) opens the checkpoint only when a search
        needs it (a rerank, a picture), unless ``checkpoint`` is given."""
        path = Path(path)
        manifest, files = read_index_folder(path)
        _check_manifest(path / MANIFEST, manifest, files)
        return cls._from_files(path, manifest, files, checkpoint, data, device)

    @classmethod
    def _from_files(
        cls,
        path: Path,
        manifest: dict[str, Any],
        files: dict[str, bytes],
        checkpoint: str | Path | None,
        data: str | Path | None,
        device: str,
    ) -> Index:
        entry = manifest.get("query_encoder")
        queries, model = None, None
        if checkpoint is None and query_encoder.usable(entry) and _has_query_files(files):
            queries = query_encoder.OnnxQueries.from_files(entry, files, path)
        else:
            model = _matching_model(path, manifest["checkpoint"], checkpoint, device)
        anns = {t: from_bytes(files[f"{t}.faiss"], str(path / f"{t}.faiss")) for t in TARGETS}
        info = json_from_bytes(files["collection.json"], str(path / "collection.json"))
        image_of_caption = array_from_bytes(files["image_of_caption.npy"], str(path / "image_of_caption.npy"))
        _check_agreement(path, manifest, anns, info, image_of_caption, model.dim if model else queries.dim)
        IndexSpec.from_dict(manifest["index"], f"{path / MANIFEST}: index")
        return cls(
            manifest,
            model or (lambda: _matching_model(path, manifest["checkpoint"], None, device)),
            anns,
            info["image_ids"],
            info["captions"],
            image_of_caption,
            path=path,
            data_root=data,
            queries=queries,
            query_files={name: files[name] for name in _QUERY_FILES if name in files},
        )

    # --- what it holds ------------------------------------------------------------------------

    @property
    def model(self) -> SearchModel:
        """The checkpoint's models (opened on first use when the index encodes its own queries;
        one that is not the checkpoint the index was built from is a one-line error)."""
        if self._model is None:
            assert self._open_model is not None
            self._model = self._open_model()
        return self._model

    @property
    def spec(self) -> IndexSpec:
        return IndexSpec.from_dict(self.manifest["index"])

    @property
    def n_images(self) -> int:
        return len(self.image_ids)

    @property
    def n_captions(self) -> int:
        return len(self.captions)

    def vectors(self, target: str) -> np.ndarray:
        """``[n, dim]`` the stored vectors of ``target`` (``images`` or ``captions``)."""
        ann = self.anns[target]
        if hasattr(ann, "make_direct_map"):  # an inverted-file index finds vectors by id through it
            ann.make_direct_map()
        return ann.reconstruct_n(0, ann.ntotal)

    def collection(self) -> Collection:
        """The collection the index was built from (read on first use; one that changed since is a
        one-line error)."""
        if self._collection is None:
            recorded = self.manifest["collection"]
            root = self._data_root or recorded["root"]
            where = f"index {self.path}" if self.path else "the index"
            try:
                collection = open_collection(root, ",".join(recorded["splits"]), recorded.get("options"))
            except DataError as exc:
                raise DataError(f"{exc} (the collection of {where}; give its place with --data)") from None
            if collection.fingerprint() != recorded["fingerprint"]:
                raise DataError(
                    f"{root}: not the collection {where} was built from (its captions, "
                    "images or splits differ); rebuild the index, or give the original with "
                    "--data"
                )
            self._collection = collection
        return self._collection

    # --- searching ----------------------------------------------------------------------------

    def search(
        self,
        text: str | None = None,
        *,
        image: str | Path | None = None,
        k: int = 10,
        rerank: int = 0,
        nprobe: int | None = None,
        ef_search: int | None = None,
    ) -> list[Hit]:
        """The ``k`` best images for ``text``, or the ``k`` best captions for the picture file
        ``image``; ``rerank=K`` orders the first ``K`` candidates by the head (then ``k <= K``).
        ``nprobe`` / ``ef_search`` override the index's search settings."""
        if (text is None) == (image is None):
            raise ConfigError(ONE_KIND_OF_QUERY)
        if text is not None:
            return self.search_texts([text], k=k, rerank=rerank, nprobe=nprobe, ef_search=ef_search)[0]
        check_rerank(k, rerank)
        spec = self.spec.with_search(nprobe, ef_search)
        features = self.picture_features(Path(image))
        query = self.model.image_vectors(PairSet(features, [], np.zeros(0)))
        scores, ids = _found(*(a[0] for a in self.search_vectors(query, max(k, rerank), "captions", spec)))
        if rerank:
            scores, ids = self.rerank_captions(ids[:rerank], features)
        return [self._caption_hit(r, s, c) for r, (s, c) in enumerate(zip(scores[:k], ids[:k]), start=1)]

    def search_texts(
        self,
        texts: Sequence[str],
        *,
        k: int = 10,
        rerank: int = 0,
        nprobe: int | None = None,
        ef_search: int | None = None,
    ) -> list[list[Hit]]:
        """The ``k`` best images for each of ``texts``, as :meth:`search` finds them for one: the
        texts, each cut to ``MAX_TEXT_CHARS`` characters as a caption is (a text that is not
        UTF-8 is a one-line error), are encoded in batches and searched in one call (``rerank``
        orders each text's candidates by the head, one text at a time)."""
        check_rerank(k, rerank)
        if not texts:
            return []
        spec = self.spec.with_search(nprobe, ef_search)
        texts = cut_queries(texts)[0]
        if self.queries is not None and not rerank:  # the index's own encoder: no checkpoint
            tokens, vectors = self.queries.tokens(texts), self.queries.vectors(texts)
        else:
            tokens = self.model.queries_tokens(texts)
            vectors = self.model.text_vectors(tokens)
        found = self.search_vectors(vectors, max(k, rerank), "images", spec)
        results = []
        for row_scores, row_ids, row_tokens in zip(*found, tokens):
            scores, ids = _found(row_scores, row_ids)
            if rerank:
                scores, ids = self.rerank_images(ids[:rerank], row_tokens)
            results.append(
                [self._image_hit(r, s, i) for r, (s, i) in enumerate(zip(scores[:k], ids[:k]), start=1)]
            )
        return results

    def search_vectors(
        self, queries: np.ndarray, k: int, target: str, spec: IndexSpec | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """``scores [q, k]`` and ``ids [q, k]`` (-1: not found) of the ``k`` best ``target``
        (``images`` or ``captions``) for each of ``queries [q, dim]``; a non-finite query or score
        (a degenerate model, a tampered index) is a one-line error, never a result."""
        check_finite(queries, "query vector values", self.manifest["checkpoint"]["path"])
        scores, ids = search_ann(self.anns[target], queries, k, spec or self.spec)
        check_finite(scores[ids >= 0], f"{target[:-1]} scores", self.path or "the index")
        return scores, ids

    def rerank_images(self, images: np.ndarray, tokens: list[int]) -> tuple[np.ndarray, np.ndarray]:
        """The candidate ``images`` of a text query (token ids ``tokens``) ordered by the head's
        score: ``scores [K]`` descending and the images in that order."""
        scores = self.model.pair_scores(self._encoded("images", images), self.model.encode_texts([tokens]))
        return _ordered(scores[:, 0].numpy(), images)

    def rerank_captions(self, captions: np.ndarray, features: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The candidate ``captions`` of a picture query (``features [1, n_fragments, dim]``)
        ordered by the head's score."""
        images = self.model.encode_images(PairSet(features, [], np.zeros(0)))
        scores = self.model.pair_scores(images, self._encoded("captions", captions))
        return _ordered(scores[0].numpy(), captions)

    def _encoded(self, target: str, items: np.ndarray) -> list[Fragments]:
        """Each model's embeddings of collection ``items`` (``images`` or ``captions``), kept for
        later queries (:class:`~mispair.search.cache.EncodedItems`)."""
        if target not in self._encoded_items:
            from mispair.search.cache import EncodedItems

            encode = self._encode_images if target == "images" else self._encode_captions
            self._encoded_items[target] = EncodedItems(encode)
        return self._encoded_items[target](items)

    def _encode_images(self, images: np.ndarray) -> list[Fragments]:
        features = self.collection().image_features(images)
        return self.model.encode_images(PairSet(features, [], np.zeros(0)))

    def _encode_captions(self, captions: np.ndarray) -> list[Fragments]:
        return self.model.encode_texts([self.model.tokenizer.encode(self.captions[c]) for c in captions])

    def picture_features(self, path: Path) -> np.ndarray:
        """``[1, n_fragments, dim]`` features of the picture file ``path`` by the run's image encoder
        (:meth:`~mispair.engine.trained.TrainedRun.picture_features`); an index whose collection has
        features of another shape is a one-line error."""
        if not path.is_file():
            raise DataError(f"--image {path}: no such file")
        with tempfile.TemporaryDirectory(prefix="mispair-query-") as cache:
            features, valid = self.model.run.picture_features([path], Path(cache))  # the run's encoder
        if not valid[0]:
            raise DataError(f"--image {path}: not a readable picture")
        pairs = PairSet(np.asarray(features, dtype=np.float32), [], np.zeros(0))
        reads = self.model.run.features.feature_dim
        if pairs.feature_dim != reads:
            raise DataError(
                f"--image {path}: the picture gives features of dimension {pairs.feature_dim}, "
                f"the index's model reads {reads} (its collection was "
                "not made from pictures by mispair's extractor): search it by text"
            )
        self.model.check_inputs(pairs)
        return pairs.images

    def _image_hit(self, rank: int, score: float, image: int) -> Hit:
        caption = self._first_caption[image]
        return Hit(
            rank,
            float(score),
            int(image),
            self.image_ids[image],
            self.image_splits[image],
            self.captions[caption] if caption >= 0 else "",
        )

    def _caption_hit(self, rank: int, score: float, caption: int) -> Hit:
        image = int(self.image_of_caption[caption])
        return Hit(
            rank,
            float(score),
            image,
            self.image_ids[image],
            self.image_splits[image],
            self.captions[caption],
            int(caption),
        )

    def _checkpoint_path(self) -> Path:
        return self._model.path if self._model else Path(self.manifest["checkpoint"]["path"])

    def describe(self) -> str:
        """One line: the index's kind, size and checkpoint."""
        return (
            f"{self.spec.describe()} index of {self.n_images} images and {self.n_captions} captions "
            f"(dim {self.manifest['dim']}), checkpoint {self._checkpoint_path()}"
        )


def _matching_model(
    path: Path, recorded: dict[str, Any], checkpoint: str | Path | None, device: str
) -> SearchModel:
    """The checkpoint's models, refused unless it is the one the index was built from."""
    if checkpoint is None and not Path(recorded["path"]).is_file():
        raise DataError(
            f"{path}: built from the checkpoint {recorded['path']}, which is not there any more "
            "(give its new place with --checkpoint)"
        )
    from mispair.search.model import SearchModel

    model = SearchModel.load(checkpoint or recorded["path"], device)
    if model.fingerprint != recorded["fingerprint"]:
        raise DataError(
            f"{model.path}: not the checkpoint index {path} was built from ({recorded['path']}); "
            f"search with that one, or rebuild the index with this one"
        )
    return model


_MANIFEST_FIELDS = {
    "checkpoint.path": str,
    "checkpoint.fingerprint": str,
    "collection.root": str,
    "collection.source": str,
    "collection.splits": list,
    "collection.split_images": list,
    "collection.n_captions": int,
    "collection.fingerprint": str,
    "index": dict,
    "dim": int,
}
_FILES = ("images.faiss", "captions.faiss", "collection.json", "image_of_caption.npy")
_QUERY_FILES = (query_encoder.MODEL_FILE, query_encoder.TOKENIZER_FILE)


def _has_query_files(files: dict[str, bytes]) -> bool:
    return all(name in files for name in _QUERY_FILES)


def _check_manifest(where: Path, manifest: dict[str, Any], files: dict[str, bytes]) -> None:
    """A one-line error unless the manifest has every field of an index, of the right type."""
    for label, wanted in _MANIFEST_FIELDS.items():
        value: Any = manifest
        for key in label.split("."):
            value = value.get(key) if isinstance(value, dict) else None
        if not isinstance(value, wanted):
            raise DataError(
                f"{where}: not a mispair index manifest ({label}: missing or not a {wanted.__name__})"
            )
    missing = [name for name in _FILES if name not in files]
    if missing:
        raise DataError(f"{where}: not a mispair index manifest (no {', '.join(missing)})")


def _check_agreement(
    path: Path,
    manifest: dict[str, Any],
    anns: dict[str, Any],
    info: dict[str, Any],
    image_of_caption: np.ndarray,
    dim: int,
) -> None:
    """A one-line error unless the index's files agree on its sizes and the checkpoint's vectors
    have its dimension."""
    split_images = manifest["collection"]["split_images"]
    if not all(isinstance(n, int) and n >= 0 for n in split_images) or not _strings(info):
        raise DataError(
            f"{path}: damaged (its image counts or collection.json are not what an index "
            "holds); rebuild it with `mispair index`"
        )
    counts = (sum(split_images), manifest["collection"]["n_captions"])
    sizes = {
        (anns["images"].ntotal, anns["captions"].ntotal),
        (counts[0], len(image_of_caption)),
        (len(info["image_ids"]), len(info["captions"])),
    }
    if sizes != {counts} or image_of_caption.ndim != 1 or image_of_caption.dtype != np.int64:
        raise DataError(f"{path}: its files disagree on the number of images and captions; rebuild it")
    if len(image_of_caption) and not 0 <= image_of_caption.min() <= image_of_caption.max() < counts[0]:
        raise DataError(f"{path / 'image_of_caption.npy'}: names images outside the index; rebuild it")
    if {anns[t].d for t in TARGETS} != {manifest["dim"]} or manifest["dim"] != dim:
        raise DataError(f"{path}: vectors of dimension {manifest['dim']}, the checkpoint's are {dim}")


def _strings(info: Any) -> bool:
    """``info`` (collection.json) holds the lists ``image_ids`` and ``captions`` of strings."""
    return isinstance(info, dict) and all(
        isinstance(info.get(key), list) and all(isinstance(v, str) for v in info[key])
        for key in ("image_ids", "captions")
    )


def _found(scores: np.ndarray, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One query's results without the ``-1`` slots of an approximate index that found fewer."""
    keep = ids >= 0
    return scores[keep], ids[keep]


def _ordered(scores: np.ndarray, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    order = np.argsort(-scores, kind="stable")
    return scores[order], np.asarray(ids)[order]


def hits_table(hits: list[Hit], title: str = "") -> str:
    """The hits as an aligned text table (rank, score, image id, split, caption), for a terminal:
    control characters of the collection's texts escaped (:func:`printable`)."""
    width = max([5, *(len(printable(h.image_id)) for h in hits)])
    lines = [title] if title else []
    lines.append(f"{'rank':>4} {'score':>8}  {'image':<{width}}  {'split':<5}  caption")
    for h in hits:
        image, split, caption = (printable(text) for text in (h.image_id, h.split, h.caption))
        lines.append(f"{h.rank:>4} {h.score:8.4f}  {image:<{width}}  {split:<5}  {caption}")
    return "\n".join(lines)
