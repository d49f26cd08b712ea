"""``mispair inject-noise``: a noise record (.npy) for a dataset."""

from __future__ import annotations

import argparse

from mispair.cli.options import (
    Subparsers,
    ranged,
)
from mispair.errors import MispairError


def _cmd_inject_noise(args: argparse.Namespace) -> None:
    from mispair.data.noise import inject_noise

    if args.data:
        from mispair.data.precomp import read_precomp

        pairs = read_precomp(args.data, args.split, check_finite=False)
        n_images, per_image = pairs.n_images, pairs.captions_per_image
        if per_image is None:
            raise MispairError(
                f"{args.data}: its images hold different numbers of captions; noise needs as many"
            )
    else:
        if args.images is None:
            raise MispairError("give --data DIR (a precomputed dataset) or --images N")
        n_images, per_image = args.images, args.captions_per_image
    record = inject_noise(n_images, per_image, args.rate, args.protocol, args.seed)
    record.save(args.out)
    print(
        f"wrote {args.out}: {len(record.is_noisy)} captions, "
        f"{record.is_noisy.sum()} truly mismatched ({100 * record.noise_rate:.1f}%)"
    )


def add_parsers(sub: Subparsers) -> None:
    """``mispair inject-noise``."""
    noise = sub.add_parser("inject-noise", help="write a noise record (.npy) for a dataset")
    noise.add_argument("--data", help="a precomputed dataset directory")
    noise.add_argument("--split", default="train")
    noise.add_argument("--images", type=ranged("images"), help="number of images (without --data)")
    noise.add_argument(
        "--captions-per-image",
        type=ranged("captions_per_image"),
        default=5,
        help="without --data (default 5)",
    )
    noise.add_argument("--rate", type=float, required=True)
    noise.add_argument("--protocol", choices=("ncr", "pmp"), default="pmp")
    noise.add_argument("--seed", type=ranged("seed"), default=0, help="seed of the swaps (default 0)")
    noise.add_argument("--out", required=True)
    noise.set_defaults(run=_cmd_inject_noise)
