"""A trained run: its config, models, text encoder and vocabulary, feature sizes, division state
and provenance, opened from and saved to a checkpoint file.

This module is the only one that reads a checkpoint (``torch.load``): everything that needs "the
model, its vocabulary and its config" (eval, export, audit, search, the Python API) takes a
:class:`TrainedRun`, and the trainer resumes from a typed :class:`Checkpoint`. A checkpoint holds
tensors and plain data only, is written atomically and is read without unpickling objects.
"""

from __future__ import annotations

import hashlib
import json
import pickle
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from mispair.atomic import atomic_write
from mispair.config import DataConfig, RunConfig, from_dict
from mispair.data.batching import TrainingPairs, encode_captions
from mispair.data.pairset import PairSet
from mispair.data.tokenizers import Tokenizer, restore_tokenizer
from mispair.encoding import frozen
from mispair.engine.assembly import (
    RunData,
    check_model_inputs,
    load_run_data,
    pick_device,
    prepare_text_encoder,
    release_text_encoder,
)
from mispair.errors import ConfigError, DataError
from mispair.nn.assembly import build_model
from mispair.nn.model import RetrievalModel
from mispair.nn.text import text_encoder_class
from mispair.sanity import check_weights

CHECKPOINT_FORMAT = 1


def save_checkpoint(path: str | Path, payload: dict[str, Any]) -> None:
    """Write ``payload`` (tensors, numbers, strings, lists, dicts) to ``path`` atomically."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, lambda f: torch.save({"format": CHECKPOINT_FORMAT, **payload}, f))


def load_checkpoint(path: str | Path) -> dict[str, Any]:
    """The payload :func:`save_checkpoint` wrote to ``path``, read with ``weights_only=True``; a
    missing, pickled or foreign file is a one-line :class:`DataError` naming it."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: checkpoint not found")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError:
        raise DataError(
            f"{path}: holds pickled Python objects, which mispair never loads "
            "(a mispair checkpoint holds tensors and plain data only)"
        ) from None
    except Exception as exc:
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DataError(f"{path}: not a readable mispair checkpoint ({first_line})") from None
    if not isinstance(payload, dict) or payload.get("format") != CHECKPOINT_FORMAT:
        raise DataError(f"{path}: not a mispair checkpoint (format {CHECKPOINT_FORMAT})")
    return payload


_FIELDS: dict[str, type | tuple[type, ...]] = {
    "config": dict,
    "models": list,
    "epoch": int,
    "best_epoch": int,
    "best_dev": dict,
    "recipe": dict,
}


@dataclass(frozen=True)
class Checkpoint:
    """What a checkpoint file holds, typed and checked.

    ``config``: the run's config (``config_record``: as written, for fingerprints); ``weights``:
    each model's state dict; ``vocab``: the tokenizer's words (empty for pre-tokenized captions);
    ``feature_dim``/``vocab_size``: the input sizes the models were built for (None in a
    checkpoint of a trainer given no data sizes); ``recipe_state``: the recipe's own state (its
    division, e.g. ``clean_prob``); ``optimizer``: the optimizers' state (None when not kept).
    """

    path: Path
    config: RunConfig
    config_record: dict[str, Any]
    weights: list[dict[str, Tensor]]
    epoch: int
    best_epoch: int
    best_dev: dict[str, float]
    recipe_state: dict[str, Any]
    vocab: list[str]
    feature_dim: int | None
    vocab_size: int | None
    optimizer: dict[str, Any] | None

    @classmethod
    def read(cls, path: str | Path) -> Checkpoint:
        """The checkpoint at ``path``; a missing field or one of the wrong type is a one-line
        :class:`DataError` naming the file, an invalid config a :class:`ConfigError`."""
        path = Path(path)
        payload = load_checkpoint(path)
        for key, kind in _FIELDS.items():
            if not isinstance(payload.get(key), kind):
                raise DataError(f"{path}: not a mispair run checkpoint (its {key!r} is missing or malformed)")
        models = payload["models"]
        if not all(isinstance(w, dict) and all(isinstance(t, Tensor) for t in w.values()) for w in models):
            raise DataError(f"{path}: a damaged checkpoint (its models are not name → tensor mappings)")
        for k, weights in enumerate(models):
            check_weights(weights, f"{path} (model {k + 1})")
        try:
            config = from_dict(payload["config"], where=f"{path}: config")
        except ConfigError as exc:
            raise ConfigError(f"{exc} (the checkpoint records a config this version cannot read)") from None
        sizes = {key: payload.get(key) for key in ("feature_dim", "vocab_size")}
        if any(value is not None and not isinstance(value, int) for value in sizes.values()):
            raise DataError(f"{path}: not a mispair run checkpoint (malformed feature_dim or vocab_size)")
        vocab = payload.get("vocab", [])
        if not isinstance(vocab, list) or not all(isinstance(word, str) for word in vocab):
            # a string would be read as a list of its characters: a run that tokenizes nonsense
            raise DataError(f"{path}: not a mispair run checkpoint (its 'vocab' is not a list of words)")
        return cls(
            path=path,
            config=config,
            config_record=payload["config"],
            weights=payload["models"],
            epoch=payload["epoch"],
            best_epoch=payload["best_epoch"],
            best_dev=dict(payload["best_dev"]),
            recipe_state=payload["recipe"],
            vocab=list(vocab),
            feature_dim=sizes["feature_dim"],
            vocab_size=sizes["vocab_size"],
            optimizer=payload.get("optimizer"),
        )


@dataclass(frozen=True)
class FeatureSpec:
    """The inputs a run's models were built for: image features of ``feature_dim`` and token ids
    below ``vocab_size``."""

    feature_dim: int
    vocab_size: int


@dataclass(frozen=True)
class Provenance:
    """Where a trained run comes from: its checkpoint file, the epoch it was saved after, its best
    epoch and dev metrics, and its config as written (what fingerprints digest)."""

    path: Path
    epoch: int
    best_epoch: int
    best_dev: dict[str, float]
    config_record: dict[str, Any]

    @property
    def folder(self) -> Path:
        """The run's folder (beside its checkpoint: ``pair_scores.npz``, ``metrics.json``)."""
        return self.path.parent


@dataclass
class TrainedRun:
    """A trained run's models in eval mode on ``device``, with what reading them takes.

    ``vocabulary``: the tokenizer's words (empty for pre-tokenized captions); ``features``: the
    input sizes; ``recipe_state``: the recipe's saved state, its division (``clean_prob``).
    """

    config: RunConfig
    models: list[RetrievalModel]
    vocabulary: list[str]
    features: FeatureSpec
    recipe_state: dict[str, Any]
    provenance: Provenance
    device: torch.device

    @classmethod
    def open(
        cls, path: str | Path, device: str | torch.device = "auto", *, option: str = "--device"
    ) -> TrainedRun:
        """The run saved at ``path`` with its models on ``device`` (``option``: the flag that named
        it, for errors). A corrupt checkpoint, or weights that do not fit the model its config
        records, is a one-line error naming the file."""
        device = device if isinstance(device, torch.device) else pick_device(device, option)
        saved = Checkpoint.read(path)
        if saved.feature_dim is None or saved.vocab_size is None:
            raise DataError(f"{saved.path}: not a trained run's checkpoint (no feature_dim or vocab_size)")
        features = FeatureSpec(saved.feature_dim, saved.vocab_size)
        models = [_loaded_model(saved, features, weights, device) for weights in saved.weights]
        if not models:
            raise DataError(f"{saved.path}: not a trained run's checkpoint (it holds no model)")
        provenance = Provenance(
            saved.path, saved.epoch, saved.best_epoch, saved.best_dev, saved.config_record
        )
        return cls(saved.config, models, saved.vocab, features, saved.recipe_state, provenance, device)

    @classmethod
    def best_of(cls, config: RunConfig) -> TrainedRun:
        """The best checkpoint (``best.pt``) of the run of ``config``, on its ``train.device``."""
        return cls.open(config.output_dir / "best.pt", config.train.device, option="train.device")

    def save(self, path: str | Path) -> None:
        """Write the run to ``path`` (atomically), as :meth:`open` reads it back."""
        save_checkpoint(
            path,
            {
                "config": self.provenance.config_record,
                "epoch": self.provenance.epoch,
                "best_epoch": self.provenance.best_epoch,
                "best_dev": self.provenance.best_dev,
                "models": [{k: v.cpu() for k, v in m.state_dict().items()} for m in self.models],
                "recipe": self.recipe_state,
                "vocab": self.vocabulary,
                "feature_dim": self.features.feature_dim,
                "vocab_size": self.features.vocab_size,
            },
        )

    @property
    def path(self) -> Path:
        return self.provenance.path

    @cached_property
    def tokenizer(self) -> Tokenizer:
        """The run's tokenizer, rebuilt from its vocabulary."""
        kind = text_encoder_class(self.config.model.text_encoder).tokenizer
        return restore_tokenizer(kind, self.vocabulary)

    def picture_features(self, files: Sequence[Path], cache_dir: Path) -> tuple[np.ndarray, np.ndarray]:
        """``[n, n_fragments, dim]`` features of the picture ``files`` by the run's own image
        encoder (``data.image_encoder``; each picture's mean feature alone where the run's model
        reads only that; kept in the cache folder ``cache_dir``) and ``valid [n]``; a run whose
        images came as vectors is a one-line error (it has no picture encoder)."""
        from mispair.data.image_encoders import create_image_encoder
        from mispair.data.picture_features import extract_folder_features
        from mispair.engine.assembly import run_data

        data = self.config.data
        if data.image_embedding_column:
            raise ConfigError(
                f"{self.path}: its images were given as vectors ({data.image_embedding_column}); "
                "it cannot encode picture files"
            )
        encoder = create_image_encoder(data.image_encoder, data.image_encoder_options)
        files = [Path(f).resolve() for f in files]
        found = extract_folder_features(
            Path("/"),
            [str(f)[1:] for f in files],
            progress=False,
            cache_dir=cache_dir,
            encoder=encoder,
            runtime=data.encoder_runtime,
            form=run_data(self.config).image_form,
        )
        return found.features, found.valid

    def tokens(self, pairs: PairSet) -> list[list[int]]:
        """Token ids of ``pairs``' captions as the run tokenized its own."""
        if pairs.text_features is not None or pairs.caption_tokens is not None:  # vectors, or pre-tokenized
            return encode_captions(pairs, None)
        return encode_captions(pairs, self.tokenizer)

    def check_inputs(self, pairs: PairSet) -> None:
        """A one-line error when the models cannot read ``pairs``' image features."""
        check_model_inputs(self.models[0], self.features.feature_dim, pairs)

    def prepare_texts(
        self,
        tokens: list[list[int]],
        *,
        data: DataConfig | None = None,
        progress: bool = False,
        log: Callable[[str], None] = lambda _: None,
    ) -> None:
        """Let a frozen text encoder (MiniLM) precompute its outputs of ``tokens``, cached beside
        ``data`` (default: the run's collection)."""
        prepare_text_encoder(self.config.model, data or self.config.data, tokens, progress=progress, log=log)

    def release_texts(self) -> None:
        """Free the frozen text encoder's precomputed outputs (a million MiniLM captions: 1 GB) once
        the run reads no more captions; reading one later computes it again."""
        release_text_encoder(self.config.model)

    @property
    def clean_prob(self) -> np.ndarray | None:
        """``[n_pairs]`` the recipe's clean probability of every training pair, when it has one."""
        clean_prob = self.recipe_state.get("clean_prob")
        return None if clean_prob is None else np.asarray(clean_prob, dtype=np.float64)

    @cached_property
    def fingerprint(self) -> str:
        """A digest of the run's config, tokenizer words, input sizes and every weight."""
        digest = hashlib.blake2b(digest_size=16)
        fields = {
            "config": self.provenance.config_record,
            "vocab": self.vocabulary,
            "feature_dim": self.features.feature_dim,
            "vocab_size": self.features.vocab_size,
        }
        digest.update(json.dumps(fields, sort_keys=True, ensure_ascii=False).encode("utf-8"))
        for model in self.models:
            for name, tensor in sorted(model.state_dict().items()):
                tensor = tensor.detach().cpu().contiguous()
                digest.update(f"{name}:{tensor.dtype}:{tuple(tensor.shape)}".encode())
                digest.update(tensor.reshape(-1).view(torch.uint8).numpy().tobytes())
        return digest.hexdigest()

    @cached_property
    def data(self) -> RunData:
        """The run's training and dev data, read again from its collection as it trained on them
        (unless the run that trained it handed them over: :meth:`trained_on`)."""
        return load_run_data(self.config)

    def trained_on(self, data: RunData) -> TrainedRun:
        """This run, with ``data`` (read by the run that just trained it, from the same config) as
        its :attr:`data`: a run opened right after training reads its collection no second time."""
        self.__dict__["data"] = data
        return self

    @cached_property
    def train(self) -> TrainingPairs:
        """The training pairs in the pairing the run trained on (the noise record's, when it has one)."""
        data = self.data
        paired = data.train.image_of_caption if data.noise is None else data.noise.image_of_caption
        return TrainingPairs(data.train, data.train_tokens, paired)

    @property
    def image_ids(self) -> list[str]:
        """The training images' ids (their index as text where the data has none)."""
        return self.data.train.image_ids or [str(i) for i in range(self.data.train.n_images)]


def _loaded_model(
    saved: Checkpoint, features: FeatureSpec, weights: dict[str, Tensor], device: torch.device
) -> RetrievalModel:
    """One model of ``saved`` with its weights, frozen on ``device``; weights that do not fit the
    model its config records are a one-line error naming the file."""
    model_config = saved.config.model
    model = build_model(model_config, features.feature_dim, features.vocab_size)
    try:
        model.load_state_dict(weights)
    except (RuntimeError, TypeError, AttributeError) as exc:
        first = str(exc).strip().splitlines()[-1].strip() if str(exc).strip() else type(exc).__name__
        model_text = f"head {model_config.head}, text encoder {model_config.text_encoder}"
        raise DataError(
            f"{saved.path}: its weights do not fit the model its config records ({model_text}): {first}"
        ) from None
    return frozen(model.to(device))
