"""Pictures (and captions) a second of the two frozen encoders on one device, in float32 and in
mixed precision (autocast: bfloat16 on a CPU, float16 and bfloat16 on CUDA), with the cosine of
each mixed-precision output with float32's (per picture's mean grid feature; per caption's mean
state). Inputs are random (pixels; token ids of 24-token captions): a rate, not a quality.

    python benchmarks/cuda/encoder_speed.py --device cuda --seconds 20 --out $OUT/encoders.md
"""

from __future__ import annotations

import argparse
import time
from functools import partial
from pathlib import Path

import torch


def rate(run, items: int, seconds: float) -> float:
    """Items a second of ``run()`` (``items`` each call), after two warm-up calls, over at least
    ``seconds`` / 4 of calls (the device synchronised before each clock read)."""
    for _ in range(2):
        run()
    sync()
    start, calls = time.perf_counter(), 0
    while time.perf_counter() - start < seconds / 4 or calls < 3:
        run()
        calls += 1
        sync()
    return items * calls / (time.perf_counter() - start)


def sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def cosine(a: torch.Tensor, b: torch.Tensor) -> float:
    return float(torch.nn.functional.cosine_similarity(a.float(), b.float(), dim=-1).min())


def encoders(device: torch.device, pictures: int, captions: int):
    """``(name, module, inputs, items, pool)`` of each encoder whose weights are installed."""
    found = []
    try:
        from mispair.data.features import EfficientNetLite0Grid

        net = EfficientNetLite0Grid().to(device)
        pixels = torch.randn(pictures, 3, 224, 224, device=device)
        found.append(
            ("EfficientNet-Lite0 (pictures)", net, (pixels,), pictures, lambda g: g.flatten(2).mean(2))
        )
    except Exception as exc:  # weights not installed on this machine: said in the table
        found.append(("EfficientNet-Lite0 (pictures)", None, str(exc)[:120], 0, None))
    try:
        from mispair.nn.text.minilm import frozen_minilm, minilm_states

        bert = frozen_minilm().to(device)
        tokens = torch.randint(1000, 20000, (captions, 24), device=device)
        lengths = torch.full((captions,), 24, device=device)
        found.append(
            (
                "MiniLM (captions)",
                lambda t, n: minilm_states(bert, t, n),
                (tokens, lengths),
                captions,
                lambda s: s.mean(1),
            )
        )
    except Exception as exc:
        found.append(("MiniLM (captions)", None, str(exc)[:120], 0, None))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--seconds", type=float, default=20.0, help="about this long per encoder")
    parser.add_argument("--pictures", type=int, default=64, help="pictures a batch (default 64)")
    parser.add_argument("--captions", type=int, default=256, help="captions a batch (default 256)")
    parser.add_argument("--out", type=Path, help="write the markdown table here too")
    args = parser.parse_args()
    device = torch.device(args.device)
    mixed = [torch.bfloat16] if device.type == "cpu" else [torch.float16, torch.bfloat16]
    lines = [
        f"device {device} ({torch.cuda.get_device_name() if device.type == 'cuda' else 'cpu'}), "
        f"torch {torch.__version__}",
        "",
        "| encoder | precision | items/s | min cosine with float32 |",
        "|---|---|---|---|",
    ]
    for name, module, inputs, items, pool in encoders(device, args.pictures, args.captions):
        if module is None:
            lines.append(f"| {name} | – | not run: {inputs} | |")
            continue
        with torch.inference_mode():
            reference = pool(module(*inputs))
            lines.append(
                f"| {name} | float32 | {rate(partial(module, *inputs), items, args.seconds):,.0f} | 1 |"
            )
            for dtype in mixed:
                with torch.autocast(device.type, dtype=dtype):
                    got = pool(module(*inputs))
                    speed = rate(partial(module, *inputs), items, args.seconds)
                lines.append(
                    f"| {name} | autocast {str(dtype)[6:]} | {speed:,.0f} | {cosine(got, reference):.5f} |"
                )
    text = "\n".join(lines)
    print(text)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
