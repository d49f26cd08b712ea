"""The notebook API: audit or train on a collection given as a path or a pandas DataFrame.

>>> import mispair                                                          # doctest: +SKIP
>>> result = mispair.audit("icons/", out="runs/icons-audit")                # doctest: +SKIP
>>> result.pairs.head()            # one row per input pair, most suspect first   # doctest: +SKIP
>>> clean = result.keep()          # the pairs below the audit's mismatch threshold # doctest: +SKIP
>>> model = mispair.train("icons/", out="runs/icons")                       # doctest: +SKIP
>>> model.encode_texts(["a red apple"]).shape                               # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import io
import tempfile
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from mispair.config import RunConfig, load_config
from mispair.errors import ConfigError
from mispair.progress import is_quiet, set_quiet

if TYPE_CHECKING:
    import pandas as pd

    from mispair.audit.result import AuditResult
    from mispair.search.model import SearchModel

COLUMN_OPTIONS = ("image_column", "caption_column", "id_column", "split_column")
"""Keyword arguments naming a table's columns (``data.<name>`` in a config; auto-detected when
not given)."""


def audit(source: str | Path | pd.DataFrame, out: str | Path | None = None, *, plant: float | None = None,
          seed: int = 0, clean_run: bool = False, config: str | Path | None = None,
          overrides: Sequence[str] = (), progress: bool = True, **options: Any) -> AuditResult:  # fmt: skip
    """Audit every pair of ``source`` (a collection's path in any form ``mispair audit`` reads, or
    a DataFrame with an image and a caption column) into the folder ``out`` (default: a new
    temporary folder, kept) and return the :class:`~mispair.audit.AuditResult`.

    ``options``: ``image_column``, ``caption_column``, ``id_column``, ``split_column``, and any
    config section as a mapping, e.g. ``train={"epochs": 5}`` (the same as the override
    ``train.epochs=5``). ``progress=False`` writes nothing to standard output or error (warnings
    are kept in ``result.summary["warnings"]``).
    """
    from mispair.audit import audit_collection

    out = Path(tempfile.mkdtemp(prefix="mispair-audit-")) if out is None else Path(out)
    with _quiet_unless(progress) as caught:
        data = _source_path(source, out)
        result = audit_collection(data, out, config_path=None if config is None else str(config),
                                  overrides=[*_overrides(options), *overrides], plant=plant, seed=seed,
                                  clean_run=clean_run, progress=progress,
                                  log=print if progress else _silent)  # fmt: skip
    if caught:
        result.summary["warnings"] = caught
    return result


def train(source: str | Path | pd.DataFrame, out: str | Path | None = None, *, recipe: str | None = None,
          config: str | Path | None = None, overrides: Sequence[str] = (), progress: bool = True,
          **options: Any) -> TrainedModel:  # fmt: skip
    """Train on ``source`` (as :func:`audit` reads it) into ``out`` (default: a new temporary
    folder) and return the :class:`TrainedModel`: by default the audit's robust run (``holdout``
    on the pretrained backbone); ``recipe`` another recipe with the same model; ``config`` a YAML
    file instead (its planted noise is not applied to your data unless ``data={"noise": ...}``)."""
    from mispair.engine.run import train_run

    out = Path(tempfile.mkdtemp(prefix="mispair-train-")) if out is None else Path(out)
    with _quiet_unless(progress):
        data = _source_path(source, out)
        extra = [*_overrides(options), *overrides] + ([f"recipe={recipe}"] if recipe else [])
        run = training_config(None if config is None else str(config), extra, data=str(data),
                              log=print if progress else _silent)  # fmt: skip
        run.output = str(out)
        summary = train_run(run, progress=progress, log=print if progress else _silent)
    return TrainedModel(out / "best.pt", summary)


def training_config(path: str | None, overrides: Sequence[str], *, data: str | None = None,
                    log: Callable[[str], None] = print) -> RunConfig:  # fmt: skip
    """The run ``mispair train`` trains: the YAML at ``path`` (or, on a user's collection ``data``
    with no file, the audit's robust run; else the embedded default) with the ``overrides``.

    A config pointed at other data (``data`` or a ``data.root=`` override) keeps its model and
    training settings but plants no noise unless the overrides set ``data.noise.*``: a config's
    planted noise is for its own benchmark collection, never silently for a user's data.
    """
    from mispair.audit.collection import AUDIT_RUN

    default = {**AUDIT_RUN, "name": "train"} if data is not None and path is None else None
    config = load_config(path, list(overrides), **({"default": default} if default else {}))
    keys = [o.partition("=")[0].strip() for o in overrides]
    if data is not None:
        config.data.root, config.data.source = data, "auto"
    elif "data.root" in keys and "data.source" not in keys:
        config.data.source = "auto"  # the new root's kind is detected
    pointed = data is not None or "data.root" in keys
    asked = any(k.startswith("data.noise") for k in keys)
    if pointed and path is not None and not asked and (config.data.noise.rate > 0 or config.data.noise.file):
        log(f"note: {path} plants noise into its own collection (data.noise); none is planted into "
            f"{config.data.root} (set data.noise.rate=R to plant some)")  # fmt: skip
        config.data.noise.rate, config.data.noise.file = 0.0, None
    return config


@dataclass
class TrainedModel:
    """A trained run as a notebook uses it: its best checkpoint, its metrics, and encoders of
    captions and pictures into the space the model compares them in (L2-normalised vectors; the
    dot product of an image's and a caption's is the models' mean cosine similarity)."""

    checkpoint: Path
    summary: dict[str, Any]
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
        self.model.prepare_texts(self.model.config.data, tokens, log=_silent)
        return self.model.text_vectors(tokens)

    def encode_images(self, paths: Sequence[str | Path]) -> np.ndarray:
        """``[len(paths), dim]`` float32 vectors of picture files (features by the extractor of
        folder collections, cached beside the checkpoint)."""
        from mispair.data.features import extract_folder_features
        from mispair.data.pairset import PairSet

        files = [Path(p).resolve() for p in paths]
        cache = self.checkpoint.parent / ".mispair_cache"
        features, valid = extract_folder_features(Path("/"), [str(f)[1:] for f in files], progress=False,
                                                  cache_dir=cache)  # fmt: skip
        if not valid.all():
            raise ConfigError(f"{files[int(np.argmin(valid))]}: not a picture mispair can read")
        return self.model.image_vectors(PairSet(features, [], np.zeros(0, dtype=np.int64)))

    def similarity(self, paths: Sequence[str | Path], texts: Sequence[str]) -> np.ndarray:
        """``[len(paths), len(texts)]`` cosine similarities of pictures and texts."""
        return self.encode_images(paths) @ self.encode_texts(texts).T


def _overrides(options: Mapping[str, Any]) -> list[str]:
    """``key=value`` overrides of keyword options: column names go to ``data.<name>``, mappings
    are flattened (``train={"epochs": 5}`` → ``train.epochs=5``)."""
    import json

    flat: list[str] = []

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, Mapping):
            for key, inner in value.items():
                walk(f"{prefix}.{key}", inner)
        else:
            flat.append(f"{prefix}={json.dumps(value)}")

    for key, value in options.items():
        walk(f"data.{key}" if key in COLUMN_OPTIONS else key, value)
    return flat


def _source_path(source: str | Path | pd.DataFrame, out: Path) -> Path:
    """A path the readers open: ``source`` itself, or a DataFrame written as ``out/input.parquet``
    with its relative image paths made absolute (from the working folder)."""
    if isinstance(source, (str, Path)):
        return Path(source)
    try:
        import pandas as pd
    except ImportError:  # pragma: no cover - pandas is a dependency
        raise ConfigError("a DataFrame source needs pandas (pip install pandas)") from None
    if not isinstance(source, pd.DataFrame):
        raise ConfigError(f"source: a path or a pandas DataFrame, got {type(source).__name__}")
    from mispair.data.readers import dataframe_table

    out.mkdir(parents=True, exist_ok=True)
    path = out / "input.parquet"
    dataframe_table(source).to_parquet(path, index=False)
    return path


def _silent(_: str) -> None:
    """A log that says nothing."""


@contextlib.contextmanager
def _quiet_unless(progress: bool) -> Iterator[list[str]]:
    """With ``progress`` False: no progress bar, nothing on standard output or error, the
    warnings collected into the yielded list instead."""
    caught: list[str] = []
    if progress:
        yield caught
        return
    with warnings.catch_warnings(record=True) as records, contextlib.redirect_stdout(io.StringIO()), \
            contextlib.redirect_stderr(io.StringIO()):  # fmt: skip
        warnings.simplefilter("always")
        was_quiet = is_quiet()
        set_quiet(True)
        try:
            yield caught
        finally:
            set_quiet(was_quiet)
            caught.extend(str(r.message) for r in records)
