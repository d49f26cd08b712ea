"""A checkpoint's models as search uses them: the vectors an index holds, queries encoded the way
the run encoded its captions and images, and the head's scores of candidate pairs."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from mispair.config import DataConfig, RunConfig, from_dict
from mispair.data.pairset import PairSet
from mispair.data.tokenizers import Tokenizer, restore_tokenizer
from mispair.encoding import image_batches, text_batches
from mispair.engine.assembly import (
    check_model_inputs,
    checkpoint_tokens,
    load_models,
    model_pairs,
    pick_device,
    prepare_text_encoder,
)
from mispair.engine.checkpoint import load_checkpoint
from mispair.errors import DataError
from mispair.nn.allpairs import all_pair_similarities
from mispair.nn.embedding import Fragments, l2_normalize
from mispair.nn.model import RetrievalModel
from mispair.nn.text import text_encoder_class
from mispair.progress import progress_bar


@dataclass
class SearchModel:
    """The models of the checkpoint at ``path`` (``state``: its payload), in eval mode on ``device``.

    The index vector of an item is the concatenation over the ``n`` models of its L2-normalised
    pooled embedding, divided by ``√n``: the inner product of an image's and a caption's vectors
    is then the models' mean cosine similarity, which is exactly what the cosine head scores (and
    what :func:`~mispair.engine.evaluation.similarity_matrix` averages over co-trained models).
    For other heads it is the first stage that ``rerank`` refines with the head itself.
    """

    path: Path
    state: dict[str, Any]
    models: list[RetrievalModel]
    device: torch.device
    batch_size: int = 256

    @classmethod
    def load(cls, path: str | Path, device: str = "auto") -> SearchModel:
        state = load_checkpoint(path)
        dev = pick_device(device, "--device")
        config = from_dict(state["config"])
        return cls(Path(path), state, load_models(state, dev, str(path)), dev, config.train.eval_batch_size)

    @cached_property
    def config(self) -> RunConfig:
        return from_dict(self.state["config"])

    @cached_property
    def fingerprint(self) -> str:
        """A digest of the checkpoint's config, tokenizer words, input sizes and every weight."""
        digest = hashlib.blake2b(digest_size=16)
        fields = {k: self.state[k] for k in ("config", "vocab", "feature_dim", "vocab_size")}
        digest.update(json.dumps(fields, sort_keys=True, ensure_ascii=False).encode("utf-8"))
        for weights in self.state["models"]:
            for name, tensor in sorted(weights.items()):
                tensor = tensor.detach().cpu().contiguous()
                digest.update(f"{name}:{tensor.dtype}:{tuple(tensor.shape)}".encode())
                digest.update(tensor.reshape(-1).view(torch.uint8).numpy().tobytes())
        return digest.hexdigest()

    @property
    def dim(self) -> int:
        """The length of an index vector: ``n_models × embed_dim``."""
        return len(self.models) * self.config.model.embed_dim

    @cached_property
    def tokenizer(self) -> Tokenizer:
        kind = text_encoder_class(self.config.model.text_encoder).tokenizer
        return restore_tokenizer(kind, self.state["vocab"])

    def tokens(self, pairs: PairSet) -> list[list[int]]:
        """Token ids of ``pairs``' captions as the checkpoint's run tokenized its own."""
        return checkpoint_tokens(self.state, pairs)

    def check_inputs(self, pairs: PairSet) -> None:
        """A one-line error when the models cannot read ``pairs``' image features."""
        check_model_inputs(self.models[0], self.state["feature_dim"], pairs)

    def prepare_texts(self, data: DataConfig, tokens: list[list[int]], progress: bool = False,
                      log: Callable[[str], None] = print) -> None:  # fmt: skip
        """Let a frozen text encoder (MiniLM) fill its cache of ``tokens`` beside ``data``."""
        prepare_text_encoder(self.config.model, data, tokens, progress=progress, log=log)

    def image_vectors(self, pairs: PairSet, progress: bool = False) -> np.ndarray:
        """``[n_images, dim]`` float32 index vectors of ``pairs``' images."""
        pairs = model_pairs(self.config.model, pairs)
        size, device = self.batch_size, self.device
        batches = [image_batches(m, pairs, batch_size=size, device=device) for m in self.models]
        return self._vectors(batches, pairs.n_images, "image vectors", progress)

    def text_vectors(self, tokens: list[list[int]], progress: bool = False) -> np.ndarray:
        """``[n_captions, dim]`` float32 index vectors of captions given as token ids."""
        size, device = self.batch_size, self.device
        batches = [text_batches(m, tokens, batch_size=size, device=device) for m in self.models]
        return self._vectors(batches, len(tokens), "caption vectors", progress)

    def _vectors(self, batches: list[Iterator[Fragments]], n: int, what: str, progress: bool) -> np.ndarray:
        out = np.empty((n, self.dim), dtype=np.float32)
        width, scale = self.config.model.embed_dim, 1 / math.sqrt(len(self.models))
        with progress_bar(total=n * len(self.models), desc=what, unit="item", disable=not progress,
                          leave=False) as bar:  # fmt: skip
            for k, model_batches in enumerate(batches):
                start = 0
                for part in model_batches:
                    pooled = l2_normalize(part.pooled.float()).cpu().numpy()
                    out[start : start + len(pooled), k * width : (k + 1) * width] = pooled * scale
                    start += len(pooled)
                    bar.update(len(pooled))
        return out

    def encode_images(self, pairs: PairSet) -> list[Fragments]:
        """Each model's embeddings of ``pairs``' images (fragments and pooled)."""
        pairs = model_pairs(self.config.model, pairs)
        return [Fragments.cat(list(image_batches(m, pairs, batch_size=self.batch_size, device=self.device)))
                for m in self.models]  # fmt: skip

    def encode_texts(self, tokens: list[list[int]]) -> list[Fragments]:
        """Each model's embeddings of captions given as token ids."""
        return [Fragments.cat(list(text_batches(m, tokens, batch_size=self.batch_size, device=self.device)))
                for m in self.models]  # fmt: skip

    def pair_scores(self, images: list[Fragments], texts: list[Fragments]) -> Tensor:
        """``[n_images, n_captions]`` the head's similarities of encoded images and captions (each
        model's, from :meth:`encode_images` / :meth:`encode_texts`), averaged over the models,
        through the all-pairs engine (:func:`~mispair.nn.allpairs.all_pair_similarities`)."""
        sims = [all_pair_similarities(m.similarity, i, t, device=self.device)
                for m, i, t in zip(self.models, images, texts)]  # fmt: skip
        return torch.stack(sims).mean(dim=0)

    def query_tokens(self, text: str) -> list[int]:
        """Token ids of a query text; a text without any token is a one-line error."""
        if not text.strip():
            raise DataError("the query text is empty")
        return self.tokenizer.encode(text)
