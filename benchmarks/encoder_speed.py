"""Pictures and captions a second per core of mispair's two frozen encoders, against the machine's
peak (issue 66.2): what each path does with the core it is given.

- **The peak**: float32 matrix products ``2048 × 2048`` on the same core(s), by PyTorch (MKL) and by
  ONNX Runtime (MLAS), GFLOP/s, the median of 5 products; the best of the two is the peak.
- **FLOPs per item** (``torch.utils.flop_counter.FlopCounterMode``, two per multiply-add):
  EfficientNet-Lite0 at the pipeline's 224 × 224; MiniLM at each caption's own length (what a
  caption needs), and as batched (its batch's longest caption: what is computed).
- **Pictures**: the first ``--pictures`` PNG stamps of ``--stamps`` (sorted paths). The pipeline
  as mispair runs it: :func:`~mispair.data.picture_features.picture_features` into an empty
  store (hashing, decoding and fitting to 224 × 224 in ``loaders`` threads, the encoder, the mean
  feature stored), with a :class:`~mispair.data.features.GridRunner` of the row's runtime, batch
  and loaders; the model alone on pictures decoded beforehand; the decoding alone.
- **Captions**: the distinct captions of ``--captions`` (Tux Paint's train, dev and test). The
  pipeline: tokenized (:meth:`~mispair.data.tokenizers.MiniLMTokenizer.encode_many`), then
  :meth:`~mispair.nn.text.state_cache.TokenStateCache.fill` of each caption's mean state (what
  the audit's pooled-only model reads), its batches of 128 (before) or padded at most 10% (after);
  the model alone over the same batches.

The process is pinned to ``--cores`` CPUs (``sched_setaffinity``) with as many torch and ONNX
Runtime threads, so that items/s divided by ``--cores`` is items/s per core whatever else runs on
the machine. Every row is timed once per round, the rounds interleaved (the order reversed every
other round), and the median of ``--repeats`` rounds is reported with each round's rate: on a
shared machine the ratios of rows of one run are the figures to read. bfloat16 rows run on
``--bf16-items`` items (slow where the CPU lacks native bfloat16: ``lscpu`` flags ``avx512_bf16``,
``amx_bf16``).

Agreement with PyTorch float32 (contiguous pictures; fixed batches of captions): the largest
absolute difference and the least cosine, per picture's grid (49 × 1280 values) and mean feature,
per caption's token states and mean state.

    PYTHONPATH=src HF_HUB_OFFLINE=1 python benchmarks/encoder_speed.py \\
        --write benchmarks/results/encoder_speed.md
"""

from __future__ import annotations

import argparse
import functools
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import torch

STAMPS = Path("/usr/share/tuxpaint/stamps")
CAPTIONS = Path("data/tuxpaint_precomp")
SIZE = 2048


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--stamps", type=Path, default=STAMPS, help="a folder of PNG pictures")
    parser.add_argument("--pictures", type=int, default=200, help="pictures encoded (default 200)")
    parser.add_argument("--captions", type=Path, default=CAPTIONS, help="a precomputed set's folder")
    parser.add_argument("--cores", type=int, default=1, help="CPUs the process is pinned to (default 1)")
    parser.add_argument("--repeats", type=int, default=3, help="rounds; each cell is their median")
    parser.add_argument("--bf16-items", type=int, default=32, help="items of the bfloat16 rows")
    parser.add_argument("--write", type=Path, help="write the results (markdown) here")
    parser.add_argument("--note", default="", help="what else ran on the machine")
    return parser.parse_args(argv)


def pin(cores: int) -> list[int]:
    """This process (and the threads it starts) on its first ``cores`` allowed CPUs."""
    cpus = sorted(os.sched_getaffinity(0))[:cores]
    os.sched_setaffinity(0, cpus)
    torch.set_num_threads(len(cpus))
    return cpus


def peak(cores: int) -> dict[str, float]:
    """GFLOP/s of a float32 ``SIZE``² matrix product by PyTorch and by ONNX Runtime (median of 5)."""
    import onnxruntime as ort
    from onnx import TensorProto, helper

    a, b = torch.randn(SIZE, SIZE), torch.randn(SIZE, SIZE)
    value = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [SIZE, SIZE]) for n in "abc"]
    graph = helper.make_graph([helper.make_node("MatMul", ["a", "b"], ["c"])], "mm", value[:2], value[2:])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    options = ort.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = cores, 1
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    feeds = {"a": a.numpy(), "b": b.numpy()}
    rates = {}
    for name, product in (("torch", lambda: a @ b), ("onnx", lambda: session.run(None, feeds))):
        product()
        times = []
        for _ in range(5):
            start = time.perf_counter()
            product()
            times.append(time.perf_counter() - start)
        rates[name] = 2 * SIZE**3 / statistics.median(times) / 1e9
    return rates


def flops(run: Callable[[], object]) -> int:
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter, torch.inference_mode():
        run()
    return counter.get_total_flops()


def read_captions(folder: Path) -> list[str]:
    lines = [line for s in ("train", "dev", "test") for line in (folder / f"{s}_caps.txt").open()]
    return [c for c in dict.fromkeys(line.strip() for line in lines) if c]


def caption_flops(bert, lengths: list[int], batches: list[range]) -> tuple[float, float]:
    """FLOPs a caption: ``(needed, computed)``: at its own length; at its batch's first length."""
    from mispair.nn.text.minilm import minilm_states

    at = {
        n: flops(lambda n=n: minilm_states(bert, torch.ones(1, n, dtype=torch.long), torch.tensor([n])))
        for n in set(lengths)
    }
    needed = sum(at[n] for n in lengths) / len(lengths)
    computed = sum(len(b) * at[lengths[b.start]] for b in batches) / len(lengths)
    return needed, computed


def picture_rows(args, work: Path) -> tuple[dict, dict, dict]:
    """``(rows, agreement, info)`` of the pictures: each row ``(items, run)``."""
    from mispair.data import features
    from mispair.data.features import EfficientNetLite0Grid, GridRunner, pixel_encoder, to_batch
    from mispair.data.picture_features import picture_features
    from mispair.data.picture_store import PictureStore
    from mispair.data.pictures.images import load_picture

    features._thread_count = lambda: args.cores  # the pinned cores, whatever the load average
    paths = sorted(args.stamps.rglob("*.png"))[: args.pictures]
    decoded = [load_picture(p, 224) for p in paths]
    pixels = to_batch(decoded)
    net = EfficientNetLite0Grid()
    plain = EfficientNetLite0Grid().train(False)
    encoders: dict[str, Callable] = {
        "torch contiguous": torch.inference_mode()(lambda x: plain(x)),
        "torch channels-last": pixel_encoder(net, "torch"),
        "onnx": pixel_encoder(net, "onnx"),
    }
    last = encoders["torch channels-last"]
    encoders["torch channels-last bfloat16"] = lambda x: _autocast(last, x)

    def model(name: str, batch: int, count: int) -> Callable[[], None]:
        def run() -> None:
            for s in range(0, count, batch):
                encoders[name](pixels[s : min(s + batch, count)])

        return run

    def load(i: int):
        return load_picture(paths[i], 224)

    def pipeline(runtime: str, batch: int, loaders: int) -> Callable[[], None]:
        runner = GridRunner(None, "cpu", batch, runtime, loaders)

        def run() -> None:
            with tempfile.TemporaryDirectory(dir=work) as store:
                picture_features(
                    paths, load, PictureStore(Path(store), "bench", "mean"), runner, progress=False
                )

        return run

    n, few = len(paths), min(args.bf16_items, len(paths))
    rows = {
        "pipeline: torch, batch 8, 1 loader (before)": (n, pipeline("torch", 8, 1)),
        "pipeline: auto (onnx), batch 8, 1 loader (after)": (n, pipeline("auto", 8, 1)),
        "pipeline: onnx, batch 8, 2 loaders": (n, pipeline("onnx", 8, 2)),
        "pipeline: onnx, batch 32, 1 loader": (n, pipeline("onnx", 32, 1)),
        "decoding and fitting alone (load_picture, to_batch)": (
            n,
            lambda: to_batch([load(i) for i in range(n)]),
        ),
        "model: torch contiguous, batch 8": (n, model("torch contiguous", 8, n)),
        "model: torch channels-last, batch 8": (n, model("torch channels-last", 8, n)),
        "model: torch channels-last bfloat16 autocast, batch 8": (
            few,
            model("torch channels-last bfloat16", 8, few),
        ),
        "model: onnx, batch 8": (n, model("onnx", 8, n)),
        "model: onnx, batch 1": (n, model("onnx", 1, n)),
        "model: onnx, batch 32": (n, model("onnx", 32, n)),
    }
    with torch.inference_mode():
        ref = encoders["torch contiguous"](pixels).float()
        agreement = {
            name: _agreement(encoders[name](pixels[:count]).float(), ref[:count], grid=True)
            for name, count in (
                ("torch channels-last", n),
                ("onnx", n),
                ("torch channels-last bfloat16", few),
            )
        }
    info = {"flops": flops(lambda: net(pixels[:1])), "items": n}
    return rows, agreement, info


def _autocast(encode: Callable, pixels: torch.Tensor) -> torch.Tensor:
    with torch.autocast("cpu", dtype=torch.bfloat16):
        return encode(pixels).float()


def caption_rows(args) -> tuple[dict, dict, dict]:
    """``(rows, agreement, info)`` of the captions: each row ``(items, run)``."""
    from mispair.data.batching import pad_tokens
    from mispair.data.tokenizers import MiniLMTokenizer
    from mispair.nn.text import minilm
    from mispair.nn.text.state_cache import TokenStateCache, length_batches

    captions = read_captions(args.captions)
    tokenizer = MiniLMTokenizer()
    ordered = sorted(tokenizer.encode_many(captions), key=len, reverse=True)
    lengths = [len(ids) for ids in ordered]
    bert = minilm.frozen_minilm()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.ao's notice that it moves to torchao
        int8 = torch.ao.quantization.quantize_dynamic(
            minilm.load_minilm(), {torch.nn.Linear}, dtype=torch.qint8
        )
    states = {
        "torch": functools.partial(minilm.minilm_states, bert),
        "onnx": minilm.onnx_minilm_states,
        "bfloat16": minilm.minilm_compute("torch", precision="bfloat16"),
        "int8": functools.partial(minilm.minilm_states, int8),
    }
    fixed, padded = length_batches(lengths, 128, None), length_batches(lengths, 128)

    def model(name: str, batches: list[range]) -> Callable[[], list]:
        def run() -> list:
            with torch.inference_mode():
                return [states[name](*pad_tokens(ordered[b.start : b.stop])) for b in batches]

        return run

    def pipeline(runtime: str, max_padding: float | None) -> Callable[[], None]:
        compute = minilm.minilm_compute(runtime, fragments=False)

        def run() -> None:
            tokens = tokenizer.encode_many(captions)
            TokenStateCache("bench", per_caption=True).fill(tokens, compute, max_padding=max_padding)

        return run

    n, sample = len(ordered), _sample(padded, args.bf16_items)
    few = sum(len(b) for b in sample)
    rows = {
        "pipeline: torch, batches of 128 (before)": (n, pipeline("torch", None)),
        "pipeline: torch, batches padded ≤ 10% (after)": (n, pipeline("torch", 0.1)),
        "pipeline: onnx, batches padded ≤ 10%": (n, pipeline("onnx", 0.1)),
        "tokenizing alone (encode_many)": (n, lambda: tokenizer.encode_many(captions)),
        "model: torch, batches of 128": (n, model("torch", fixed)),
        "model: torch, batches padded ≤ 10%": (n, model("torch", padded)),
        "model: onnx, batches of 128": (n, model("onnx", fixed)),
        "model: onnx, batches padded ≤ 10%": (n, model("onnx", padded)),
        "model: torch int8 dynamic (torch.ao, Linear), padded ≤ 10%": (n, model("int8", padded)),
        f"model: torch, {few} captions of the middle": (few, model("torch", sample)),
        f"model: torch bfloat16 autocast, the same {few}": (few, model("bfloat16", sample)),
    }
    reference = _caption_states(model("torch", fixed)(), ordered, fixed)
    agreement = {}
    for label, name, batches in (
        ("torch, batches padded ≤ 10%", "torch", padded),
        ("onnx, batches padded ≤ 10%", "onnx", padded),
        ("torch int8 dynamic (torch.ao, Linear)", "int8", padded),
        (f"torch bfloat16 autocast ({few} captions)", "bfloat16", sample),
    ):
        got = _caption_states(model(name, batches)(), ordered, batches)
        rows_of = [k for b in batches for k in b]
        agreement[label] = _caption_agreement(got, [reference[k] for k in rows_of])
    needed, computed = caption_flops(bert, lengths, fixed)
    _, computed_padded = caption_flops(bert, lengths, padded)
    few_lengths = [lengths[k] for b in sample for k in b]
    _, sampled = caption_flops(
        bert, few_lengths, [range(b.start - sample[0].start, b.stop - sample[0].start) for b in sample]
    )
    info = {
        "flops": needed,
        "computed": {"batches of 128": computed, "padded ≤ 10%": computed_padded},
        "items": n,
        "mean length": float(np.mean(lengths)),
        "sample": sampled,
    }
    return rows, agreement, info


def _sample(batches: list[range], count: int) -> list[range]:
    """Batches from the middle of ``batches`` holding at least ``count`` captions in all."""
    out: list[range] = []
    for b in batches[len(batches) // 2 :]:
        if sum(len(r) for r in out) >= count:
            break
        out.append(b)
    return out


def _caption_states(outs: list[torch.Tensor], ordered: list[list[int]], batches: list[range]) -> list:
    return [s[: len(ordered[k])].float() for out, b in zip(outs, batches) for s, k in zip(out, b)]


def _caption_agreement(got: list[torch.Tensor], ref: list[torch.Tensor]) -> dict[str, float]:
    tokens = _agreement(torch.cat(got), torch.cat(ref), grid=False)
    pooled = _agreement(
        torch.stack([s.mean(0) for s in got]), torch.stack([s.mean(0) for s in ref]), grid=False
    )
    return {
        "token cosine": tokens["cosine"],
        "mean cosine": pooled["cosine"],
        "mean max abs": pooled["max abs"],
    }


def _agreement(got: torch.Tensor, ref: torch.Tensor, *, grid: bool) -> dict[str, float]:
    """Largest absolute difference, least cosine per row (``grid``: per picture's whole grid and
    per picture's mean feature)."""
    cos = torch.nn.functional.cosine_similarity
    out = {
        "max abs": float((got - ref).abs().max()),
        "cosine": float(cos(got.flatten(1).double(), ref.flatten(1).double()).min()),
    }
    if grid:
        out["mean cosine"] = float(cos(got.mean((2, 3)).double(), ref.mean((2, 3)).double()).min())
    return out


def timed(rows: dict[str, tuple[int, Callable]], repeats: int) -> dict[str, list[float]]:
    """Items a second of every row in each of ``repeats`` interleaved rounds (after a warm-up)."""
    for _, run in rows.values():
        run()
    rates: dict[str, list[float]] = {name: [] for name in rows}
    for round_ in range(repeats):
        for name in list(rows)[:: 1 if round_ % 2 == 0 else -1]:
            items, run = rows[name]
            start = time.perf_counter()
            run()
            rates[name].append(items / (time.perf_counter() - start))
        print(f"round {round_ + 1}/{repeats} done", file=sys.stderr)
    return rates


def machine() -> str:
    lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    model = next((line.split(":", 1)[1].strip() for line in lscpu.splitlines() if "Model name" in line), "?")
    flags = next((line.split() for line in lscpu.splitlines() if line.startswith("Flags")), [])
    bf16 = [f for f in ("avx512_bf16", "amx_bf16", "avx512f") if f in flags]
    import onnxruntime

    return (
        f"{model}, {os.cpu_count()} CPUs, bfloat16 flags: {', '.join(bf16) or 'none (avx2 only)'}; "
        f"{platform.python_version()}, torch {torch.__version__}, onnxruntime {onnxruntime.__version__}"
    )


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def table(
    title: str, rates: dict[str, list[float]], per: dict, cores: int, top: float, unit: str
) -> list[str]:
    """A markdown table: each row's median per core, its rounds, its ratio to the first row, and
    its GFLOP/s against the peak (``per``: the FLOPs of an item, by row)."""
    base = statistics.median(rates[next(iter(rates))])
    lines = [
        f"| {title} | {unit}/s per core (median) | each round | × the first row "
        "| GFLOP/s per core | % of peak |",
        "|---|---:|---|---:|---:|---:|",
    ]
    for name, values in rates.items():
        rate = statistics.median(values) / cores
        gflops = rate * per(name) / 1e9
        shown = ", ".join(f"{v / cores:.1f}" for v in values)
        ratio, share = rate * cores / base, 100 * gflops / top
        lines.append(f"| {name} | **{rate:.1f}** | {shown} | {ratio:.2f}× | {gflops:.1f} | {share:.0f}% |")
    return lines


def report(args, result: dict, command: str) -> str:
    top = max(statistics.median(v) for v in result["peak"].values()) / args.cores
    pictures, captions = result["pictures"], result["captions"]
    computed = captions["info"]["computed"]

    def caption_per(name: str) -> float:
        if name.startswith("tokenizing"):
            return 0.0
        if "middle" in name or "the same" in name:
            return captions["info"]["sample"]
        return computed["batches of 128"] if "128" in name else computed["padded ≤ 10%"]

    def picture_per(name: str) -> float:
        return 0.0 if name.startswith("decoding") else pictures["info"]["flops"]

    lines = [
        "# Encoder speed per core against the peak (issue 66.2)",
        "",
        f"Made by `benchmarks/encoder_speed.py` ({result['stamp']}):",
        "",
        "```bash",
        command,
        "```",
        "",
        f"**The machine**: {result['machine']}; the process pinned to {args.cores} CPU(s) "
        f"({args.cores} torch and ONNX Runtime threads). Load: `{result['load'][0]}` before, "
        f"`{result['load'][1]}` after." + (f" {args.note}" if args.note else ""),
        "",
        "## The peak",
        "",
        f"Float32 {SIZE} × {SIZE} matrix products (GFLOP/s on {args.cores} core(s); each run's median of 5; "
        "measured at the start and at the end):",
        "",
        "| library | GFLOP/s per core, each measure |",
        "|---|---|",
        *[f"| {k} | {', '.join(f'{v / args.cores:.1f}' for v in vs)} |" for k, vs in result["peak"].items()],
        "",
        f"**The peak: {top:.1f} GFLOP/s per core** (the better library's median).",
        "",
        "## FLOPs per item",
        "",
        f"- EfficientNet-Lite0, a 224 × 224 picture to its 7 × 7 × 1280 grid: "
        f"**{pictures['info']['flops'] / 1e9:.3f} GFLOP**.",
        f"- MiniLM, one of the {captions['info']['items']} distinct Tux Paint captions (mean "
        f"{captions['info']['mean length']:.1f} ids): **{captions['info']['flops'] / 1e9:.3f} GFLOP** "
        f"at its own length; as computed in batches of 128 longest first (padded to the batch's "
        f"first): {computed['batches of 128'] / 1e9:.3f}; in batches padded at most 10%: "
        f"{computed['padded ≤ 10%'] / 1e9:.3f}.",
        "",
        "GFLOP/s counts the FLOPs the model computes (a caption's at its batch's length); "
        "a pipeline row counts the model's FLOPs over the pipeline's time.",
        "",
        f"## Pictures ({pictures['info']['items']} Tux Paint stamps)",
        "",
        *table("pictures", pictures["rates"], picture_per, args.cores, top, "pictures"),
        "",
        f"## Captions ({captions['info']['items']} distinct Tux Paint captions)",
        "",
        *table("captions", captions["rates"], caption_per, args.cores, top, "captions"),
        "",
        "## Agreement with PyTorch float32",
        "",
        "| items | path | max abs difference | least cosine | least cosine of the mean |",
        "|---|---|---:|---:|---:|",
    ]
    for name, a in pictures["agreement"].items():
        lines.append(
            f"| pictures (grid) | {name} | {a['max abs']:.2e} | {a['cosine']:.6f} | {a['mean cosine']:.6f} |"
        )
    for name, a in captions["agreement"].items():
        lines.append(
            f"| captions (token states; mean: max abs {a['mean max abs']:.2e}) | {name} | | "
            f"{a['token cosine']:.6f} | {a['mean cosine']:.6f} |"
        )
    lines += [
        "",
        f"Medians of {args.repeats} interleaved rounds (order reversed every other round); bfloat16 "
        f"rows on {args.bf16_items} pictures / the batches of captions from the middle that hold "
        f"{args.bf16_items} or more, beside float32 on the same.",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    load_before = uptime()
    pin(args.cores)
    result: dict = {"machine": machine(), "peak": {"torch": [], "onnx": []}}
    for name, rate in peak(args.cores).items():
        result["peak"][name].append(rate)
    with tempfile.TemporaryDirectory(prefix="encoder_speed_") as tmp:
        os.environ.setdefault("MISPAIR_CACHE", tmp)  # the ONNX exports, unless a cache is set
        for side, build in (
            ("pictures", lambda: picture_rows(args, Path(tmp))),
            ("captions", lambda: caption_rows(args)),
        ):
            rows, agreement, info = build()
            result[side] = {"rates": timed(rows, args.repeats), "agreement": agreement, "info": info}
    for name, rate in peak(args.cores).items():
        result["peak"][name].append(rate)
    result["load"] = (load_before, uptime())
    result["stamp"] = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    given = sys.argv[1:] if argv is None else argv
    command = "PYTHONPATH=src HF_HUB_OFFLINE=1 python benchmarks/encoder_speed.py " + shlex.join(given)
    text = report(args, result, command)
    print(text)
    if args.write:
        args.write.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
