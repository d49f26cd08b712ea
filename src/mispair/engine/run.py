"""Assemble a run from its config: data, vocabulary, noise, models, recipe; train; evaluate."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch

from mispair.atomic import atomic_text
from mispair.config import DataConfig, ModelConfig, RunConfig, from_dict
from mispair.data.batching import Tokenizer, TrainingPairs, encode_captions
from mispair.data.loading import fallback_root, load_split, resolve_source
from mispair.data.noise import NoiseRecord, inject_noise
from mispair.data.pairset import PairSet
from mispair.data.sources.openclipart import read_natural_noise
from mispair.data.vocab import Vocabulary
from mispair.engine.checkpoint import load_checkpoint
from mispair.engine.evaluation import caption_groups, evaluate_split
from mispair.engine.trainer import Trainer, TrainResult
from mispair.errors import ConfigError, DataError
from mispair.methods.base import RecipeContext, build_options, get_recipe
from mispair.nn.encoders import BiGRUTextEncoder, FragmentImageEncoder
from mispair.nn.heads import create_head, head_options
from mispair.nn.model import RetrievalModel


def pick_device(name: str = "auto") -> torch.device:
    """``auto``: CUDA when available, else CPU."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError:
        raise ConfigError(f"train.device: unknown device {name!r}") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError("train.device: CUDA requested but not available on this machine")
    return device


TEXT_ENCODERS = ("bigru", "minilm")


def build_model(cfg: ModelConfig, feature_dim: int, vocab_size: int) -> RetrievalModel:
    """An image encoder, the configured text encoder and the configured head."""
    if cfg.text_encoder not in TEXT_ENCODERS:
        raise ConfigError(f"model.text_encoder: one of {', '.join(TEXT_ENCODERS)}, "
                          f"got {cfg.text_encoder!r}")  # fmt: skip
    if cfg.text_encoder == "minilm":
        from mispair.nn.minilm import MiniLMTextEncoder

        text_encoder: torch.nn.Module = MiniLMTextEncoder(cfg.embed_dim, cfg.text_trainable_layers)
    else:
        text_encoder = BiGRUTextEncoder(vocab_size, cfg.word_dim, cfg.embed_dim)
    return RetrievalModel(
        FragmentImageEncoder(feature_dim, cfg.embed_dim, mlp=cfg.image_mlp),
        text_encoder,
        create_head(cfg.head, cfg.embed_dim, **cfg.head_options),
    )


def build_vocab(config: RunConfig, train: PairSet, dev: PairSet) -> Tokenizer | None:
    """The caption tokenizer: MiniLM's WordPiece for ``model.text_encoder=minilm``; else the
    vocabulary file of the config, or one built from train + dev captions (NCR); None when the
    captions come pre-tokenized (NoW)."""
    if train.caption_tokens is not None:
        return None
    if config.model.text_encoder == "minilm":
        from mispair.nn.minilm import MiniLMTokenizer

        return MiniLMTokenizer()
    if config.data.vocab:
        return Vocabulary.load(config.data.vocab)
    return Vocabulary.build(train.captions + dev.captions, config.data.min_word_count)


def make_noise(data: DataConfig, train: PairSet) -> NoiseRecord | None:
    """The noise of the training split: a noise file, injected synthetic noise, or, for a
    collection with natural-noise labels (OpenClipart), those labels (pairs unchanged, scored
    only); None when the split is taken as clean."""
    per_image = train.captions_per_image
    if data.noise.file:
        path = Path(data.noise.file)
        try:
            record = NoiseRecord.load(path)
        except DataError:
            if per_image is None:
                raise
            record = NoiseRecord.from_reference(path, train.n_images, per_image)
        if len(record.image_of_caption) != train.n_captions:
            raise DataError(f"{path}: noise for {len(record.image_of_caption)} captions, "
                            f"training split has {train.n_captions}")  # fmt: skip
        return record
    if data.noise.rate <= 0:
        return _natural_noise(data, train)
    if per_image is None:
        raise DataError(f"{train.name}: noise injection needs caption k of image k // c")
    groups = caption_groups(train.captions)
    return inject_noise(train.n_images, per_image, data.noise.rate, data.noise.protocol,
                        data.noise.seed, caption_groups=groups)  # fmt: skip


def _natural_noise(data: DataConfig, train: PairSet) -> NoiseRecord | None:
    source, root = resolve_source(data)
    labels = read_natural_noise(root, data.train_split) if source == "precomp" else None
    if labels is None:
        return None
    if len(labels) != train.n_captions:
        raise DataError(f"{root}/{data.train_split}_natural_noise.npy: {len(labels)} labels for "
                        f"{train.n_captions} captions")  # fmt: skip
    return NoiseRecord(train.image_of_caption, train.image_of_caption, labels)


@dataclass
class RunData:
    train: PairSet
    dev: PairSet
    vocab: Tokenizer | None
    noise: NoiseRecord | None


def load_run_data(config: RunConfig) -> RunData:
    train = load_split(config.data, config.data.train_split)
    dev = load_split(config.data, config.data.dev_split)
    vocab = build_vocab(config, train, dev)
    return RunData(train, dev, vocab, make_noise(config.data, train))


def train_run(
    config: RunConfig,
    *,
    resume: bool = True,
    progress: bool = True,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Train ``config`` in its output directory, then evaluate the best checkpoint on test.

    Returns ``{"best_epoch", "dev", "test"}``, also written to ``metrics.json``.
    """
    device = pick_device(config.train.device)
    if config.train.threads > 0:
        torch.set_num_threads(config.train.threads)
    recipe_cls = get_recipe(config.recipe)
    options = build_options(recipe_cls, config.method)
    head_options(config.model.head, config.model.head_options)  # errors before anything is written
    config = _resolve_auto_source(config, log)
    data = load_run_data(config)
    out_dir = config.output_dir
    _check_resume_config(out_dir, config, resume)
    tokens = encode_captions(data.train, data.vocab)
    paired = None if data.noise is None else data.noise.image_of_caption
    context = RecipeContext(
        train=TrainingPairs(data.train, tokens, paired),
        batch_size=config.train.batch_size,
        epochs=config.train.epochs,
        device=device,
        seed=config.train.seed,
        eval_batch_size=config.train.eval_batch_size,
        noise=data.noise,
    )
    vocab_size = len(data.vocab) if data.vocab else _token_vocab_size(data.train)
    models = []
    for k in range(recipe_cls.n_models):
        torch.manual_seed(config.train.seed * 7919 + k)
        models.append(build_model(config.model, data.train.feature_dim, vocab_size).to(device))
    recipe = recipe_cls(models, options, context)
    words = data.vocab.words if isinstance(data.vocab, Vocabulary) else []
    extra = {"vocab": words, "feature_dim": data.train.feature_dim,
             "vocab_size": vocab_size}  # fmt: skip
    kind = config.data.noise.protocol if config.data.noise.rate > 0 else "labelled"
    noise_text = f", noise {data.noise.noise_rate:.2f} ({kind})" if data.noise else ""
    log(f"{config.recipe} on {data.train.name}: {data.train.n_images} images, "
        f"{data.train.n_captions} captions{noise_text}; device {device}")  # fmt: skip
    dev_tokens = encode_captions(data.dev, data.vocab)
    trainer = Trainer(config, recipe, data.dev, dev_tokens, out_dir, extra_state=extra,
                      progress=progress, log=log)  # fmt: skip
    result: TrainResult = trainer.fit(resume=resume)
    test = evaluate_checkpoint(out_dir / "best.pt", progress=progress)
    summary = {"best_epoch": result.best_epoch, "dev": result.best_dev, "test": test}
    _write_json(out_dir / "metrics.json", summary)
    return summary


def _token_vocab_size(pairs: PairSet) -> int:
    """The vocabulary size of pre-tokenized captions: the file's, else 1 + the largest id."""
    if pairs.vocab_size is not None:
        return pairs.vocab_size
    return 1 + max((max(t) for t in pairs.caption_tokens or [] if t), default=3)


def _check_resume_config(out_dir: Path, config: RunConfig, resume: bool) -> None:
    """Refuse to resume a run whose saved config differs (a silent mix of two runs)."""
    saved = out_dir / "config.json"
    current = config.to_dict()
    if resume and (out_dir / "last.pt").is_file() and saved.is_file():
        previous = json.loads(saved.read_text(encoding="utf-8"))
        if previous != current:
            changed = sorted(k for k in current if previous.get(k) != current[k])
            raise ConfigError(
                f"{out_dir}: holds a run with a different config (differs in: {', '.join(changed)}); "
                "use another output directory, or --no-resume to start over"
            )
    out_dir.mkdir(parents=True, exist_ok=True)
    if not resume:
        for name in ("last.pt", "best.pt", "log.jsonl", "metrics.json"):
            (out_dir / name).unlink(missing_ok=True)
    _write_json(saved, current)


def _write_json(path: Path, data: Any) -> None:
    atomic_text(path, json.dumps(data, indent=2) + "\n")


def load_models(state: dict[str, Any], device: torch.device) -> list[RetrievalModel]:
    """Rebuild the models of a checkpoint payload with their weights."""
    config = from_dict(state["config"])
    models = []
    for weights in state["models"]:
        model = build_model(config.model, state["feature_dim"], state["vocab_size"])
        model.load_state_dict(weights)
        models.append(model.to(device).eval())
    return models


def _resolve_auto_source(config: RunConfig, log: Callable[[str], None]) -> RunConfig:
    """``data.source: auto`` made concrete, so the checkpoint records what it was trained on
    (evaluating it from another folder then reads the same data, or says it cannot)."""
    if config.data.source != "auto":
        return config
    source, root = resolve_source(config.data)
    if source == "synthetic":
        log(f"note: no prepared data in {fallback_root(config.data).resolve()}; training on synthetic "
            "data (run `mispair prepare tuxpaint` in this folder, or set data.root)")  # fmt: skip
    root = str(Path(root).resolve()) if root else root
    return replace(config, data=replace(config.data, source=source, root=root))


def evaluate_checkpoint(
    path: str | Path | Sequence[str | Path],
    *,
    split: str | None = None,
    data_root: str | None = None,
    folds: int | None = None,
    device: str = "auto",
    progress: bool = False,
) -> dict[str, float]:
    """Retrieval metrics of a checkpoint's models on a split (default: the config's test split).

    Several checkpoints (e.g. an SGR and a SAF run, for SGRAF) are evaluated on their averaged
    similarities; the data and tokenizer come from the first one's config.
    """
    paths = [path] if isinstance(path, (str, Path)) else list(path)
    states = [load_checkpoint(p) for p in paths]
    config = from_dict(states[0]["config"])
    if data_root:
        config.data.root = data_root
        if config.data.source in ("auto", "synthetic"):
            config.data.source = "precomp"
    pairs = load_split(config.data, split or config.data.test_split)
    dev = pick_device(device)
    models = [m for state in states for m in load_models(state, dev)]
    tokens = _checkpoint_tokens(config, states[0], pairs)
    for other, state in zip(paths[1:], states[1:]):
        if _checkpoint_tokens(from_dict(state["config"]), state, pairs) != tokens:
            raise ConfigError(f"{other}: tokenizes captions differently from {paths[0]}")
    return evaluate_split(models, pairs, tokens, folds=folds or config.data.test_folds,
                          batch_size=config.train.eval_batch_size, device=dev,
                          progress=progress)  # fmt: skip


def _checkpoint_tokens(config: RunConfig, state: dict[str, Any], pairs: PairSet) -> list[list[int]]:
    if config.model.text_encoder == "minilm" and pairs.caption_tokens is None:
        from mispair.nn.minilm import MiniLMTokenizer

        return encode_captions(pairs, MiniLMTokenizer())
    return encode_captions(pairs, Vocabulary(state["vocab"][4:]) if state["vocab"] else None)
