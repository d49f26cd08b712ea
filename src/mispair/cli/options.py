"""The options and argument types several verbs share (columns, processes, ranges), and the checks of a
path before heavy work."""

from __future__ import annotations

import argparse
from pathlib import Path

from mispair.errors import DataError

CONFIG_SUFFIXES = (".yaml", ".yml")


OVERWRITE_HELP = (
    "write into a non-empty --out that mispair did not create (only mispair's own files there are replaced)"
)


DATA_OPTIONS = (
    "image_column",
    "caption_column",
    "id_column",
    "split_column",
    "image_root",
    "image_embedding_column",
    "text_embedding_column",
    "embeddings_aligned",
    "encoder_runtime",
    "cache_dir",
)


def data_options(args: argparse.Namespace) -> dict[str, str]:
    """The collection options given (columns, image root) by their ``data.`` field names."""
    return {name: value for name in DATA_OPTIONS if (value := getattr(args, name, None))}


def column_overrides(args: argparse.Namespace) -> list[str]:
    """``data.<field>=VALUE`` overrides of the collection options given."""
    return [f"data.{name}={value}" for name, value in data_options(args).items()]


def exists(path: str) -> bool:
    """``path`` names something (a name too long for the file system names nothing)."""
    try:
        return Path(path).exists()
    except OSError:
        return False


def require_collection(path: str) -> None:
    """A one-line error when ``path`` names nothing (a shard pattern with braces is left to the
    readers), as :func:`mispair.data.readers.detect_source` says it."""
    if not exists(path) and "{" not in path:
        raise DataError(f"{Path(path)}: no such file or folder")


def require_checkpoint(path: str) -> None:
    """A one-line error when ``path`` is no file, as :func:`mispair.engine.trained.load_checkpoint`
    says it."""
    if not Path(path).is_file():
        raise DataError(f"{Path(path)}: checkpoint not found")


def ranged(name: str):
    """An argparse type: a whole number in ``RANGES[name]`` (:mod:`mispair.limits`)."""
    from mispair.limits import RANGES

    low, high = RANGES[name]

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be a whole number in [{low}, {high:,}], got {text!r}")
        return value

    parse.bounds = f"{low}–{high:,}"  # type: ignore[attr-defined]
    return parse


def port(text: str) -> int:
    """An argparse type: a TCP port, 0 (any free one) to 65535."""
    if not text.isdecimal() or int(text) > 65535:
        raise argparse.ArgumentTypeError(f"must be a whole number in [0, 65,535], got {text!r}")
    return int(text)


port.bounds = "0–65,535"  # type: ignore[attr-defined]


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number, got {value}")
    return value


class RangeHelp(argparse.HelpFormatter):
    """Every option with a range (:func:`ranged`) states it in its help."""

    def _get_help_string(self, action: argparse.Action) -> str:
        bounds = getattr(action.type, "bounds", None)
        return f"{action.help} (range {bounds})" if bounds else str(action.help)


def column_options(parser: argparse.ArgumentParser) -> None:
    """The options naming a table's columns (found by their usual names when not given)."""
    for name, what in (
        ("image", "image paths or bytes (default: image, file_name, path, ...)"),
        ("caption", "captions (default: caption, text, alt_text, title, ...)"),
        ("id", "stable pair ids (default: the row number)"),
        ("split", "splits train/dev/test (default: split, when present)"),
    ):
        parser.add_argument(f"--{name}-column", help=f"the column of {what}")
    parser.add_argument(
        "--image-root", help="the folder a table's image paths are relative to (default: the table's folder)"
    )
    parser.add_argument(
        "--cache-dir",
        help="where image features and unpacked images are cached (default: $MISPAIR_CACHE, else "
        "$XDG_CACHE_HOME/mispair, else ~/.cache/mispair); the collection itself is only read",
    )
    for side in ("image", "text"):
        parser.add_argument(
            f"--{side}-embedding-column",
            help=f"the column of precomputed {side} "
            "vectors (a list per cell, or a .npy path): used instead of the built-in "
            "encoder",
        )
    parser.add_argument(
        "--embeddings-aligned",
        action="store_true",
        help="the two embedding columns come "
        "from one matched pair of towers (CLIP): report their raw cosine beside the audit's "
        "score",
    )
    runtime_option(parser)


def runtime_option(parser: argparse.ArgumentParser) -> None:
    """The option choosing what runs the frozen pretrained encoders (``data.encoder_runtime``)."""
    parser.add_argument(
        "--encoder-runtime",
        metavar="{auto,torch,onnx}",
        help="what runs EfficientNet-Lite0 and a frozen MiniLM: auto (the default of audit and "
        "train: ONNX Runtime for EfficientNet-Lite0 on a CPU where it is installed, else torch), "
        "torch (the default of prepare) or onnx (ONNX Runtime: pip install 'mispair[onnx]')",
    )


Subparsers = argparse._SubParsersAction  # what ``add_subparsers`` returns


def check_opened_index(args: argparse.Namespace) -> None:
    """One-line errors, before anything loads, for :func:`opened_index_options`' index folder and
    the ``--checkpoint`` it names when the checkpoint moved."""
    from mispair.search.storage import check_index_folder

    check_index_folder(args.index)
    if args.checkpoint:
        require_checkpoint(args.checkpoint)


def opened_index_options(parser: argparse.ArgumentParser) -> None:
    """Where an index's checkpoint and collection are when they moved, and the device."""
    parser.add_argument("--checkpoint", help="the index's checkpoint, if it moved")
    parser.add_argument("--data", help="the index's collection, if it moved (read to rerank)")
    parser.add_argument("--device", default="auto")


def process_options(parser: argparse.ArgumentParser, verb: str) -> None:
    """``--nproc`` and ``--timeout``: the command in several processes on this machine (torchrun)."""
    parser.add_argument(
        "--nproc",
        type=ranged("nproc"),
        default=1,
        help=f"{verb} in this many processes on this machine (torchrun; one per GPU)",
    )
    parser.add_argument(
        "--timeout",
        type=positive_float,
        metavar="SECONDS",
        help="with several processes: how long one waits for the others before the run "
        "fails (default: an hour)",
    )
