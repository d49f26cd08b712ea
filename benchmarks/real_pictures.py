"""Real pictures, end to end (issue 66 item 3): ``mispair audit`` on N distinct pictures drawn
from the offline sources, with planted mismatches, as a new user runs it on 2 cores.

1. **Bases**: every Tux Paint stamp (its English description), the OpenClipart clips whose title
   may describe them (:func:`mispair.data.sources.openclipart.eval_eligible`: a unique,
   content-bearing, non-boilerplate title) and the Adwaita icons (one per name, captioned by the
   name), read with the readers of ``audit_calibration.py``. Each is cut to its object (the
   alpha channel's box), fitted into a ``--side`` square and kept once (equal pixels dropped) in
   ``WORK/bases/``. Emoji fonts: none is installed on this project's machine (``fc-list``); the
   section says whether one was found, and none is used.
2. **Pictures**: from the bases, N distinct ``--side`` × ``--side`` pictures, deterministic from
   ``--seed``: one object (small at a corner or in the middle, large, or a close-up of its
   middle; upright, tilted or upside down; tinted or not) or two side by side, on one of 10
   background colours. No two share a (base, variation) key, a caption or their pixels (a
   picture whose pixels repeat another's, e.g. a symmetric object upside down, is drawn again).
   The caption names the object(s) and every variation: "a small red-tinted apple, upside down,
   at the top left on a blue background". Rendered by ``multiprocessing.Pool(2)``, a line every 5%.
   JPEG quality 90 by default: mispair's reader (``load_picture``, at 224 pixels) took 1.76–1.89 ms
   a picture against 1.91–2.20 ms for the same pictures as PNG (4 alternating rounds; every run
   measures it again, :func:`read_speed`), and the files are 2.6× smaller (3.3 against 8.8 KB),
   so less to read and to digest. Either is small beside the image encoder's tens of milliseconds
   a picture. ``--format png`` writes PNG; the distinctness is checked on the decoded pixels, what
   the audit reads, JPEG's losses included.
3. **Collection**: ``WORK/nN/collection/`` (``captions.csv``: ``image,caption``, the pair id the
   row from 0; ``images/``), ``--noise`` of the rows' captions deranged among themselves (a
   uniformly random permutation without fixed points). The truth lies outside it:
   ``WORK/nN/truth.csv`` (``pair_id,mismatched``) and ``WORK/nN/pictures.csv`` (every row's
   picture, its key and its own caption).
4. **Audit**: ``MISPAIR_CACHE=WORK/nN/cache OMP_NUM_THREADS=2 mispair audit WORK/nN/collection
   --out WORK/nN/audit`` in a child process (the default run; ``MISPAIR_CACHE`` only keeps the
   feature and text caches inside ``--work``, empty at the start: every picture and caption is
   encoded). Measured: wall time, the time by stage (``summary.json`` ``timings``), the peak RSS of
   the child (``os.wait4``'s ``ru_maxrss``) and its sampled peak anonymous memory, the disk used
   by the cache, the output and the collection, the AUC of ``pairs.csv``'s
   ``mismatch_probability`` (and of ``-held_out_score``, which has no ties) against the planted
   truth, the load average before and after. The rendering is timed apart.
5. **Section** (stdout, or appended to ``--write``): the command, the machine, every figure, and
   per stage a fit ``t = a + b·N`` over the sizes run, its growth exponent between sizes
   (linear or not, from the figures) and the times it extrapolates to 100K, 1M and 10M pictures.

``--work`` must be empty or new (``--reuse``: keep its bases and rendered collections; every
audit and its cache are made again). ``--override KEY=VALUE`` (repeated) passes a setting to
every audit after its command (none by default); each size's figures are also kept in
``WORK/nN/measurement.json``. Run (the issue's run; the small sizes give the fit)::

    python benchmarks/real_pictures.py --sizes 2000 5000 100000 --work runs/real_pictures \\
        --write benchmarks/results/real_pictures.md

A quick check (about 9 minutes on this project's 2 cores, the bases' preparation included;
2,000 pictures took 159 s of audit, 5,000 took 354 s: ``results/real_pictures.md``)::

    nice -n 10 python benchmarks/real_pictures.py --sizes 1000 2500 --work /tmp/rp_check
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import hashlib
import io
import json
import multiprocessing
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

import audit_calibration as calibration
from bench_audit_scale import PARTS, MemorySampler

HERE = Path(__file__).parent
ROOT = HERE.parent
PROCESSES = 2
PAIR_SHARE = 0.25
"""The share of pictures holding two objects side by side."""

BACKGROUNDS = {
    "white": (255, 255, 255),
    "black": (20, 20, 20),
    "grey": (128, 128, 128),
    "red": (205, 35, 35),
    "orange": (245, 140, 20),
    "yellow": (245, 220, 40),
    "green": (40, 160, 60),
    "blue": (40, 80, 205),
    "purple": (130, 50, 165),
    "pink": (245, 150, 195),
}
TINTS = {
    "": None,
    "red": (220, 20, 20),
    "green": (20, 180, 40),
    "blue": (30, 60, 230),
    "yellow": (240, 220, 0),
}
ROTATIONS = {"": 0, "tilted to the left": 20, "tilted to the right": -20, "upside down": 180}
CORNERS = {
    "top left": (0.26, 0.26),
    "top right": (0.74, 0.26),
    "bottom left": (0.26, 0.74),
    "bottom right": (0.74, 0.74),
}
FRAMINGS = (*CORNERS, "middle", "large", "close-up")
SMALL, LARGE, SIDE_BY_SIDE = 0.42, 0.84, 0.46
"""Object boxes as shares of the picture's side: small, large and close-up, each of two."""

GOALS = {"wall_s": 1800.0, "rss_mib": 4e9 / 2**20, "cache_bytes": 1e9}
"""The issue's goals at 100K pictures: 30 minutes, 4 GB (10⁹ bytes: 3,815 MiB), 1 GB of cache."""


# --- bases -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Base:
    """One object to draw: ``source`` (tuxpaint, openclipart, icons), its ``path`` (``fallback``:
    the SVG of a raster too large to decode), and ``noun``, the words that name it."""

    source: str
    path: str
    noun: str
    fallback: str = ""


def noun_of(text: str) -> str:
    """The words naming an object, from a description or title: its first sentence without a
    leading article or the closing punctuation, ``-`` and ``_`` as spaces, the first word in lower
    case when it was the sentence's capital ("A singing dinosaur!" → "singing dinosaur",
    "lightbulb-brightlit" → "lightbulb brightlit", "A European coin" → "European coin")."""
    text = " ".join(re.sub(r"[_\-]+", " ", text).split())
    text = re.split(r"(?<=[a-z)])[.!?](?:\s|$)", text)[0].strip(" .!?")
    stripped = re.sub(r"^(a|an|the)\s+", "", text, flags=re.IGNORECASE)
    if stripped == text and re.match(r"[A-Z][a-z]", text) and not re.search(r"\s[A-Z]", text):
        stripped = text[0].lower() + text[1:]  # a sentence's capital, no proper noun after it
    return stripped


def find_bases(per_source: int | None = None, clip_folder: str = "") -> list[Base]:
    """Every object of the three sources, sorted by source and path (``per_source``: at most
    that many of each, evenly spaced; ``clip_folder``: OpenClipart below that category only)."""
    from mispair.data.sources.openclipart import PNG_DIR, SVG_DIR, eval_eligible, find_clips, natural_noise

    clips = find_clips(PNG_DIR / clip_folder, SVG_DIR / clip_folder, trusted=True)
    eligible = eval_eligible(clips, natural_noise(clips))
    found = {
        "tuxpaint": [Base("tuxpaint", str(p), noun_of(d)) for p, d in calibration.tuxpaint_pairs()],
        "openclipart": [
            Base("openclipart", str(c.png), noun_of(c.meta.title), str(c.svg))
            for c, ok in zip(clips, eligible)
            if ok
        ],
        "icons": [Base("icons", str(p), noun_of(name)) for p, name in calibration.icon_pairs()],
    }
    bases = []
    for items in found.values():
        items = [b for b in items if re.search(r"[A-Za-z]{2}", b.noun)]
        if per_source is not None and len(items) > per_source:
            items = [items[k] for k in np.linspace(0, len(items) - 1, per_source).round().astype(int)]
        bases += items
    return bases


def emoji_fonts() -> list[str]:
    """The emoji fonts ``fc-list`` knows (none on this project's machine; none is used)."""
    if shutil.which("fc-list") is None:
        return []
    listed = subprocess.run(["fc-list"], capture_output=True, text=True, check=False).stdout
    return sorted({line.split(":")[0] for line in listed.splitlines() if "emoji" in line.lower()})


def rgba(path: Path, side: int, fallback: str = ""):
    """The picture at ``path`` as an RGBA Pillow image, decoded by mispair's safe readers
    (an SVG rendered at twice ``side``; a raster over mispair's pixel limit from ``fallback``)."""
    from PIL import Image

    from mispair.data.pictures.raster import ImageTooLarge, open_raster
    from mispair.data.pictures.svg_fetch import BoundedFetcher, read_svg_bytes

    if path.suffix.lower() != ".svg":
        try:
            with open_raster(path) as image:
                return image.convert("RGBA")
        except ImageTooLarge:
            if not fallback:
                raise
            path = Path(fallback)
    from cairosvg import surface

    fetcher = BoundedFetcher(path, trusted=True)  # Debian packages' files
    png = surface.PNGSurface.convert(
        bytestring=read_svg_bytes(path),
        output_width=2 * side,
        output_height=2 * side,
        unsafe=True,
        url_fetcher=fetcher,
    )
    with Image.open(io.BytesIO(png), formats=["PNG"]) as image:
        return image.convert("RGBA")


def load_base(job: tuple[Base, int]) -> np.ndarray | None:
    """``[side, side, 4]`` uint8: the base's object (its alpha box) fitted into the square,
    centred on transparency; None for an unreadable picture or one whose object covers under 2%
    of the square (a thin line, an empty icon)."""
    from PIL import Image

    base, side = job
    try:
        image = rgba(Path(base.path), side, base.fallback)
    except Exception:  # any picture a reader refuses is left out, and counted
        return None
    box = image.getchannel("A").point(lambda a: 255 if a > 8 else 0).getbbox()
    if box is None:
        return None
    canvas = Image.new("RGBA", (side, side), (0, 0, 0, 0))
    obj = fit(image.crop(box), side)
    canvas.alpha_composite(obj, ((side - obj.width) // 2, (side - obj.height) // 2))
    pixels = np.asarray(canvas)
    return pixels if (pixels[..., 3] > 8).mean() >= 0.02 else None


def prepare_bases(folder: Path, bases: list[Base], side: int, progress=print) -> tuple[list[Base], float]:
    """Load the bases (``Pool(2)``), drop those unreadable or repeating another's pixels, and
    write ``bases.npy`` (``[B, side, side, 4]``) and ``bases.json``; returns the kept bases and
    the seconds taken. A folder that holds them for the same bases and side is reused."""
    manifest = folder / "bases.json"
    wanted = {"side": side, "found": [asdict(b) for b in bases]}
    if manifest.is_file():
        held = json.loads(manifest.read_text(encoding="utf-8"))
        if {k: held[k] for k in wanted} == wanted:
            return [Base(**b) for b in held["kept"]], held["seconds"]
    began = time.perf_counter()
    folder.mkdir(parents=True, exist_ok=True)
    with multiprocessing.Pool(PROCESSES) as pool:
        loaded = pool.map(load_base, [(b, side) for b in bases], chunksize=8)
    kept, arrays, seen = [], [], set()
    for base, pixels in zip(bases, loaded):
        digest = None if pixels is None else hashlib.sha1(pixels.tobytes()).hexdigest()
        if digest is not None and digest not in seen:
            seen.add(digest)
            kept.append(base)
            arrays.append(pixels)
    np.save(folder / "bases.npy", np.stack(arrays))
    seconds = time.perf_counter() - began
    record = {**wanted, "kept": [asdict(b) for b in kept], "seconds": seconds}
    manifest.write_text(json.dumps(record, indent=1), encoding="utf-8")
    left = len(bases) - len(kept)
    progress(
        f"bases: {len(kept):,} kept, {left} unreadable, empty or repeating another's pixels; {seconds:.0f} s"
    )
    return kept, seconds


# --- pictures ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Spec:
    """One picture's key: ``layout`` "one" (``base`` drawn with ``framing``, ``rotation``,
    ``tint``) or "two" (``base`` on the left, ``second`` on the right), on ``background``."""

    layout: str
    base: int
    second: int
    framing: str
    rotation: str
    tint: str
    background: str


def article(words: str) -> str:
    return "an" if words[:1].lower() in "aeiou" else "a"


def caption_of(spec: Spec, nouns: list[str]) -> str:
    """The words that fit the picture: its object(s) and every variation of its key."""
    noun = nouns[spec.base]
    ground = f"on {article(spec.background)} {spec.background} background"
    if spec.layout == "two":
        second = nouns[spec.second]
        return f"{article(noun)} {noun} on the left and {article(second)} {second} on the right {ground}"
    thing = f"{spec.tint}-tinted {noun}" if spec.tint else noun
    if spec.framing == "close-up":
        head = f"a close-up of {article(thing)} {thing}"
    else:
        head = f"a {'large' if spec.framing == 'large' else 'small'} {thing}"
    turned = f", {spec.rotation}," if spec.rotation else ""
    where = {"large": "", "close-up": "", "middle": " in the middle"}.get(
        spec.framing, f" at the {spec.framing}"
    )
    return f"{head}{turned}{where} {ground}"


def draw_specs(
    n: int, nouns: list[str], rng: np.random.Generator, taken: set[Spec], captions: set[str]
) -> list[Spec]:
    """``n`` new keys, none in ``taken`` and none whose caption is in ``captions`` (both grow)."""
    specs: list[Spec] = []
    backgrounds, framings, rotations, tints = list(BACKGROUNDS), list(FRAMINGS), list(ROTATIONS), list(TINTS)
    tries = 0
    while len(specs) < n:
        tries += 1
        if tries > 50 * n + 1000:
            raise SystemExit(f"cannot draw {n:,} distinct pictures from {len(nouns):,} bases")
        background = backgrounds[rng.integers(len(backgrounds))]
        if rng.random() < PAIR_SHARE:
            first, second = (int(k) for k in rng.choice(len(nouns), 2, replace=False))
            if nouns[first] == nouns[second]:
                continue
            spec = Spec("two", first, second, "", "", "", background)
        else:
            framing, rotation = framings[rng.integers(len(framings))], rotations[rng.integers(len(rotations))]
            tint = tints[rng.integers(len(tints))]
            spec = Spec("one", int(rng.integers(len(nouns))), -1, framing, rotation, tint, background)
        caption = caption_of(spec, nouns)
        if spec in taken or caption in captions:
            continue
        taken.add(spec)
        captions.add(caption)
        specs.append(spec)
    return specs


def fit(image, box: float):
    """``image`` scaled to fit a ``box`` × ``box`` square, its aspect kept."""
    from PIL import Image

    scale = box / max(image.size)
    size = (max(1, round(image.width * scale)), max(1, round(image.height * scale)))
    return image.resize(size, Image.Resampling.LANCZOS)


def draw(spec: Spec, bases: np.ndarray, side: int):
    """The picture of ``spec`` (RGB Pillow image, ``side`` square)."""
    from PIL import Image

    canvas = Image.new("RGBA", (side, side), (*BACKGROUNDS[spec.background], 255))

    def put(obj, box: float, x: float, y: float) -> None:
        obj = fit(obj, box * side)
        canvas.alpha_composite(obj, (round(x * side - obj.width / 2), round(y * side - obj.height / 2)))

    def cut(k: int):
        obj = Image.fromarray(bases[k], "RGBA")
        return obj.crop(obj.getchannel("A").getbbox())

    if spec.layout == "two":
        put(cut(spec.base), SIDE_BY_SIDE, 0.26, 0.5)
        put(cut(spec.second), SIDE_BY_SIDE, 0.74, 0.5)
        return canvas.convert("RGB")
    obj = cut(spec.base)
    if spec.framing == "close-up":  # the object's middle half, enlarged
        w, h = obj.size
        obj = obj.crop((w // 4, h // 4, w // 4 + max(1, w // 2), h // 4 + max(1, h // 2)))
    if spec.tint:
        pixels = np.asarray(obj).copy()
        pixels[..., :3] = (0.5 * pixels[..., :3] + 0.5 * np.array(TINTS[spec.tint])).round().astype(np.uint8)
        obj = Image.fromarray(pixels, "RGBA")
    if ROTATIONS[spec.rotation]:
        obj = obj.rotate(ROTATIONS[spec.rotation], resample=Image.Resampling.BICUBIC, expand=True)
    if spec.framing in CORNERS:
        put(obj, SMALL, *CORNERS[spec.framing])
    else:
        put(obj, SMALL if spec.framing == "middle" else LARGE, 0.5, 0.5)
    return canvas.convert("RGB")


_WORKER: dict = {}


def _start_worker(bases_file: str, folder: str, fmt: str, side: int) -> None:
    _WORKER.update(bases=np.load(bases_file, mmap_mode="r"), folder=Path(folder), fmt=fmt, side=side)


def picture_name(row: int, fmt: str) -> str:
    return f"images/{row // 1000:03d}/{row:06d}.{'jpg' if fmt == 'jpeg' else 'png'}"


def encode(image, fmt: str) -> bytes:
    buffer = io.BytesIO()
    if fmt == "jpeg":
        image.save(buffer, format="JPEG", quality=90)
    else:
        image.save(buffer, format="PNG")
    return buffer.getvalue()


def pixel_digest(data: bytes) -> str:
    """The digest of the pixels a file decodes to (what the audit reads, JPEG's losses included)."""
    from PIL import Image

    with Image.open(io.BytesIO(data)) as image:
        return hashlib.sha1(np.asarray(image.convert("RGB")).tobytes()).hexdigest()


def _render_chunk(chunk: list[tuple[int, Spec]]) -> list[tuple[int, str]]:
    folder, fmt, side = _WORKER["folder"], _WORKER["fmt"], _WORKER["side"]
    done = []
    for row, spec in chunk:
        data = encode(draw(spec, _WORKER["bases"], side), fmt)
        path = folder / picture_name(row, fmt)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        done.append((row, pixel_digest(data)))
    return done


def render(
    folder: Path, jobs: list[tuple[int, Spec]], bases_file: Path, fmt: str, side: int, progress=print
) -> dict[int, str]:
    """Write each ``(row, spec)``'s picture below ``folder`` with ``Pool(2)``, a line every 5%;
    returns each row's pixel digest."""
    chunks = [jobs[k : k + 200] for k in range(0, len(jobs), 200)]
    digests: dict[int, str] = {}
    began, shown = time.perf_counter(), 0
    init = (str(bases_file), str(folder), fmt, side)
    with multiprocessing.Pool(PROCESSES, initializer=_start_worker, initargs=init) as pool:
        for done in pool.imap_unordered(_render_chunk, chunks):
            digests.update(done)
            twentieths = 20 * len(digests) // len(jobs)
            if twentieths > shown:
                shown = twentieths
                elapsed = time.perf_counter() - began
                progress(
                    f"  rendered {len(digests):,} / {len(jobs):,} pictures ({5 * shown}%), {elapsed:.0f} s"
                )
    return digests


def repeated_rows(digests: list[str]) -> list[int]:
    """The rows whose pixels repeat an earlier row's."""
    seen: set[str] = set()
    repeated = []
    for row, digest in enumerate(digests):
        if digest in seen:
            repeated.append(row)
        seen.add(digest)
    return repeated


def derange(n: int, share: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(``shown``, ``planted``): row ``r`` shows the caption of row ``shown[r]``; ``planted`` are
    the ``round(share · n)`` rows (at least 2 when any) whose captions were permuted among
    themselves by a uniformly random permutation without fixed points (drawn until it has none)."""
    count = round(share * n)
    count = 2 if count == 1 and n >= 2 else count
    planted = np.sort(rng.choice(n, size=count, replace=False)) if count else np.zeros(0, dtype=int)
    shown = np.arange(n)
    if count:
        while True:
            order = rng.permutation(count)
            if not (order == np.arange(count)).any():
                break
        shown[planted] = planted[order]
    return shown, planted


@dataclass
class Collection:
    """A rendered collection: ``folder`` (what the audit reads), ``truth`` (its file), ``rows``,
    ``planted``, ``seconds`` of rendering, ``redrawn`` pictures drawn again for repeated pixels."""

    folder: Path
    truth: Path
    rows: int
    planted: int
    seconds: float
    redrawn: int
    fmt: str
    side: int


def make_collection(
    root: Path,
    bases: list[Base],
    bases_file: Path,
    n: int,
    noise: float,
    seed: int,
    fmt: str,
    side: int,
    progress=print,
) -> Collection:
    """Render ``n`` distinct pictures into ``root/collection`` with their captions, ``noise`` of
    them deranged, the truth in ``root/truth.csv`` and the keys in ``root/pictures.csv``. A
    finished collection of the same settings (``root/render.json``) is reused."""
    settings = {"n": n, "noise": noise, "seed": seed, "format": fmt, "side": side, "bases": len(bases)}
    record = root / "render.json"
    if record.is_file():
        held = json.loads(record.read_text(encoding="utf-8"))
        if held["settings"] == settings:
            fields = held["collection"]
            return Collection(**{**fields, "folder": Path(fields["folder"]), "truth": Path(fields["truth"])})
    shutil.rmtree(root / "collection", ignore_errors=True)
    folder = root / "collection"
    nouns = [b.noun for b in bases]
    rng = np.random.default_rng([seed, 0])
    taken: set[Spec] = set()
    captions: set[str] = set()
    began = time.perf_counter()
    specs = draw_specs(n, nouns, rng, taken, captions)
    progress(f"rendering {n:,} pictures ({fmt}, {side} px) from {len(bases):,} bases")
    found = render(folder, list(enumerate(specs)), bases_file, fmt, side, progress)
    digests = [found[row] for row in range(n)]
    redrawn = 0
    for _ in range(20):
        again = repeated_rows(digests)
        if not again:
            break
        redrawn += len(again)
        for row, spec in zip(again, draw_specs(len(again), nouns, rng, taken, captions)):
            specs[row] = spec
        found = render(folder, [(row, specs[row]) for row in again], bases_file, fmt, side, lambda _: None)
        digests = [found.get(row, d) for row, d in enumerate(digests)]
    else:
        raise SystemExit(f"pictures still repeat after 20 redraws: {len(repeated_rows(digests))}")
    seconds = time.perf_counter() - began
    own = [caption_of(s, nouns) for s in specs]
    shown, planted = derange(n, noise, np.random.default_rng([seed, 1]))
    write_tables(root, folder, specs, bases, own, shown, digests, fmt)
    collection = Collection(folder, root / "truth.csv", n, len(planted), seconds, redrawn, fmt, side)
    payload = {**asdict(collection), "folder": str(folder), "truth": str(collection.truth)}
    record.write_text(json.dumps({"settings": settings, "collection": payload}, indent=1), encoding="utf-8")
    progress(f"rendered {n:,} pictures in {seconds:.1f} s ({redrawn} drawn again for repeated pixels)")
    return collection


def write_tables(
    root: Path,
    folder: Path,
    specs: list[Spec],
    bases: list[Base],
    own: list[str],
    shown: np.ndarray,
    digests: list[str],
    fmt: str,
) -> None:
    """``captions.csv`` in the collection; ``truth.csv`` and ``pictures.csv`` beside it."""
    with open(folder / "captions.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["image", "caption"])
        writer.writerows([picture_name(row, fmt), own[shown[row]]] for row in range(len(specs)))
    with open(root / "truth.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["pair_id", "mismatched"])
        writer.writerows([row, int(shown[row] != row)] for row in range(len(specs)))
    head = ["pair_id", "image", "layout", "source", "base", "second", "framing", "rotation", "tint"]
    with open(root / "pictures.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow([*head, "background", "own_caption", "pixel_digest"])
        for row, spec in enumerate(specs):
            second = bases[spec.second].path if spec.second >= 0 else ""
            fields = [spec.layout, bases[spec.base].source, bases[spec.base].path, second]
            fields += [spec.framing, spec.rotation, spec.tint, spec.background]
            writer.writerow([row, picture_name(row, fmt), *fields, own[row], digests[row]])


def read_speed(folder: Path, count: int = 200) -> dict[str, float]:
    """Milliseconds a picture for mispair's reader (:func:`mispair.data.pictures.images.load_picture`
    at 224 pixels) on ``count`` pictures of the collection, written as PNG and as JPEG 90."""
    from PIL import Image

    from mispair.data.pictures.images import load_picture

    names = sorted(folder.glob("images/*/*"))[:count]
    speed = {}
    for fmt in ("png", "jpeg"):
        files = []
        for k, name in enumerate(names):
            with Image.open(name) as image:
                files.append(folder.parent / f"speed-{k}.{fmt}")
                files[-1].write_bytes(encode(image.convert("RGB"), fmt))
        began = time.perf_counter()
        for path in files:
            load_picture(path)
        speed[fmt] = 1000 * (time.perf_counter() - began) / max(1, len(files))
        for path in files:
            path.unlink()
    return speed


# --- the audit ---------------------------------------------------------------------------------


@dataclass
class Measurement:
    """One size's figures (seconds, MiB, bytes)."""

    pictures: int
    planted: int
    render_s: float
    redrawn: int
    wall_s: float
    parts: dict[str, float]
    rss_mib: float
    anon_mib: float | None
    cache_bytes: int
    out_bytes: int
    collection_bytes: int
    auc_probability: float
    auc_score: float
    share: float | None
    interval: list[float] | None
    suspected: int | None
    load_before: tuple[float, float, float]
    load_after: tuple[float, float, float]
    command: str = ""
    stages: dict[str, float] = field(default_factory=dict)
    peak_at: str = "–"
    realised_fdr: float | None = None  # the share of the suspected pairs the truth calls matched


def disk_bytes(folder: Path) -> int:
    """The disk the folder's files take (allocated blocks), 0 when it is absent."""
    total = 0
    for parent, _, files in os.walk(folder):
        for name in files:
            with contextlib.suppress(OSError):  # removed meanwhile
                total += os.lstat(os.path.join(parent, name)).st_blocks * 512
    return total


def audit(root: Path, collection: Collection, overrides: tuple[str, ...] = (), progress=print) -> Measurement:
    """The default ``mispair audit`` of the collection (``overrides``: ``key=value`` after it) in a
    child process (2 threads, the cache inside ``root``, made anew), measured; the figures are
    kept in ``root/measurement.json``."""
    out, cache, log = root / "audit", root / "cache", root / "audit.log"
    shutil.rmtree(out, ignore_errors=True)
    shutil.rmtree(cache, ignore_errors=True)
    command = [
        sys.executable,
        "-m",
        "mispair",
        "audit",
        str(collection.folder),
        "--out",
        str(out),
        *overrides,
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "2", "MISPAIR_CACHE": str(cache)}
    shown = " ".join([f"MISPAIR_CACHE={cache} OMP_NUM_THREADS=2 mispair audit", *command[4:]])
    progress(f"auditing: {shown} (log: {log})")
    load_before = os.getloadavg()
    began = time.perf_counter()
    with open(log, "w", encoding="utf-8") as handle:
        child = subprocess.Popen(command, stdout=handle, stderr=subprocess.STDOUT, env=env)
        sampler = MemorySampler(child.pid)
        sampler.start()
        _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - began
    sampler.join()
    load_after = os.getloadavg()
    if os.waitstatus_to_exitcode(status):
        tail = log.read_text(encoding="utf-8", errors="replace")[-2000:]
        raise SystemExit(f"the audit failed (exit {os.waitstatus_to_exitcode(status)}):\n{tail}")
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    auc_probability, auc_score, realised_fdr = detection(out / "pairs.csv", collection.truth)
    parts = {k: float(v) for k, v in summary.get("timings", {}).items()}
    stages = {p: parts[p] for p in PARTS if p in parts}
    stages["start-up and the rest"] = wall - parts.get("total", sum(stages.values()))
    stages["audit wall"] = wall
    stages["rendering"] = collection.seconds
    interval = summary.get("estimated_mismatched_share_interval")
    measurement = Measurement(
        pictures=collection.rows,
        planted=collection.planted,
        render_s=collection.seconds,
        redrawn=collection.redrawn,
        wall_s=wall,
        parts=parts,
        rss_mib=usage.ru_maxrss / 1024,  # Linux: kilobytes
        anon_mib=sampler.peak_mb,
        cache_bytes=disk_bytes(cache),
        out_bytes=disk_bytes(out),
        collection_bytes=disk_bytes(collection.folder),
        auc_probability=auc_probability,
        auc_score=auc_score,
        realised_fdr=realised_fdr,
        share=summary.get("estimated_mismatched_share"),
        interval=list(interval) if interval else None,
        suspected=summary.get("suspected"),
        load_before=load_before,
        load_after=load_after,
        command=shown,
        stages=stages,
        peak_at=stage_at(sampler.high_water[0] if sampler.high_water else None, parts, wall),
    )
    (root / "measurement.json").write_text(json.dumps(asdict(measurement), indent=1), encoding="utf-8")
    return measurement


def stage_at(seconds: float | None, parts: dict[str, float], wall: float) -> str:
    """The stage running ``seconds`` after the audit's start, taking the stages to run one after
    the other in :data:`PARTS`'s order after a start-up of ``wall`` less their total."""
    if seconds is None:
        return "–"
    clock = wall - parts.get("total", sum(parts.get(p, 0.0) for p in PARTS))
    if seconds < clock:
        return "start-up"
    for part in PARTS:
        clock += parts.get(part, 0.0)
        if seconds < clock:
            return part
    return "the end"


def detection(pairs_csv: Path, truth_csv: Path) -> tuple[float, float, float | None]:
    """AUC against the planted truth of ``mismatch_probability`` and of ``-held_out_score``
    (lower is more suspect; no ties where the probability saturates at 1), and the realised
    false-discovery rate of the ``suspected`` pairs (the share of them the truth calls matched;
    None when none is suspected), to set beside the FDR the audit estimated."""
    import pandas as pd
    from sklearn.metrics import roc_auc_score

    pairs = pd.read_csv(
        pairs_csv,
        usecols=["pair_id", "mismatch_probability", "held_out_score", "suspected"],
        dtype={"pair_id": str, "suspected": str},
    )
    truth = pd.read_csv(truth_csv, dtype={"pair_id": str})
    joined = truth.merge(pairs, on="pair_id", how="left")
    if joined["mismatch_probability"].isna().any():
        missing = joined.loc[joined["mismatch_probability"].isna(), "pair_id"].head(5).tolist()
        count = joined["mismatch_probability"].isna().sum()
        raise SystemExit(f"{pairs_csv}: {count} pairs of the truth not in it, e.g. {missing}")
    y = joined["mismatched"].to_numpy()
    suspected = (joined["suspected"] == "True").to_numpy()
    fdr = float((y[suspected] == 0).mean()) if suspected.any() else None
    return (
        float(roc_auc_score(y, joined["mismatch_probability"])),
        float(roc_auc_score(y, -joined["held_out_score"])),
        fdr,
    )


# --- the section -------------------------------------------------------------------------------


def line_fit(sizes: list[int], seconds: list[float]) -> tuple[float, float] | None:
    """(a, b) of ``t = a + b·N``, least squares (None with fewer than 2 sizes)."""
    if len(set(sizes)) < 2:
        return None
    b, a = np.polyfit(np.asarray(sizes, dtype=float), np.asarray(seconds, dtype=float), 1)
    return float(a), float(b)


def exponents(sizes: list[int], values: list[float]) -> list[float]:
    """The growth exponent ``log(t₂/t₁) / log(N₂/N₁)`` between each size and the next."""
    return [
        float(np.log(v2 / v1) / np.log(n2 / n1))
        for n1, n2, v1, v2 in zip(sizes, sizes[1:], values, values[1:])
        if n2 != n1 and v1 > 0 and v2 > 0
    ]


def verdict(slopes: list[float]) -> str:
    """What the growth exponents between the sizes say of a part's growth."""
    if not slopes:
        return "–"
    if all(s < 0.15 for s in slopes):
        return "flat (a fixed part, or noise)"
    if all(0.85 <= s <= 1.15 for s in slopes):
        return "linear"
    if all(s < 0.85 for s in slopes):
        return "below linear (a fixed part)"
    if all(s > 1.15 for s in slopes):
        return "**above linear**: the line underestimates"
    return "mixed"


def mib(count: float) -> str:
    return f"{count / 2**20:,.1f}"


def machine() -> str:
    model = ""
    with contextlib.suppress(OSError), open("/proc/cpuinfo", encoding="utf-8") as cpus:
        model = next((line.split(":", 1)[1].strip() for line in cpus if line.startswith("model name")), "")
    pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    cores = f"{os.cpu_count()} cores ({usable} usable)"
    return f"{model or platform.processor()}, {cores}, {pages / 2**30:.0f} GiB memory"


def commit() -> str:
    try:
        found = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        )
        return found.stdout.strip() or "?"
    except OSError:
        return "?"


def figures_table(rows: list[Measurement]) -> str:
    head = [
        "pictures",
        "planted",
        "render s",
        "audit wall s",
        *[f"{p} s" for p in PARTS],
        "start-up and the rest s",
    ]
    head += ["peak RSS MiB (stage)", "peak anon MiB", "cache MiB", "output MiB", "collection MiB"]
    head += ["AUC (probability)", "AUC (score)", "suspected (realised FDR)", "est. share [interval]"]
    head += ["load before → after"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---:|" * len(head)]
    for m in rows:
        parts = [f"{m.stages[p]:.1f}" if p in m.stages else "–" for p in PARTS]
        share = "–" if m.share is None else f"{m.share:.3f}"
        if m.interval:
            share += f" [{m.interval[0]:.3f}, {m.interval[1]:.3f}]"
        anon = "–" if m.anon_mib is None else f"{m.anon_mib:,.0f}"
        load = f"{m.load_before[0]:.2f} → {m.load_after[0]:.2f}"
        cells = [f"{m.pictures:,}", f"{m.planted:,}", f"{m.render_s:.1f}", f"{m.wall_s:.1f}", *parts]
        cells += [f"{m.stages['start-up and the rest']:.1f}", f"{m.rss_mib:,.0f} ({m.peak_at})", anon]
        cells += [mib(m.cache_bytes), mib(m.out_bytes), mib(m.collection_bytes)]
        fdr = "–" if m.realised_fdr is None else f"{m.realised_fdr:.1%}"
        suspected = "–" if m.suspected is None else f"{m.suspected:,} ({fdr})"
        cells += [f"{m.auc_probability:.3f}", f"{m.auc_score:.3f}", suspected, share, load]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def fit_row(label: str, sizes: list[int], values: list[float], unit: str, targets) -> str | None:
    """One row of the fit: ``a``, ``b`` per picture (``unit`` s: ms; MiB: KiB), the growth
    exponents, what they say, and ``a + b·N`` at each target (a part that did not grow: "flat")."""
    fitted, slopes = line_fit(sizes, values), exponents(sizes, values)
    if fitted is None:
        return None
    a, b = fitted
    per = f"{1000 * b:.2f} ms" if unit == "s" else f"{1024 * b:.2f} KiB"
    cells = [f"{a + b * t:,.0f} {unit}" if b > 0 else f"flat: {max(values):,.1f} {unit}" for t in targets]
    slope_text = ", ".join(f"{s:.2f}" for s in slopes) or "–"
    return (
        f"| {label} | {a:,.1f} {unit} | {per} | {slope_text} | {verdict(slopes)} | "
        + " | ".join(cells)
        + " |"
    )


def fit_table(rows: list[Measurement], targets=(100_000, 1_000_000, 10_000_000)) -> str:
    """Per stage (and for peak RSS and the disk), ``t = a + b·N`` over the sizes and its values at
    the targets."""
    sizes = [m.pictures for m in rows]
    head = [
        "part",
        "a",
        "b per picture",
        "growth exponent(s)",
        "from the figures",
        *[f"{t:,}" for t in targets],
    ]
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * 3 + "---|" + "---:|" * len(targets)]
    found = []
    for stage in [*PARTS, "start-up and the rest", "audit wall", "rendering"]:
        if all(stage in m.stages for m in rows):
            found.append(fit_row(stage, sizes, [m.stages[stage] for m in rows], "s", targets))
    found.append(fit_row("peak RSS", sizes, [m.rss_mib for m in rows], "MiB", targets))
    for what, values in (("cache", [m.cache_bytes for m in rows]), ("output", [m.out_bytes for m in rows])):
        found.append(fit_row(f"disk: {what}", sizes, [v / 2**20 for v in values], "MiB", targets))
    return "\n".join(lines + [row for row in found if row is not None])


def goals(rows: list[Measurement]) -> str:
    """The issue's goals against the measured 100K run, else against the fitted line at 100K."""
    at = next((m for m in rows if m.pictures == 100_000), None)
    if at is not None:
        met = {
            k: "met" if value <= GOALS[k] else "**missed**"
            for k, value in (("wall_s", at.wall_s), ("rss_mib", at.rss_mib), ("cache_bytes", at.cache_bytes))
        }
        return (
            "Goals at 100,000 pictures (measured): "
            f"wall {at.wall_s:,.0f} s against 1,800 s ({met['wall_s']}); "
            f"peak RSS {at.rss_mib:,.0f} MiB against 4 GB = 3,815 MiB ({met['rss_mib']}); "
            f"cache {mib(at.cache_bytes)} MiB against 1 GB = 954 MiB ({met['cache_bytes']})."
        )
    sizes = [m.pictures for m in rows]
    wall = line_fit(sizes, [m.wall_s for m in rows])
    cache = line_fit(sizes, [float(m.cache_bytes) for m in rows])
    if wall is None or cache is None:
        return "Goals at 100,000 pictures: not measured, and one size gives no line."
    rss = line_fit(sizes, [m.rss_mib for m in rows])
    growth = exponents([sizes[0], sizes[-1]], [rows[0].rss_mib, rows[-1].rss_mib])
    return (
        "Goals at 100,000 pictures (the lines above at 100K, not measured): "
        f"wall {wall[0] + wall[1] * 1e5:,.0f} s against 1,800 s; "
        f"peak RSS {rss[0] + rss[1] * 1e5:,.0f} MiB against 4 GB = 3,815 MiB (grown as "
        f"N^{growth[0] if growth else float('nan'):.2f} between the sizes: a line through a mostly "
        "fixed part is a rough guess); "
        f"cache {mib(cache[0] + cache[1] * 1e5)} MiB against 1 GB = 954 MiB."
    )


def section(
    args: argparse.Namespace, bases: list[Base], bases_s: float, rows: list[Measurement], speed
) -> str:
    """The markdown section: the command, the machine, the sources, the figures, the fit, the goals."""
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    counts = {s: sum(b.source == s for b in bases) for s in ("tuxpaint", "openclipart", "icons")}
    emoji = emoji_fonts()
    speed_text = (
        f" mispair's reader took {speed['png']:.2f} ms a picture as PNG and {speed['jpeg']:.2f} ms as "
        f"JPEG 90 (`load_picture` at 224 px, {min(200, rows[0].pictures)} of the pictures)."
        if speed
        else ""
    )
    one = f"{len(FRAMINGS)} framings, {len(ROTATIONS)} rotations, {len(TINTS)} tints"
    text = [
        f"## Real pictures, end to end (issue 66.3): {', '.join(f'{m.pictures:,}' for m in rows)} pictures\n",
        f"`python benchmarks/real_pictures.py {' '.join(sys.argv[1:])}`; {when}; mispair {commit()}; "
        f"{machine()}, **shared with other work** (the load averages are in the table); the audit in a "
        f"child process with OMP_NUM_THREADS=2: `{rows[0].command}` (each size's cache empty at its "
        "start).\n",
        f"Bases: {len(bases):,} distinct objects ({counts['tuxpaint']:,} Tux Paint stamps, "
        f"{counts['openclipart']:,} OpenClipart clips, {counts['icons']:,} Adwaita icons; prepared once "
        f"in {bases_s:.0f} s, not in the render times); emoji fonts: "
        f"{'none installed' if not emoji else ', '.join(emoji) + ' found, not used'}. "
        f"Pictures: {args.side} × {args.side} {args.format.upper()}, {1 - PAIR_SHARE:.0%} one object "
        f"({one}), {PAIR_SHARE:.0%} two side by side, {len(BACKGROUNDS)} backgrounds; seed {args.seed}; "
        f"{args.noise:.0%} of the captions deranged; rendered by Pool({PROCESSES}).{speed_text} "
        "AUC: `pairs.csv`'s `mismatch_probability` (and `-held_out_score`) against `truth.csv`.\n",
        figures_table(rows) + "\n",
    ]
    if len({m.pictures for m in rows}) > 1:
        text += [
            "Per stage, `t = a + b·N` fitted by least squares over the sizes above; the growth exponent "
            "between successive sizes says whether the stage grew linearly at these sizes (0.85–1.15) "
            f"or not. Every size uses all {len(bases):,} bases, so the pictures per base grow with N; "
            "the ranking's exact search turns into an IVF index above 4·10⁹ caption–image products "
            "(docs/scale.md), which a line from small sizes cannot see.\n",
            fit_table(rows) + "\n",
        ]
    text.append(goals(rows) + "\n")
    return "\n".join(text)


# --- the command -------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--sizes", type=int, nargs="+", default=[100_000], help="pictures per run (default 100000)"
    )
    parser.add_argument(
        "--noise", type=float, default=0.2, help="share of the captions deranged (default 0.2)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="passed to the audit after its command (default none: the audit as a new user runs it)",
    )
    parser.add_argument("--work", default="runs/real_pictures", help="everything it writes goes here")
    parser.add_argument(
        "--reuse", action="store_true", help="use a non-empty --work: keep its bases and pictures"
    )
    parser.add_argument("--write", help="append the section to this markdown file (default: stdout only)")
    parser.add_argument(
        "--format", choices=("png", "jpeg"), default="jpeg", help="the pictures' format (default jpeg)"
    )
    parser.add_argument("--side", type=int, default=160, help="the pictures' side in pixels (default 160)")
    parser.add_argument(
        "--bases-per-source", type=int, help="at most this many objects of each source (quick checks)"
    )
    args = parser.parse_args(argv)
    if not 0 <= args.noise < 1:
        parser.error("--noise must lie in [0, 1)")
    if min(args.sizes) < 50:
        parser.error("--sizes: at least 50 pictures each")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    work = Path(args.work)
    if work.exists() and any(work.iterdir()) and not args.reuse:
        raise SystemExit(
            f"{work} is not empty: name a new --work, or add --reuse to keep its bases and pictures"
        )
    work.mkdir(parents=True, exist_ok=True)
    say = lambda text: print(text, flush=True)  # noqa: E731
    bases, bases_s = prepare_bases(work / "bases", find_bases(args.bases_per_source), args.side, say)
    rows, speed = [], None
    for n in sorted(set(args.sizes)):
        root = work / f"n{n}"
        collection = make_collection(
            root, bases, work / "bases" / "bases.npy", n, args.noise, args.seed, args.format, args.side, say
        )
        speed = speed or read_speed(collection.folder)
        rows.append(audit(root, collection, tuple(args.override), say))
        m = rows[-1]
        say(f"{n:,} pictures: audit {m.wall_s:.1f} s, {m.rss_mib:,.0f} MiB, AUC {m.auc_probability:.3f}")
    text = section(args, bases, bases_s, rows, speed)
    print(text)
    if args.write:
        with open(args.write, "a", encoding="utf-8") as handle:
            handle.write("\n" + text)


if __name__ == "__main__":
    main()
