"""What a run checks before anything is written: every free-form option against its type, and
the data against the model it is to train."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import torch

from mispair.config import ModelConfig, RunConfig
from mispair.engine.assembly import RunData, check_model_inputs
from mispair.engine.held_out.kinds import SCORE_KINDS
from mispair.errors import ConfigError
from mispair.methods.base import build_options, get_recipe
from mispair.nn.heads import create_head, head_options
from mispair.nn.text import text_encoder_class
from mispair.onnx_runtime import require_runtime
from mispair.options import build_dataclass


def check_text_precision(model: ModelConfig) -> None:
    """``model.text_precision: bfloat16`` only for a text encoder that can compute its states in
    it (``bfloat16_when_frozen``: the frozen MiniLM), frozen (no trainable layers)."""
    encoder = text_encoder_class(model.text_encoder)
    frozen = getattr(encoder, "bfloat16_when_frozen", False) and not model.text_trainable_layers
    if model.text_precision == "bfloat16" and not frozen:
        raise ConfigError(
            f"model.text_precision={model.text_precision}: only the frozen MiniLM runs in it "
            "(model.text_encoder=minilm, model.text_trainable_layers=0)"
        )


def check_run_config(config: RunConfig) -> Any:
    """Every free-form option of ``config`` checked against its type before anything is written:
    the recipe's (``method``), the head's and the scorers' (``division.scorer_options``), the text
    encoder's precision (:func:`check_text_precision`), the held-out score kind (a name of
    :data:`~mispair.engine.held_out.kinds.SCORE_KINDS`), and that ``data.encoder_runtime`` can
    run here; returns the recipe's options."""
    if config.data.encoder_runtime == "onnx" and config.model.text_precision == "bfloat16":
        raise ConfigError(
            f"model.text_precision={config.model.text_precision} runs in PyTorch: "
            "use data.encoder_runtime=torch"
        )
    require_runtime(config.data.encoder_runtime)
    check_text_precision(config.model)
    recipe_cls = get_recipe(config.recipe)
    options = build_options(recipe_cls, config.method)
    head_options(config.model.head, config.model.head_options)
    build_dataclass(get_recipe("vse").Options, config.division.scorer_options, "division.scorer_options")
    if config.division.pair_score not in SCORE_KINDS:
        raise ConfigError(
            f"division.pair_score: {config.division.pair_score!r} is not a held-out score kind "
            f"({', '.join(SCORE_KINDS)})"
        )
    if recipe_cls.needs_pair_scores and config.division.scored_by == "in_sample":
        raise ConfigError(
            f"recipe {config.recipe}: needs held-out pair scores (division.scored_by: out_of_fold or early)"
        )
    return options


def check_data_fits(config: RunConfig, data: RunData) -> None:
    """The head fits the data's fragments, checked before anything is written (its head alone is
    built, off the run's random stream, so the run's draws stay as they were)."""
    with torch.random.fork_rng(devices=[]):
        head = create_head(config.model.head, config.model.embed_dim, **config.model.head_options)
    check_model_inputs(SimpleNamespace(head=head), data.train.feature_dim, data.train)  # reads .head only
