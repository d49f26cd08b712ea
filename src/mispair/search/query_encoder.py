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

Other runs (a BiGRU, trainable MiniLM layers, MiniLM in bfloat16, a caption encoder), an index
built without ``mispair[onnx]`` or before this file existed, and every search that reranks or
starts from a picture encode with the checkpoint, as before.
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
"""Largest difference allowed between the exported encoder's vectors and the models' own."""


def can_export() -> bool:
    """ONNX (to export) and ONNX Runtime (to check and run) are installed."""
    return all(importlib.util.find_spec(name) is not None for name in ("onnx", "onnxruntime"))


def exportable(model: SearchModel) -> bool:
    """Every model of ``model`` reads a frozen float32 MiniLM (the function :class:`QueryVectors`
    computes)."""
    from mispair.nn.text.minilm import MiniLMTextEncoder

    encoders = [m.text_encoder for m in model.models]
    return all(isinstance(e, MiniLMTextEncoder) and e.frozen and e.precision == "float32" for e in encoders)


def export_query_encoder(
    model: SearchModel, checks: Sequence[str], log: Callable[[str], None] = print
) -> tuple[dict[str, Any], dict[str, bytes]] | None:
    """The manifest entry and the files of ``model``'s query encoder, or None when the run's text
    encoder is not one it can export (or ONNX is not installed: said in one ``log`` line). The
    exported encoder's vectors of the texts ``checks`` must equal the models' own within
    :data:`TOLERANCE`, or it is not kept."""
    if not exportable(model):
        return None
    if not can_export():
        log("note: pip install 'mispair[onnx]' before `mispair index` and a search starts in ~1 s")
        return None
    from mispair.pretrained import minilm_dir

    tokenizer = (minilm_dir() / "tokenizer.json").read_bytes()
    max_length = model.tokenizer.max_length  # type: ignore[attr-defined]
    files = {MODEL_FILE: _exported(model), TOKENIZER_FILE: tokenizer}
    entry = {"kind": KIND, "max_length": max_length, "dim": model.dim}
    queries = OnnxQueries.from_files(entry, files, "the exported query encoder")
    texts = [text for text in checks if text.strip()][:64] or ["a query"]
    got = queries.vectors(texts)
    expected = model.text_vectors(model.queries_tokens(texts))
    if queries.tokens(texts) != model.queries_tokens(texts) or not np.allclose(got, expected, atol=TOLERANCE):
        log("note: the exported query encoder differs from the checkpoint's; searches load the checkpoint")
        return None
    return entry, files


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
