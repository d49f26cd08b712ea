"""A table file written back in its own form: ``.parquet``, ``.csv``, ``.tsv`` or ``.jsonl`` in,
the same table out, streamed.

The kept rows are the input's rows (same columns in the same order, the same schema, the same
bytes where nothing changed), the dropped rows gone, a replaced caption written into the caption
column. Nothing is decoded that need not be:

- **Parquet** is read one row group at a time and each written as one row group, with the
  input's Arrow schema (its metadata included) and compression; image bytes are copied as Arrow
  buffers, never decoded or re-encoded. A row group larger than :data:`ROW_GROUP_BYTES` once
  decoded is read in batches of about that size, each written as a row group of its own, so the
  memory stays bounded by the input's pages (Parquet's unit of reading: a page is decompressed
  whole) rather than its row groups; the output's pages hold about a megabyte.
- **CSV / TSV** are read record by record (:mod:`csv`, as pandas reads them); a kept record is
  written as the exact text it was read from, a replaced one written again with the new caption.
- **JSON lines** are read line by line; a kept line is written as it was, a replaced one is the
  same text with only the caption's value written anew (every other field's text as it was,
  ``1.50`` staying ``1.50``); a line without the caption field gets it added.

Pair ids are the reader's: the id column's text, else the row number from 0 (``row_offset``
added, for the split files of a Hugging Face imagefolder).
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TextIO

from mispair.audit.writers.base import Decided, Written, cell_text, new_file
from mispair.data.readers.columns import Columns
from mispair.errors import DataError
from mispair.limits import limit, raise_hint

TABLE_FORMS = (".parquet", ".csv", ".tsv", ".jsonl")
ROW_GROUP_BYTES = 64 << 20
"""A Parquet row group decoded larger than this is copied in batches of about this size."""
BOM = "\ufeff"


def write_table_file(
    source: Path, target: Path, columns: Columns, decided: Decided, *, row_offset: int = 0
) -> Written:
    """The table ``source`` with the decisions applied, written to ``target`` (same form)."""
    suffix = source.suffix.lower()
    if suffix == ".parquet":
        return _parquet(source, target, columns, decided, row_offset)
    if suffix in (".csv", ".tsv"):
        return _delimited(source, target, columns, decided, row_offset, "\t" if suffix == ".tsv" else ",")
    if suffix == ".jsonl":
        return _jsonl(source, target, columns, decided, row_offset)
    raise DataError(f"{source}: no writer for tables of form {suffix!r} (use {', '.join(TABLE_FORMS)})")


def _parquet(source: Path, target: Path, columns: Columns, decided: Decided, offset: int) -> Written:
    import pyarrow as pa
    import pyarrow.parquet as pq

    file = pq.ParquetFile(source, buffer_size=1 << 20)
    schema, meta = file.schema_arrow, file.metadata
    names = columns.resolve(schema.names, str(source))
    caption = schema.get_field_index(names.caption)
    written = Written(files=[target.name])
    options = {"compression": _compression(meta), "write_batch_size": _batch_rows(meta)}
    with new_file(target) as handle, pq.ParquetWriter(handle, schema, **options) as out:
        for group in range(meta.num_row_groups):
            info = meta.row_group(group)
            rows = max(1, info.num_rows * ROW_GROUP_BYTES // max(1, info.total_byte_size))
            if info.total_byte_size <= ROW_GROUP_BYTES:
                parts: Iterator = iter([file.read_row_group(group)])
            else:
                parts = (pa.Table.from_batches([b], schema) for b in file.iter_batches(rows, [group]))
            for part in parts:
                ids = (
                    [cell_text(v) for v in part.column(names.id).to_pylist()]
                    if names.id
                    else [str(offset + written.read + k) for k in range(part.num_rows)]
                )
                written.read += part.num_rows
                keep = [decided.keeps(i) for i in ids]
                part = part.filter(pa.array(keep, pa.bool_()))
                kept_ids = [i for i, k in zip(ids, keep) if k]
                new = [decided.caption(i) for i in kept_ids]
                if any(n is not None for n in new):
                    old = part.column(caption).to_pylist()
                    values = [o if n is None else n for o, n in zip(old, new)]
                    field = schema.field(caption)
                    part = part.set_column(caption, field, pa.array(values, field.type))
                    written.replaced += sum(n is not None for n in new)
                written.kept += part.num_rows
                if part.num_rows:
                    out.write_table(part, row_group_size=part.num_rows)
    return written


def _batch_rows(meta) -> int:
    """Rows per write batch such that a data page holds about a megabyte (Parquet cuts pages only
    between batches: 1,024 rows of 100 KB pictures would be one 100 MB page, read whole)."""
    if not meta.num_row_groups or not meta.row_group(0).num_rows:
        return 1024
    row = meta.row_group(0).total_byte_size // meta.row_group(0).num_rows
    return max(1, min(1024, (1 << 20) // max(1, row)))


def _compression(meta) -> str:
    """The input's codec (of its first column chunk) as pyarrow's writer names it."""
    if not meta.num_row_groups or not meta.num_columns:
        return "snappy"
    codec = str(meta.row_group(0).column(0).compression).lower()
    return {"uncompressed": "none", "lz4_raw": "lz4"}.get(codec, codec)


def _delimited(
    source: Path, target: Path, columns: Columns, decided: Decided, offset: int, separator: str
) -> Written:
    csv.field_size_limit(max(csv.field_size_limit(), limit("MAX_LINE_CHARS")))
    written = Written(files=[target.name])
    with open(source, "rb") as head:
        bom = head.read(3) == BOM.encode()
    with (
        open(source, encoding="utf-8-sig", newline="") as text,
        new_file(target, "w", encoding="utf-8", newline="") as out,
    ):
        records = _records(text, separator, source)
        header, raw = next(records, ([], ""))
        out.write((BOM if bom else "") + raw)
        if not header:
            return written
        names = columns.resolve(header, str(source))
        caption, id_at = header.index(names.caption), header.index(names.id) if names.id else None
        for fields, raw in records:
            if not fields:  # a blank line: no row (pandas skips it too)
                continue
            pair_id = (
                (fields[id_at] if id_at < len(fields) else "")
                if id_at is not None
                else str(offset + written.read)
            )
            written.read += 1
            if not decided.keeps(pair_id):
                continue
            written.kept += 1
            new = decided.caption(pair_id)
            if new is None:
                out.write(raw)
                continue
            fields = fields + [""] * (caption + 1 - len(fields))
            fields[caption] = new
            end = "\r\n" if raw.endswith("\r\n") else "\n" if raw.endswith(("\n", "\r")) else ""
            out.write(_record(fields, separator, end))
            written.replaced += 1
    return written


def csv_text(rows: Iterable[list[str]], separator: str = ",", end: str = "\n") -> str:
    """``rows`` (the header first) as CSV text a reader reads back cell for cell (see
    :func:`_record`): apply's plain ``captions.csv``."""
    return "".join(_record([cell_text(c) for c in row], separator, end) for row in rows)


def _record(fields: list[str], separator: str, end: str) -> str:
    """One CSV/TSV record ending in ``end``, every field that holds a line break (CR, LF or
    both), the separator or a quote quoted: ``csv`` quotes only for the characters of its line
    terminator, so a bare CR in a caption written with ``end="\\n"`` would start a new row."""
    buffer = io.StringIO()
    csv.writer(buffer, delimiter=separator, lineterminator="\r\n").writerow(fields)
    return buffer.getvalue()[: -len("\r\n")] + end


def _records(text: TextIO, separator: str, source: Path) -> Iterator[tuple[list[str], str]]:
    """``(fields, the exact text they were read from)`` of every record of a CSV/TSV file."""
    raw: list[str] = []

    def lines() -> Iterator[str]:
        for line in text:
            raw.append(line)
            yield line

    try:
        for fields in csv.reader(lines(), delimiter=separator):
            yield fields, "".join(raw)
            raw.clear()
    except (csv.Error, UnicodeDecodeError) as exc:
        raise DataError(f"{source}: not a readable table ({exc})") from None


def _jsonl(source: Path, target: Path, columns: Columns, decided: Decided, offset: int) -> Written:
    found: dict[str, None] = {}
    for _, row in _json_lines(source):
        if row is not None:
            found.update(dict.fromkeys(row))
    names = columns.resolve(list(found), str(source))
    written = Written(files=[target.name])
    with new_file(target, "w", encoding="utf-8", newline="") as out:
        for line, row in _json_lines(source):
            if row is None:
                continue
            pair_id = _json_cell(row.get(names.id)) if names.id else str(offset + written.read)
            written.read += 1
            if not decided.keeps(pair_id):
                continue
            written.kept += 1
            new = decided.caption(pair_id)
            if new is None:
                out.write(line if line.endswith("\n") else line + "\n")
                continue
            out.write(_with_caption(line, row, names.caption, new))
            written.replaced += 1
    return written


WHITESPACE = re.compile(r"[ \t\n\r]*")


def _with_caption(line: str, row: dict, caption: str, new: str) -> str:
    """The JSON line ``line`` (the object ``row``) with the value of its field ``caption`` (the
    last one, as ``json`` reads a repeated key) replaced by ``new`` and nothing else changed; a
    line without the field is its object written again with the field added."""
    value = json.dumps(new, ensure_ascii=False)
    span = _value_spans(line).get(caption)
    if span is None:
        end = "\r\n" if line.endswith("\r\n") else "\n"
        return json.dumps({**row, caption: new}, ensure_ascii=False) + end
    text = line[: span[0]] + value + line[span[1] :]
    return text if text.endswith("\n") else text + "\n"


def _value_spans(line: str) -> dict[str, tuple[int, int]]:
    """Where the value of each top-level field of a JSON object line starts and ends (a line
    ``json`` has read as an object; empty if it cannot be followed)."""
    decoder, spans = json.JSONDecoder(), {}
    try:
        at = WHITESPACE.match(line, line.index("{") + 1).end()
        while line[at] == '"':
            key, at = json.decoder.scanstring(line, at + 1)
            at = WHITESPACE.match(line, at).end()
            if line[at] != ":":
                return {}
            at = WHITESPACE.match(line, at + 1).end()
            _, end = decoder.raw_decode(line, at)
            spans[key] = (at, end)
            at = WHITESPACE.match(line, end).end()
            if line[at] == ",":
                at = WHITESPACE.match(line, at + 1).end()
    except (ValueError, IndexError, RecursionError):
        return {}
    return spans


def _json_lines(source: Path) -> Iterator[tuple[str, dict | None]]:
    """``(line, its object)`` of every line (None for a blank one), each line bounded."""
    bound = limit("MAX_LINE_CHARS")
    with open(source, encoding="utf-8-sig", newline="") as lines:
        for n, line in enumerate(iter(lambda: lines.readline(bound + 1), ""), start=1):
            if len(line.rstrip("\r\n")) > bound:
                raise DataError(
                    f"{source}:{n}: a line of more than {bound:,} characters ({raise_hint('MAX_LINE_CHARS')})"
                )
            if not line.strip():
                yield line, None
                continue
            try:
                row = json.loads(line)
            except ValueError:
                row = None
            if not isinstance(row, dict):
                raise DataError(f"{source}:{n}: not a JSON object")
            yield line, row


def _json_cell(value: object) -> str:
    """A JSON cell as the reader makes it text (numbers as written in JSON)."""
    if value is None:
        return ""
    return value if isinstance(value, str) else cell_text(json.dumps(value))
