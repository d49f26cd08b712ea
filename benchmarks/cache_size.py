"""Cache bytes per picture before and after issue 66.1, and the same pictures in three folders.

For each calibration collection (Tux Paint stamps, OpenClipart PNGs, Oxygen 48×48 icons: the first
``--pictures`` PNG files of each, sorted paths) the pictures are encoded once by EfficientNet-Lite0
(``GridRunner``) and stored both ways in a scratch cache folder:

- **before**: the feature chunks of a collection's folder (:func:`mispair.data.features.
  extract_grid_features`' format: 64 pictures' float16 grids a file);
- **after**: one entry per picture in the store (:mod:`mispair.data.picture_store`), the mean
  (what the default run reads) and, for a head that reads fragments, the grid.

Bytes per picture are the files' sizes (``apparent``) and their disk blocks (``du``). Then the
same pictures are copied into three folders and read by ``extract_folder_features`` (the mean)
with an encoder that counts its pictures: each is encoded once.

    OMP_NUM_THREADS=2 PYTHONPATH=src python benchmarks/cache_size.py --pictures 64 \\
        --write benchmarks/results/cache_size.md
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np

from mispair.data.cache_files import write_arrays
from mispair.data.features import PREPROCESS_VERSION, EfficientNetLite0Grid, GridRunner
from mispair.data.picture_features import content_key, extract_folder_features
from mispair.data.picture_store import Entry, PictureStore, entries
from mispair.data.pictures.images import load_picture
from mispair.progress import progress_bar

COLLECTIONS = {
    "Tux Paint stamps": Path("/usr/share/tuxpaint/stamps"),
    "OpenClipart": Path("/usr/share/openclipart/png"),
    "Oxygen icons 48×48": Path("/usr/share/icons/oxygen/base/48x48"),
}


def sizes(files: list[Path]) -> tuple[int, int]:
    """(apparent bytes, disk bytes) of ``files``."""
    infos = [f.stat() for f in files]
    return sum(i.st_size for i in infos), sum(i.st_blocks * 512 for i in infos)


def measure(paths: list[Path], scratch: Path) -> dict[str, tuple[float, float]]:
    """Bytes per picture of each way of storing the features of ``paths``."""
    runner = GridRunner(None, "cpu", 8, "torch")
    with progress_bar(total=len(paths), desc="encode", unit="img") as bar:
        grids, valid = runner.run(lambda i: load_picture(paths[i], 224), range(len(paths)), bar)
    (scratch / "before").mkdir(parents=True)
    for start in range(0, len(paths), 64):  # before: a collection's chunks
        arrays = {"features": grids[start : start + 64], "valid": valid[start : start + 64]}
        write_arrays(scratch / "before" / f"{start}.chunk", arrays)
    means = grids.astype(np.float32).mean(axis=1, keepdims=True)
    encoder = f"{EfficientNetLite0Grid.cache_name}\n{PREPROCESS_VERSION}"
    from mispair.data.content import stored_digests

    digests = stored_digests(grids)
    for form, features in (("mean", means), ("grid", grids)):
        store = PictureStore(scratch / form, encoder, form)
        for i, path in enumerate(paths):
            store.save(content_key(path), Entry(features[i], bool(valid[i]), digests[i]))
    out = {"before (chunks of grids)": sizes(list((scratch / "before").glob("*.chunk")))}
    for form in ("mean", "grid"):
        out[f"after, {form}"] = sizes([s.path for s in entries(scratch / form / "features-v2")])
    return {k: (a / len(paths), d / len(paths)) for k, (a, d) in out.items()}


class Counting(EfficientNetLite0Grid):
    pictures = 0

    def forward(self, pixels):
        Counting.pictures += len(pixels)
        return super().forward(pixels)


def three_folders(paths: list[Path], scratch: Path) -> tuple[int, int]:
    """(pictures encoded, pictures read) when the same ``paths`` are three folders' pictures."""
    names = []
    for k in range(3):
        folder = scratch / f"folder{k}"
        folder.mkdir(parents=True)
        for i, path in enumerate(paths):
            shutil.copyfile(path, folder / f"{k}-{i}.png")
        names.append((folder, [f"{k}-{i}.png" for i in range(len(paths))]))
    encoder = Counting()
    for folder, files in names:
        extract_folder_features(folder, files, cache_dir=scratch / "shared", encoder=encoder, form="mean")
    return Counting.pictures, 3 * len(paths)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pictures", type=int, default=64, help="PNG pictures of each collection")
    parser.add_argument("--write", type=Path, help="write the markdown results here")
    args = parser.parse_args()
    lines = [
        f"`OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', '')} PYTHONPATH=src python "
        f"benchmarks/cache_size.py --pictures {args.pictures}`; load average at start "
        f"{os.getloadavg()[0]:.2f} on {os.cpu_count()} cores",
        "",
        "| collection | pictures | stored as | bytes/picture (files) | bytes/picture (disk blocks) |",
        "|---|---|---|---|---|",
    ]
    with tempfile.TemporaryDirectory(prefix="h66_cache_size_") as tmp:
        first = None
        for name, root in COLLECTIONS.items():
            paths = sorted(root.rglob("*.png"))[: args.pictures]
            if not paths:
                lines.append(f"| {name} | 0 | – (not installed) | | |")
                continue
            first = first or paths
            scratch = Path(tmp) / name.split()[0]
            for way, (apparent, disk) in measure(paths, scratch).items():
                lines.append(f"| {name} | {len(paths)} | {way} | {apparent:,.0f} | {disk:,.0f} |")
        if first:
            encoded, read = three_folders(first, Path(tmp) / "three")
            lines += [
                "",
                f"Same {len(first)} pictures in three folders: {read} pictures read, {encoded} encoded.",
            ]
    text = "\n".join(lines)
    print(text)
    if args.write:
        args.write.write_text("# Cache size per picture (issue 66.1)\n\n" + text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
