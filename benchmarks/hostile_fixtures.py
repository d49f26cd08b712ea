"""The hostile files of ``hostile_inputs.py``: pictures that are not what they say, SVG bombs,
collections in every input form with one bad part, damaged run folders and indexes."""

from __future__ import annotations

import base64
import csv
import gzip
import hashlib
import io
import json
import os
import tarfile
from pathlib import Path

import numpy as np
import torch

EPS = b"%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 10 10\n{ } loop\nshowpage\n"
SVG_HEAD = (
    '<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" '
    'width="10" height="10">'
)


def png(colour: tuple[int, int, int], size: int = 32, fmt: str = "PNG") -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (size, size), colour).save(buffer, format=fmt)
    return buffer.getvalue()


def huge_png() -> bytes:
    """A 20,000 × 20,000 one-bit PNG (400 megapixels) in about 50 kB."""
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("1", (20_000, 20_000)).save(buffer, format="PNG")
    return buffer.getvalue()


def svg_with(data: bytes, mime: str = "image/png") -> bytes:
    uri = f"data:{mime};base64," + base64.b64encode(data).decode()
    return (SVG_HEAD + f'<image width="10" height="10" xlink:href="{uri}"/></svg>').encode()


def gzip_bomb_svg() -> bytes:
    """An SVG of 200 MB compressed into about 200 kB."""
    return gzip.compress(b"<svg xmlns='http://www.w3.org/2000/svg'>" + b" " * 200_000_000 + b"</svg>", 9)


def picture_folder(folder: Path, hostile: dict[str, bytes], good: int = 3) -> Path:
    """A folder collection: ``good`` real pictures and the ``hostile`` files, one caption each."""
    folder.mkdir(parents=True, exist_ok=True)
    files = {f"good{k}.png": png((60 * k, 120, 200)) for k in range(good)} | hostile
    for name, content in files.items():
        (folder / name).write_bytes(content)
    with (folder / "captions.csv").open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["image", "caption"])
        writer.writerows((name, f"picture {k}") for k, name in enumerate(files))
    return folder


def colour_pictures(n: int = 24) -> list[tuple[str, bytes, str]]:
    """``(name, PNG bytes, caption)`` of ``n`` distinct plain pictures."""
    return [
        (f"p{k:02d}.png", png(((37 * k) % 256, (91 * k) % 256, (53 * k) % 256)), f"colour number {k}")
        for k in range(n)
    ]


def parquet_collection(path: Path, *, caption_of=None, bytes_of=None) -> Path:
    """A parquet table with image bytes; ``caption_of(k)`` / ``bytes_of(k)`` replace row ``k``'s."""
    import pandas as pd

    rows = []
    for k, (name, blob, caption) in enumerate(colour_pictures()):
        blob = bytes_of(k) if bytes_of and bytes_of(k) is not None else blob
        caption = caption_of(k) if caption_of and caption_of(k) is not None else caption
        rows.append({"image": {"bytes": blob, "path": name}, "caption": caption})
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_parquet(path, index=False)
    return path


def webdataset_collection(folder: Path, *, caption_of=None, bytes_of=None, link: bool = False) -> Path:
    """One tar shard of key.png + key.txt samples (``link``: one member is a symbolic link)."""
    folder.mkdir(parents=True, exist_ok=True)
    with tarfile.open(folder / "shard-000.tar", "w") as tar:
        for k, (_, blob, caption) in enumerate(colour_pictures()):
            blob = bytes_of(k) if bytes_of and bytes_of(k) is not None else blob
            caption = caption_of(k) if caption_of and caption_of(k) is not None else caption
            for suffix, data in ((".png", blob), (".txt", caption.encode())):
                info = tarfile.TarInfo(f"{k:05d}{suffix}")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
        if link:
            info = tarfile.TarInfo("99999.png")
            info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
            tar.addfile(info)
            info = tarfile.TarInfo("99999.txt")
            info.size = 4
            tar.addfile(info, io.BytesIO(b"link"))
    return folder


def coco_collection(folder: Path, *, caption_of=None, raw: bytes | None = None) -> Path:
    """COCO captions JSON beside its pictures (``raw``: the JSON file's bytes instead)."""
    (folder / "train2017").mkdir(parents=True, exist_ok=True)
    images, annotations = [], []
    for k, (name, blob, caption) in enumerate(colour_pictures()):
        (folder / "train2017" / name).write_bytes(blob)
        caption = caption_of(k) if caption_of and caption_of(k) is not None else caption
        images.append({"id": k, "file_name": f"train2017/{name}"})
        annotations.append({"id": 1000 + k, "image_id": k, "caption": caption})
    path = folder / "captions_train2017.json"
    path.write_bytes(
        raw if raw is not None else json.dumps({"images": images, "annotations": annotations}).encode()
    )
    return path


def tampered_checkpoint(
    source: Path, path: Path, value: float | None = None, drop: str | None = None
) -> Path:
    """``source`` with its first weight set to ``value``, or without the field ``drop``."""
    state = torch.load(source, weights_only=True)
    if value is not None:
        name = next(k for k, v in state["models"][0].items() if v.is_floating_point())
        state["models"][0][name] = state["models"][0][name].clone().fill_(value)
    if drop is not None:
        state.pop(drop)
    torch.save(state, path)
    return path


def tamper_index(folder: Path, name: str, content: bytes) -> None:
    """Replace ``name`` in the index ``folder`` and update its digest in the manifest."""
    (folder / name).write_bytes(content)
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["files"][name] = hashlib.sha256(content).hexdigest()
    manifest.get("sizes", {})[name] = len(content)
    (folder / "manifest.json").write_text(json.dumps(manifest))


def few_aliases_bomb() -> str:
    """40 YAML aliases (under the alias bound) that expand to 4^10 values."""
    lines = ['l0: &l0 ["x", "x", "x", "x"]']
    lines += [f"l{k}: &l{k} [" + ", ".join([f"*l{k - 1}"] * 4) + "]" for k in range(1, 11)]
    return "\n".join(lines) + "\nname: x\n"


def sparse_file(path: Path, size: int) -> Path:
    with path.open("wb") as handle:
        handle.truncate(size)
    return path


def fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


def npy_bytes(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


# --- bombs: small on disk, huge once built (issue 50, class 3) -----------------------------------


def parquet_row_bomb(path: Path, rows: int = 100_000_000) -> Path:
    """A Parquet file of ``rows`` rows of one repeated image path and caption: dictionary and
    run-length encoded, well under a megabyte on disk."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path.parent.mkdir(parents=True, exist_ok=True)
    chunk = 10_000_000
    schema = pa.schema(
        [
            ("image", pa.dictionary(pa.int32(), pa.string())),
            ("caption", pa.dictionary(pa.int32(), pa.string())),
        ]
    )
    with pq.ParquetWriter(path, schema, use_dictionary=True, compression="zstd") as writer:
        for start in range(0, rows, chunk):
            n = min(chunk, rows - start)
            indices = pa.array(np.zeros(n, dtype=np.int32))
            column = lambda text, i=indices: pa.DictionaryArray.from_arrays(i, pa.array([text]))  # noqa: E731
            writer.write_table(
                pa.table({"image": column("a.png"), "caption": column("a caption")}, schema=schema),
                row_group_size=n,
            )
    return path


def sparse_tar(folder: Path, members: int = 130, size: int = 49_000_000) -> Path:
    """A tar shard of ``members`` GNU sparse members, each declaring ``size`` bytes of picture
    while storing a few: a couple of hundred kilobytes that unpack to gigabytes."""
    folder.mkdir(parents=True, exist_ok=True)
    shard = folder / "shard-000.tar"
    with tarfile.open(shard, "w", format=tarfile.GNU_FORMAT) as tar:
        for k in range(members):
            info = tarfile.TarInfo(f"{k:05d}.png")
            info.type = tarfile.GNUTYPE_SPARSE
            info.sparse = [(0, 0)]
            info.size = 0
            header = info.tobuf(tarfile.GNU_FORMAT)
            tar.fileobj.write(_sparse_header(header, size))
            tar.offset += len(header)
            text = tarfile.TarInfo(f"{k:05d}.txt")
            text.size = 4
            tar.addfile(text, io.BytesIO(b"a cat"[:4]))
    return folder


def _sparse_header(header: bytes, size: int) -> bytes:
    """A GNU sparse header (one map entry: ``size`` bytes of which none stored) with a good
    checksum: the member's real size field at byte 483 (``realsize``)."""
    block = bytearray(header[:512])
    block[483:495] = f"{size:011o}\0".encode()  # realsize
    block[386:398] = b"00000000000\0"  # sparse[0].offset
    block[398:410] = b"00000000000\0"  # sparse[0].numbytes
    block[148:156] = b" " * 8
    block[148:156] = f"{sum(block):06o}\0 ".encode()
    return bytes(block)


def duplicate_key_tar(folder: Path, n: int = 24, every: int = 2) -> Path:
    """A shard of ``n`` keys where every ``every``-th key (from the second) appears twice (two
    pictures, two captions)."""
    folder.mkdir(parents=True, exist_ok=True)
    with tarfile.open(folder / "shard-000.tar", "w") as tar:
        for k, (_, blob, caption) in enumerate(colour_pictures(n)):
            for repeat in range(2 if k % every == 1 else 1):
                for suffix, data in ((".png", blob), (".txt", f"{caption} {repeat}".encode())):
                    info = tarfile.TarInfo(f"{k:05d}{suffix}")
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
    return folder


def coco_element_bomb(folder: Path, elements: int = 10_000_000) -> Path:
    """COCO JSON of 20 MB whose one list holds ``elements`` zeros (~27x larger once built)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "captions_train2017.json"
    path.write_bytes(b'{"images": [], "annotations": [], "x": [' + b"0," * (elements - 1) + b"0]}")
    return path


def image_struct_parquet(path: Path, value: object) -> Path:
    """A Parquet table whose every image struct's ``bytes`` field is ``value`` (a number, a
    string, a negative number: anything but bytes)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path.parent.mkdir(parents=True, exist_ok=True)
    pictures = colour_pictures()
    images = [{"bytes": value, "path": name} for name, _, _ in pictures]
    pq.write_table(pa.table({"image": images, "caption": [c for _, _, c in pictures]}), path)
    return path


# --- audit folders someone else wrote (issue 50, classes 1, 2, 6) ---------------------------------


def fake_audit(
    base: Path, *, pair_ids: list[str] | None = None, image_of=None, summary: dict | None = None
) -> Path:
    """A collection of six picture files and an audit folder of it, written without training
    (apply reads only ``summary.json`` and ``pairs.parquet``); ``image_of(k)`` replaces pair
    ``k``'s image id, ``summary`` fields replace the summary's. Returns the audit folder."""
    import pandas as pd

    collection, audit = base / "collection", base / "audit"
    (collection / "pics").mkdir(parents=True, exist_ok=True)
    audit.mkdir(parents=True, exist_ok=True)
    n = 6
    ids = pair_ids or [str(k) for k in range(n)]
    images = [f"pics/{k}.png" for k in range(n)]
    for name in images:
        (collection / name).write_bytes(png((10, 20, 30)))
    pairs = pd.DataFrame(
        {
            "pair_id": ids,
            "image_id": [image_of(k) if image_of and image_of(k) else images[k] for k in range(n)],
            "caption": [f"caption {k}" for k in range(n)],
            "mismatch_probability": [0.1 * k for k in range(n)],
        }
    )
    pairs.to_parquet(audit / "pairs.parquet", index=False)
    values = {"collection": str(collection), "image_root": str(collection), "threshold": 0.5, "pairs": n}
    (audit / "summary.json").write_text(json.dumps({**values, **(summary or {})}))
    return audit


def decisions_file(path: Path, rows: list[tuple[str, str, str]] = (("1", "drop", ""),)) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["pair_id", "decision", "caption"])
        writer.writerows(rows)
    return path


def npy_header_bomb(path: Path, elements: int = 9_250_000_000) -> Path:
    """A ``.npy`` of 128 bytes whose header declares ``elements`` float32 (37 GB)."""
    header = np.lib.format.header_data_from_array_1_0(np.zeros(1, np.float32))
    header["shape"] = (elements // 32, 32)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as handle:
        np.lib.format.write_array_header_1_0(handle, header)
        handle.write(b"\0" * 64)
    return path
