"""``mispair apply``: a reviewer's decisions on an audit turned into a cleaned collection.

The decisions (``decisions.csv`` as the report downloads it: ``pair_id,decision,caption``, the
decision ``keep``, ``drop`` or ``replace``, the caption only for ``replace``) are checked against
the audit, then the cleaned collection is written into a new folder: ``captions.csv``
(``image,caption,pair_id``, and ``split`` when the collection named its splits), the image files
at the same relative paths (hard-linked to the input's where the file system allows, else
copied; never moved), ``keep.csv`` and ``removed.csv`` (each pair id with its reason). A pair
with no decision is kept, or removed when ``threshold`` is given and its mismatch probability is
at least that. The folder is a collection ``mispair audit`` and ``mispair train`` read as it is.

Precomputed collections without image files (only a feature array) are refused: the cleaned
collection is a folder of files, and such a collection has none to link.
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mispair.atomic import atomic_directory
from mispair.errors import ConfigError, DataError

if TYPE_CHECKING:
    import pandas as pd

DECISIONS = ("keep", "drop", "replace")
OUTPUT_FILES = ("captions.csv", "keep.csv", "removed.csv")
DECISIONS_NAME = re.compile(r"^decisions-(?P<id>[0-9A-Za-z]+)(?: \(\d+\))?\.csv$")
"""The report's download name (a browser may add `` (1)`` to a second download)."""


@dataclass
class AppliedCollection:
    """What :func:`apply_decisions` wrote: the ``folder``, pairs ``kept`` (``replaced`` of them
    with a new caption), pairs ``removed``, image files ``linked`` and ``copied``."""

    folder: Path
    kept: int
    replaced: int
    removed: int
    linked: int
    copied: int


def apply_decisions(
    pairs: pd.DataFrame,
    summary: dict[str, Any],
    decisions: str | Path | pd.DataFrame,
    out: str | Path,
    *,
    threshold: float | None = None,
    fdr: float | None = None,
) -> AppliedCollection:
    """Write the collection of the audit (``pairs``, ``summary``) with ``decisions`` applied into
    the new folder ``out`` (see the module's description). Every check runs before anything is
    written, and the folder is written beside ``out`` and renamed into place: bad input is a
    one-line :class:`~mispair.errors.DataError` and leaves nothing behind. ``threshold`` drops the
    undecided pairs whose mismatch probability reaches it; ``fdr`` those whose q-value is at most
    it (the cut whose estimated share of matched pairs among the dropped is ``fdr``)."""
    import pandas as pd

    if threshold is not None and not 0 <= threshold <= 1:
        raise ConfigError(f"--threshold: a mismatch probability in [0, 1], got {threshold}")
    if fdr is not None and not 0 < fdr < 1:
        raise ConfigError(f"--fdr: a false-discovery rate in (0, 1), got {fdr}")
    if fdr is not None and threshold is not None:
        raise ConfigError("--fdr and --threshold: give one of them")
    if fdr is not None and ("q_value" not in pairs or pairs["q_value"].isna().all()):
        raise ConfigError("--fdr: this audit has no q-values (audited without decoys); give --threshold")
    root = _image_root(summary)
    out = _checked_out(Path(out), summary, root)
    table = read_decisions(decisions, summary.get("audit_id"))
    _check_pair_ids(table, pairs, "decisions" if isinstance(decisions, pd.DataFrame) else str(decisions))
    rows = _outcome(pairs, summary, table, threshold, fdr)
    kept = rows[rows["kept"]]
    source = {image: root / image for image in kept["image"]}  # an absolute id stays itself
    kept = kept.assign(image=kept["image"].map(lambda image: _relative(image, root)))
    missing = [i for i in dict.fromkeys(source) if not source[i].is_file()]
    if missing:
        raise DataError(
            f"{root / missing[0]}: the image file is gone ({len(missing)} missing); the "
            "collection moved since the audit"
        )
    counts = {"linked": 0, "copied": 0}

    def write(folder: Path) -> None:
        columns = ["image", "caption", "pair_id"] + (["split"] if summary.get("split_note") is None else [])
        kept[columns].to_csv(folder / "captions.csv", index=False, lineterminator="\n")
        kept[["pair_id", "reason"]].to_csv(folder / "keep.csv", index=False, lineterminator="\n")
        rows[~rows["kept"]][["pair_id", "reason"]].to_csv(
            folder / "removed.csv", index=False, lineterminator="\n"
        )
        for image, file in source.items():
            counts[_link_or_copy(file, folder / _relative(image, root))] += 1

    atomic_directory(
        out,
        write,
        what="cleaned collection",
        replaceable=lambda p: all((p / name).is_file() for name in OUTPUT_FILES),
    )
    replaced = int((kept["reason"] == "replace").sum())
    return AppliedCollection(out, len(kept), replaced, int((~rows["kept"]).sum()), **counts)


def read_decisions(decisions: str | Path | pd.DataFrame, audit: str | None) -> pd.DataFrame:
    """The decisions as a table of strings (``pair_id``, ``decision`` in :data:`DECISIONS`,
    ``caption``: the new caption of a ``replace``, else ""), checked: one row per pair id, no
    unknown decision, no empty replacement, a ``decisions-<id>.csv`` of this ``audit``."""
    import pandas as pd

    if isinstance(decisions, pd.DataFrame):
        frame, where = decisions.fillna("").astype(str), "decisions"
    else:
        path = Path(decisions)
        if not path.is_file():
            raise DataError(f"--decisions {path}: no such file; give the decisions.csv the report downloaded")
        named = DECISIONS_NAME.match(path.name)
        if audit and named and named["id"] != audit:
            raise DataError(
                f"{path}: decisions of audit {named['id']}, not of this audit ({audit}); give "
                "the file downloaded from this audit's report"
            )
        frame, where = _read_csv(path), str(path)
    missing = [c for c in ("pair_id", "decision") if c not in frame.columns]
    if missing:
        raise DataError(
            f"{where}: no column {missing[0]!r}; expected pair_id,decision,caption "
            f"(columns found: {', '.join(map(str, frame.columns)) or 'none'})"
        )
    frame = pd.DataFrame(
        {
            "pair_id": frame["pair_id"].str.strip(),
            "decision": frame["decision"].str.strip().str.lower(),
            "caption": frame["caption"].str.strip() if "caption" in frame else "",
        }
    )
    _check_rows(frame, where)
    return frame


def _read_csv(path: Path) -> pd.DataFrame:
    import pandas as pd

    try:
        return pd.read_csv(path, dtype=str, keep_default_na=False, encoding="utf-8-sig")
    except UnicodeDecodeError:
        raise DataError(f"{path}: not UTF-8 text; save the decisions as UTF-8") from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DataError(f"{path}: not a readable CSV file ({first})") from None


def _check_rows(frame: pd.DataFrame, where: str) -> None:
    unknown = frame[~frame["decision"].isin(DECISIONS)]
    if len(unknown):
        first = unknown.iloc[0]
        raise DataError(
            f"{where}: pair {first['pair_id']!r} has decision {first['decision']!r}; a decision "
            f"is one of {', '.join(DECISIONS)} ({len(unknown)} row(s) with another)"
        )
    empty = frame[(frame["decision"] == "replace") & (frame["caption"] == "")]
    if len(empty):
        raise DataError(
            f"{where}: pair {empty.iloc[0]['pair_id']!r} is replaced by an empty caption "
            f"({len(empty)} such row(s)); type the new caption, or drop the pair"
        )
    twice = frame["pair_id"][frame["pair_id"].duplicated()]
    if len(twice):
        raise DataError(f"{where}: pair {twice.iloc[0]!r} has more than one decision; keep one row per pair")


def _check_pair_ids(decisions: pd.DataFrame, pairs: pd.DataFrame, where: str) -> None:
    known = set(pairs["pair_id"].astype(str))
    unknown = [i for i in decisions["pair_id"] if i not in known]
    if unknown and len(unknown) == len(decisions):
        raise DataError(
            f"{where}: none of the {len(unknown)} pair ids is in this audit (e.g. "
            f"{unknown[0]!r}); these are the decisions of another audit"
        )
    if unknown:
        raise DataError(
            f"{where}: {len(unknown)} pair id(s) not in this audit (e.g. {unknown[0]!r}); "
            "were they made on another audit of the collection?"
        )


def _outcome(
    pairs: pd.DataFrame,
    summary: dict[str, Any],
    decisions: pd.DataFrame,
    threshold: float | None,
    fdr: float | None = None,
) -> pd.DataFrame:
    """Every pair in pair-id order (numbers by value) with ``image`` (as the input pairs it: a
    swap the audit planted is undone), ``caption`` (replaced where decided), ``split``, ``kept``
    and ``reason`` (the decision, ``undecided``, or the threshold it met)."""
    planted = summary.get("planted") is not None and "true_image_id" in pairs
    rows = pairs.assign(pair_id=pairs["pair_id"].astype(str)).merge(
        decisions, on="pair_id", how="left", suffixes=("", "_new")
    )
    rows = rows.iloc[sorted(range(len(rows)), key=lambda k: _natural(rows["pair_id"].iat[k]))]
    reason = rows["decision"].fillna("undecided")
    if threshold is not None:
        over = (reason == "undecided") & (rows["mismatch_probability"] >= threshold)
        reason = reason.where(~over, f"mismatch probability >= {threshold:g}")
    if fdr is not None:
        over = (reason == "undecided") & (rows["q_value"] <= fdr)
        reason = reason.where(~over, f"q-value <= {fdr:g}")
    caption = rows["caption"].where(rows["decision"] != "replace", rows["caption_new"])
    kept = reason.isin(["keep", "replace", "undecided"])
    return rows.assign(
        image=rows["true_image_id"] if planted else rows["image_id"],
        caption=caption,
        reason=reason,
        kept=kept,
    )


def _natural(pair_id: str) -> list[tuple[int, int | str]]:
    """A sort key that orders the numbers in ids by value (``train/2`` before ``train/10``)."""
    return [(0, int(part)) if part.isdigit() else (1, part) for part in re.split(r"(\d+)", pair_id)]


def _relative(image: str, root: Path) -> str:
    """Where ``image`` goes in the cleaned folder: its id, or, for an absolute path (a DataFrame's
    pictures), its path below the folder that holds every picture."""
    return Path(image).relative_to(root).as_posix() if Path(image).is_absolute() else image


def _image_root(summary: dict[str, Any]) -> Path:
    root = summary.get("image_root")
    if root is None:
        raise DataError(
            f"{summary.get('collection', 'the collection')}: the audit found no image file for "
            "its image ids (a precomputed feature array?); apply writes a folder of image files, "
            "so it needs a collection of files (or an audit with --images)"
        )
    return Path(root)


def _checked_out(out: Path, summary: dict[str, Any], root: Path) -> Path:
    """``out``, absolute, refused when it lies inside what it would be made from."""
    out = out.resolve()
    audit_folder = Path(summary["run"]).parent if summary.get("run") else None
    inputs = [Path(p).resolve() for p in (summary.get("collection"), audit_folder) if p]
    for folder in [*inputs, root.resolve()]:
        if out.is_relative_to(folder):
            raise DataError(
                f"--out {out}: inside the input {folder}; the input is never modified, choose "
                "a folder outside it"
            )
    return out


def _link_or_copy(source: Path, target: Path) -> str:
    """Hard-link ``source`` at ``target`` (copy it where links cannot be made): which was done."""
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(source, target)
        return "linked"
    except OSError:
        shutil.copy2(source, target)
        return "copied"
