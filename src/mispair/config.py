"""Run configuration: small YAML files, an embedded default, and ``key=value`` overrides."""

from __future__ import annotations

import copy
import math
import os
import stat
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from mispair.errors import ConfigError
from mispair.limits import check_range, limit, raise_hint
from mispair.options import build_dataclass
from mispair.safe_parse import load_yaml


@dataclass
class NoiseConfig:
    """Synthetic mismatches added to the training split (``rate`` 0 = none)."""

    rate: float = 0.0
    protocol: Literal["pmp", "ncr"] = "pmp"
    seed: int = 0
    file: str | None = None  # a saved NoiseRecord (.npy) or a reference repository's noise index
    oracle: bool = False  # train on the truly clean pairs only (a bound for benchmarks, not a method)

    def __post_init__(self) -> None:
        if not 0 <= self.rate <= 1:
            raise ConfigError(f"data.noise.rate: a fraction in [0, 1], got {self.rate}")
        check_range("seed", self.seed, "data.noise.seed")


@dataclass
class DataConfig:
    """Where the pairs come from.

    ``source``: a reader of :data:`mispair.data.readers.READERS` — ``folder`` (a folder with a
    captions or imagefolder metadata file), ``table`` (a .csv/.tsv/.jsonl/.parquet file),
    ``webdataset`` (tar shards), ``coco`` (COCO or Karpathy JSON), ``precomp`` (the papers'
    precomputed features), ``now`` (NoW), ``synthetic`` (generated; no ``root``) — or ``auto``:
    the reader that recognises ``root``, and without a root the prepared Tux Paint set in
    ``data/tuxpaint_precomp`` when present, else synthetic data (with a note).
    ``image_column`` ... ``split_column``: a table's columns (None: the usual names).
    ``image_root``: the folder a table's image paths are relative to (default: the table's).
    ``cache_dir``: where image features, unpacked images and caption vectors are kept (default:
    the user's cache folder, ``$MISPAIR_CACHE``, else ``$XDG_CACHE_HOME/mispair``, else
    ``~/.cache/mispair``, one folder per collection; see :mod:`mispair.data.cache_folder`).
    ``image_embedding_column`` / ``text_embedding_column``: a table's columns of precomputed
    vectors (a list per cell, or a ``.npy`` path relative to the table), used instead of image
    features / caption encoding (see ``docs/encoders.md``); a text-embedding column makes the text
    encoder ``precomputed``. ``embeddings_aligned``: the two columns come from one matched pair of
    towers (e.g. CLIP), so their plain cosine is a score too (the audit's raw-score baseline).
    ``image_encoder``: the frozen encoder that turns a collection's pictures into features (a name
    of :data:`mispair.data.image_encoders.IMAGE_ENCODERS`: ``efficientnet_lite0``, ``timm``,
    ``open_clip``), with ``image_encoder_options`` (``model``, ``checkpoint``: local weights).
    ``caption_encoder``: a frozen encoder that turns each caption into a vector before training
    (:data:`mispair.data.caption_encoders.CAPTION_ENCODERS`: ``open_clip``, ``huggingface``), with
    ``caption_encoder_options``; it makes the text encoder ``precomputed``.
    ``encoder_runtime``: what runs the frozen pretrained encoders, EfficientNet-Lite0 (and other
    image encoders) on the pictures and a frozen MiniLM on the captions: ``torch``, ``onnx``
    (ONNX Runtime on the CPU, ``pip install 'mispair[onnx]'``, checked before a run starts; the
    model is exported once and cached, see :mod:`mispair.onnx_runtime`), or ``auto``: ONNX
    Runtime for EfficientNet-Lite0 on a CPU where it is installed (2–2.8× the pictures a second
    per core), PyTorch otherwise and for MiniLM (:func:`mispair.data.features.auto_runtime`), the
    default: the audit's numbers on the calibration collections move with it no more than with a
    placebo of the same size (``benchmarks/results/encoder_speed.md``). A performance setting:
    the features are the same to rounding, and a run trained with ``onnx`` opens without ONNX
    Runtime.
    ``image_form``: what of each picture's features is read and cached (once per picture
    content, :mod:`mispair.data.picture_store`): ``mean`` (the mean of its fragments, what a model
    that reads only the mean feature reads: 2–3 KB a picture), ``grid`` (every fragment, 125 KB:
    heads that read fragments), or ``auto``: the run's model decides (``grid`` where no run
    decides, e.g. a collection read alone).
    """

    source: str = "auto"
    root: str | None = None
    train_split: str = "train"
    dev_split: str = "dev"
    test_split: str = "test"
    image_column: str | None = None
    caption_column: str | None = None
    id_column: str | None = None
    split_column: str | None = None
    image_root: str | None = None
    cache_dir: str | None = None
    image_embedding_column: str | None = None
    text_embedding_column: str | None = None
    embeddings_aligned: bool = False
    image_encoder: str = "efficientnet_lite0"
    image_encoder_options: dict[str, Any] = field(default_factory=dict)
    caption_encoder: str | None = None
    caption_encoder_options: dict[str, Any] = field(default_factory=dict)
    encoder_runtime: Literal["auto", "torch", "onnx"] = "auto"
    image_form: Literal["auto", "mean", "grid"] = "auto"
    vocab: str | None = None
    now_tokenizer: str = "bpe"  # NoW's pre-tokenized captions: bpe | bert | jieba
    folder_allow_outside: bool = False  # table sources: read image paths outside the table's folder
    min_word_count: int = 2  # NCR uses 4 on Flickr30K/COCO (see configs/)
    test_folds: int = 1
    synthetic_images: int = 1000
    noise: NoiseConfig = field(default_factory=NoiseConfig)


@dataclass
class ModelConfig:
    """Encoders and head. ``text_encoder``: ``bigru`` (learned word embeddings, NCR) or ``minilm``
    (pretrained all-MiniLM-L6-v2, frozen but for its top ``text_trainable_layers`` layers; frozen,
    its outputs are computed once per caption and cached). ``image_pooling``: the pooled image
    embedding is the mean of the projected fragments (``fragments``, NCR) or the projection of
    the mean feature (``features``, the pretrained backbone). ``text_precision``: the arithmetic
    of the frozen MiniLM, ``float32``, ``bfloat16`` (PyTorch's autocast: on CPUs with AMX or
    AVX512-BF16, about 2.2× the captions a second, the states at cosine ≥ 0.9999 with float32's;
    on other CPUs slower) or ``auto`` (bfloat16 where the CPU has those instructions and the
    frozen MiniLM runs in PyTorch, else float32; a run records which it took); bfloat16 states
    are cached apart from float32's."""

    head: str = "cosine"
    text_encoder: str = "bigru"
    text_trainable_layers: int = 0
    text_precision: Literal["float32", "bfloat16", "auto"] = "float32"
    embed_dim: int = 1024
    word_dim: int = 300
    image_mlp: bool = False
    image_pooling: Literal["fragments", "features"] = "fragments"
    head_options: dict[str, Any] = field(default_factory=dict)


OPTIMIZERS = ("adam", "adamw")


@dataclass
class TrainConfig:
    epochs: int = 20
    batch_size: int = 128
    lr: float = 2e-4
    lr_decay_epochs: list[int] = field(default_factory=lambda: [15])
    lr_decay: float = 0.1
    grad_clip: float = 2.0
    seed: int = 0
    device: str = "auto"
    eval_batch_size: int = 256
    threads: int = 0  # torch CPU threads; 0 = leave torch's default
    optimizer: str = "adam"  # adam | adamw (OMIT)
    weight_decay: float = 0.0  # decoupled for adamw, L2 for adam

    def __post_init__(self) -> None:
        if self.optimizer not in OPTIMIZERS:
            raise ConfigError(f"train.optimizer: one of {', '.join(OPTIMIZERS)}, got {self.optimizer!r}")
        if not self.weight_decay >= 0:
            raise ConfigError(f"train.weight_decay: must be >= 0, got {self.weight_decay}")
        for key in ("epochs", "batch_size", "eval_batch_size"):
            if getattr(self, key) < 1:
                raise ConfigError(f"train.{key}: must be >= 1, got {getattr(self, key)}")
        if not 0 < self.lr < math.inf:
            raise ConfigError(f"train.lr: must be a finite number > 0, got {self.lr}")
        check_range("seed", self.seed, "train.seed")


@dataclass
class DivisionConfig:
    """Where the division of ``ncr``, ``asl``, ``pc2``, ``l2rm``, ``holdout`` (and
    ``--export-pairs``, ``mispair audit``) takes its pair scores from
    (:mod:`mispair.engine.held_out`, :mod:`mispair.division.scores`).

    ``scored_by``: who scores a pair: ``in_sample`` (each epoch, the recipe's own models score the
    pairs they train on: the papers), ``out_of_fold`` (before training, ``folds`` scorers each
    trained ``epochs`` epochs on the other folds score the held-out pairs: no pair is scored by a
    model that fitted it; ``rounds`` > 1 trains each later round's scorers on the previous round's
    clean split; ``repeats`` > 1 repeats the scoring over as many partitions into folds and
    averages) or ``early`` (one scorer trained ``epochs`` epochs on all pairs, each pair's
    similarity averaged over those epochs: cheap, before the mismatched pairs are fitted).
    ``pair_score``: what a held-out pair's score is (its ``similarity``, its ``contrast``
    against its fold at temperature ``tau``, ``contrast_structure``: that contrast checked by GSC's
    structure consistency, or ``gap_corrected``: MGCS's similarity;
    :data:`~mispair.engine.held_out.kinds.SCORE_KINDS`). ``scorer_options``: the options of the ``vse``
    recipe that trains each scorer (the run's model; default: InfoNCE). ``p_threshold``: a pair
    whose clean probability under the held-out scores is above it is clean (the refinement rounds,
    ``holdout``'s split and the audit's suspected pairs). ``score_other_splits``: the scorers also
    score every pair of the dev and test splits, none of which any scorer trained on
    (cross-fitting; ``mispair audit`` sets it, so every pair of a collection gets a held-out score).
    ``refine_epochs``: the epochs of a refinement round's scorers when each starts from the same
    fold's scorer of the round before (which never saw that fold either); None: every round's
    scorers train from scratch for ``epochs``. ``scorer_pairs``: an out-of-fold scorer whose
    training pairs (the other folds, or their clean split) outnumber it trains on a random sample
    of that many of them (seeded per scorer), so that a scorer's cost stops growing with the
    collection while every pair is still scored; None: all of them. ``reference``: the clean-trained
    reference division instead, for benchmarks on planted noise: one round of out-of-fold scorers
    trained on the truly matched pairs only (the division a perfect refinement would reach).
    ``nested_trust`` (``rounds`` < ``folds``, from scratch; nothing to do for one round): the
    rounds before the last train one scorer per set of folds held out together
    (:mod:`~mispair.engine.held_out.nested`), so that no scorer trains on pairs trusted by a model
    that saw a fold it holds out (the plain refinement rounds' trust was, and a fold's own pairs
    then score above its decoys: ``benchmarks/refinement_leak.py``). ``trust_pairs``: the most
    pairs one of those trust scorers trains on (a sample, seeded per scorer, as ``scorer_pairs``);
    None: ``scorer_pairs``. ``answers``: labels files
    (``pair_id,label``, :mod:`mispair.estimate.labels`; several reviewers' merged, a disagreement
    unsure): a person's judgements, fixed for every
    out-of-fold scorer (:mod:`~mispair.engine.held_out.answers`: pairs judged correct always
    trusted, pairs judged mismatched never trained on; ``mispair audit --labels``).
    """

    scored_by: Literal["in_sample", "out_of_fold", "early"] = "in_sample"
    folds: int = 5
    rounds: int = 1
    repeats: int = 1  # partitions into folds, the scores averaged (out_of_fold)
    epochs: int = 10
    pair_score: Literal["similarity", "contrast", "contrast_structure", "gap_corrected"] = "similarity"
    tau: float = 0.05  # the contrast score's temperature
    scorer_options: dict[str, Any] = field(default_factory=lambda: {"loss": "infonce"})
    p_threshold: float = 0.5  # clean above it
    score_other_splits: bool = False  # the dev and test pairs scored too (by scorers that never saw them)
    refine_epochs: int | None = None  # warm-started refinement rounds (out_of_fold)
    scorer_pairs: int | None = None  # the most pairs an out-of-fold scorer trains on (a sample)
    reference: bool = False  # scorers trained on the truly matched pairs (planted noise only)
    nested_trust: bool = False  # the last round's trust decided without the fold it scores
    trust_pairs: int | None = None  # the most pairs a nested-trust scorer trains on (None: scorer_pairs)
    answers: list[str] = field(default_factory=list)  # labels files: judged pairs fixed for the scorers

    def __post_init__(self) -> None:
        if self.folds < 2:
            raise ConfigError(f"division.folds: at least 2, got {self.folds}")
        if self.scorer_pairs is not None and self.scorer_pairs < 1:
            raise ConfigError(f"division.scorer_pairs: at least 1 (or null: all), got {self.scorer_pairs}")
        if self.trust_pairs is not None and self.trust_pairs < 1:
            raise ConfigError(
                f"division.trust_pairs: at least 1 (or null: scorer_pairs), got {self.trust_pairs}"
            )
        if self.refine_epochs is not None and self.refine_epochs < 1:
            raise ConfigError(
                f"division.refine_epochs: at least 1 (or null: from scratch), got {self.refine_epochs}"
            )
        if self.nested_trust and self.rounds > 1 and self.rounds >= self.folds:
            raise ConfigError(
                f"division.nested_trust: division.rounds={self.rounds} with division.folds={self.folds} "
                "leaves no fold to train its first round on (it holds out `rounds` folds at once): "
                "use more folds, division.rounds=1 or division.nested_trust=false"
            )
        if self.nested_trust and self.rounds > 1 and self.refine_epochs is not None:
            raise ConfigError(
                "division.refine_epochs: warm-started rounds would train on a scorer that saw the fold "
                "it scores; set division.nested_trust=false with it"
            )
        for key in ("epochs", "rounds", "repeats"):
            if getattr(self, key) < 1:
                raise ConfigError(f"division.{key}: at least 1, got {getattr(self, key)}")
        if not 0 < self.p_threshold < 1:
            raise ConfigError(f"division.p_threshold: between 0 and 1, got {self.p_threshold}")


@dataclass
class RunConfig:
    """Everything a run needs; ``method`` holds the recipe's own options."""

    name: str = "run"
    recipe: str = "vse"
    output: str | None = None  # default runs/<name>
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    method: dict[str, Any] = field(default_factory=dict)
    division: DivisionConfig = field(default_factory=DivisionConfig)

    def __post_init__(self) -> None:
        if self.data.text_embedding_column or self.data.caption_encoder:  # captions as vectors: read by this
            self.model.text_encoder = "precomputed"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def output_dir(self) -> Path:
        return Path(self.output or f"runs/{self.name}")


RENAMED_DIVISION_KEYS = {"scores": "scored_by", "score": "pair_score", "scorer": "scorer_options"}
"""``division`` keys of earlier versions and their names now (read, with a note, in old files)."""


def upgraded(data: dict[str, Any], where: str = "config") -> dict[str, Any]:
    """``data`` (a run config as plain data) with the ``division`` keys of earlier versions
    renamed (:data:`RENAMED_DIVISION_KEYS`), each noted in one line of a :class:`FutureWarning`."""
    division = data.get("division")
    if not isinstance(division, dict) or not RENAMED_DIVISION_KEYS.keys() & division.keys():
        return data
    renamed = {}
    for key, value in division.items():
        new = RENAMED_DIVISION_KEYS.get(key, key)
        if new != key:
            warnings.warn(f"{where}: division.{key} is now division.{new}", FutureWarning, stacklevel=3)
        renamed[new] = value
    return {**data, "division": renamed}


def from_dict(data: dict[str, Any], cls: type = RunConfig, where: str = "config") -> Any:
    """Build a config dataclass from plain data, rejecting unknown keys and wrong types
    (:func:`mispair.options.build_dataclass`); a run config's renamed keys are read
    (:func:`upgraded`)."""
    if cls is RunConfig and isinstance(data, dict):
        data = upgraded(data, where)
    return build_dataclass(cls, data, where)


# The run of a bare ``mispair train``: the VSE baseline on the pretrained backbone (frozen MiniLM,
# the mean EfficientNet-Lite0 grid feature) on the prepared Tux Paint stamps (or the synthetic
# fallback), with settings that train in well under a minute on a CPU core.
DEFAULT_RUN: dict[str, Any] = {
    "name": "default",
    "recipe": "vse",
    "data": {"source": "auto", "min_word_count": 1},
    "model": {"head": "cosine", "text_encoder": "minilm", "image_pooling": "features", "embed_dim": 256},
    "train": {"epochs": 30, "batch_size": 64, "lr": 1e-3, "lr_decay_epochs": [20]},
    "method": {"loss": "triplet", "margin": 0.2, "hardest": True, "hardest_after": 5},
}


ROBUST_RUN: dict[str, Any] = {
    "name": "robust",
    "recipe": "holdout",
    "data": {"min_word_count": 1},
    "model": {
        "head": "cosine",
        "text_encoder": "minilm",
        "image_pooling": "features",
        "embed_dim": 256,
        "text_precision": "auto",
    },
    "train": {"epochs": 12, "batch_size": 64, "lr": 1e-3, "lr_decay_epochs": [10]},
    "division": {
        "scored_by": "out_of_fold",
        "folds": 5,
        "repeats": 3,
        "rounds": 3,
        "epochs": 5,
        "pair_score": "contrast",
        "scorer_options": {"loss": "infonce", "tau": 0.2},
        "scorer_pairs": 20000,
    },
    "method": {"loss": "infonce", "tau": 0.2, "suspect_weight": 0.1},
}
"""The run of a user's collection (``mispair audit``, ``mispair train PATH``): ``holdout`` on the
pretrained backbone with the settings of ``configs/holdout/``, its division from out-of-fold
contrast scores (5 folds × 3 partitions, 3 rounds: the best detector of docs/results.md; the
audit decides its trust by nested trust instead, :data:`~mispair.audit.collection.AUDIT_RUN`).
Its schedule differs from the benchmarked configs: 12 epochs (not 30 / 15), since its models peak on
dev within the first few (docs/results.md); every thread (not 1); batch 64 on every collection
(OpenClipart's benchmark config takes 128); MiniLM in bfloat16 where the CPU computes it natively
(``model.text_precision: auto``); each out-of-fold scorer trains on at most 20,000 pairs
(``division.scorer_pairs``: a collection above 25,000 pairs is scored by scorers trained on a
sample of the other folds, so the division's training stops growing with it; docs/scale.md)."""


def load_config(
    path: str | Path | None = None,
    overrides: list[str] | tuple[str, ...] = (),
    default: dict[str, Any] = DEFAULT_RUN,
) -> RunConfig:
    """A run config: the YAML file at ``path`` over the dataclass defaults (the papers' common
    settings), or ``default`` (:data:`DEFAULT_RUN`) without a file; then the ``key=value``
    overrides (``train.lr=1e-3``, ``method.loss=infonce``; values parsed as YAML)."""
    data: dict[str, Any] = copy.deepcopy(default) if path is None else _read_yaml(Path(path))
    if path is None and any(o.partition("=")[0].strip() == "recipe" for o in overrides):
        data.pop("method")  # the default's options belong to its own recipe
    _check_overrides(overrides)
    for override in overrides:
        key, sep, raw = override.partition("=")
        if not sep or not key:
            raise ConfigError(f"override {override!r}: expected key=value")
        try:
            value = load_yaml(raw, f"override {key}") if raw else ""
        except yaml.YAMLError:
            value = raw
        _set_path(data, key.strip().split("."), value, override)
    if "name" not in data and path is not None:
        data["name"] = Path(path).stem
    return from_dict(data)


def _check_overrides(overrides: list[str] | tuple[str, ...]) -> None:
    """At most ``MAX_OVERRIDES`` overrides of at most ``MAX_OVERRIDE_CHARS`` characters each."""
    if len(overrides) > limit("MAX_OVERRIDES"):
        raise ConfigError(
            f"{len(overrides)} key=value overrides (at most {limit('MAX_OVERRIDES')}); put "
            f"them in a YAML config ({raise_hint('MAX_OVERRIDES')})"
        )
    for override in overrides:
        bound = limit("MAX_OVERRIDE_CHARS")
        if len(override) > bound:
            raise ConfigError(
                f"override {override[:40]!r}...: {len(override):,} characters (at most "
                f"{bound:,}; {raise_hint('MAX_OVERRIDE_CHARS')})"
            )


def _read_yaml(path: Path) -> dict[str, Any]:
    """The mapping of the YAML config at ``path``: its size checked before it is read, its aliases,
    nesting and expanded size bounded (:func:`mispair.safe_parse.load_yaml`)."""
    bound = limit("MAX_CONFIG_BYTES")
    try:
        with os.fdopen(os.open(path, os.O_RDONLY | os.O_NONBLOCK), "rb") as handle:  # a FIFO never blocks
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                raise ConfigError(f"{path}: config file not found (not a regular file)")
            size = os.fstat(handle.fileno()).st_size
            if size > bound:
                raise ConfigError(
                    f"{path}: a config file of {size:,} bytes (at most {bound:,}; "
                    f"{raise_hint('MAX_CONFIG_BYTES')})"
                )
            raw = handle.read(bound + 1)
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        raise ConfigError(f"{path}: config file not found") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the config ({exc.strerror or exc})") from None
    if len(raw) > bound:  # it grew while being read
        raise ConfigError(f"{path}: a config file of more than {bound:,} bytes")
    try:
        data = load_yaml(raw.decode("utf-8"), path) or {}
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}" if mark else ""
        raise ConfigError(f"{path}{where}: invalid YAML") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    return data


def _set_path(data: dict[str, Any], keys: list[str], value: Any, override: str) -> None:
    node = data
    for key in keys[:-1]:
        node = node.setdefault(key, {})
        if not isinstance(node, dict):
            raise ConfigError(f"override {override!r}: {key!r} is not a section")
    node[keys[-1]] = value
