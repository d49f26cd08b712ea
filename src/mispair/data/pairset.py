"""PairSet: images (as fragment features) and the captions written for them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from mispair.data.mapped import row_blocks, stacked
from mispair.errors import DataError


@dataclass
class PairSet:
    """One split of an image–caption collection.

    Attributes:
        images: ``[n_images, n_fragments, dim]`` float features (regions or grid cells).
        captions: ``n_captions`` caption strings.
        image_of_caption: ``[n_captions]`` int, the image each caption was written for
            (the ground truth; noise injection never changes it, see ``NoiseRecord``).
        name: a label for logs ("f30k_precomp/train").
        image_ids: optional ``n_images`` identifiers (file names, dataset ids).
        image_meta: optional per-image metadata columns, each a list of ``n_images`` values
            (e.g. ``{"category": [...]}`` for Tux Paint).
        caption_tokens: optional pre-tokenized captions (lists of vocabulary ids, NoW format);
            when present they are used instead of tokenizing ``captions``.
        vocab_size: the size of the vocabulary ``caption_tokens`` index into (NoW's ``idx``).
        pair_ids: optional ``n_captions`` stable identifiers of the pairs (an input row, an id
            column's value), kept through every reordering.
        text_features: optional ``[n_captions, D]`` float32 vectors given for the captions (a
            table's text-embedding column), read by the ``precomputed`` text encoder instead of
            the caption text.
        caption_image_names: optional ``n_captions`` names each pair's own row gives its
            picture, where rows holding the same bytes name them apart (the copy of one picture
            in several WebDataset samples, a table's equal image bytes under two paths):
            ``image_ids`` keeps each picture's first name, these keep every row's own, for what
            is shown of the pair (``pairs.csv``, the report, ``apply``). None: the image ids.
    """

    images: np.ndarray
    captions: list[str]
    image_of_caption: np.ndarray
    name: str = ""
    image_ids: list[str] | None = None
    image_meta: dict[str, list] = field(default_factory=dict)
    caption_tokens: list[list[int]] | None = None
    vocab_size: int | None = None
    pair_ids: list[str] | None = None
    text_features: np.ndarray | None = None
    caption_image_names: list[str] | None = None

    def __post_init__(self) -> None:
        self.image_of_caption = np.asarray(self.image_of_caption, dtype=np.int64)
        where = self.name or "PairSet"
        if self.images.ndim != 3:
            raise DataError(
                f"{where}: image features must be [n_images, n_fragments, dim], "
                f"got shape {tuple(self.images.shape)}"
            )
        if len(self.captions) != len(self.image_of_caption):
            raise DataError(
                f"{where}: {len(self.captions)} captions but "
                f"{len(self.image_of_caption)} caption-to-image entries"
            )
        if len(self.image_of_caption) and (
            self.image_of_caption.min() < 0 or self.image_of_caption.max() >= self.n_images
        ):
            raise DataError(f"{where}: a caption points to an image index outside [0, {self.n_images})")
        if self.pair_ids is not None and len(self.pair_ids) != self.n_captions:
            raise DataError(f"{where}: {len(self.pair_ids)} pair ids for {self.n_captions} captions")
        if self.text_features is not None and (
            self.text_features.ndim != 2 or len(self.text_features) != self.n_captions
        ):
            raise DataError(
                f"{where}: caption vectors of shape {tuple(self.text_features.shape)} for "
                f"{self.n_captions} captions (expected [n_captions, dim])"
            )
        if self.caption_image_names is not None and len(self.caption_image_names) != self.n_captions:
            raise DataError(
                f"{where}: {len(self.caption_image_names)} picture names for {self.n_captions} captions"
            )
        if self.image_ids is not None and len(self.image_ids) != self.n_images:
            raise DataError(f"{where}: {len(self.image_ids)} image ids for {self.n_images} images")
        for key, column in self.image_meta.items():
            if len(column) != self.n_images:
                raise DataError(
                    f"{where}: metadata {key!r} has {len(column)} values for {self.n_images} images"
                )

    @property
    def n_images(self) -> int:
        return int(self.images.shape[0])

    @property
    def n_captions(self) -> int:
        return len(self.captions)

    @property
    def feature_dim(self) -> int:
        return int(self.images.shape[2])

    def own_image_names(self) -> list[str] | None:
        """Each caption's own name for its picture (:attr:`caption_image_names`, else its image's
        id), or None without image ids."""
        if self.caption_image_names is not None:
            return self.caption_image_names
        if self.image_ids is None:
            return None
        return [self.image_ids[i] for i in self.image_of_caption]

    @property
    def captions_per_image(self) -> int | None:
        """``c`` when caption ``k`` belongs to image ``k // c`` for every caption, else None.

        This is the layout the evaluation protocol needs (5 for Flickr30K/COCO, 1 for CC152K/NoW).
        """
        if self.n_images == 0 or self.n_captions % self.n_images:
            return None
        per_image = self.n_captions // self.n_images
        expected = np.arange(self.n_captions) // per_image
        return per_image if np.array_equal(expected, self.image_of_caption) else None

    def with_mean_fragment(self, chunk: int | None = None) -> PairSet:
        """The same pairs with each image's fragments replaced by their mean: images
        ``[n_images, 1, dim]`` float32 (what an encoder that projects the mean feature reads;
        computed in blocks of ``chunk`` images, default about 64 MiB, so a memory-mapped array
        is read once and one block of it is resident at a time). Images that are one float32
        fragment each already are their mean: the set is returned as it is (a memory-mapped array
        stays on disk instead of a copy in memory: 0.9 GB for 180,000 features of 1,280)."""
        if self.images.ndim == 3 and self.images.shape[1] == 1 and self.images.dtype == np.float32:
            return self
        pooled = np.empty((self.n_images, 1, self.feature_dim), dtype=np.float32)
        for block, part in row_blocks(self.images, chunk, np.float32):
            pooled[block, 0] = part.mean(axis=1)
        return replace(self, images=pooled)


def concatenate(parts: Sequence[PairSet], name: str = "") -> PairSet:
    """The pairs of ``parts`` as one set: their images one after another, each caption still
    paired with its own image (features of one shape; ids, metadata, tokens and caption vectors
    kept only when every part has them; memory-mapped features stay so, :func:`stacked`)."""
    offsets = np.cumsum([0] + [p.n_images for p in parts])
    ids = [p.image_ids for p in parts]
    tokens = [p.caption_tokens for p in parts]
    pair_ids = [p.pair_ids for p in parts]
    vectors = [p.text_features for p in parts]
    own = [names for p in parts if (names := p.own_image_names()) is not None]
    named_apart = any(p.caption_image_names is not None for p in parts) and len(own) == len(parts)
    return PairSet(
        images=stacked([p.images for p in parts]),
        captions=[c for p in parts for c in p.captions],
        image_of_caption=np.concatenate([p.image_of_caption + o for p, o in zip(parts, offsets)]),
        name=name or "+".join(p.name for p in parts),
        image_ids=None if any(i is None for i in ids) else [i for part in ids for i in part],
        caption_tokens=None if any(t is None for t in tokens) else [t for part in tokens for t in part],
        vocab_size=parts[0].vocab_size,
        pair_ids=None if any(i is None for i in pair_ids) else [i for part in pair_ids for i in part],
        text_features=None if any(v is None for v in vectors) else stacked(vectors),
        caption_image_names=[n for part in own for n in part] if named_apart else None,
    )


def caption_groups(captions: Sequence[str]) -> np.ndarray:
    """``[n_captions]`` int labels, equal for captions with the same normalised text."""
    index: dict[str, int] = {}
    return np.array([index.setdefault(" ".join(c.lower().split()), len(index)) for c in captions])
