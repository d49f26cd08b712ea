"""Caption tokenizers and their registry: how a text encoder's captions become token ids.

A text encoder names the tokenizer it reads (``tokenizer`` of its class in
:mod:`mispair.nn.text`); :func:`create_tokenizer` builds it for a run and
:func:`restore_tokenizer` rebuilds it from the words a checkpoint keeps. Registered here:

- ``vocabulary``: NCR's word vocabulary (:class:`~mispair.data.vocab.Vocabulary`), read from
  ``data.vocab`` or built from the train + dev captions (words seen ``data.min_word_count`` times);
- ``minilm``: all-MiniLM-L6-v2's WordPiece (:class:`MiniLMTokenizer`), nothing to keep;
- ``precomputed``: none: the captions come as vectors (:mod:`mispair.data.text_vectors`), and
  asking for this tokenizer means they did not.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from mispair.config import DataConfig
from mispair.data.vocab import Vocabulary
from mispair.errors import ConfigError
from mispair.pretrained import MINILM_INSTALL_HINT, minilm_dir
from mispair.registry import Registry


class Tokenizer(Protocol):
    """Maps a caption to token ids (0 = padding)."""

    def encode(self, caption: str) -> list[int]: ...

    def __len__(self) -> int: ...


class TokenizerKind(Protocol):
    """A registered tokenizer: how to build one for a run and restore it from a checkpoint."""

    def build(self, data: DataConfig, captions: Sequence[str]) -> Tokenizer: ...

    def restore(self, words: list[str]) -> Tokenizer: ...


TOKENIZERS: Registry[TokenizerKind] = Registry("tokenizer", "tokenizer")
register_tokenizer = TOKENIZERS.register


def create_tokenizer(name: str, data: DataConfig, captions: Sequence[str]) -> Tokenizer:
    """The tokenizer ``name`` for a run whose training (and dev) captions are ``captions``."""
    return TOKENIZERS.get(name).build(data, captions)


def restore_tokenizer(name: str, words: list[str]) -> Tokenizer:
    """Tokenizer ``name`` as a checkpoint recorded it (``words``: its :func:`tokenizer_words`)."""
    return TOKENIZERS.get(name).restore(words)


def tokenizer_words(tokenizer: Tokenizer) -> list[str]:
    """What a checkpoint keeps to restore ``tokenizer``: a vocabulary's words, else nothing."""
    return tokenizer.words if isinstance(tokenizer, Vocabulary) else []


@register_tokenizer("vocabulary")
class _VocabularyKind:
    @classmethod
    def build(cls, data: DataConfig, captions: Sequence[str]) -> Tokenizer:
        if data.vocab:
            return Vocabulary.load(data.vocab)
        return Vocabulary.build(captions, data.min_word_count)

    @classmethod
    def restore(cls, words: list[str]) -> Tokenizer:
        return Vocabulary(words[4:])  # the first four are the special tokens


@register_tokenizer("minilm")
class MiniLMTokenizer:
    """WordPiece ids of the MiniLM tokenizer (``[CLS] ... [SEP]``, pad id 0, at most
    ``max_length`` ids), with :class:`~mispair.data.vocab.Vocabulary`'s interface."""

    def __init__(self, max_length: int = 64) -> None:
        try:
            from transformers import AutoTokenizer
        except ImportError:
            raise ConfigError(MINILM_INSTALL_HINT) from None
        self._tokenizer = AutoTokenizer.from_pretrained(str(minilm_dir()))
        self.max_length = max_length

    def __len__(self) -> int:
        return len(self._tokenizer)

    def encode(self, caption: str) -> list[int]:
        return self._tokenizer(caption, truncation=True, max_length=self.max_length)["input_ids"]

    def encode_many(self, captions: Sequence[str], chunk: int = 4096) -> list[list[int]]:
        """:meth:`encode` of every caption, ``chunk`` at a time through the fast tokenizer's
        batch call (several times faster than one call per caption)."""
        ids: list[list[int]] = []
        one: dict[int, int] = {}
        for start in range(0, len(captions), chunk):
            part = list(captions[start : start + chunk])
            ids += shared_ids(
                self._tokenizer(part, truncation=True, max_length=self.max_length)["input_ids"], one
            )
        return ids

    @classmethod
    def build(cls, data: DataConfig, captions: Sequence[str]) -> Tokenizer:
        return cls()

    @classmethod
    def restore(cls, words: list[str]) -> Tokenizer:
        return cls()


def shared_ids(token_lists: list[list[int]], one: dict[int, int] | None = None) -> list[list[int]]:
    """``token_lists`` with every id one shared object per value (``one``: the objects so far,
    kept across calls). A tokenizer returns a new int object per id (28 bytes, beside the list's
    8-byte slot): a million 13-token captions held about 0.36 GB of them."""
    one = {} if one is None else one
    return [[one.setdefault(i, i) for i in ids] for ids in token_lists]


@register_tokenizer("precomputed")
class _PrecomputedKind:
    """Captions given as vectors are never tokenized: being asked to is a one-line error."""

    MESSAGE = (
        "model.text_encoder=precomputed reads each caption's own vector, and this collection gives "
        "none: name its text-embedding column (--text-embedding-column, data.text_embedding_column)"
    )

    @classmethod
    def build(cls, data: DataConfig, captions: Sequence[str]) -> Tokenizer:
        raise ConfigError(cls.MESSAGE)

    @classmethod
    def restore(cls, words: list[str]) -> Tokenizer:
        raise ConfigError(cls.MESSAGE)
