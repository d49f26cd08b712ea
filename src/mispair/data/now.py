"""The Noise of Web (NoW) format of PC² (Duan et al., ACM MM 2024, §3): pre-tokenized captions.

NoW (98,000 train / 1,000 dev / 1,000 test web-page screenshots with their meta-descriptions, ~70%
naturally mismatched) is published as features and token ids only. A split directory (published
as ``h5100k_precomp/``; the reference code calls the dataset ``now100k_precomp``) holds, per split:

- ``{split}_ims.npy``: float ``[n_images, 36, 768]`` APT region features;
- ``{split}_caps_{tokenizer}.txt``: one caption per image, in image order, as comma-separated token
  ids, for each tokenizer ``bpe`` (vocabulary of 10,000), ``bert`` (32,702) and ``jieba`` (56,271);
- ``{split}_ids.txt``: the image's index in the original 500K collection, one per line.

The vocabularies ``now100k_precomp_vocab_{tokenizer}.json`` (NCR layout: ``word2idx``,
``idx2word``, ``idx`` = vocabulary size) sit in a ``vocab/`` directory beside the split directory
in the published archive; :func:`find_vocab` also looks in the split directory itself.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

from mispair.data.pairset import PairSet
from mispair.data.precomp import load_feature_array, read_text_lines, split_features_path
from mispair.data.text_bounds import cut_long_texts
from mispair.errors import ConfigError, DataError
from mispair.limits import limit, raise_hint

TOKENIZERS = ("bpe", "bert", "jieba")
DATASET_NAME = "now100k_precomp"


def vocab_filename(tokenizer: str) -> str:
    """``now100k_precomp_vocab_{tokenizer}.json``, the name the reference code loads."""
    return f"{DATASET_NAME}_vocab_{tokenizer}.json"


def find_vocab(root: str | Path, tokenizer: str) -> Path:
    """The vocabulary file of ``tokenizer`` for the split directory ``root``.

    Looked up, in order, in ``root/``, ``root/vocab/``, ``root/../vocab/`` (the published archive)
    and ``root/../``.
    """
    root = Path(root)
    name = vocab_filename(tokenizer)
    folders = [root, root / "vocab", root.parent / "vocab", root.parent]
    for folder in folders:
        if (folder / name).is_file():
            return folder / name
    looked = ", ".join(map(str, folders))
    raise DataError(f"{root}: vocabulary {name} not found (looked in {looked})")


def read_vocab(path: str | Path) -> tuple[int, dict[int, str], dict[str, int]]:
    """``(size, idx2word, word2idx)`` of an NCR-layout vocabulary; the size is its ``idx``."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        size = int(data["idx"])
        idx2word = {int(i): str(w) for i, w in data.get("idx2word", {}).items()}
        word2idx = {str(w): int(i) for w, i in data.get("word2idx", {}).items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
        raise DataError(f"{path}: not an NCR vocabulary file (idx, idx2word): {exc}") from None
    if size <= 0:
        raise DataError(f"{path}: vocabulary size 'idx' must be positive, got {size}")
    return size, idx2word, word2idx


def parse_token_line(line: str, vocab_size: int, where: str) -> list[int]:
    """The ids of one caption line ``"12,5,873"`` (empty fields skipped, as the reference does).

    Raises:
        DataError: a field that is not an integer, or an id outside ``[0, vocab_size)``.
    """
    ids = []
    for field in line.split(","):
        field = field.strip()
        if not field:
            continue
        try:
            token = int(field)
        except ValueError:
            raise DataError(f"{where}: token {field!r} is not an integer id") from None
        if not 0 <= token < vocab_size:
            raise DataError(f"{where}: token id {token} outside the vocabulary [0, {vocab_size})")
        ids.append(token)
    return ids


def decode(ids: list[int], idx2word: dict[int, str]) -> str:
    """Space-joined words of ``ids`` (WordPiece ``##`` continuations glued to the previous word)."""
    words: list[str] = []
    for token in ids:
        word = idx2word.get(token, str(token))
        if word.startswith("##") and words:
            words[-1] += word[2:]
        else:
            words.append(word)
    return " ".join(words)


def read_now(
    root: str | Path, split: str, tokenizer: str = "bpe", *, vocab: str | Path | None = None
) -> PairSet:
    """Read one NoW split (see the module docstring) with the captions of ``tokenizer``.

    Each caption becomes ``[<start>, ids..., <end>]`` when the vocabulary has those two words
    (the reference's ``get_dataset``), else just its ids; ``captions`` holds the decoded words
    when the vocabulary has ``idx2word``, else the id line. The vocabulary size (its ``idx``) is
    kept as ``pairs.vocab_size`` for building the word embedding.

    Args:
        root: the split directory (``h5100k_precomp`` / ``now100k_precomp``).
        split: ``train``, ``dev`` or ``test``.
        tokenizer: ``bpe``, ``bert`` or ``jieba`` (the paper's Table 2 uses ``jieba``).
        vocab: the vocabulary file (default: :func:`find_vocab`).

    Raises:
        DataError: missing or malformed files (one line, naming the file and line).

    Example:
        >>> pairs = read_now("data/NoW/h5100k_precomp", "test", "jieba")  # doctest: +SKIP
        >>> pairs.n_images, pairs.captions_per_image, pairs.vocab_size  # doctest: +SKIP
        (1000, 1, 56271)
    """
    if tokenizer not in TOKENIZERS:
        raise ConfigError(f"NoW tokenizer: one of {', '.join(TOKENIZERS)}, got {tokenizer!r}")
    root = Path(root)
    ims_path = split_features_path(root, split)
    caps_path = root / f"{split}_caps_{tokenizer}.txt"
    if not caps_path.is_file():
        present = sorted(p.name for p in root.glob(f"{split}_caps_*.txt")) or ["none"]
        raise DataError(
            f"{caps_path}: no {tokenizer} captions for split {split!r} (present: {', '.join(present)})"
        )
    vocab_path = Path(vocab) if vocab else find_vocab(root, tokenizer)
    size, idx2word, word2idx = read_vocab(vocab_path)
    images = load_feature_array(ims_path, check_finite=True)
    lines = read_text_lines(caps_path)
    if len(lines) != images.shape[0]:
        raise DataError(
            f"{caps_path}: {len(lines)} captions for {images.shape[0]} images in "
            f"{ims_path.name} (NoW has one caption per image)"
        )
    ids = _cut_tokens(
        [parse_token_line(line, size, f"{caps_path}:{n}") for n, line in enumerate(lines, 1)], caps_path
    )
    wrap = [word2idx[w] for w in ("<start>", "<end>") if w in word2idx and word2idx[w] < size]
    tokens = [[wrap[0], *t, wrap[1]] for t in ids] if len(wrap) == 2 else ids
    captions = [decode(t, idx2word) for t in ids] if idx2word else [line.strip() for line in lines]
    captions = cut_long_texts(captions, caps_path)
    pairs = PairSet(
        images=images,
        captions=captions,
        image_of_caption=list(range(len(lines))),
        name=f"{root.name}/{split}",
        image_ids=_read_ids(root / f"{split}_ids.txt", images.shape[0]),
        caption_tokens=tokens,
        vocab_size=size,
    )
    return pairs


def _cut_tokens(ids: list[list[int]], where: Path) -> list[list[int]]:
    """Each caption's ids cut to ``MAX_TEXT_TOKENS``, with one warning naming the count."""
    bound = limit("MAX_TEXT_TOKENS")
    long = sum(len(t) > bound for t in ids)
    if long:
        warnings.warn(
            f"{where}: {long} caption(s) longer than {bound} tokens were cut "
            f"({raise_hint('MAX_TEXT_TOKENS')})",
            stacklevel=3,
        )
    return [t[:bound] for t in ids]


def _read_ids(path: Path, n_images: int) -> list[str] | None:
    if not path.is_file():
        return None
    ids = [line.strip() for line in read_text_lines(path)]
    if len(ids) != n_images:
        raise DataError(f"{path}: {len(ids)} ids for {n_images} images")
    return ids
