"""An index's own text encoder: a query's vector without torch, transformers or the checkpoint.

A cold ``mispair search`` spent most of its time opening the checkpoint's models (torch, then
transformers building MiniLM: about 8 s of 10) to encode one short text. When every model of the
run reads a frozen float32 MiniLM (the default run), a query's index vector is a fixed function
of its WordPiece ids: MiniLM's mean token state, each model's projection, L2-normalised,
concatenated and divided by ``√n`` (:class:`~mispair.search.model.SearchModel`). ``mispair index``
exports that function once to ONNX
(:class:`~mispair.search.query_vectors.QueryVectors`, checked against the models' own
vectors within 1e-5) and keeps it in the index with MiniLM's tokenizer file, both under the
manifest's digests like every file of the index; a search then needs ONNX Runtime and the
``tokenizers`` library only (:class:`OnnxQueries`).

A run whose MiniLM computes in bfloat16 (``model.text_precision``, what ``auto`` picks on a CPU
with native bfloat16) gets the same float32 encoder: ONNX Runtime has no bfloat16 matrix product
on the CPU (and rounding each product's inputs to bfloat16 in the graph brings its vectors only
from 4.1e-3 to 2.8e-3 of the run's), so its vectors differ from the run's by bfloat16's rounding.
The check then bounds the distance of the two vectors of each text by :data:`BFLOAT16_TOLERANCE`
(every score against an index's unit vectors moves by at most that much) and asks for the same
ten best images of the index, up to images whose scores differ by less than twice the distance;
the manifest records the run's precision and the largest distance found.

Other runs (a BiGRU, trainable MiniLM layers, a caption encoder), an index built without
``mispair[onnx]`` or before this file existed, and every search that reranks or starts from a
picture encode with the checkpoint, as before.
"""

from __future__ import annotations

import importlib.util
import io
import warnings
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from mispair.errors import DataError

if TYPE_CHECKING:
    from mispair.search.model import SearchModel

MODEL_FILE = "query_encoder.onnx"
TOKENIZER_FILE = "query_tokenizer.json"
KIND = "minilm-onnx"
TOLERANCE = 1e-5
"""Largest difference allowed between the exported encoder's vectors and those of models that read
MiniLM in float32."""
BFLOAT16_TOLERANCE = 0.02
"""Largest Euclidean distance allowed between the exported (float32) encoder's vector of a text and
that of models reading MiniLM in bfloat16 (a cosine of at least 0.9998): a bound on how much any
score of a query moves. Measured: at most 7e-3 (cosine 0.99998)."""
CHECKED_HITS = 10


def can_export() -> bool:
    """ONNX (to export) and ONNX Runtime (to check and run) are installed."""
    return all(importlib.util.find_spec(name) is not None for name in ("onnx", "onnxruntime"))


def run_precision(model: SearchModel) -> str | None:
    """``float32`` or ``bfloat16`` when every model of ``model`` reads a frozen MiniLM computed in
    that precision (the function :class:`QueryVectors` computes, up to bfloat16's rounding), else
    None (nothing to export)."""
    from mispair.nn.text.minilm import MiniLMTextEncoder

    encoders = [m.text_encoder for m in model.models]
    if not all(isinstance(e, MiniLMTextEncoder) and e.frozen for e in encoders):
        return None
    precisions = {str(e.precision) for e in encoders}
    return precisions.pop() if len(precisions) == 1 and precisions <= {"float32", "bfloat16"} else None


def exportable(model: SearchModel) -> bool:
    """Every model of ``model`` reads a frozen MiniLM, all in float32 or all in bfloat16."""
    return run_precision(model) is not None


def export_query_encoder(
    model: SearchModel,
    checks: Sequence[str],
    log: Callable[[str], None] = print,
    images: np.ndarray | None = None,
) -> tuple[dict[str, Any], dict[str, bytes]] | None:
    """The manifest entry and the files of ``model``'s query encoder, or None when the run's text
    encoder is not one it can export (or ONNX is not installed: said in one ``log`` line). The
    exported encoder's vectors of the texts ``checks`` must equal the models' own within
    :data:`TOLERANCE` (a float32 MiniLM), or within :data:`BFLOAT16_TOLERANCE` with the same best
    hits among the index's ``images [n, dim]`` (a bfloat16 one), or it is not kept."""
    precision = run_precision(model)
    if precision is None:
        return None
    if not can_export():
        log("note: pip install 'mispair[onnx]' before `mispair index` and a search starts in ~1 s")
        return None
    from mispair.pretrained import minilm_dir

    tokenizer = (minilm_dir() / "tokenizer.json").read_bytes()
    max_length = model.tokenizer.max_length  # type: ignore[attr-defined]
    files = {MODEL_FILE: _exported(model), TOKENIZER_FILE: tokenizer}
    entry: dict[str, Any] = {"kind": KIND, "max_length": max_length, "dim": model.dim}
    queries = OnnxQueries.from_files(entry, files, "the exported query encoder")
    texts = [text for text in checks if text.strip()][:64] or ["a query"]
    got = queries.vectors(texts)
    expected = model.text_vectors(model.queries_tokens(texts))
    same_ids = queries.tokens(texts) == model.queries_tokens(texts)
    if precision == "float32":
        agrees = same_ids and np.allclose(got, expected, atol=TOLERANCE)
    else:
        distance = float(np.linalg.norm(got - expected, axis=1).max())
        agrees = same_ids and distance <= BFLOAT16_TOLERANCE and same_best(got, expected, images, distance)
        entry.update(  # the encoder computes in float32, the run's MiniLM in bfloat16
            precision="float32",
            run_precision="bfloat16",
            tolerance=BFLOAT16_TOLERANCE,
            largest_distance=round(distance, 6),
        )
    if not agrees:
        log("note: the exported query encoder differs from the checkpoint's; searches load the checkpoint")
        return None
    return entry, files


def same_best(got: np.ndarray, expected: np.ndarray, images: np.ndarray | None, distance: float) -> bool:
    """The :data:`CHECKED_HITS` best of ``images [n, dim]`` for the vectors ``got [q, dim]`` are
    those for ``expected [q, dim]`` (by inner product, in order), except that images whose scores
    for ``expected`` differ by at most ``2 × distance`` may swap (a closer gap cannot be told apart
    at that distance)."""
    if images is None or not len(images):
        return True
    k = min(CHECKED_HITS, len(images))
    for mine, theirs in zip(got @ images.T, expected @ images.T):
        order, wanted = np.argsort(-mine, kind="stable")[:k], np.argsort(-theirs, kind="stable")[:k]
        if np.abs(theirs[order] - theirs[wanted]).max() > 2 * distance:
            return False
    return True


def _exported(model: SearchModel) -> bytes:
    """:class:`QueryVectors` of ``model`` as ONNX bytes (batch and length axes dynamic)."""
    import torch

    from mispair.search.query_vectors import QueryVectors

    module = QueryVectors.of(model).train(False)
    example = torch.ones(2, 8, dtype=torch.long)
    buffer = io.BytesIO()
    with warnings.catch_warnings(), torch.inference_mode(False), torch.no_grad():
        warnings.simplefilter("ignore")  # the exporter's deprecation and tracer notes
        torch.onnx.export(
            module,
            (example, example),
            buffer,  # type: ignore[arg-type]  # a file object is what it writes to
            dynamo=False,  # the TorchScript exporter: needs onnx only, not onnxscript
            input_names=["input_ids", "attention_mask"],
            output_names=["vectors"],
            dynamic_axes={
                "input_ids": {0: "batch", 1: "length"},
                "attention_mask": {0: "batch", 1: "length"},
                "vectors": {0: "batch"},
            },
            opset_version=17,
        )
    return buffer.getvalue()


class OnnxQueries:
    """A query encoder read from an index: texts → WordPiece ids (``tokenizers``) → index vectors
    (ONNX Runtime), as the checkpoint's models encode them (see the module docstring)."""

    def __init__(self, session: Any, tokenizer: Any, dim: int) -> None:
        self.session, self.tokenizer, self.dim = session, tokenizer, dim

    @classmethod
    def from_files(cls, entry: dict[str, Any], files: dict[str, bytes], where: object) -> OnnxQueries:
        """The encoder of the manifest ``entry`` and the index's checked ``files``; a damaged one
        is a one-line error naming ``where``."""
        import onnxruntime
        from tokenizers import Tokenizer

        try:
            tokenizer = Tokenizer.from_str(files[TOKENIZER_FILE].decode("utf-8"))
            tokenizer.enable_truncation(max_length=int(entry["max_length"]))
            tokenizer.no_padding()
            options = onnxruntime.SessionOptions()
            options.log_severity_level = 3  # errors only
            options.inter_op_num_threads = 1
            options.add_session_config_entry("session.disable_prepacking", "1")  # starts ~0.1 s sooner
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")  # no busy waits
            session = onnxruntime.InferenceSession(
                files[MODEL_FILE], options, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:  # any parser's failure is the same: the files are not an encoder
            raise DataError(
                f"{where}: its query encoder cannot be read ({type(exc).__name__}); rebuild the index"
            ) from None
        return cls(session, tokenizer, int(entry["dim"]))

    def tokens(self, texts: Sequence[str]) -> list[list[int]]:
        """WordPiece ids of each text (``[CLS] ... [SEP]``, truncated as the run's tokenizer
        truncates); an empty text is a one-line error."""
        if not all(text.strip() for text in texts):
            raise DataError("the query text is empty")
        return [encoding.ids for encoding in self.tokenizer.encode_batch(list(texts))]

    def vectors(self, texts: Sequence[str]) -> np.ndarray:
        """``[n, dim]`` float32 index vectors of ``texts``."""
        ids = self.tokens(texts)
        width = max(len(row) for row in ids)
        padded = np.zeros((len(ids), width), dtype=np.int64)
        mask = np.zeros((len(ids), width), dtype=np.int64)
        for row, line in enumerate(ids):
            padded[row, : len(line)], mask[row, : len(line)] = line, 1
        out = self.session.run(None, {"input_ids": padded, "attention_mask": mask})[0]
        if out.shape != (len(ids), self.dim):
            raise DataError(
                f"the index's query encoder gives vectors of shape {out.shape}; rebuild the index"
            )
        return np.ascontiguousarray(out, dtype=np.float32)


def usable(entry: Any) -> bool:
    """The manifest's ``query_encoder`` entry is one this mispair runs, with ONNX Runtime and
    ``tokenizers`` installed."""
    return (
        isinstance(entry, dict)
        and entry.get("kind") == KIND
        and isinstance(entry.get("max_length"), int)
        and isinstance(entry.get("dim"), int)
        and all(importlib.util.find_spec(name) is not None for name in ("onnxruntime", "tokenizers"))
    )
