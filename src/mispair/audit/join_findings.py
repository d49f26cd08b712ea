"""The join errors of an audited collection (:mod:`mispair.audit.join_errors`) named by pair ids:
``AUDIT/structure.json``, the repair each shift asks for, and the headline's words.

The audit's pairs reach its models in an order of their content
(:func:`~mispair.data.readers.table.content_order`), not the file's; the collection's own row
order is read back from its reader (a table's rows, each WebDataset shard apart; a precomputed
collection's splits in their files' order) and the audit's pairs found in it by pair id. A row
the audit did not read (a refused sample, an unaudited row) keeps its place where the collection
tells it (a shard's members, a table numbered by rows): the runs are searched across it, and no
caption is moved to or from it.

The similarities are the audit run's index vectors (:class:`~mispair.search.model.SearchModel`,
the cosine head's exact scores): one more encoding of every picture and caption by the final
run's heads over features already in memory (the MiniLM states are cached), then ``2 × 8``
dot products per caption — a second or two for a thousand pairs, where the audit takes minutes.
The held-out scorers' models are gone by then, and a head without vectors (``sgraf``) would
score every shifted pair through its cross-attention: shifts are searched only for vector heads.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from mispair.audit.join_errors import (
    ALPHA,
    MAX_OFFSET,
    MIN_PICTURES,
    ShiftRun,
    caption_wording,
    find_shifts,
    picture_looks,
    repeated_captions,
)
from mispair.errors import DataError

if TYPE_CHECKING:
    from mispair.audit.duplicates import Duplicates
    from mispair.audit.pair_table import AuditedPairs
    from mispair.config import DataConfig
    from mispair.engine.trained import TrainedRun

STRUCTURE = "structure.json"
STRUCTURE_FORMAT = 1


@dataclass(frozen=True)
class Shift:
    """A run of rows of ``file`` (``first_pair_id`` to ``last_pair_id``, ``pairs`` rows, their
    ``pair_ids`` in row order) whose captions belong to the picture ``offset`` rows away: the
    evidence (``agreeing`` of ``informative`` rows, mean ``similarity_gain``, corrected
    ``p_value``: the run's core, the segment tested), the repair (``moves``: ``[from, to]`` the
    caption of pair ``from`` goes to the picture of pair ``to``), the pairs whose own caption is
    ``lost`` (none moves to them), ``edge_rows``, the rows added at the core's ends
    (:func:`~mispair.audit.join_errors.find_shifts`; 0 in an audit written before), and the ids
    of the rows between ``first_pair_id`` and ``last_pair_id`` the audit did not read
    (``unread``: refused or not audited; they keep their place in the row arithmetic, and no
    caption moves to or from them: a row whose own caption was on one is ``lost``). ``pairs``
    counts the rows read."""

    file: str
    first_pair_id: str
    last_pair_id: str
    offset: int
    pairs: int
    agreeing: int
    informative: int
    similarity_gain: float
    p_value: float
    suspected: int
    pair_ids: list[str]
    moves: list[tuple[str, str]]
    lost: list[str]
    edge_rows: int = 0
    unread: list[str] = field(default_factory=list)

    def sentence(self) -> str:
        """The run in words (the headline's)."""
        edges = f", {self.edge_rows} of them added at its ends row by row" if self.edge_rows else ""
        unread = f", and {len(self.unread)} not read between them" if self.unread else ""
        core = " in its core" if self.edge_rows else ""
        return (
            f"pairs {self.first_pair_id}–{self.last_pair_id} of {self.file} carry "
            f"{_offset_words(self.offset)} "
            f"({self.pairs} rows{edges}{unread}, {self.agreeing} of {self.informative}{core} agree, "
            f"chance of as many by accident {self.p_value:.1g}, similarity gain {self.similarity_gain:+.2f})"
        )


@dataclass(frozen=True)
class RepeatedCaption:
    """One ``caption`` on ``pairs`` pairs (``pair_ids``) whose ``pictures`` are not
    near-duplicates of one another; ``suspected`` of them suspected."""

    caption: str
    pairs: int
    pictures: int
    suspected: int
    pair_ids: list[str]

    def sentence(self) -> str:
        shown = self.caption if len(self.caption) <= 60 else self.caption[:57] + "..."
        return (
            f"the caption {shown!r} is on {self.pairs} pairs whose {self.pictures} pictures do not look alike"
        )


@dataclass
class JoinFindings:
    """``structure.json``: the ``shifts`` and ``repeated_captions``, how they were searched
    (``method``), the suspects they explain, and the estimated mismatched share after repair."""

    shifts: list[Shift] = field(default_factory=list)
    repeated_captions: list[RepeatedCaption] = field(default_factory=list)
    method: dict[str, Any] = field(default_factory=dict)
    suspected: int = 0
    suspected_in_shifts: int = 0
    suspected_in_repeated_captions: int = 0
    share: float | None = None
    share_after_repair: float | None = None
    share_after_repair_interval: list[float] | None = None
    note: str | None = None

    @property
    def moves(self) -> int:
        return sum(len(s.moves) for s in self.shifts)

    @property
    def lost(self) -> int:
        return sum(len(s.lost) for s in self.shifts)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        for shift in out["shifts"]:
            shift["moves"] = [list(m) for m in shift["moves"]]
        out["pairs_repaired"], out["pairs_lost"] = self.moves, self.lost
        return {"format": STRUCTURE_FORMAT, **out}

    def save(self, folder: Path) -> None:
        from mispair.atomic import atomic_text

        atomic_text(folder / STRUCTURE, json.dumps(self.to_dict(), indent=1, ensure_ascii=False) + "\n")

    @classmethod
    def from_dict(cls, data: Any, where: object) -> JoinFindings:
        """The findings of ``structure.json``'s content, checked (a one-line :class:`DataError`
        naming ``where`` for anything else)."""
        try:
            shifts = [_shift(s) for s in data["shifts"]]
            repeated = [
                RepeatedCaption(**{**r, "pair_ids": [str(i) for i in r["pair_ids"]]})
                for r in data["repeated_captions"]
            ]
            found = cls(shifts, repeated, dict(data.get("method") or {}))
            for name in ("suspected", "suspected_in_shifts", "suspected_in_repeated_captions"):
                setattr(found, name, int(data.get(name) or 0))
            for name in ("share", "share_after_repair"):
                value = data.get(name)
                setattr(found, name, None if value is None else float(value))
            interval = data.get("share_after_repair_interval")
            if interval is not None:
                low, high = (float(v) for v in interval)  # two numbers, or a ValueError
                found.share_after_repair_interval = [low, high]
            found.note = None if data.get("note") is None else str(data["note"])
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise DataError(
                f"{where}: not a structure.json the audit writes ({type(exc).__name__}: {exc}); audit again"
            ) from None
        return found

    def sentences(self, most: int = 5) -> list[str]:
        """The findings in words, the shifts first, at most ``most``."""
        said = [s.sentence() for s in self.shifts] + [r.sentence() for r in self.repeated_captions]
        more = len(said) - most
        return said[:most] + ([f"{more} more in structure.json"] if more > 0 else [])


def _shift(data: dict[str, Any]) -> Shift:
    ids = ("first_pair_id", "last_pair_id")
    named = {**data, **{k: str(data[k]) for k in ids}}
    named["pair_ids"] = [str(i) for i in data["pair_ids"]]
    named["moves"] = [(str(a), str(b)) for a, b in data["moves"]]
    named["lost"] = [str(i) for i in data["lost"]]
    named["unread"] = [str(i) for i in data.get("unread", [])]  # none in an audit written before
    if not isinstance(named["offset"], int) or not 0 < abs(named["offset"]) <= 64:
        raise ValueError(f"offset {named['offset']!r}")
    edge_rows = named.setdefault("edge_rows", 0)
    if not isinstance(edge_rows, int) or not 0 <= edge_rows <= len(named["pair_ids"]):
        raise ValueError(f"edge_rows {edge_rows!r}")
    return Shift(**named)


def read_structure(folder: Path) -> JoinFindings | None:
    """The audit folder's ``structure.json`` read as untrusted input (bounded, a regular file),
    or None where the audit wrote none (audited before it existed)."""
    import os

    from mispair.limits import limit
    from mispair.safe_io import read_input
    from mispair.safe_parse import load_json

    path = Path(folder) / STRUCTURE
    if not os.path.lexists(path):
        return None
    data = read_input(path, limit("MAX_TABLE_BYTES"), "an audit's structure", links=False)
    return JoinFindings.from_dict(load_json(data, path), path)


def _offset_words(k: int) -> str:
    if k == 1:
        return "the next row's caption"
    if k == -1:
        return "the previous row's caption"
    return f"the caption of the row {abs(k)} {'below' if k > 0 else 'above'} (offset {k:+d})"


@dataclass(frozen=True)
class RowOrder:
    """The collection's own row order: each file's audit pair indices in its rows' order
    (``files``; ``-1`` for a row not read, refused or not audited, which keeps its place; a file
    is cut where :data:`~mispair.audit.join_errors.MAX_OFFSET` or more rows in a row are not read,
    since no offset reaches across), with the file's name (``names``) and the ids of its rows not
    read by position (``unread``; none where every row was read); ``unsearched``: the files left
    out because a row of theirs is missing at a place that cannot be told, so that "k rows away"
    would not mean k rows of the file."""

    files: list[np.ndarray]
    names: list[str]
    unsearched: list[str] = field(default_factory=list)
    unread: list[dict[int, str]] = field(default_factory=list)

    def unread_ids(self, file: int, places: np.ndarray) -> list[str]:
        """The ids of file ``file``'s rows not read at the positions ``places``."""
        known = self.unread[file] if file < len(self.unread) else {}
        return [known.get(int(i), f"row {int(i)}") for i in places]

    def add(self, name: str, places: np.ndarray, pairs: np.ndarray, id_of: Callable[[int], str]) -> None:
        """One file's audited rows added: ``places [r]`` their rising row numbers in the file,
        ``pairs [r]`` their pair indices, ``id_of`` the id of the row at a number (for the rows
        between them not read), cut where :data:`~mispair.audit.join_errors.MAX_OFFSET` or more
        rows in a row are not read."""
        cuts = np.flatnonzero(np.diff(places) > MAX_OFFSET) + 1
        for part, at in zip(np.split(places, cuts), np.split(pairs, cuts)):
            if not len(part):
                continue
            rows = np.full(int(part[-1] - part[0]) + 1, -1, dtype=np.int64)
            rows[part - part[0]] = at
            self.files.append(rows)
            self.names.append(name)
            self.unread.append({int(i): id_of(int(part[0] + i)) for i in np.flatnonzero(rows < 0)})


def row_order(pair_ids: Sequence[str], split: np.ndarray, data: DataConfig) -> RowOrder:
    """The audited pairs (``pair_ids``, in the audit's order) in the collection's row order: a
    table's rows (each WebDataset shard apart), else each split in the audit's order (a
    precomputed collection's files)."""
    from mispair.data.readers import reader_of
    from mispair.data.readers.table import TableReader
    from mispair.data.readers.webdataset import WebDatasetReader

    reader = reader_of(data)
    if not isinstance(reader, TableReader):
        names = list(dict.fromkeys(np.asarray(split).tolist()))
        return RowOrder([np.flatnonzero(np.asarray(split) == n) for n in names], names)
    index = {p: k for k, p in enumerate(pair_ids)}
    if isinstance(reader, WebDatasetReader):  # each shard apart, refused and unaudited samples in place
        return _shard_rows(reader.shards(data), index)
    table = reader.table(data)  # the rows as read: no picture's features needed
    listed = table.pairs["pair_id"].astype(str).tolist()
    refused = table.refused["pair_id"].astype(str).tolist() if len(table.refused) else []
    return _table_rows(listed, refused, index, Path(table.where).name)


def _shard_rows(shards: list[Path], index: dict[str, int]) -> RowOrder:
    """Each shard's audited samples (``index``: pair id to pair index) in the shard's own order
    (:func:`~mispair.data.readers.webdataset.shard_keys`), a refused or unaudited sample kept in
    its place as a row not read (:class:`RowOrder`)."""
    from mispair.data.readers.webdataset import shard_keys

    order = RowOrder([], [])
    for shard in shards:
        ids = [f"{shard.stem}/{key}" for key in shard_keys(shard)]
        places = np.array([n for n, p in enumerate(ids) if p in index], dtype=np.int64)
        pairs = np.array([index[ids[n]] for n in places], dtype=np.int64)
        order.add(f"shard {shard.stem}", places, pairs, ids.__getitem__)
    return order


def _table_rows(listed: list[str], refused: list[str], index: dict[str, int], name: str) -> RowOrder:
    """A table's audited rows (``listed``: the rows read, ``refused``: those the reader refused,
    ``index``: the audited pair ids' indices): where the pair ids are the rows' numbers (no id
    column: digits, rising down the file), a refused or unaudited row keeps its place as a row not
    read (:class:`RowOrder`); with ids of their own, a table missing any row is left out of the
    search."""
    numbered = all(p.isdigit() for p in listed + refused)
    if numbered and any(int(a) >= int(b) for a, b in itertools.pairwise(listed)):
        numbered = False
    if not numbered:
        if refused or any(p not in index for p in listed):
            return RowOrder([], [], [name])
        return RowOrder([np.array([index[p] for p in listed], dtype=np.int64)], [name])
    audited = np.array(sorted((int(p), index[p]) for p in listed if p in index), dtype=np.int64)
    number = {int(p): p for p in refused + listed}
    order = RowOrder([], [])
    places, pairs = audited.reshape(-1, 2).T
    order.add(name, places, pairs, lambda n: number.get(n, str(n)))
    return order


def join_findings(
    run: TrainedRun,
    audited: AuditedPairs,
    duplicates: Duplicates,
    suspected: np.ndarray,
    share: float | None,
) -> JoinFindings:
    """The shifts and repeated captions of the audited pairs (module description), with the
    suspects they explain and the share after repair (:func:`_explained`)."""
    pairs = audited.pairs
    looks = picture_looks(duplicates.duplicate_of)[pairs.image_of_caption]
    wording = caption_wording(pairs.pairs.captions)
    groups = repeated_captions(pairs.pairs.captions, looks, wording=wording)
    in_group = np.zeros(len(pairs), dtype=bool)
    for group in groups:
        in_group[group.pairs] = True
    order = row_order(audited.pair_id, audited.split, run.config.data)
    found = JoinFindings(method=_method())
    if all(getattr(m.head, "vector_search", False) for m in run.models):
        captions, pictures = _vectors(run, audited)
        scan = find_shifts(captions, pictures, looks, order.files, wording=wording)
        if order.unsearched:
            found.note = (
                f"shifts not searched in {', '.join(order.unsearched[:5])}"
                f"{' …' if len(order.unsearched) > 5 else ''}: a row there was refused or not audited at a "
                "place its ids do not tell, so a row's neighbours are unknown"
            )
        found.shifts = [_named(r, order, audited, suspected, in_group) for r in scan.runs]
        rates = {str(k): round(q, 6) for k, q in scan.null_rate.items()}
        found.method.update(null_rate=rates, segments_tested=scan.tests)
    else:
        found.note = (
            "shifts are searched with a head whose similarity is a dot product (cosine); this run's is not"
        )
    found.repeated_captions = [_repeated(g, audited.pair_id, suspected) for g in groups]
    _explained(found, audited, suspected, share)
    return found


def _method() -> dict[str, Any]:
    return {
        "vectors": "the audit run's index vectors (cosine similarity)",
        "max_offset": MAX_OFFSET,
        "agreement": "the picture k rows away fits the caption best of the rows around, better than its own",
        "alpha": ALPHA,
        "test": "binomial tail of a run's agreeing rows at the null rate, times the segments tested",
        "edges": (
            "a run found is extended a row at a time while the next row agrees, or its caption is also "
            "the caption of the row offset rows away outside the run; rows that tell nothing are spanned"
        ),
        "min_pictures": MIN_PICTURES,
    }


def _vectors(run: TrainedRun, audited: AuditedPairs) -> tuple[np.ndarray, np.ndarray]:
    """``([n, d], [n, d])`` each pair's caption vector and its own picture's vector."""
    from mispair.search.model import SearchModel

    model = SearchModel(run)
    pictures = model.image_vectors(audited.pairs.pairs)[audited.pairs.image_of_caption]
    return model.text_vectors(audited.pairs.tokens), pictures


def _named(
    run: ShiftRun, order: RowOrder, audited: AuditedPairs, suspected: np.ndarray, in_group: np.ndarray
) -> Shift:
    """A run of positions of one file as pair ids, with its moves (none to a pair that carries a
    repeated caption: a pasted caption is never replaced by another row's, and none to or from a
    row not read) and lost rows (none moves to them: their own caption lies before the run or on
    a row not read), and the ids of its rows not read."""
    rows, ids, k = order.files[run.file], audited.pair_id, run.offset
    positions = np.arange(run.start, run.stop + 1)
    span = positions[rows[positions] >= 0]  # the rows read
    sources = span[(span + k >= 0) & (span + k < len(rows))]
    sources = sources[rows[sources + k] >= 0]  # never to a row not read
    moves = [(ids[rows[i]], ids[rows[i + k]]) for i in sources if not in_group[rows[i + k]]]
    receiving = set((sources + k).tolist())
    lost = [ids[rows[i]] for i in span if i not in receiving]  # its caption above the run, or not read
    return Shift(
        file=order.names[run.file],
        first_pair_id=ids[rows[run.start]],
        last_pair_id=ids[rows[run.stop]],
        offset=run.offset,
        pairs=len(span),
        agreeing=run.agreeing,
        informative=run.informative,
        similarity_gain=round(run.gain, 4),
        p_value=float(f"{run.p_value:.3g}"),
        suspected=int(suspected[rows[span]].sum()),
        pair_ids=[ids[rows[i]] for i in span],
        moves=moves,
        lost=lost,
        edge_rows=run.edge_rows,
        unread=order.unread_ids(run.file, positions[rows[positions] < 0]),
    )


def _repeated(group: Any, ids: list[str], suspected: np.ndarray) -> RepeatedCaption:
    return RepeatedCaption(
        group.caption,
        len(group.pairs),
        group.pictures,
        int(suspected[group.pairs].sum()),
        [ids[k] for k in group.pairs],
    )


def _explained(
    found: JoinFindings, audited: AuditedPairs, suspected: np.ndarray, share: float | None
) -> None:
    """The suspects inside the findings, and the share once the shifts are repaired: the
    mismatched share of the pairs the repair leaves as they are (those of no shift, neither moved
    nor given a caption), estimated as the audit's share is but over those pairs alone
    (:meth:`AuditedPairs.calibration`), counted over the pairs that remain after the repair
    (every pair less those whose own caption is lost). The repaired pairs count as matched: the
    estimate is the repair's word, as the repair is. Not the share less the shifted pairs'
    probabilities: a final run trained on the shifted pairs fits some of them, so their
    probabilities fall short and the rest would be read as mismatched (a caption cell deleted in
    a table of 1,135 icons: 16% said to remain where none did)."""
    ids = audited.pair_id
    index = {p: k for k, p in enumerate(ids)}
    shifted = np.zeros(len(ids), dtype=bool)
    repaired = np.zeros(len(ids), dtype=bool)
    for shift in found.shifts:
        shifted[[index[p] for p in shift.pair_ids]] = True
        repaired[[index[p] for move in shift.moves for p in move]] = True
    grouped = np.zeros(len(ids), dtype=bool)
    for group in found.repeated_captions:
        grouped[[index[p] for p in group.pair_ids]] = True
    found.suspected = int(suspected.sum())
    found.suspected_in_shifts = int((suspected & shifted).sum())
    found.suspected_in_repeated_captions = int((suspected & grouped & ~shifted).sum())
    found.share = share
    untouched = ~(shifted | repaired)
    calibration = audited.calibration(untouched) if found.shifts and untouched.any() else None
    if calibration is not None:
        remain = max(len(ids) - found.lost, 1)
        scale = int(untouched.sum()) / remain
        found.share_after_repair = round(calibration.share * scale, 6)
        found.share_after_repair_interval = [
            round(calibration.share_low * scale, 6),
            round(calibration.share_high * scale, 6),
        ]
