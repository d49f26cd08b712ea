"""A checkpoint's models as search uses them: the vectors an index holds, queries encoded the way
the run encoded its captions and images, and the head's scores of candidate pairs."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from mispair.config import DataConfig, RunConfig
from mispair.data.pairset import PairSet
from mispair.data.tokenizers import Tokenizer
from mispair.encoding import image_batches, text_batches
from mispair.engine.assembly import model_pairs
from mispair.engine.trained import TrainedRun
from mispair.errors import DataError
from mispair.nn.allpairs import all_pair_similarities
from mispair.nn.embedding import Fragments, l2_normalize
from mispair.nn.model import RetrievalModel
from mispair.nn.text import text_encoder_class
from mispair.progress import progress_bar


@dataclass
class SearchModel:
    """A trained run's models as search reads them (``run``: the :class:`TrainedRun` opened from
    the checkpoint at ``path``), in eval mode on its device.

    The index vector of an item is the concatenation over the ``n`` models of its L2-normalised
    pooled embedding, divided by ``√n``: the inner product of an image's and a caption's vectors
    is then the models' mean cosine similarity, which is exactly what the cosine head scores (and
    what :func:`~mispair.engine.evaluation.similarity_matrix` averages over co-trained models).
    For other heads it is the first stage that ``rerank`` refines with the head itself.
    """

    run: TrainedRun

    @classmethod
    def load(cls, path: str | Path, device: str = "auto") -> SearchModel:
        return cls(TrainedRun.open(path, device))

    @property
    def path(self) -> Path:
        return self.run.path

    @property
    def models(self) -> list[RetrievalModel]:
        return self.run.models

    @property
    def device(self) -> torch.device:
        return self.run.device

    @property
    def config(self) -> RunConfig:
        return self.run.config

    @property
    def batch_size(self) -> int:
        return self.config.train.eval_batch_size

    @property
    def fingerprint(self) -> str:
        """A digest of the checkpoint's config, tokenizer words, input sizes and every weight."""
        return self.run.fingerprint

    @property
    def dim(self) -> int:
        """The length of an index vector: ``n_models × embed_dim``."""
        return len(self.models) * self.config.model.embed_dim

    @property
    def tokenizer(self) -> Tokenizer:
        return self.run.tokenizer

    def tokens(self, pairs: PairSet) -> list[list[int]]:
        """Token ids of ``pairs``' captions as the checkpoint's run tokenized its own."""
        return self.run.tokens(pairs)

    def check_inputs(self, pairs: PairSet) -> None:
        """A one-line error when the models cannot read ``pairs``' image features."""
        self.run.check_inputs(pairs)

    def prepare_texts(
        self,
        data: DataConfig,
        tokens: list[list[int]],
        progress: bool = False,
        log: Callable[[str], None] = print,
    ) -> None:
        """Let a frozen text encoder (MiniLM) fill its cache of ``tokens`` beside ``data``."""
        self.run.prepare_texts(tokens, data=data, progress=progress, log=log)

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
        with progress_bar(
            total=n * len(self.models), desc=what, unit="item", disable=not progress, leave=False
        ) as bar:
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
        return [
            Fragments.cat(list(image_batches(m, pairs, batch_size=self.batch_size, device=self.device)))
            for m in self.models
        ]

    def encode_texts(self, tokens: list[list[int]]) -> list[Fragments]:
        """Each model's embeddings of captions given as token ids."""
        return [
            Fragments.cat(list(text_batches(m, tokens, batch_size=self.batch_size, device=self.device)))
            for m in self.models
        ]

    def pair_scores(self, images: list[Fragments], texts: list[Fragments]) -> Tensor:
        """``[n_images, n_captions]`` the head's similarities of encoded images and captions (each
        model's, from :meth:`encode_images` / :meth:`encode_texts`), averaged over the models,
        through the all-pairs engine (:func:`~mispair.nn.allpairs.all_pair_similarities`)."""
        sims = [
            all_pair_similarities(m.similarity, i, t, device=self.device)
            for m, i, t in zip(self.models, images, texts)
        ]
        return torch.stack(sims).mean(dim=0)

    def query_tokens(self, text: str) -> list[int]:
        """Token ids of a query text; a text without any token is a one-line error."""
        return self.queries_tokens([text])[0]

    def queries_tokens(self, texts: list[str]) -> list[list[int]]:
        """Token ids of each query text (a caption encoder encodes them in one call); an empty
        text is a one-line error."""
        if not all(text.strip() for text in texts):
            raise DataError("the query text is empty")
        if not getattr(text_encoder_class(self.config.model.text_encoder), "given_vectors", False):
            return [self.tokenizer.encode(text) for text in texts]
        data = self.config.data
        if data.caption_encoder:  # the run's own caption encoder (an open_clip text tower, ...)
            from mispair.data.caption_encoders import caption_vectors
            from mispair.data.text_vectors import vector_tokens

            vectors = caption_vectors(data.caption_encoder, data.caption_encoder_options, list(texts), None)
            return vector_tokens(vectors)
        raise DataError(
            f"{self.path}: trained on caption vectors given with the collection "
            f"({data.text_embedding_column}), so it cannot encode a text query; search it by "
            "picture (--image), or with a run whose captions are text or made by an encoder"
        )
