"""One small collection written in every form the readers accept (for the reader and audit tests).

``PICTURES`` pictures (distinct colour and shape), one or two captions each, every caption unique,
rows in one order in every form; ``split`` given for every row (so that every form has the same
splits), or left out with ``splits=False``.
"""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import numpy as np

PICTURES = 24
COLOURS = ["red", "green", "blue", "yellow", "purple", "orange", "black", "grey"]
SHAPES = ["square", "disc", "bar"]


def pictures() -> list[tuple[str, bytes, list[str]]]:
    """``(file name, PNG bytes, captions)`` per picture."""
    from PIL import Image, ImageDraw

    out = []
    for i in range(PICTURES):
        colour, shape = COLOURS[i % len(COLOURS)], SHAPES[i // len(COLOURS)]
        image = Image.new("RGB", (48, 48), "white")
        draw = ImageDraw.Draw(image)
        box = (8, 8, 40, 40) if shape != "bar" else (4, 18, 44, 30)
        (draw.ellipse if shape == "disc" else draw.rectangle)(box, fill=colour)
        buffer = io.BytesIO()
        image.save(buffer, format="PNG")
        captions = [f"a {colour} {shape} number {i}"] + (
            [f"the {shape} in {colour}, {i}"] if i % 3 == 0 else []
        )
        out.append((f"pic{i:02d}.png", buffer.getvalue(), captions))
    return out


def split_of(i: int) -> str:
    return "test" if i % 8 == 7 else "dev" if i % 8 == 3 else "train"


def rows(splits: bool = True) -> list[dict]:
    """The pairs in order: ``image`` (file name), ``png``, ``caption``, ``split``, ``number``."""
    return [
        {"image": name, "png": png, "caption": caption, "split": split_of(i) if splits else "", "number": i}
        for i, (name, png, captions) in enumerate(pictures())
        for caption in captions
    ]


def _images(folder: Path, prefix: str = "") -> None:
    (folder / prefix).mkdir(parents=True, exist_ok=True)
    for name, png, _ in pictures():
        (folder / prefix / name).write_bytes(png)


def write_form(form: str, folder: Path, splits: bool = True) -> Path:
    """The collection in ``form`` under ``folder``; returns the path to give mispair."""
    import pandas as pd

    table = rows(splits)
    plain = pd.DataFrame([{"image": r["image"], "caption": r["caption"], "split": r["split"]} for r in table])
    if not splits:
        plain = plain.drop(columns="split")
    folder.mkdir(parents=True, exist_ok=True)
    if form in ("folder-csv", "folder-tsv", "folder-jsonl"):
        _images(folder)
        suffix = form.split("-")[1]
        _write(plain, folder / f"captions.{suffix}")
        return folder
    if form in ("imagefolder-csv", "imagefolder-jsonl", "imagefolder-parquet"):
        _images(folder, "files")
        meta = plain.rename(columns={"image": "file_name", "caption": "text"})
        meta["file_name"] = "files/" + meta["file_name"]
        path = folder / f"metadata.{form.split('-')[1]}"
        _write(meta, path)
        return folder
    if form in ("table-csv", "table-jsonl", "table-parquet"):
        _images(folder, "pictures")
        mapped = plain.rename(columns={"image": "picture", "caption": "alt"})
        mapped["picture"] = "pictures/" + mapped["picture"]
        mapped.insert(0, "uid", [f"row-{k}" for k in range(len(mapped))])
        path = folder / f"pairs.{form.split('-')[1]}"
        _write(mapped, path)
        return path
    if form == "parquet-bytes":
        data = plain.assign(image=[{"bytes": r["png"], "path": r["image"]} for r in table])
        path = folder / "pairs.parquet"
        data.to_parquet(path, index=False)
        return path
    if form == "webdataset":
        return _webdataset(table, folder, splits)
    if form == "coco":
        return _coco(table, folder)
    if form == "karpathy":
        return _karpathy(table, folder)
    raise ValueError(form)


def _write(frame, path: Path) -> None:
    if path.suffix == ".csv":
        frame.to_csv(path, index=False)
    elif path.suffix == ".tsv":
        frame.to_csv(path, index=False, sep="\t")
    elif path.suffix == ".jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in frame.to_dict("records")), encoding="utf-8")
    else:
        frame.to_parquet(path, index=False)


def _webdataset(table: list[dict], folder: Path, splits: bool) -> Path:
    """Two shards; a caption's sample holds its own copy of the picture (as img2dataset writes)."""
    half = len(table) // 2
    for shard, part in enumerate((table[:half], table[half:])):
        with tarfile.open(folder / f"shard-{shard:03d}.tar", "w") as tar:
            for k, r in enumerate(part):
                key = f"{shard:03d}{k:04d}"
                meta = {"key": key, "caption": r["caption"]} | ({"split": r["split"]} if splits else {})
                for suffix, blob in (
                    (".png", r["png"]),
                    (".txt", r["caption"].encode()),
                    (".json", json.dumps(meta).encode()),
                ):
                    info = tarfile.TarInfo(key + suffix)
                    info.size = len(blob)
                    tar.addfile(info, io.BytesIO(blob))
    return folder


def _coco(table: list[dict], folder: Path) -> Path:
    _images(folder, "train2017")
    names = list(dict.fromkeys(r["image"] for r in table))
    document = {
        "images": [{"id": 100 + k, "file_name": f"train2017/{name}"} for k, name in enumerate(names)],
        "annotations": [
            {"id": 5000 + k, "image_id": 100 + names.index(r["image"]), "caption": r["caption"]}
            for k, r in enumerate(table)
        ],
    }
    path = folder / "captions_train2017.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def _karpathy(table: list[dict], folder: Path) -> Path:
    _images(folder, "val2014")
    images: dict[str, dict] = {}
    for k, r in enumerate(table):
        split = {"dev": "val"}.get(r["split"], r["split"])
        entry = images.setdefault(
            r["image"], {"filepath": "val2014", "filename": r["image"], "split": split, "sentences": []}
        )
        entry["sentences"].append({"raw": r["caption"], "sentid": k, "tokens": r["caption"].split()})
    path = folder / "dataset_coco.json"
    path.write_text(json.dumps({"images": list(images.values()), "dataset": "coco"}), encoding="utf-8")
    return path


def feature_digest(features: np.ndarray) -> bytes:
    """A key of an image's features (equal pictures, equal keys)."""
    return np.round(np.asarray(features, dtype=np.float32), 3).tobytes()
