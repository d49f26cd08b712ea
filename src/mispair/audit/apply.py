"""``mispair apply``: a reviewer's decisions on an audit turned into a cleaned collection.

The decisions (``decisions.csv`` as the report downloads it: ``pair_id,decision,caption``, the
decision ``keep``, ``drop`` or ``replace``, the caption only for ``replace``) are checked against
the audit, then the cleaned collection is written into a new folder, in the collection's own form
(:mod:`mispair.audit.writers`: a folder's captions file under its own name and format, with its
own columns, a table file, shards, COCO JSON) or as apply's plain folder (``--format folder``, a
DataFrame's audit): ``captions.csv`` (``image,caption,pair_id``, and ``split`` when the
collection named its splits). Beside either: the image files at the same relative paths
(hard-linked to the input's where the file system allows, else copied; never moved; not for
shards or image bytes), ``keep.csv`` and ``removed.csv`` (each pair id with its reason). A pair
with no decision is kept, or removed when ``threshold`` is given and its mismatch probability is
at least that. The folder is a collection ``mispair audit`` and ``mispair train`` read as it is.

Precomputed collections without image files (only a feature array) are refused: the cleaned
collection is a folder of files, and such a collection has none to link.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, TypedDict

from mispair.atomic import atomic_directory, atomic_text, atomic_write
from mispair.audit.audit_folder import check_pairs, check_summary, plain_name, read_run_data
from mispair.audit.picture_digests import check_unchanged, expected_digests
from mispair.errors import ConfigError, DataError
from mispair.limits import limit, raise_hint
from mispair.output_folder import MARKER
from mispair.safe_io import made_parents, read_input, spreadsheet_text, write_csv

if TYPE_CHECKING:
    import pandas as pd

DECISIONS = ("keep", "drop", "replace")
SUSPECTED = {"true": "drop", "1": "drop", "false": "keep", "0": "keep"}
"""A decisions file's ``suspected`` values (any case) and the decision each one is."""
OUTPUT_FILES = ("captions.csv", "keep.csv", "removed.csv", "keep_keys.txt", "uids.npy")
MARKER_TEXT = "mispair apply output\n"
"""The first line of the marker apply writes; its second lists (JSON) the files it wrote."""
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
    form: str = "folder"
    """The form written (``folder``, ``table``, ``webdataset``, ``imagefolder``, ``coco``)."""
    files: list[str] | None = None
    """The collection's files written in its own form (tables, shards, JSON; None for a folder)."""


class ApplyOptions(TypedDict, total=False):
    """:func:`apply_decisions`'s keyword arguments, which :meth:`AuditResult.apply
    <mispair.audit.result.AuditResult.apply>` passes on."""

    threshold: float | None
    fdr: float | None
    overwrite: bool
    format: str
    shard_bytes: int | None


def apply_decisions(
    pairs: pd.DataFrame,
    summary: dict[str, Any],
    decisions: str | Path | pd.DataFrame | None,
    out: str | Path,
    *,
    threshold: float | None = None,
    fdr: float | None = None,
    overwrite: bool = False,
    format: str = "same",
    shard_bytes: int | None = None,
) -> AppliedCollection:
    """Write the collection of the audit (``pairs``, ``summary``) with ``decisions`` applied into
    the new folder ``out`` (see the module's description). Every check runs before anything is
    written, and the folder is written beside ``out`` and renamed into place: bad input is a
    one-line :class:`~mispair.errors.DataError` and leaves nothing behind. ``threshold`` drops the
    undecided pairs whose mismatch probability reaches it; ``fdr`` those whose q-value is at most
    it (the cut whose estimated share of matched pairs among the dropped is ``fdr``). Without
    ``decisions`` (None) one of the two must be given: the drop is the audit's numbers alone.

    The audit is untrusted input: its summary, pairs and run config are checked
    (:mod:`mispair.audit.audit_folder`), and every picture is checked again when it is linked (a
    regular file inside the image root, reached through no link); nothing is written outside
    ``out``. ``out`` is marked as apply's (``.mispair-output``); an existing non-empty ``out`` is
    refused unless ``overwrite``: then an earlier cleaned collection holding only apply's files is
    replaced, and any other folder gets apply's files written into it, nothing else touched.

    ``format="same"`` writes a folder with its captions file, a table file, WebDataset shards, an
    imagefolder or COCO JSON in the collection's own form (:mod:`mispair.audit.writers`;
    ``shard_bytes`` bounds an output shard); ``"folder"`` (and a DataFrame's audit, an audit
    without its run) apply's plain folder above. Keep-lists are written beside either."""

    from mispair.audit.writers import Decided, WriteRequest, collection_form, write_keep_lists
    from mispair.audit.writers.table import csv_text

    if threshold is not None and not 0 <= threshold <= 1:
        raise ConfigError(f"--threshold: a mismatch probability in [0, 1], got {threshold}")
    if fdr is not None and not 0 < fdr < 1:
        raise ConfigError(f"--fdr: a false-discovery rate in (0, 1), got {fdr}")
    if fdr is not None and threshold is not None:
        raise ConfigError("--fdr and --threshold: give one of them")
    if decisions is None and fdr is None and threshold is None:
        raise ConfigError(
            "--decisions: give the decisions, or --fdr / --threshold to drop by the audit's numbers"
        )
    if os.path.islink(out):  # resolving it would write wherever it points, even a dangling link
        raise DataError(f"--out {out}: a symbolic link; give a folder path that is no link")
    if fdr is not None and ("q_value" not in pairs or pairs["q_value"].isna().all()):
        raise ConfigError("--fdr: this audit has no q-values (audited without decoys); give --threshold")
    summary = check_summary(summary, "the audit's summary")
    pairs = check_pairs(pairs.copy(), summary, "the audit's pairs")
    root = _image_root(summary, pairs)
    out = _checked_out(Path(out), summary, root)
    mode = _out_mode(out, overwrite)
    table = read_decisions(decisions, summary.get("audit_id"))
    _check_pair_ids(table, pairs, "decisions" if not isinstance(decisions, (str, Path)) else str(decisions))
    rows = _outcome(pairs, summary, table, threshold, fdr)
    form = collection_form(summary, format)
    kept = rows[rows["kept"]]
    names = {image: plain_name(image, root, "the audit's pairs: image id") for image in kept["image"]}
    kept = kept.assign(image=kept["image"].map(names))
    pictures = form is None or form.pictures
    source = {name: _checked_source(root, name) for name in dict.fromkeys(names.values()) if pictures}
    check_unchanged(expected_digests(kept), source)  # each picture the one the audit scored
    counts = {"linked": 0, "copied": 0}
    files: list[str] = []

    def link_pictures(folder: Path, written: list[str] | tuple[str, ...] = ()) -> dict[str, int]:
        clash = sorted(set(source) & {*written, *OUTPUT_FILES, MARKER})
        if clash:  # a picture linked over the cleaned captions, or a report over the picture
            raise DataError(
                f"the audit's pairs: image id {clash[0]!r} is named like a file apply writes beside "
                "the pictures (a damaged or tampered audit, or rename the picture and audit again)"
            )
        for name, file in source.items():
            counts[_link_or_copy(file, folder, name)] += 1
        return dict(counts)

    def write(folder: Path) -> list[str]:
        if form is not None:
            new = [c if r == "replace" else None for c, r in zip(kept["caption"], kept["reason"])]
            decided = Decided(dict(zip(kept["pair_id"].astype(str), new)))
            collection = Path(summary["collection"])
            request = WriteRequest(collection, form.columns, decided, link_pictures, shard_bytes)
            files.extend(form.write(request, folder).files)
        else:
            split = ["split"] if summary.get("split_note") is None else []
            columns = ["image", "caption", "pair_id", *split]
            lines = [columns, *kept[columns].itertuples(index=False, name=None)]
            atomic_text(folder / "captions.csv", csv_text(lines))  # a CR in a caption quoted
            link_pictures(folder)
        for name, frame in (("keep.csv", kept), ("removed.csv", rows[~rows["kept"]])):
            atomic_write(
                folder / name,
                lambda handle, f=frame: write_csv(f[["pair_id", "reason"]], handle, line_end="\n"),
            )
        keys = kept["pair_id"].astype(str).tolist()
        lists = write_keep_lists(folder, keys, shard_keys=bool(form and form.shard_keys))
        table = files if form is not None else ["captions.csv"]
        wrote = [*table, *source, "keep.csv", "removed.csv", *lists]
        atomic_text(folder / MARKER, MARKER_TEXT + json.dumps(wrote) + "\n")
        return wrote

    if mode == "into":
        earlier = _manifest(out)
        _remove_stale(out, earlier, write(out))
    else:
        atomic_directory(out, write, what="cleaned collection", replaceable=lambda p: mode == "replace")
    replaced = int((kept["reason"] == "replace").sum())
    removed = int((~rows["kept"]).sum())
    written = {"form": form.name, "files": files} if form else {}
    return AppliedCollection(out, len(kept), replaced, removed, **counts, **written)


def read_decisions(decisions: str | Path | pd.DataFrame | None, audit: str | None) -> pd.DataFrame:
    """The decisions as a table of strings (``pair_id``, ``decision`` in :data:`DECISIONS`,
    ``caption``: the new caption of a ``replace``, else ""), checked: one row per pair id, no
    unknown decision, no empty replacement, decisions of this ``audit`` (by the ``audit_id``
    column the review page writes on every row, whatever the file is called, and by the
    ``decisions-<id>.csv`` name); None: no decisions. A file with ``suspected`` instead of
    ``decision`` (``estimate_pairs.csv``) drops its suspected pairs (:func:`_suspected_decisions`)."""
    import pandas as pd

    if decisions is None:
        return pd.DataFrame({"pair_id": [], "decision": [], "caption": []}, dtype=str)
    if isinstance(decisions, pd.DataFrame):
        frame, where = decisions.fillna("").astype(str), "decisions"
    else:
        path = Path(decisions)
        if not os.path.lexists(path):
            raise DataError(f"--decisions {path}: no such file; give the decisions.csv the report downloaded")
        named = DECISIONS_NAME.match(path.name)
        if audit and named and named["id"] != audit:
            raise DataError(
                f"{path}: decisions of audit {named['id']}, not of this audit ({audit}); give "
                "the file downloaded from this audit's report"
            )
        frame, where = _read_csv(path), str(path)
    if "decision" not in frame.columns and "suspected" in frame.columns:  # estimate_pairs.csv
        frame = _suspected_decisions(frame, where)
    missing = [c for c in ("pair_id", "decision") if c not in frame.columns]
    if missing:
        raise DataError(
            f"{where}: no column {missing[0]!r}; expected pair_id,decision,caption "
            f"(columns found: {', '.join(map(str, frame.columns)) or 'none'})"
        )
    _check_audit(frame, where, audit)
    frame = pd.DataFrame(  # cells the report made spreadsheet-safe ('=...) read as they were
        {
            "pair_id": frame["pair_id"].str.strip().map(spreadsheet_text).str.strip(),
            "decision": frame["decision"].str.strip().str.lower(),
            "caption": frame["caption"].str.strip().map(spreadsheet_text).str.strip()
            if "caption" in frame
            else "",
        }
    )
    _check_rows(frame, where)
    return frame


def _suspected_decisions(frame: pd.DataFrame, where: str) -> pd.DataFrame:
    """``estimate_pairs.csv``'s rows as decisions: a suspected pair dropped, the others kept.

    The audit's own ``pairs.csv`` (its ``suspected``: the scores' cut, which no one checked) is
    refused, as is a ``suspected`` other than :data:`SUSPECTED`'s (``yes`` is not taken for true)."""
    if "held_out_score" in frame.columns:
        raise DataError(
            f"{where}: the audit's pairs.csv, not decisions (its suspected column is the scores' cut, "
            "which no one checked); give --fdr to drop by the audit's numbers, or the decisions file "
            "the review page downloads, or estimate_pairs.csv"
        )
    value = frame["suspected"].str.strip().str.lower()
    bad = ~value.isin(SUSPECTED)
    if bad.any():
        k = int(bad.to_numpy().argmax())
        pair = f" (pair {frame['pair_id'].iloc[k][:80]!r})" if "pair_id" in frame else ""
        raise DataError(
            f"{where}: row {k + 2}{pair} has suspected {frame['suspected'].iloc[k][:40]!r}; suspected is "
            f"true or false (or 1 or 0) ({int(bad.sum())} row(s) with another)"
        )
    return frame.assign(decision=value.map(SUSPECTED), caption="")


def _check_audit(frame: pd.DataFrame, where: str, audit: str | None) -> None:
    """Decisions whose ``audit_id`` column names another audit are refused (a file without the
    column, from an older page or written by hand, is taken as it is)."""
    if not audit or "audit_id" not in frame:
        return
    named = frame["audit_id"].str.strip()
    other = named[(named != "") & (named != audit)]
    if len(other):
        raise DataError(
            f"{where}: decisions of audit {other.iloc[0][:40]!r}, not of this audit ({audit}); give "
            "the decisions downloaded from this audit's report"
        )


def _read_csv(path: Path) -> pd.DataFrame:
    import pandas as pd

    data = read_input(
        path, limit("MAX_DECISIONS_BYTES"), "a decisions file", hint=raise_hint("MAX_DECISIONS_BYTES")
    )
    try:
        frame = pd.read_csv(io.BytesIO(data), dtype=str, keep_default_na=False, encoding="utf-8-sig")
    except UnicodeDecodeError:
        raise DataError(f"{path}: not UTF-8 text; save the decisions as UTF-8") from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DataError(f"{path}: not a readable CSV file ({first})") from None
    return frame


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


def _image_root(summary: dict[str, Any], pairs: pd.DataFrame) -> Path:
    """The audit's image root, resolved: a real folder, not the file system's root, and the
    audited collection (the collection's folder or one inside it, the ``--images`` folder, a
    folder of mispair's cache, the folder of a DataFrame's absolute paths, or the run's
    ``data.image_root``)."""
    root = summary.get("image_root")
    if root is None:
        raise DataError(
            f"{summary.get('collection', 'the collection')}: the audit found no image file for "
            "its image ids (a precomputed feature array?); apply writes a folder of image files, "
            "so it needs a collection of files (or an audit with --images)"
        )
    found = Path(root).resolve()
    if not found.is_dir() or found == Path(found.anchor):
        raise DataError(
            f"{root}: the audit's image root is not a folder of pictures; the collection moved, "
            "or the audit was altered"
        )
    if not any(found.is_relative_to(base) for base in _collection_folders(summary, pairs)):
        raise DataError(
            f"{root}: the audit's image root is not the audited collection "
            f"{summary.get('collection')!r}; a tampered audit (or audit again with --images "
            "naming the pictures' folder)"
        )
    return found


def _collection_folders(summary: dict[str, Any], pairs: pd.DataFrame) -> list[Path]:
    from mispair.data.cache_folder import cache_root

    collection = Path(summary["collection"])
    folders = [
        collection.resolve() if collection.is_dir() else collection.resolve().parent,
        cache_root().resolve(),
    ]
    folders += [Path(summary[k]).resolve() for k in ("pictures",) if summary.get(k)]
    ids = pairs["image_id"]
    if len(ids) and ids.str.startswith("/").all():  # a DataFrame's pictures: the folder holding them
        folders.append(Path(os.path.commonpath([os.path.dirname(i) for i in ids.unique()])).resolve())
    run_root = _run_image_root(summary)
    return folders + ([run_root] if run_root is not None else [])


def _run_image_root(summary: dict[str, Any]) -> Path | None:
    """The ``data.image_root`` of the audit's run config, if it names one and the config is the
    audit's own (:func:`~mispair.audit.audit_folder.read_run_data`: a regular bounded file naming
    the summary's collection; one that is not widens nothing here, and the collection's own form
    refuses it)."""
    try:
        data = read_run_data(summary)
    except DataError:
        return None
    root = data.get("image_root") if data is not None else None
    return Path(root).resolve() if root and "\0" not in root and Path(root).is_absolute() else None


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


def _checked_source(root: Path, name: str) -> Path:
    """The picture ``name`` below ``root`` when it is a regular file reached through no link
    (checked at apply time: the collection may have changed since the audit)."""
    path = root.joinpath(*PurePosixPath(name).parts)
    where = root
    for part in PurePosixPath(name).parts:
        where = where / part
        try:
            info = os.lstat(where)
        except FileNotFoundError:
            raise DataError(f"{path}: the image file is gone; the collection moved since the audit") from None
        except OSError as exc:
            raise DataError(f"{path}: cannot read the image file ({exc.strerror or exc})") from None
        if stat.S_ISLNK(info.st_mode):
            raise DataError(
                f"{where}: a symbolic link in the collection; apply copies only regular files inside "
                "the collection (replace the link by the file, or remove the pair)"
            )
    if not stat.S_ISREG(info.st_mode):
        raise DataError(f"{path}: not a regular file; apply copies only regular files inside the collection")
    return path


def _out_mode(out: Path, overwrite: bool) -> str:
    """How ``out`` is written: ``new`` (missing or empty), ``replace`` (an earlier cleaned
    collection holding only apply's files, with ``overwrite``) or ``into`` (any other folder, with
    ``overwrite``: apply's files written into it, nothing else touched); else refused."""
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        raise DataError(f"{out}: exists and is not a folder; choose another path for the cleaned collection")
    if not out.is_dir() or not any(out.iterdir()):
        return "new"
    marker = out / MARKER
    ours = marker.is_file() and not marker.is_symlink() and _marker_text(marker).startswith(MARKER_TEXT)
    if ours and not overwrite:
        raise DataError(
            f"{out}: holds a cleaned collection an earlier `mispair apply` wrote; choose a new --out, "
            "or add --overwrite to replace it (files you added to it are kept)"
        )
    if not overwrite:
        first = sorted(p.name for p in out.iterdir())[0]
        raise DataError(
            f"{out}: a folder that mispair did not create (it holds {first!r}); choose an empty or "
            "new --out, or add --overwrite to write the cleaned collection into it (nothing else "
            "there is touched)"
        )
    return "replace" if ours and _only_applys(out) else "into"


def _marker_text(marker: Path) -> str:
    try:
        data = read_input(marker, limit("MAX_TABLE_BYTES"), "a folder's marker", links=False)
    except DataError:
        return ""
    return data.decode("utf-8", "replace")


def _manifest(out: Path) -> list[str] | None:
    """The files an earlier apply wrote into ``out``, as its marker lists them (relative names),
    or None where the marker lists none (written before it did, or not apply's)."""
    text = _marker_text(out / MARKER)
    if not text.startswith(MARKER_TEXT):
        return None
    try:
        names = json.loads(text[len(MARKER_TEXT) :] or "null")
    except ValueError:
        return None
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        return None
    return names


def _remove_stale(out: Path, earlier: list[str] | None, now: list[str]) -> None:
    """Remove from ``out`` the files an earlier apply wrote that this one did not write again (a
    dropped picture, a shard that is no longer written): the cleaned collection holds only this
    apply's output beside the files the user added. Only plain relative names of regular files
    are removed, never a link or anything through one."""
    for name in sorted(set(earlier or ()) - set(now)):
        parts = PurePosixPath(name).parts
        if not parts or name.startswith("/") or ".." in parts:
            continue
        path, ok = out, True
        for part in parts[:-1]:
            path = path / part
            ok = ok and path.is_dir() and not path.is_symlink()
        path = path / parts[-1]
        if ok and path.is_file() and not path.is_symlink():
            path.unlink()


def _only_applys(out: Path) -> bool:
    """``out`` holds nothing but what an earlier apply wrote (the files its marker lists; for an
    older marker, its tables and the pictures its ``captions.csv`` names)."""
    import pandas as pd

    listed = _manifest(out)
    if listed is not None:
        return _holds_only(out, {*listed, MARKER})
    try:
        data = read_input(out / "captions.csv", limit("MAX_TABLE_BYTES"), "a cleaned collection", links=False)
        images = set(pd.read_csv(io.BytesIO(data), dtype=str, keep_default_na=False)["image"])
    except (DataError, ValueError, KeyError, pd.errors.ParserError, pd.errors.EmptyDataError):
        return False
    return _holds_only(out, {*OUTPUT_FILES, MARKER, *images})


def _holds_only(out: Path, own: set[str]) -> bool:
    """Every file below ``out`` is one of ``own`` (relative names) and none is a link."""
    for path in out.rglob("*"):
        name = path.relative_to(out).as_posix()
        if path.is_symlink() or (path.is_file() and name not in own):
            return False
    return True


def _link_or_copy(source: Path, folder: Path, name: str) -> str:
    """Hard-link ``source`` at ``folder/name`` (copy it where links cannot be made), never through
    a link below ``folder``: which was done."""
    target = made_parents(folder, name)
    if target.is_symlink() or (target.exists() and not target.is_file()):
        raise DataError(f"{target}: not a regular file in the output; remove it")
    if target.exists():
        if os.path.samefile(source, target):
            return "linked"
        target.unlink()
    try:
        os.link(source, target, follow_symlinks=False)
        return "linked"
    except OSError:
        fd = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        with os.fdopen(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                raise DataError(f"{source}: not a regular file; apply copies only regular files") from None
            atomic_write(target, lambda out: shutil.copyfileobj(handle, out))
        shutil.copystat(source, target)
        return "copied"
