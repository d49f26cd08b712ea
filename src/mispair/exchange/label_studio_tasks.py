"""An audit's pairs as Label Studio tasks: ``tasks.json`` (one task per pair: the picture, the
caption, the pair id) and ``config.xml`` (the labelling interface: the picture, the caption, a
choice correct / mismatched / unsure and a text area for a corrected caption).

Which pairs: the first ``n`` of the audit's random order (``sample.csv``: a uniform sample, what
``mispair estimate`` needs), the suspected pairs (most suspect first), or both (the sample's
first, then the suspects not in it). Each task says which (``source``) and, for the sample, its
place in the order (``order``); the audit's scores are left out of the task, so they cannot sway
the person who judges it.

The pictures travel inside the tasks by default, as ``data:`` URIs of JPEG thumbnails
(``size`` pixels, 384 by default, about 10–40 KB each): the tasks then show in any Label Studio,
local or hosted, with no storage set up, and cannot point at a file that moved; the export is
bounded (:data:`MAX_INLINE_BYTES`). With ``local_files`` (a folder), each task names its picture
in Label Studio's local-storage form instead (``/data/local-files/?d=<path below that folder>``):
small tasks and full-size pictures, for a Label Studio started with
``LABEL_STUDIO_LOCAL_FILES_SERVING_ENABLED=true`` and
``LABEL_STUDIO_LOCAL_FILES_DOCUMENT_ROOT`` set to that folder, with a Local Files storage added
to the project.

``out`` is an output folder as every command's (:mod:`mispair.output_folder`): new, empty, or
marked as mispair's by an earlier export; a folder of someone else's (their own ``tasks.json``
included) only with ``overwrite``, and a link never. It is checked before any picture is read and
marked when the files are written.
"""

from __future__ import annotations

import base64
import io
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from mispair.atomic import atomic_text
from mispair.audit.audit_folder import plain_name
from mispair.errors import ConfigError, DataError
from mispair.estimate.labels import LABELS
from mispair.estimate.sample import read_sample
from mispair.output_folder import check_folder, claim_folder

if TYPE_CHECKING:
    import pandas as pd

CHOICE = "judgement"
"""The name of the config's choice (``from_name`` of its answers)."""
CORRECTED = "corrected_caption"
"""The name of the config's text area for a corrected caption."""
MAX_INLINE_BYTES = 256 * 2**20
"""The largest ``tasks.json`` with pictures inline; past it, use local files."""
OWN = ("tasks.json", "config.xml")
"""What an export writes into its folder."""


def labelling_config() -> str:
    """The Label Studio labelling config of mispair's tasks (``config.xml``)."""
    choices = "\n".join(f'    <Choice value="{label}"/>' for label in LABELS)
    return f"""<View>
  <Header value="Does the caption describe the picture?"/>
  <Image name="image" value="$image" maxWidth="480px"/>
  <Text name="caption" value="$caption"/>
  <Choices name="{CHOICE}" toName="caption" choice="single-radio" showInline="true" required="true">
{choices}
  </Choices>
  <Header value="Mismatched: a caption that does describe it (optional)" size="6"/>
  <TextArea name="{CORRECTED}" toName="caption" editable="true" maxSubmissions="1" rows="2"/>
</View>
"""


@dataclass(frozen=True)
class TaskExport:
    """What :func:`write_tasks` wrote: the ``folder``, how many tasks of the ``sample`` and of
    the ``suspects``, and the size of ``tasks.json`` in bytes."""

    folder: Path
    sample: int
    suspects: int
    size: int


def write_tasks(
    audit: str | Path,
    pairs: pd.DataFrame,
    summary: dict[str, Any],
    out: str | Path,
    *,
    sample: int | None = None,
    suspects: bool = False,
    local_files: str | Path | None = None,
    size: int = 384,
    overwrite: bool = False,
) -> TaskExport:
    """Write ``tasks.json`` and ``config.xml`` of the audit in folder ``audit`` (its ``pairs``
    and ``summary``) into the folder ``out`` (see the module's description; ``overwrite``: into
    a folder mispair did not create). Every check runs before a file is written."""
    if not sample and not suspects:
        raise ConfigError("say which pairs: --sample N (the audit's random sample) and/or --suspects")
    check_folder(out, (), overwrite=overwrite)  # the user's own tasks.json is not mispair's
    chosen = _chosen(audit, pairs, sample, suspects)
    root = _image_root(summary)
    picture = _picture_url(root, Path(local_files) if local_files else None, size)
    tasks = [
        {"data": _task_data(row, source, order, picture, summary.get("audit_id"))}
        for row, source, order in chosen
    ]
    text = json.dumps(tasks, ensure_ascii=False, indent=1)
    if local_files is None and len(text) > MAX_INLINE_BYTES:
        raise DataError(
            f"{len(tasks)} tasks with their pictures inline would take {len(text) / 2**20:.0f} MB; "
            "give --local-files FOLDER (Label Studio's local storage) or fewer pairs"
        )
    folder = claim_folder(out, "export", (), overwrite=overwrite)
    atomic_text(folder / "config.xml", labelling_config())
    atomic_text(folder / "tasks.json", text + "\n")
    counts = [source for _, source, _ in chosen]
    return TaskExport(folder, counts.count("sample"), counts.count("suspects"), len(text.encode()))


def _chosen(
    audit: str | Path, pairs: pd.DataFrame, sample: int | None, suspects: bool
) -> list[tuple[Any, str, int | None]]:
    """``(row, source, order)`` of each task: the sample's first ``sample`` pairs, then the
    suspects not among them, most suspect first."""
    by_id = pairs.set_index(pairs["pair_id"].astype(str), drop=False)
    chosen: list[tuple[Any, str, int | None]] = []
    if sample:
        order = read_sample(audit)
        unknown = order.loc[~order["pair_id"].isin(by_id.index), "pair_id"]
        if len(unknown):
            raise DataError(f"{audit}: sample.csv names pair {unknown.iloc[0]!r}, not in pairs.parquet")
        for pair_id, place in zip(order["pair_id"].iloc[:sample], order["order"].iloc[:sample]):
            chosen.append((by_id.loc[pair_id], "sample", int(place)))
    if suspects:
        if "suspected" not in pairs:
            raise DataError(f"{audit}: this audit marks no suspects (no column 'suspected'); audit it again")
        taken = {row["pair_id"] for row, _, _ in chosen}
        ranked = pairs.sort_values("rank", kind="stable") if "rank" in pairs else pairs
        for _, row in ranked[ranked["suspected"].astype(bool)].iterrows():
            if str(row["pair_id"]) not in taken:
                chosen.append((row, "suspects", None))
    if not chosen:
        raise DataError(f"{audit}: no pair to export (the audit suspects none); try --sample N")
    return chosen


def _task_data(
    row: Any, source: str, order: int | None, picture: Any, audit_id: str | None
) -> dict[str, Any]:
    data = {
        "image": picture(str(row["image_id"])),
        "caption": str(row["caption"]),
        "pair_id": str(row["pair_id"]),
        "source": source,
    }
    if order is not None:
        data["order"] = order
    if audit_id:
        data["audit_id"] = audit_id
    return data


def _image_root(summary: dict[str, Any]) -> Path:
    root = summary.get("image_root")
    if not root or not Path(root).is_dir():
        raise DataError(
            f"this audit's pictures are not files in a folder (image_root {root!r}); Label "
            "Studio tasks show picture files: audit the collection from its files"
        )
    return Path(root)


def _picture_url(root: Path, local_files: Path | None, size: int) -> Any:
    """The function from an image id to the URL its task shows."""
    if local_files is None:
        return lambda image_id: _data_uri(root / plain_name(image_id, root, "pairs.parquet: image id"), size)
    base = Path(os.path.realpath(local_files))
    if not base.is_dir():
        raise ConfigError(f"--local-files {local_files}: not a folder")

    def url(image_id: str) -> str:
        path = Path(os.path.realpath(root / plain_name(image_id, root, "pairs.parquet: image id")))
        if not path.is_relative_to(base):
            raise ConfigError(
                f"--local-files {local_files}: picture {path} is not inside it; give a folder that "
                "holds the collection's pictures (Label Studio's document root)"
            )
        return "/data/local-files/?d=" + quote(path.relative_to(base).as_posix())

    return url


def _data_uri(path: Path, size: int) -> str:
    """The picture at ``path`` as a ``data:image/jpeg;base64,...`` URI, ``size`` pixels square."""
    from mispair.data.pictures.images import load_picture

    buffer = io.BytesIO()
    load_picture(path, size).save(buffer, format="JPEG", quality=85)
    return "data:image/jpeg;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")
