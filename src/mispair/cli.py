"""The ``mispair`` command line: parses, calls the library, prints. No logic lives here."""
# The user's page of ``mispair --help`` is USAGE below; this docstring is for developers.

from __future__ import annotations

import argparse
import json
import os
import sys
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path

from mispair.atomic import atomic_text
from mispair.errors import ConfigError, DataError, MispairError
from mispair.progress import set_quiet

USAGE = """\
Find the mismatched pairs of an image–caption collection, review them, and train a retriever that
stays accurate when many pairs are wrong.

A collection is a folder (images + captions.csv/.tsv/.jsonl, or a Hugging Face imagefolder
metadata file), a table file (.csv .tsv .jsonl .parquet, image paths or image bytes), WebDataset
tar shards, a COCO or Karpathy captions JSON, or a precomputed features folder.

  audit     rank every pair by how likely it is mismatched; writes report.html, pairs.csv
              mispair audit photos/ --out runs/photos-audit
  apply     write the cleaned collection from your decisions on an audit (its report's decisions.csv)
              mispair apply runs/photos-audit --decisions decisions.csv --out photos-clean
  estimate  the mismatched share, proven by your answers on the audit's random sample
              mispair estimate runs/photos-audit --labels labels.csv
  export    open an audit in FiftyOne, or as Label Studio tasks
              mispair export runs/photos-audit --to label-studio --sample 200 --out ls/
  import    answers given in FiftyOne or Label Studio as labels and decisions files
              mispair import runs/photos-audit --from label-studio export.json --out labels.csv
  train     train a retriever (the robust recipe by default) on a collection or a config
              mispair train photos/ --out runs/photos
  eval      retrieval metrics (R@K, rSum) of a checkpoint
              mispair eval runs/photos/best.pt
  index     embed a collection into a search index
              mispair index runs/photos/best.pt photos/ --out runs/photos.index
  search    search an index by text, or by --image for captions
              mispair search runs/photos.index "a red apple"
  prepare   build the offline datasets (tuxpaint, openclipart) or a synthetic one
              mispair prepare tuxpaint
  recipes   list the training recipes, similarity heads and text encoders

`mispair COMMAND --help` tells a command's options. Columns are found by their usual names
(image, file_name, path; caption, text, alt_text, title) or named with --image-column and
--caption-column.
"""

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


def _data_options(args: argparse.Namespace) -> dict[str, str]:
    """The collection options given (columns, image root) by their ``data.`` field names."""
    return {name: value for name in DATA_OPTIONS if (value := getattr(args, name, None))}


def _column_overrides(args: argparse.Namespace) -> list[str]:
    """``data.<field>=VALUE`` overrides of the collection options given."""
    return [f"data.{name}={value}" for name, value in _data_options(args).items()]


def _cmd_train(args: argparse.Namespace) -> None:
    path, overrides = args.config, list(args.overrides) + _column_overrides(args)
    if path and "=" in path and not _exists(path):
        path, overrides = None, [path, *overrides]
    data = args.data
    if path and not _exists(path):
        raise ConfigError(
            f"{path}: no such config file or collection (give a YAML config from configs/, "
            "or the path of your collection: a folder, a table file, shards)"
        )
    if path and (Path(path).is_dir() or Path(path).suffix.lower() not in CONFIG_SUFFIXES):
        if data:
            raise ConfigError(f"{path} and --data {data}: two collections; give one (`mispair train PATH`)")
        path, data = None, path
    from mispair import distributed
    from mispair.api import training_config
    from mispair.engine.run import train_run

    config = training_config(path, overrides, data=data, log=lambda m: print(m, file=sys.stderr))
    if args.out:
        config.output = args.out
    export = Path(args.export_pairs) if args.export_pairs else None
    if export is not None and not export.parent.is_dir():  # before training, not after
        raise ConfigError(f"--export-pairs {export}: no such directory {export.parent}")
    if export is not None and (export.is_symlink() or (export.exists() and not export.is_file())):
        raise ConfigError(
            f"--export-pairs {export}: a folder, a link or another non-file is there; give the path "
            "of the CSV file to write"
        )
    if args.nproc > 1 and not distributed.launched():  # this command again, in each of nproc processes
        distributed.launch(args.nproc, args.argv)
        return
    summary = train_run(
        config,
        resume=not args.no_resume,
        progress=not args.quiet,
        log=lambda m: print(m, file=sys.stderr),
        timeout=args.timeout or distributed.DEFAULT_TIMEOUT,
        overwrite=args.overwrite,
    )
    if not distributed.is_main_process():
        return
    from mispair.engine.metrics import format_metrics

    title = f"test ({config.output_dir / 'best.pt'}, best epoch {summary.best_epoch + 1})"
    print(format_metrics(summary.test, title))
    if export is not None:
        _export_pairs(config, export)


def _exists(path: str) -> bool:
    """``path`` names something (a name too long for the file system names nothing)."""
    try:
        return Path(path).exists()
    except OSError:
        return False


# The refusals below come before a command imports its libraries (torch alone takes a second or
# more), in the words the library would use a moment later.


def _require_collection(path: str) -> None:
    """A one-line error when ``path`` names nothing (a shard pattern with braces is left to the
    readers), as :func:`mispair.data.readers.detect_source` says it."""
    if not _exists(path) and "{" not in path:
        raise DataError(f"{Path(path)}: no such file or folder")


def _require_checkpoint(path: str) -> None:
    """A one-line error when ``path`` is no file, as :func:`mispair.engine.trained.load_checkpoint`
    says it."""
    if not Path(path).is_file():
        raise DataError(f"{Path(path)}: checkpoint not found")


def _export_pairs(config, path: Path) -> None:
    from mispair.engine.export import export_training_pairs, pairs_csv

    rows = export_training_pairs(config)
    atomic_text(path, pairs_csv(rows))
    print(f"wrote {len(rows)} training pairs to {path}", file=sys.stderr)


def _cmd_audit(args: argparse.Namespace) -> None:
    if not args.config and not any(o.startswith("data.source=") for o in args.overrides):
        _require_collection(args.data)  # a config may name a source that reads no path
    from mispair import distributed
    from mispair.audit import audit_collection

    if args.nproc > 1 and not distributed.launched():  # this command again, in each of nproc processes
        distributed.launch(args.nproc, args.argv)
        return
    result = audit_collection(
        args.data,
        args.out,
        config_path=args.config,
        overrides=[*args.overrides, *_column_overrides(args)],
        plant=args.plant,
        seed=args.seed,
        clean_run=args.clean_run,
        images=args.images,
        top=args.top,
        resume=not args.no_resume,
        progress=not args.quiet,
        log=lambda m: print(m, file=sys.stderr),
        overwrite=args.overwrite,
        timeout=args.timeout or distributed.DEFAULT_TIMEOUT,
        fdr=args.fdr,
        labels=args.labels or (),
    )
    if result is not None:  # rank 0 (or the only process) ranked the pairs and wrote the report
        print("\n".join(result.summary.lines(Path(args.out))))


def _cmd_apply(args: argparse.Namespace) -> None:
    folder, decisions = Path(args.audit), Path(args.decisions) if args.decisions else None
    if not (folder / "summary.json").is_file() or not (folder / "pairs.parquet").is_file():
        raise DataError(
            f"{folder}: not a finished audit folder (no summary.json and pairs.parquet); "
            "give the --out folder of `mispair audit`"
        )
    if decisions is None and args.fdr is None and args.threshold is None:
        raise ConfigError(
            "--decisions: give the decisions file, or --fdr / --threshold to drop by the audit's numbers"
        )
    if decisions is not None and not decisions.is_file():
        raise DataError(
            f"--decisions {decisions}: no such file; give the decisions.csv the report downloaded"
        )
    from mispair.audit.result import AuditResult
    from mispair.audit.writers import parse_bytes

    applied = AuditResult.load(args.audit).apply(
        args.decisions,
        args.out,
        threshold=args.threshold,
        fdr=args.fdr,
        overwrite=args.overwrite,
        format=args.format,
        shard_bytes=parse_bytes(args.shard_size),
    )
    files = applied.files or []
    written = f" as {applied.form} ({', '.join(files[:3])}{', ...' * (len(files) > 3)})" if files else ""
    print(
        f"wrote {applied.folder}{written}: {applied.kept} pairs kept "
        f"({applied.replaced} with a new caption), {applied.removed} removed; images "
        f"{applied.linked} hard-linked, {applied.copied} copied; the reasons in keep.csv and "
        "removed.csv, the kept pair ids in keep_keys.txt"
    )


def _cmd_eval(args: argparse.Namespace) -> None:
    if args.index:
        return _eval_index(args)
    if args.top_k or args.rerank:
        raise ConfigError("--top-k and --rerank evaluate through an index: give --index INDEX")
    for checkpoint in args.checkpoint:
        _require_checkpoint(checkpoint)
    from mispair.engine.run import evaluate_checkpoint

    metrics = evaluate_checkpoint(
        args.checkpoint,
        split=args.split,
        data_root=args.data_root,
        folds=args.folds,
        device=args.device,
        progress=not args.quiet,
    )
    if args.json:
        print(json.dumps(metrics, indent=2))
    else:
        from mispair.engine.metrics import format_metrics

        print(format_metrics(metrics, f"{' + '.join(args.checkpoint)} on {args.split or 'test'}"))


def _eval_index(args: argparse.Namespace) -> None:
    from mispair.search.storage import check_index_folder

    if len(args.checkpoint) > 1 or args.split or args.data_root or args.folds:
        raise ConfigError(
            "--index: evaluates one checkpoint on the index's own collection "
            "(no --split, --data-root, --folds or second checkpoint)"
        )
    check_index_folder(args.index)
    _require_checkpoint(args.checkpoint[0])
    from mispair.search import Index, evaluate_index

    index = Index.load(args.index, checkpoint=args.checkpoint[0], device=args.device)
    metrics = evaluate_index(index, k=args.top_k or 100, rerank=args.rerank or 0, progress=not args.quiet)
    lists = f"reranked top-{args.rerank}" if args.rerank else f"top-{args.top_k or 100} lists"
    if args.json:
        print(json.dumps(metrics, indent=2))
    else:
        from mispair.engine.metrics import format_metrics

        title = f"{args.checkpoint[0]} on {args.index} ({index.spec.describe()}, {lists})"
        print(format_metrics(metrics, title))


def _cmd_index(args: argparse.Namespace) -> None:
    from mispair.search.storage import check_index_target

    _require_checkpoint(args.checkpoint)
    _require_collection(args.data)
    check_index_target(args.out)  # before the collection is embedded
    from mispair.search import Index, IndexSpec

    spec = IndexSpec(args.kind, args.nlist, args.nprobe, args.hnsw_m, args.ef_construction, args.ef_search)
    index = Index.build(
        args.checkpoint,
        args.data,
        split=args.split,
        spec=spec,
        device=args.device,
        progress=not args.quiet,
        log=lambda m: print(m, file=sys.stderr),
        data_options=_data_options(args),
    )
    index.save(args.out)
    print(f"wrote {args.out}: {index.describe()}")


def _cmd_search(args: argparse.Namespace) -> None:
    from mispair.search.queries import ONE_KIND_OF_QUERY, batches, check_rerank, query_texts
    from mispair.search.storage import check_index_folder
    from mispair.search.terminal import printable

    check_index_folder(args.index)
    if args.checkpoint:
        _require_checkpoint(args.checkpoint)
    if bool(args.image) == bool(args.query or args.queries):
        raise ConfigError(ONE_KIND_OF_QUERY)
    if args.image and not Path(args.image).is_file():
        raise DataError(f"--image {Path(args.image)}: no such file")
    check_rerank(args.top_k, args.rerank)
    texts = query_texts(args.query, args.queries)
    from mispair.search import Index

    index = Index.load(args.index, checkpoint=args.checkpoint, data=args.data, device=args.device)
    options = {"k": args.top_k, "rerank": args.rerank, "nprobe": args.nprobe, "ef_search": args.ef_search}
    show = _hits_printer(args, index)
    if args.image:
        show(
            "captions",
            {"image": args.image},
            f"image {printable(args.image)}",
            index.search(image=args.image, **options),
        )
        return
    lines = args.queries is not None or len(args.query) > 1  # JSON lines, one object per query
    for batch in batches(texts):
        for text, hits in zip(batch, index.search_texts(batch, **options)):
            show("images", {"query": text}, repr(text), hits, lines=lines)
        sys.stdout.flush()  # each batch's results while the next is searched


def _hits_printer(args: argparse.Namespace, index) -> Callable[..., None]:
    """A function printing one query's hits as ``--json`` asks: a JSON object (indented, or on one
    line for many queries) with the query as given, or the table under a title."""
    from mispair.search import hits_table
    from mispair.search.terminal import json_text

    rerank = ""
    if args.rerank:  # the head's name is in the checkpoint, opened only to rerank
        rerank = f", top {args.rerank} reranked by the {index.model.config.model.head} head"
    settings = f"{index.spec.with_search(args.nprobe, args.ef_search).describe()}{rerank}"
    first = True

    def show(found: str, query: dict, title: str, hits: list, lines: bool = False) -> None:
        nonlocal first
        if args.json:
            printed = {**query, "results": found, "hits": [h.to_dict() for h in hits]}
            print(json_text(printed, indent=None if lines else 2))
        else:
            print(("" if first else "\n") + hits_table(hits, f"{found} for {title} ({settings})"))
        first = False

    return show


def _cmd_serve(args: argparse.Namespace) -> None:
    from mispair.search.storage import check_index_folder

    check_index_folder(args.index)
    if args.checkpoint:
        _require_checkpoint(args.checkpoint)
    from mispair.search.serve import require_server

    require_server()  # before the index is loaded
    from mispair.search import Index
    from mispair.search.serve import serve

    index = Index.load(args.index, checkpoint=args.checkpoint, data=args.data, device=args.device)
    log = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731
    serve(index, args.host, args.port, allow_hosts=args.allow_host, log=log)


def _cmd_inject_noise(args: argparse.Namespace) -> None:
    from mispair.data.noise import inject_noise

    if args.data:
        from mispair.data.precomp import read_precomp

        pairs = read_precomp(args.data, args.split, check_finite=False)
        n_images, per_image = pairs.n_images, pairs.captions_per_image
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


def _cmd_recipes(args: argparse.Namespace) -> None:
    from mispair.methods import list_recipes
    from mispair.nn.heads import list_heads
    from mispair.nn.text import list_text_encoders

    print("recipes:       " + ", ".join(list_recipes()))
    print("heads:         " + ", ".join(list_heads()))
    print("text encoders: " + ", ".join(list_text_encoders()))


def _cmd_prepare(args: argparse.Namespace) -> None:
    if args.dataset == "synthetic":
        from mispair.data.synthetic import write_synthetic_dataset

        out = write_synthetic_dataset(args.out or "data/synthetic_precomp")
    else:
        from mispair.data.sources import PREPARERS
        from mispair.onnx_runtime import require_runtime

        options = {"lang": args.lang} if args.dataset == "tuxpaint" else {}
        if args.dataset == "openclipart" and args.captions:
            options["caption_source"] = args.captions
        kwargs = {"out": args.out} if args.out else {}
        if args.encoder_runtime:
            kwargs["runtime"] = require_runtime(args.encoder_runtime, "--encoder-runtime")
        out = PREPARERS[args.dataset](**kwargs, **options, progress=not args.quiet)
    print(f"prepared {args.dataset} in {out}")


def _ranged(name: str):
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


def _port(text: str) -> int:
    """An argparse type: a TCP port, 0 (any free one) to 65535."""
    if not text.isdecimal() or int(text) > 65535:
        raise argparse.ArgumentTypeError(f"must be a whole number in [0, 65,535], got {text!r}")
    return int(text)


_port.bounds = "0–65,535"  # type: ignore[attr-defined]


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number, got {value}")
    return value


class _Parser(argparse.ArgumentParser):
    """argparse with a usage mistake reported as every other mistake: one line, exit 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        print(f"mispair: error: {message} (see `{self.prog} --help`)", file=sys.stderr)
        sys.exit(2)

    def _get_formatter(self) -> argparse.HelpFormatter:
        if self.formatter_class is argparse.HelpFormatter:
            return _RangeHelp(prog=self.prog)
        return super()._get_formatter()


class _RangeHelp(argparse.HelpFormatter):
    """Every option with a range (:func:`_ranged`) states it in its help."""

    def _get_help_string(self, action: argparse.Action) -> str:
        bounds = getattr(action.type, "bounds", None)
        return f"{action.help} (range {bounds})" if bounds else str(action.help)


def _column_options(parser: argparse.ArgumentParser) -> None:
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
    _runtime_option(parser)


def _runtime_option(parser: argparse.ArgumentParser) -> None:
    """The option choosing what runs the frozen pretrained encoders (``data.encoder_runtime``)."""
    parser.add_argument(
        "--encoder-runtime",
        metavar="{torch,onnx}",
        help="what runs EfficientNet-Lite0 and a frozen MiniLM: torch (default) or onnx "
        "(ONNX Runtime: pip install 'mispair[onnx]')",
    )


Subparsers = argparse._SubParsersAction  # what ``add_subparsers`` returns


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="mispair",
        description=USAGE,
        usage="mispair COMMAND [options]",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", prog="mispair")
    for add in (
        _train_parser,
        _audit_parser,
        _apply_parser,
        _eval_parser,
        _index_parser,
        _search_parser,
        _serve_parser,
        _inject_noise_parser,
        _recipes_parser,
        _prepare_parser,
    ):
        add(sub)
    from mispair.commands import estimate, exchange

    estimate.add_parsers(sub)
    exchange.add_parsers(sub)
    return parser


def _train_parser(sub: Subparsers) -> None:
    """``mispair train``."""
    train = sub.add_parser(
        "train",
        help="train a retriever on a collection or a config",
        description="Train on a collection (`mispair train photos/`: the robust holdout recipe) or as a "
        "YAML config says (`mispair train configs/vse/tuxpaint.yaml`); with no argument, the embedded "
        "default run on data/tuxpaint_precomp.",
    )
    train.add_argument("config", nargs="?", help="your collection (folder, table, shards) or a YAML config")
    train.add_argument("overrides", nargs="*", default=[], help="key=value overrides, e.g. train.epochs=5")
    train.add_argument(
        "--data",
        help="with a config: train it on this collection instead (no noise is "
        "planted into it unless data.noise.rate is set on the command line)",
    )
    _column_options(train)
    train.add_argument("--out", help="output directory (default runs/<name>)")
    train.add_argument("--no-resume", action="store_true", help="start over even if last.pt exists")
    train.add_argument("--overwrite", action="store_true", help=OVERWRITE_HELP)
    train.add_argument("--export-pairs", help="write every training pair with its scores (CSV)")
    train.add_argument("--quiet", action="store_true", help="no progress bars")
    _process_options(train, "train")
    train.set_defaults(run=_cmd_train)


def _audit_parser(sub: Subparsers) -> None:
    """``mispair audit``."""
    audit = sub.add_parser("audit", help="rank a collection's pairs by how likely they are mismatched")
    audit.add_argument(
        "data",
        help="your collection: a folder, a table file (.csv .tsv .jsonl .parquet), "
        "WebDataset shards, a COCO/Karpathy JSON, a Hugging Face save_to_disk folder, or a precomputed "
        "folder",
    )
    audit.add_argument("overrides", nargs="*", default=[], help="key=value overrides of the audit's run")
    audit.add_argument("--out", required=True, help="output folder (report.html, pairs.csv, summary.json)")
    audit.add_argument("--config", help="a YAML config instead of the audit's default run")
    audit.add_argument(
        "--plant", type=float, help="swap this share of the pairs first and score the audit on them"
    )
    audit.add_argument("--seed", type=_ranged("seed"), default=0, help="seed of the planted swaps")
    audit.add_argument(
        "--clean-run",
        action="store_true",
        help="also train the same run without the planted noise, for comparison",
    )
    audit.add_argument("--images", help="where a precomputed collection's pictures lie (for thumbnails)")
    audit.add_argument(
        "--fdr",
        type=float,
        default=0.1,
        help="suspect the pairs a cut at this estimated false-discovery rate drops (default 0.1: "
        "about 10%% of the suspected pairs are matched ones)",
    )
    audit.add_argument(
        "--top",
        type=_ranged("top"),
        default=None,
        help=(
            "only the N most suspect pairs in the report, 0 to 1,000,000 (default: every pair up to "
            "100,000, else the 100,000 most suspect; pairs.csv holds every pair)"
        ),
    )
    audit.add_argument(
        "--no-resume",
        action="store_true",
        help="train again even if the output folder holds a finished or interrupted run",
    )
    audit.add_argument(
        "--labels",
        nargs="+",
        metavar="FILE",
        help="your answers on pairs (labels files from `Check a sample`; several reviewers merged): "
        "the scorers trust the pairs judged correct and never train on those judged mismatched; "
        "when they are the first pairs of this audit's sample, their estimate is printed too",
    )
    _column_options(audit)
    audit.add_argument("--overwrite", action="store_true", help=OVERWRITE_HELP)
    audit.add_argument("--quiet", action="store_true", help="no progress bars")
    _process_options(audit, "audit")
    audit.set_defaults(run=_cmd_audit)


def _apply_parser(sub: Subparsers) -> None:
    """``mispair apply``."""
    apply = sub.add_parser("apply", help="write the cleaned collection from your decisions on an audit")
    apply.add_argument("audit", help="the audit's folder (the --out of `mispair audit`)")
    apply.add_argument(
        "--decisions",
        help="decisions.csv from the report: pair_id,decision,caption (keep, drop, replace); "
        "optional with --fdr or --threshold",
    )
    apply.add_argument("--out", required=True, help="a new folder for the cleaned collection")
    apply.add_argument(
        "--threshold",
        type=float,
        help="also drop the undecided pairs whose mismatch probability is at least this",
    )
    apply.add_argument(
        "--fdr",
        type=float,
        help="also drop the undecided pairs of the cut at this estimated false-discovery rate "
        "(their q-value at most this: e.g. 0.05, about 5%% of the dropped pairs matched ones)",
    )
    apply.add_argument(
        "--format",
        choices=("same", "folder"),
        default="same",
        help="same: the collection's own form (a table file, a folder with its captions file, "
        "WebDataset shards, an imagefolder, COCO JSON); folder: a folder of pictures with "
        "captions.csv (image,caption,pair_id[,split]) (default: same)",
    )
    apply.add_argument(
        "--shard-size",
        metavar="SIZE",
        help="WebDataset output: shards of at most this size (e.g. 100MB; default: one per input shard)",
    )
    apply.add_argument(
        "--overwrite",
        action="store_true",
        help="write into an existing --out: an earlier cleaned collection holding only apply's "
        "files is replaced; any other folder gets apply's files, nothing else there touched",
    )
    apply.set_defaults(run=_cmd_apply)


def _eval_parser(sub: Subparsers) -> None:
    """``mispair eval``."""
    ev = sub.add_parser("eval", help="evaluate a checkpoint")
    ev.add_argument("checkpoint", nargs="+", help="one checkpoint, or several to average (SGR + SAF = SGRAF)")
    ev.add_argument("--split", help="split name (default: the config's test split)")
    ev.add_argument("--data-root", help="read the split from this precomputed directory")
    ev.add_argument("--folds", type=_ranged("folds"), help="5 for the COCO 5-fold 1K protocol")
    ev.add_argument("--device", default="auto")
    ev.add_argument("--json", action="store_true", help="print the metrics as JSON")
    ev.add_argument("--index", help="evaluate on an index's collection from top-k lists (mispair index)")
    ev.add_argument("--top-k", type=_ranged("top_k"), help="with --index: length of the lists (default 100)")
    ev.add_argument("--rerank", type=_ranged("rerank"), help="with --index: rerank the first K with the head")
    ev.add_argument("--quiet", action="store_true")
    ev.set_defaults(run=_cmd_eval)


def _index_parser(sub: Subparsers) -> None:
    """``mispair index``."""
    index = sub.add_parser("index", help="embed a collection with a checkpoint into a search index")
    index.add_argument("checkpoint")
    index.add_argument("data", help="a collection in any form `mispair audit` reads")
    index.add_argument("--out", required=True, help="the index folder to write")
    index.add_argument("--split", default="all", help="split(s) to index, comma-separated, or all (default)")
    index.add_argument(
        "--kind",
        choices=("flat", "ivf", "hnsw"),
        default="flat",
        help="flat: exact (default); ivf, hnsw: approximate, for large collections",
    )
    index.add_argument("--nlist", type=_ranged("nlist"), help="ivf: number of cells (default 4·√n)")
    index.add_argument("--nprobe", type=_ranged("nprobe"), default=8, help="ivf: cells searched (default 8)")
    index.add_argument("--hnsw-m", type=_ranged("m"), default=16, help="hnsw: links per vector (default 16)")
    index.add_argument(
        "--ef-construction", type=_ranged("ef_construction"), default=100, help="hnsw (default 100)"
    )
    index.add_argument(
        "--ef-search", type=_ranged("ef_search"), default=32, help="hnsw: search list (default 32)"
    )
    index.add_argument("--device", default="auto")
    index.add_argument("--quiet", action="store_true")
    _column_options(index)
    index.set_defaults(run=_cmd_index)


def _search_parser(sub: Subparsers) -> None:
    """``mispair search``."""
    search = sub.add_parser(
        "search",
        help="search an index by text (images) or by --image (captions)",
        description="Search an index (`mispair index`) by one text or many: the index is loaded "
        "once and the texts are encoded and searched in batches. With --json, one query prints "
        "one JSON object, several print JSON lines (one object per query, in their order).",
    )
    search.add_argument("index")
    search.add_argument("query", nargs="*", default=[], help="texts: each finds images")
    search.add_argument(
        "--queries",
        metavar="FILE",
        help="more texts, one per line (blank lines skipped); - reads standard input",
    )
    search.add_argument("--image", help="a picture file: finds captions")
    search.add_argument("--top-k", type=_ranged("top_k"), default=10, help="results shown (default 10)")
    search.add_argument(
        "--rerank",
        type=_ranged("rerank"),
        default=0,
        help="order the first K candidates by the checkpoint's head (SGR, SAF, OMIT, CAM)",
    )
    search.add_argument("--nprobe", type=_ranged("nprobe"), help="ivf: cells searched (default: the index's)")
    search.add_argument(
        "--ef-search", type=_ranged("ef_search"), help="hnsw: search list (default: the index's)"
    )
    _opened_index_options(search)
    search.add_argument("--json", action="store_true", help="print JSON (JSON lines for several queries)")
    search.add_argument("--quiet", action="store_true")
    search.set_defaults(run=_cmd_search)


def _serve_parser(sub: Subparsers) -> None:
    """``mispair serve``."""
    serve = sub.add_parser(
        "serve",
        help="answer searches of an index over HTTP (JSON; pip install 'mispair[serve]')",
        description="Load an index once and answer searches over HTTP with JSON: GET /search?q=TEXT&k=10 "
        '(&rerank=K), POST /search with a JSON list of texts (["a red apple", ...], k and rerank '
        "as query parameters), GET /health. No authentication: it listens on 127.0.0.1 (this "
        "machine only) unless --host says otherwise, and answers only requests naming an allowed "
        "Host. Ctrl+C stops it.",
    )
    serve.add_argument("index")
    serve.add_argument("--host", default="127.0.0.1", help="the address to listen on (default 127.0.0.1)")
    serve.add_argument("--port", type=_port, default=8000, help="the port (default 8000; 0: any free port)")
    serve.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="a Host name requests may give besides the loopback names and --host (repeatable)",
    )
    _opened_index_options(serve)
    serve.set_defaults(run=_cmd_serve)


def _opened_index_options(parser: argparse.ArgumentParser) -> None:
    """Where an index's checkpoint and collection are when they moved, and the device."""
    parser.add_argument("--checkpoint", help="the index's checkpoint, if it moved")
    parser.add_argument("--data", help="the index's collection, if it moved (read to rerank)")
    parser.add_argument("--device", default="auto")


def _inject_noise_parser(sub: Subparsers) -> None:
    """``mispair inject-noise``."""
    noise = sub.add_parser("inject-noise", help="write a noise record (.npy) for a dataset")
    noise.add_argument("--data", help="a precomputed dataset directory")
    noise.add_argument("--split", default="train")
    noise.add_argument("--images", type=_ranged("images"), help="number of images (without --data)")
    noise.add_argument(
        "--captions-per-image",
        type=_ranged("captions_per_image"),
        default=5,
        help="without --data (default 5)",
    )
    noise.add_argument("--rate", type=float, required=True)
    noise.add_argument("--protocol", choices=("ncr", "pmp"), default="pmp")
    noise.add_argument("--seed", type=_ranged("seed"), default=0, help="seed of the swaps (default 0)")
    noise.add_argument("--out", required=True)
    noise.set_defaults(run=_cmd_inject_noise)


def _recipes_parser(sub: Subparsers) -> None:
    """``mispair recipes``."""
    recipes = sub.add_parser("recipes", help="list the registered recipes, heads and text encoders")
    recipes.set_defaults(run=_cmd_recipes)


def _prepare_parser(sub: Subparsers) -> None:
    """``mispair prepare``."""
    prep = sub.add_parser("prepare", help="build a dataset in the precomputed format")
    prep.add_argument("dataset", choices=("tuxpaint", "openclipart", "synthetic"))
    prep.add_argument("--out", help="output directory (default data/<dataset>_precomp)")
    prep.add_argument("--lang", default="en", help="Tux Paint caption language")
    prep.add_argument("--captions", help="OpenClipart caption source")
    prep.add_argument("--quiet", action="store_true")
    _runtime_option(prep)
    prep.set_defaults(run=_cmd_prepare)


def _process_options(parser: argparse.ArgumentParser, verb: str) -> None:
    """``--nproc`` and ``--timeout``: the command in several processes on this machine (torchrun)."""
    parser.add_argument(
        "--nproc",
        type=_ranged("nproc"),
        default=1,
        help=f"{verb} in this many processes on this machine (torchrun; one per GPU)",
    )
    parser.add_argument(
        "--timeout",
        type=_positive_float,
        metavar="SECONDS",
        help="with several processes: how long one waits for the others before the run "
        "fails (default: an hour)",
    )


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line's arguments; ``key=value`` overrides of ``train`` may also follow its
    options (``mispair train --out runs/x train.epochs=5``)."""
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if (
        extra
        and getattr(args, "command", None) in ("train", "audit")
        and all("=" in e and not e.startswith("-") for e in extra)
    ):
        args.overrides = [*args.overrides, *extra]
    elif extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    return args


def _one_line_warning(
    message: Warning | str, category: type[Warning], *args: object, **kwargs: object
) -> str:
    return f"mispair: warning: {message}\n"


def _os_error(exc: OSError) -> str:
    """An operating-system error as one line naming the path (cut to 200 characters)."""
    name = str(exc.filename) if exc.filename is not None else ""
    name = name if len(name) <= 200 else name[:200] + "..."
    reason = exc.strerror or str(exc)
    return f"{name}: {reason} (check the path, its permissions and the free space)" if name else reason


def main(argv: Sequence[str] | None = None) -> int:
    warnings.formatwarning = _one_line_warning  # a warning is one line, like an error
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse(argv)
    args.argv = argv  # what --nproc runs again in each process
    set_quiet(getattr(args, "quiet", False))  # every progress bar, also those deep in data loading
    rank = os.environ.get("RANK", "0")
    where = "" if rank == "0" else f"process {rank}: "  # the others of a multi-process run
    try:
        args.run(args)
    except MispairError as exc:
        print(f"mispair: error: {where}{exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # a path, a permission, a full disk: the system refused what the user gave
        print(f"mispair: error: {where}{_os_error(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("mispair: interrupted (rerun the same command to resume)", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
