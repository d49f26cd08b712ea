"""A retrieval model from its config: image encoder, registered text encoder, registered head."""

from __future__ import annotations

from mispair.config import ModelConfig
from mispair.nn.encoders import FragmentImageEncoder
from mispair.nn.heads import create_head, head_reads_fragments
from mispair.nn.model import RetrievalModel
from mispair.nn.text import text_encoder_class


def build_model(cfg: ModelConfig, feature_dim: int, vocab_size: int) -> RetrievalModel:
    """The model of ``cfg`` for features of ``feature_dim`` and a tokenizer of ``vocab_size`` ids
    (unused by encoders with their own vocabulary, e.g. MiniLM)."""
    # the text encoder is initialised first: the random draws of every released result follow
    # this order (text encoder, image encoder, head)
    text_encoder = text_encoder_class(cfg.text_encoder).from_config(cfg, vocab_size)
    image_encoder = FragmentImageEncoder(
        feature_dim,
        cfg.embed_dim,
        mlp=cfg.image_mlp,
        pooling=cfg.image_pooling,
        fragments=head_reads_fragments(cfg.head),
    )
    return RetrievalModel(
        image_encoder,
        text_encoder,
        create_head(cfg.head, cfg.embed_dim, **cfg.head_options),
    )


def reads_mean_feature(cfg: ModelConfig) -> bool:
    """Whether the model of ``cfg`` reads only the mean of each image's fragments: its images may
    then be given as ``[n, 1, dim]`` means (:meth:`~mispair.data.pairset.PairSet.with_mean_fragment`)."""
    return cfg.image_pooling == "features" and not head_reads_fragments(cfg.head)
