"""Word tokenizer and the NCR-format vocabulary (``word2idx``, ``idx2word``, ``idx``)."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from mispair.atomic import atomic_text
from mispair.errors import DataError

PAD, START, END, UNK = "<pad>", "<start>", "<end>", "<unk>"
_SPECIALS = (PAD, START, END, UNK)
_WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)*|[^\w\s]", re.UNICODE)


def tokenize(text: str) -> list[str]:
    """Lower-case word tokens: runs of letters/digits (with inner apostrophes) and punctuation.

    Needs no downloaded data (NCR uses NLTK's ``word_tokenize``; this is close for English and
    works for any script).

    >>> tokenize("A dog's ball, on the grass.")
    ['a', "dog's", 'ball', ',', 'on', 'the', 'grass', '.']
    """
    return _WORD.findall(text.lower())


class Vocabulary:
    """Maps words to ids: ``<pad>``=0, ``<start>``=1, ``<end>``=2, ``<unk>``=3, then the words."""

    def __init__(self, words: Iterable[str]) -> None:
        self.words: list[str] = list(_SPECIALS)
        self.word2idx: dict[str, int] = {w: i for i, w in enumerate(self.words)}
        for word in words:
            if word not in self.word2idx:
                self.word2idx[word] = len(self.words)
                self.words.append(word)

    def __len__(self) -> int:
        return len(self.words)

    @classmethod
    def build(cls, captions: Iterable[str], min_count: int = 4) -> Vocabulary:
        """Words occurring at least ``min_count`` times (NCR: 4, over train + dev captions),
        most frequent first (ties alphabetically), so the result is deterministic."""
        counts = Counter(word for caption in captions for word in tokenize(caption))
        kept = [w for w, c in counts.items() if c >= min_count and w not in _SPECIALS]
        return cls(sorted(kept, key=lambda w: (-counts[w], w)))

    def encode(self, caption: str) -> list[int]:
        """``[<start>] + ids + [<end>]``, unknown words as ``<unk>``."""
        unk = self.word2idx[UNK]
        ids = [self.word2idx.get(word, unk) for word in tokenize(caption)]
        return [self.word2idx[START], *ids, self.word2idx[END]]

    def to_json(self) -> dict:
        """The NCR JSON layout."""
        return {
            "word2idx": dict(self.word2idx),
            "idx2word": {str(i): w for i, w in enumerate(self.words)},
            "idx": len(self.words),
        }

    @classmethod
    def from_json(cls, data: dict, source: str = "vocabulary") -> Vocabulary:
        try:
            idx2word = {int(i): w for i, w in data["idx2word"].items()}
            size = int(data["idx"])
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise DataError(f"{source}: not an NCR vocabulary (missing or bad {exc})") from None
        if sorted(idx2word) != list(range(size)):
            raise DataError(f"{source}: idx2word must cover ids 0..{size - 1} exactly")
        words = [idx2word[i] for i in range(size)]
        if len(set(words)) != len(words):
            raise DataError(f"{source}: idx2word lists a word more than once")
        if tuple(words[:4]) != _SPECIALS:
            raise DataError(f"{source}: ids 0-3 must be {', '.join(_SPECIALS)}")
        return cls(words[4:])

    def save(self, path: str | Path) -> None:
        atomic_text(path, json.dumps(self.to_json(), ensure_ascii=False))

    @classmethod
    def load(cls, path: str | Path) -> Vocabulary:
        path = Path(path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise DataError(f"{path}: vocabulary file not found") from None
        except (ValueError, UnicodeDecodeError, RecursionError) as exc:
            raise DataError(f"{path}: not valid JSON ({type(exc).__name__})") from None
        return cls.from_json(data, str(path))
