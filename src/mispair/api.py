"""``mispair.train``: train on a collection given as a path or a pandas DataFrame, and the run
``mispair train`` trains (``mispair.audit`` is in :mod:`mispair.audit.notebook`).

>>> import mispair                                                          # doctest: +SKIP
>>> model = mispair.train("icons/", out="runs/icons")                       # doctest: +SKIP
>>> model.encode_texts(["a red apple"]).shape                               # doctest: +SKIP
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from mispair.config import ROBUST_RUN, RunConfig, load_config
from mispair.errors import ConfigError
from mispair.notebook import as_before_on_failure, keyword_overrides, quiet_unless, silent, source_path

if TYPE_CHECKING:
    import pandas as pd
    from datasets import Dataset, DatasetDict

    from mispair.engine.run import TrainSummary
    from mispair.search.model import SearchModel


def train(
    source: str | Path | pd.DataFrame | Dataset | DatasetDict,
    out: str | Path | None = None,
    *,
    recipe: str | None = None,
    config: str | Path | None = None,
    overrides: Sequence[str] = (),
    progress: bool = True,
    **options: Any,
) -> TrainedModel:
    """Train on ``source`` (as :func:`mispair.audit.notebook.audit` reads it) into ``out``
    (default: a new temporary folder) and return the :class:`TrainedModel`: by default the robust
    run (``holdout`` on the pretrained backbone, :data:`~mispair.config.ROBUST_RUN`); ``recipe``
    another recipe with the same model; ``config`` a YAML file instead (its planted noise is not
    applied to your data unless ``data={"noise": ...}`` asks). A training that fails leaves
    ``out`` as it was (removed when the call made it)."""
    from mispair.engine.run import train_run

    new = out is None
    out = Path(tempfile.mkdtemp(prefix="mispair-train-")) if out is None else Path(out)
    with (
        as_before_on_failure(out, new=new, replacing=not isinstance(source, (str, Path))),
        quiet_unless(progress),
    ):
        data, reading = source_path(source, out, options)
        extra = [*reading, *keyword_overrides(options), *overrides] + ([f"recipe={recipe}"] if recipe else [])
        run = training_config(
            None if config is None else str(config), extra, data=str(data), log=print if progress else silent
        )
        run.output = str(out)
        summary = train_run(run, progress=progress, log=print if progress else silent)
    return TrainedModel(out / "best.pt", summary)


def training_config(
    path: str | None, overrides: Sequence[str], *, data: str | None = None, log: Callable[[str], None] = print
) -> RunConfig:
    """The run ``mispair train`` trains: the YAML at ``path`` (or, on a user's collection ``data``
    with no file, the audit's robust run; else the embedded default) with the ``overrides``.

    A config pointed at other data (``data`` or a ``data.root=`` override) keeps its model and
    training settings but plants no noise unless the overrides set ``data.noise.*``: a config's
    planted noise is for its own benchmark collection, never silently for a user's data.
    """
    default = {**ROBUST_RUN, "name": "train"} if data is not None and path is None else None
    config = load_config(path, list(overrides), **({"default": default} if default else {}))
    keys = [o.partition("=")[0].strip() for o in overrides]
    if data is not None:
        config.data.root, config.data.source = data, "auto"
    elif "data.root" in keys and "data.source" not in keys:
        config.data.source = "auto"  # the new root's kind is detected
    pointed = data is not None or "data.root" in keys
    asked = any(k.startswith("data.noise") for k in keys)
    if pointed and path is not None and not asked and (config.data.noise.rate > 0 or config.data.noise.file):
        log(
            f"note: {path} plants noise into its own collection (data.noise); none is planted into "
            f"{config.data.root} (set data.noise.rate=R to plant some)"
        )
        config.data.noise.rate, config.data.noise.file = 0.0, None
    return config


@dataclass
class TrainedModel:
    """A trained run as a notebook uses it: its best checkpoint, its metrics, and encoders of
    captions and pictures into the space the model compares them in (L2-normalised vectors; the
    dot product of an image's and a caption's is the models' mean cosine similarity)."""

    checkpoint: Path
    summary: TrainSummary
    _model: SearchModel | None = field(default=None, repr=False)

    @property
    def model(self) -> SearchModel:
        if self._model is None:
            from mispair.search.model import SearchModel

            self._model = SearchModel.load(self.checkpoint)
        return self._model

    def encode_texts(self, texts: Sequence[str]) -> np.ndarray:
        """``[len(texts), dim]`` float32 vectors of the texts."""
        tokens = [self.model.query_tokens(text) for text in texts]
        self.model.prepare_texts(self.model.config.data, tokens, log=silent)
        return self.model.text_vectors(tokens)

    def encode_images(self, paths: Sequence[str | Path]) -> np.ndarray:
        """``[len(paths), dim]`` float32 vectors of picture files (features by the run's image
        encoder, cached in the user's cache folder, :mod:`mispair.data.cache_folder`)."""
        from mispair.data.cache_folder import cache_root
        from mispair.data.pairset import PairSet

        files = [Path(p).resolve() for p in _listed(paths, "paths")]
        features, valid = self.model.run.picture_features(files, cache_root())
        if not valid.all():
            raise ConfigError(f"{files[int(np.argmin(valid))]}: not a picture mispair can read")
        return self.model.image_vectors(PairSet(features, [], np.zeros(0, dtype=np.int64)))

    def similarity(
        self, images: Sequence[str | Path] | np.ndarray, texts: Sequence[str] | np.ndarray
    ) -> np.ndarray:
        """``[n_images, n_texts]`` cosine similarities of pictures and texts: ``images`` picture
        files, or their vectors as :meth:`encode_images` returns them (``[n, dim]``, or one
        ``[dim]``); ``texts`` strings, or their vectors from :meth:`encode_texts`. Anything else
        is a one-line :class:`~mispair.errors.ConfigError`."""
        image_vectors = _vectors(images, self.encode_images, "images", "picture paths")
        text_vectors = _vectors(texts, self.encode_texts, "texts", "strings")
        if image_vectors.shape[1] != text_vectors.shape[1]:
            raise ConfigError(
                f"similarity: image vectors of dimension {image_vectors.shape[1]} and text vectors "
                f"of dimension {text_vectors.shape[1]}; give vectors of this model's encode_images "
                "and encode_texts"
            )
        return image_vectors @ text_vectors.T


def _listed(items: object, what: str) -> list:
    """``items`` as a list (one string or path: a list of it)."""
    if isinstance(items, (str, Path)):
        return [items]
    try:
        return list(items)  # type: ignore[call-overload]
    except TypeError:
        raise ConfigError(f"{what}: a list, got {type(items).__name__}") from None


def _vectors(items: object, encode: Callable[[list], np.ndarray], what: str, kind: str) -> np.ndarray:
    """``items`` encoded when they are ``kind`` (strings or paths), else taken as vectors
    ``[n, dim]`` (one vector ``[dim]`` as a row)."""
    if not hasattr(items, "shape"):
        listed = _listed(items, what)
        if all(isinstance(i, (str, Path)) for i in listed):
            return encode(listed)
        items = listed
    try:
        vectors = np.asarray(items, dtype=np.float32)
    except (TypeError, ValueError):
        vectors = None
    if vectors is None or vectors.ndim not in (1, 2) or (vectors.ndim == 2 and vectors.shape[1] == 0):
        raise ConfigError(
            f"similarity: {what} are {kind} or an [n, dim] array of vectors, got "
            f"{type(items).__name__}" + (f" of shape {vectors.shape}" if vectors is not None else "")
        )
    return vectors[None] if vectors.ndim == 1 else vectors
