"""Feature extraction throughput: PyTorch against ONNX Runtime, in 1 and 2 processes.

What is encoded (real data, nothing fetched):

- **captions**: the distinct captions of ``data/tuxpaint_precomp/{train,dev,test}_caps.txt``,
  tokenized by :class:`~mispair.data.tokenizers.MiniLMTokenizer`, turned into MiniLM token states
  as a run does before training (:meth:`~mispair.nn.text.state_cache.TokenStateCache.fill`:
  longest first, batches of 128, float16 states) by :func:`~mispair.nn.text.minilm.minilm_compute`;
- **images**: the first ``--images`` PNG stamps of ``/usr/share/tuxpaint/stamps`` (sorted paths),
  decoded and fitted to 224×224 once beforehand (decoding is the same for every runtime and is not
  timed), turned into EfficientNet-Lite0 grids ``[B, 1280, 7, 7]`` in batches of ``--batch``
  (8, as :func:`~mispair.data.features.extract_grid_features`) by
  :func:`~mispair.data.features.pixel_encoder`.

The rows: ``torch`` (the PyTorch path of a run: inference mode, channels-last images), ``torch
contiguous`` (images without channels-last: what it gains), ``torch bfloat16`` (captions only:
``model.text_precision=bfloat16``, PyTorch's bfloat16 autocast), ``onnx`` (``data.encoder_runtime=onnx``)
and ``onnx int8`` (the exported model after ONNX Runtime's dynamic int8 quantization: measured
here only, since its features are not within 0.01 cosine of PyTorch's; ``--no-int8`` skips it).

Every process runs one thread (torch and ONNX Runtime). With 2 processes each encodes half of the
items; both start together after a barrier, with their models loaded and warmed, and the rate is
items / (last finish − first start). The processes are started once and keep their models; each
cell is the median of ``--repeats`` rounds, the configurations interleaved within a round so that
the load of other jobs spreads over all of them.

Agreement: the cosine of each ONNX output with PyTorch's, per caption token (the states a run
caches), per caption's mean state, per image's whole grid (49 × 1280 values flattened) and per
image's mean grid feature (what ``model.image_pooling=features`` reads).

Run (the figures in ``benchmarks/results/bench_features.md``)::

    PYTHONPATH=src HF_HUB_OFFLINE=1 python benchmarks/bench_features.py \\
        --write benchmarks/results/bench_features.md
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import shlex
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import torch

STAMPS = Path("/usr/share/tuxpaint/stamps")
CAPTIONS = Path("data/tuxpaint_precomp")
CAPTION_ROWS = ("torch", "torch bfloat16", "onnx", "onnx int8")
IMAGE_ROWS = ("torch", "torch contiguous", "onnx", "onnx int8")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--captions", type=Path, default=CAPTIONS, help="a precomputed set's folder")
    parser.add_argument("--stamps", type=Path, default=STAMPS, help="a folder of PNG pictures")
    parser.add_argument("--images", type=int, default=256, help="pictures encoded (default 256)")
    parser.add_argument("--batch", type=int, default=8, help="pictures per batch (default 8)")
    parser.add_argument("--repeats", type=int, default=3, help="rounds; each cell is their median")
    parser.add_argument("--no-int8", action="store_true", help="skip the int8 rows")
    parser.add_argument("--write", type=Path, help="write the results (markdown) here")
    parser.add_argument("--note", default="", help="what else ran on the machine (written with the results)")
    return parser.parse_args(argv)


def read_captions(folder: Path) -> list[list[int]]:
    """Token ids of the distinct captions of ``folder``'s train, dev and test splits."""
    from mispair.data.tokenizers import MiniLMTokenizer

    lines = [line for s in ("train", "dev", "test") for line in (folder / f"{s}_caps.txt").open()]
    tokenizer = MiniLMTokenizer()
    return [tokenizer.encode(c) for c in dict.fromkeys(line.strip() for line in lines) if c]


def read_pictures(folder: Path, count: int) -> np.ndarray:
    """``[count, 3, 224, 224]`` float32 pictures: the first ``count`` PNGs under ``folder``."""
    from mispair.data.features import to_batch
    from mispair.data.pictures.images import load_picture

    paths = sorted(folder.rglob("*.png"))[:count]
    return to_batch([load_picture(p, 224) for p in paths]).numpy()


def quantized(model: Path, out: Path) -> Path:
    """``model`` after ONNX Runtime's dynamic int8 quantization (weights int8), written to ``out``."""
    import logging

    from onnxruntime.quantization import QuantType, quantize_dynamic

    logging.getLogger().setLevel(logging.ERROR)  # its advice on pre-processing, per tensor
    quantize_dynamic(model, out, weight_type=QuantType.QInt8)
    return out


def caption_encoders(int8: Path | None) -> dict[str, Callable]:
    """The state functions ``(ids [B, L], lengths [B]) -> [B, L, 384]`` of each caption row."""
    from mispair.nn.text import minilm
    from mispair.onnx_runtime import OnnxModule

    found = {"torch": minilm.minilm_compute("torch"), "onnx": minilm.minilm_compute("onnx")}
    found["torch bfloat16"] = minilm.minilm_compute("torch", precision="bfloat16")  # model.text_precision
    if int8 is not None:
        module = OnnxModule(int8)
        found["onnx int8"] = lambda ids, lengths: module(ids, minilm._mask(ids, lengths).long())
    return found


def image_encoders(int8: Path | None) -> dict[str, Callable]:
    """The functions ``pixels [B, 3, 224, 224] -> [B, 1280, 7, 7]`` of each image row."""
    from mispair.data.features import EfficientNetLite0Grid, pixel_encoder
    from mispair.onnx_runtime import OnnxModule

    found = {"onnx": pixel_encoder(EfficientNetLite0Grid(), "onnx")}
    found["torch"] = pixel_encoder(EfficientNetLite0Grid(), "torch")
    plain = EfficientNetLite0Grid().train(False)
    found["torch contiguous"] = torch.inference_mode()(lambda pixels: plain(pixels))
    if int8 is not None:
        found["onnx int8"] = OnnxModule(int8)
    return found


def encode_captions(compute: Callable, tokens: list[list[int]]) -> None:
    from mispair.nn.text.state_cache import TokenStateCache

    TokenStateCache("bench").fill(tokens, compute)


def encode_images(encode: Callable, pixels: np.ndarray, batch: int) -> None:
    for start in range(0, len(pixels), batch):
        encode(torch.from_numpy(pixels[start : start + batch]))


def worker(rank: int, work: Path, args: argparse.Namespace, barrier, tasks, results) -> None:
    """Loads every encoder at one thread, then runs ``(side, row, processes)`` tasks on its share
    of the items until told to stop (None), answering ``(start, end)`` times."""
    torch.set_num_threads(1)
    tokens = read_token_file(work / "tokens.txt")
    pixels = np.load(work / "pixels.npy", mmap_mode="r")
    int8 = None if args.no_int8 else work
    encoders = {
        "captions": caption_encoders(int8 and int8 / "minilm-int8.onnx"),
        "images": image_encoders(int8 and int8 / "efficientnet-int8.onnx"),
    }
    for side, found in encoders.items():  # warm up
        for encode in found.values():
            if side == "captions":
                encode_captions(encode, tokens[:8])
            else:
                encode_images(encode, np.array(pixels[:2]), 2)
    results.put(("ready", rank))
    while (task := tasks.get()) is not None:
        side, row, processes = task
        if processes > 1:
            barrier.wait()
        start = time.time()
        if side == "captions":
            encode_captions(encoders[side][row], tokens[rank::processes])
        else:
            share = np.array(pixels[rank * len(pixels) // processes : (rank + 1) * len(pixels) // processes])
            encode_images(encoders[side][row], share, args.batch)
        results.put((start, time.time()))


def read_token_file(path: Path) -> list[list[int]]:
    return [[int(t) for t in line.split()] for line in path.read_text().splitlines()]


def measure(workers: list, results, side: str, row: str, processes: int, items: int) -> float:
    """Items per second of ``side``'s ``row`` in ``processes`` of the started workers."""
    for tasks in workers[:processes]:
        tasks.put((side, row, processes))
    times = [results.get() for _ in range(processes)]
    return items / (max(end for _, end in times) - min(start for start, _ in times))


def cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise cosine of ``[n, d]`` arrays (float64)."""
    a, b = a.astype(np.float64), b.astype(np.float64)
    return (a * b).sum(-1) / (np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1))


def caption_agreement(encoders: dict[str, Callable], tokens: list[list[int]]) -> dict[str, dict]:
    """Per row other than torch: cosine with torch's states per token and per caption's mean."""
    from mispair.data.batching import pad_tokens

    outs: dict[str, list] = {name: [] for name in encoders}
    for start in range(0, len(tokens), 128):
        ids, lengths = pad_tokens(tokens[start : start + 128])
        for name, compute in encoders.items():
            with torch.inference_mode():
                states = compute(ids, lengths).float().numpy()
            outs[name] += [s[:n] for s, n in zip(states, lengths.tolist())]
    return {
        name: {
            "token": cosine(np.concatenate(outs[name]), np.concatenate(outs["torch"])),
            "pooled": cosine(*(np.stack([s.mean(0) for s in outs[k]]) for k in (name, "torch"))),
        }
        for name in encoders
        if name != "torch"
    }


def image_agreement(encoders: dict[str, Callable], pixels: np.ndarray) -> dict[str, dict]:
    """Per row other than the torch ones: cosine with torch's grid, whole and mean-pooled."""
    outs = {}
    for name, encode in encoders.items():
        with torch.inference_mode():
            batches = [torch.from_numpy(pixels[s : s + 16]) for s in range(0, len(pixels), 16)]
            outs[name] = np.concatenate([encode(batch).float().numpy() for batch in batches])
    ref = outs["torch"]
    return {
        name: {
            "grid": cosine(out.reshape(len(out), -1), ref.reshape(len(ref), -1)),
            "pooled": cosine(out.mean((2, 3)), ref.mean((2, 3))),
        }
        for name, out in outs.items()
        if not name.startswith("torch")
    }


def prepare_work(args: argparse.Namespace, work: Path) -> tuple[list[list[int]], np.ndarray]:
    """The items written for the workers, the ONNX models exported (and quantized) beforehand."""
    from mispair.data.features import EfficientNetLite0Grid, pixel_encoder
    from mispair.nn.text.minilm import onnx_minilm

    tokens, pixels = read_captions(args.captions), read_pictures(args.stamps, args.images)
    (work / "tokens.txt").write_text("\n".join(" ".join(map(str, t)) for t in tokens) + "\n")
    np.save(work / "pixels.npy", pixels)
    images = pixel_encoder(EfficientNetLite0Grid(), "onnx")
    models = {"minilm": onnx_minilm().path, "efficientnet": images.path}
    if not args.no_int8:
        for name, path in models.items():
            quantized(path, work / f"{name}-int8.onnx")
    return tokens, pixels


def run(args: argparse.Namespace) -> dict:
    """Every measurement: rates per (side, row, processes) and the agreement of each ONNX row."""
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory(prefix="bench_features_") as tmp:
        work = Path(tmp)
        tokens, pixels = prepare_work(args, work)
        int8 = None if args.no_int8 else work
        agreement = {
            "captions": caption_agreement(caption_encoders(int8 and work / "minilm-int8.onnx"), tokens),
            "images": image_agreement(image_encoders(int8 and work / "efficientnet-int8.onnx"), pixels),
        }
        rates = timed(args, work, len(tokens), len(pixels))
    return {"rates": rates, "agreement": agreement, "captions": len(tokens), "images": len(pixels)}


def timed(args: argparse.Namespace, work: Path, n_captions: int, n_images: int) -> dict:
    """Median rates over ``args.repeats`` interleaved rounds, in two persistent worker processes."""
    context = mp.get_context("spawn")
    barrier, results = context.Barrier(2), context.Queue()
    queues = [context.Queue() for _ in range(2)]
    procs = [
        context.Process(target=worker, args=(rank, work, args, barrier, queues[rank], results))
        for rank in range(2)
    ]
    for proc in procs:
        proc.start()
    for _ in procs:
        results.get()  # ready
    rows = [("captions", r) for r in CAPTION_ROWS] + [("images", r) for r in IMAGE_ROWS]
    cells = [
        (side, row, p) for side, row in rows for p in (1, 2) if not (args.no_int8 and row == "onnx int8")
    ]
    samples: dict[tuple, list[float]] = {c: [] for c in cells}
    for round_ in range(args.repeats):
        for cell in cells:
            items = n_captions if cell[0] == "captions" else n_images
            samples[cell].append(measure(queues, results, *cell, items))
        print(f"round {round_ + 1}/{args.repeats} done", file=sys.stderr)
    for tasks in queues:
        tasks.put(None)
    for proc in procs:
        proc.join()
    return {cell: statistics.median(values) for cell, values in samples.items()}


def report(result: dict, args: argparse.Namespace, load: tuple[float, float]) -> str:
    """The results as markdown: a throughput table and the agreement of each ONNX row."""
    rates = result["rates"]
    lines = [
        "| encoder | runtime | 1 process | 2 processes | 2 vs 1 | vs torch (1 proc.) | vs torch (2 proc.) |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for side, encoder in (("captions", "MiniLM (captions/s)"), ("images", "EfficientNet-Lite0 (images/s)")):
        for row in CAPTION_ROWS if side == "captions" else IMAGE_ROWS:
            if (side, row, 1) not in rates:
                continue
            one, two = rates[side, row, 1], rates[side, row, 2]
            base1, base2 = rates[side, "torch", 1], rates[side, "torch", 2]
            ratios = f"{two / one:.2f}× | {one / base1:.2f}× | {two / base2:.2f}×"
            lines.append(f"| {encoder} | {row} | {one:.1f} | {two:.1f} | {ratios} |")
    lines += [
        "",
        "| agreement with torch | runtime | cosine per | mean cosine | min cosine | 1 − min cosine |",
        "|---|---|---|---:|---:|---:|",
    ]
    for side, found in result["agreement"].items():
        for row, measures in found.items():
            for per, values in measures.items():
                low = values.min()
                lines.append(f"| {side} | {row} | {per} | {values.mean():.6f} | {low:.6f} | {1 - low:.1e} |")
    note = (
        f"{result['captions']} captions, {result['images']} images (batch {args.batch}), one thread per "
        f"process, median of {args.repeats} interleaved rounds; load average {load[0]:.2f} before, "
        f"{load[1]:.2f} after; torch {torch.__version__}"
    )
    return "\n".join(lines) + f"\n\n{note}\n"


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    load_before = os.getloadavg()[0]
    result = run(args)
    table = report(result, args, (load_before, os.getloadavg()[0]))
    print(table)
    if args.write:
        given = sys.argv[1:] if argv is None else argv
        command = "PYTHONPATH=src HF_HUB_OFFLINE=1 python benchmarks/bench_features.py " + shlex.join(given)
        stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        note = f"**The machine**: {args.note}\n\n" if args.note else ""
        args.write.write_text(HEADER.format(command=command, stamp=stamp, note=note) + table)


HEADER = """# Feature extraction: PyTorch against ONNX Runtime, 1 and 2 processes

Made by `benchmarks/bench_features.py` ({stamp}):

```bash
{command}
```

{note}"""


if __name__ == "__main__":
    main()
