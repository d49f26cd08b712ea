"""A run's data, tokenizer and models, assembled alike for ``train``, ``eval`` and the pair export."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from mispair.config import DataConfig, ModelConfig, RunConfig
from mispair.data.batching import TrainingPairs, encode_captions
from mispair.data.loading import load_split, resolve_source
from mispair.data.noise import NoiseRecord, noise_of_split
from mispair.data.pairset import PairSet
from mispair.data.readers import reader_of
from mispair.data.tokenizers import Tokenizer, create_tokenizer, tokenizer_words
from mispair.errors import ConfigError, DataError
from mispair.nn.assembly import build_model, reads_mean_feature
from mispair.nn.model import RetrievalModel
from mispair.nn.text import text_encoder_class
from mispair.nn.text.minilm import cpu_computes_bfloat16
from mispair.progress import ProgressLine
from mispair.seeds import child_seed


def pick_device(name: str = "auto", option: str = "train.device") -> torch.device:
    """``auto``: CUDA when available, else CPU. A bad name is a one-line error naming ``option``
    (the config key or command-line flag the user gave it with)."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError:
        raise ConfigError(f"{option}: unknown device {name!r} (use auto, cpu, cuda or cuda:N)") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"{option}: CUDA requested ({name}) but not available on this machine")
    if device.type not in ("cpu", "cuda"):
        raise ConfigError(f"{option}: device {name!r} is not supported (use auto, cpu, cuda or cuda:N)")
    return device


@dataclass
class RunData:
    """The training and dev pairs of a run, its tokenizer (None for pre-tokenized captions, e.g.
    NoW) and the noise of its training split (None when the split is taken as clean)."""

    train: PairSet
    dev: PairSet
    tokenizer: Tokenizer | None
    noise: NoiseRecord | None
    train_tokens: list[list[int]] = field(default_factory=list)  # token ids of each caption
    dev_tokens: list[list[int]] = field(default_factory=list)

    @property
    def vocab_size(self) -> int:
        """The tokenizer's size; for pre-tokenized captions, the file's, else 1 + the largest id;
        for captions given as vectors, their dimension (what the precomputed encoder reads)."""
        if self.train.text_features is not None:
            return int(self.train.text_features.shape[1])
        if self.tokenizer is not None:
            return len(self.tokenizer)
        if self.train.vocab_size is not None:
            return self.train.vocab_size
        return 1 + max((max(t) for t in self.train.caption_tokens or [] if t), default=3)

    def checkpoint_fields(self) -> dict[str, Any]:
        """What a checkpoint records to rebuild the models and the tokenizer."""
        return {
            "vocab": tokenizer_words(self.tokenizer) if self.tokenizer else [],
            "feature_dim": self.train.feature_dim,
            "vocab_size": self.vocab_size,
        }


def load_run_data(config: RunConfig) -> RunData:
    """The configured training and dev splits (as the model reads them: see
    :func:`model_pairs`), the text encoder's tokenizer (built from their captions), their token
    ids and the training noise."""
    train = run_split(config, config.data.train_split)
    dev = run_split(config, config.data.dev_split)
    tokenizer = None
    if train.caption_tokens is None and train.text_features is None:
        kind = text_encoder_class(config.model.text_encoder).tokenizer
        tokenizer = create_tokenizer(kind, config.data, train.captions + dev.captions)
    return RunData(
        train,
        dev,
        tokenizer,
        noise_of_split(config.data, train),
        encode_captions(train, tokenizer),
        encode_captions(dev, tokenizer),
    )


REFERENCE_NEEDS_NOISE = "division.reference: needs a training split with planted noise (data.noise.rate)"


def training_pairs(config: RunConfig, data: RunData) -> tuple[TrainingPairs, NoiseRecord | None]:
    """The pairs the run trains on, in the noise record's pairing, and the noise it may score
    its division against; with ``data.noise.oracle`` (the bound) the truly clean pairs alone and
    no noise. A run without planted noise cannot ask for ``division.reference`` (checked here,
    before the run writes anything)."""
    paired = None if data.noise is None else data.noise.image_of_caption
    train, noise = TrainingPairs(data.train, data.train_tokens, paired), data.noise
    if config.division.reference and (noise is None or not noise.is_noisy.any()):
        raise ConfigError(REFERENCE_NEEDS_NOISE)
    if config.data.noise.oracle:
        if noise is None:
            raise ConfigError(
                "data.noise.oracle: needs a noise record (data.noise.rate > 0 or data.noise.file)"
            )
        clean = np.flatnonzero(~noise.is_noisy)
        train, noise = TrainingPairs(data.train, [data.train_tokens[k] for k in clean], paired[clean]), None
    return train, noise


def planted_noise_note(config: RunConfig, data: RunData) -> str | None:
    """The note that the run plants noise into the user's pairs (said in the first lines, never
    silently), or None when it plants none."""
    noise = config.data.noise
    if noise.rate <= 0 or data.noise is None:
        return None
    swapped = int(data.noise.is_noisy.sum())
    return (
        f"note: planting mismatched pairs into the training split as data.noise asks: {swapped} of "
        f"{data.train.n_captions} captions swapped ({noise.protocol}, rate {noise.rate}, seed "
        f"{noise.seed}); recorded in the run's config.json and metrics.json"
    )


def test_pairs(config: RunConfig) -> PairSet:
    """The configured test split, as the model reads it."""
    return run_split(config, config.data.test_split)


def other_splits(config: RunConfig, data: RunData, test: PairSet | None = None) -> TrainingPairs | None:
    """The dev and test pairs as one set (tokenized as the run tokenizes), when the run's
    division scores them too (``division.score_other_splits``), else None; ``test``: the test
    split when it was read already."""
    if not config.division.score_other_splits:
        return None
    test = test_pairs(config) if test is None else test
    return TrainingPairs.join(
        [TrainingPairs(data.dev, data.dev_tokens), TrainingPairs(test, encode_captions(test, data.tokenizer))]
    )


def run_split(config: RunConfig, split: str) -> PairSet:
    """The split ``split`` of the run's data as its model reads it (:func:`model_pairs`), the
    pictures' features read in the form the model needs (:func:`run_data`)."""
    return model_pairs(config.model, load_split(run_data(config), split))


def run_data(config: RunConfig) -> DataConfig:
    """``config.data`` with ``image_form`` made concrete: ``mean`` when the model reads only each
    picture's mean feature (:func:`~mispair.nn.assembly.reads_mean_feature`: the default run),
    else ``grid``; ``mean`` asked of a model that reads fragments is a one-line error."""
    wanted = "mean" if reads_mean_feature(config.model) else "grid"
    if config.data.image_form == "mean" and wanted == "grid":
        raise ConfigError(
            f"data.image_form=mean: the model (head {config.model.head}, image_pooling "
            f"{config.model.image_pooling}) reads every fragment; use grid or auto"
        )
    form = wanted if config.data.image_form == "auto" else config.data.image_form
    return replace(config.data, image_form=form)


def model_pairs(model: ModelConfig, pairs: PairSet) -> PairSet:
    """``pairs`` as a model of ``model`` reads them: each image's mean feature alone when that
    is all the model reads (a 49× smaller batch for the pretrained backbone), else unchanged."""
    return pairs.with_mean_fragment() if reads_mean_feature(model) else pairs


def concrete_precision(
    model: ModelConfig, data: DataConfig, log: Callable[[str], None] = print
) -> ModelConfig:
    """``model`` with ``text_precision: auto`` made concrete, so that the run records (and its
    checkpoints rebuild) the arithmetic its text states were computed in: ``bfloat16`` for the
    frozen MiniLM run by PyTorch on a CPU with native bfloat16 instructions (about 2.2× the
    captions a second), said in the log; else ``float32``."""
    if model.text_precision != "auto":
        return model
    in_bfloat16 = getattr(text_encoder_class(model.text_encoder), "bfloat16_when_frozen", False)
    if (
        in_bfloat16
        and not model.text_trainable_layers
        and data.encoder_runtime != "onnx"  # (``auto`` runs MiniLM in PyTorch)
        and cpu_computes_bfloat16()
    ):
        log(
            "text features: MiniLM in bfloat16, which this CPU computes natively "
            "(model.text_precision=float32 to turn it off)"
        )
        return replace(model, text_precision="bfloat16")
    return replace(model, text_precision="float32")


def text_cache_dir(data: DataConfig) -> Path | None:
    """Where a frozen text encoder keeps its per-caption outputs: ``text/`` in the reader's cache
    folder (``ROOT/cache`` of a precomputed set, ``.mispair_cache`` beside a table); None (memory
    only) for synthetic data."""
    data = resolve_source(data)
    cache = reader_of(data).cache_dir(data)
    return None if cache is None else cache / "text"


def prepare_text_encoder(
    model: ModelConfig,
    data: DataConfig,
    token_lists: list[list[int]],
    *,
    progress: bool = False,
    log: Callable[[str], None] = print,
) -> None:
    """Let the text encoder precompute what it reads of ``token_lists`` (a frozen encoder's
    cached outputs) before the run; a cache folder that cannot be written is a one-line note and
    the outputs are kept in memory."""
    prepare = getattr(text_encoder_class(model.text_encoder), "prepare", None)
    if prepare is None:
        return
    runtime = data.encoder_runtime
    try:
        done = prepare(model, token_lists, text_cache_dir(data), progress, runtime=runtime)
    except DataError as exc:
        log(f"note: {exc}; text features are kept in memory for this run")
        done = prepare(model, token_lists, None, progress, runtime=runtime)
    if done.get("text_cache/computed"):
        log(
            ProgressLine(
                f"text features: {done['text_cache/computed']} captions encoded by {model.text_encoder}, "
                f"{done['text_cache/size']} cached"
            )
        )


def release_text_encoder(model: ModelConfig) -> None:
    """Let the text encoder forget what :func:`prepare_text_encoder` precomputed (its ``release``,
    where it has one), once no caption is read any more."""
    release = getattr(text_encoder_class(model.text_encoder), "release", None)
    if release is not None:
        release(model)


def build_models(config: RunConfig, count: int, data: RunData, device: torch.device) -> list[RetrievalModel]:
    """``count`` freshly initialised models of the run (model ``k`` seeded from the run's seed)."""
    models = []
    for k in range(count):
        torch.manual_seed(child_seed(config.train.seed, "model", k))
        models.append(build_model(config.model, data.train.feature_dim, data.vocab_size).to(device))
    check_model_inputs(models[0], data.train.feature_dim, data.train)
    return models


def check_model_inputs(model: RetrievalModel, feature_dim: int, pairs: PairSet) -> None:
    """A one-line error when ``pairs`` cannot be read by ``model``, built for features of
    ``feature_dim``: another feature dimension, or another number of fragments per image than a
    head sized for it (SGR/SAF's ``num_regions``) expects."""
    where = pairs.name or "the data"
    if pairs.feature_dim != feature_dim:
        raise DataError(
            f"{where}: image features of dimension {pairs.feature_dim}, but the model was "
            f"built for {feature_dim}"
        )
    regions = getattr(model.head, "required_regions", None)
    if regions is not None and pairs.images.shape[1] != regions:
        raise ConfigError(
            f"model.head_options.num_regions: the head is sized for {regions} fragments per "
            f"image, {where} has {pairs.images.shape[1]} (set "
            f"model.head_options.num_regions={pairs.images.shape[1]})"
        )
