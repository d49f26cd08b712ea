"""Frozen pretrained encoders run by ONNX Runtime (``data.encoder_runtime: onnx``; ``auto``: for
EfficientNet-Lite0 on a CPU, :func:`mispair.data.features.auto_runtime`), optional.

``pip install 'mispair[onnx]'``. A module is exported once with :func:`torch.onnx.export` from its
local PyTorch weights (the batch and sequence axes left dynamic) into the folder it is given (runs
give :func:`mispair.data.cache_folder.onnx_folder`, which only this user may write), the file
named by a digest of the weights and written atomically: later runs load it, other weights are
another file. ONNX Runtime runs it on the CPU with as many threads as torch is set to use.

In float32 its outputs are PyTorch's up to rounding (1 − cosine below 1e-10 for MiniLM's token
states and EfficientNet-Lite0's grids, ``benchmarks/results/bench_features.md``), so a feature
cache does not tell the two runtimes apart. Example::

    encoder = OnnxModule.of(module, (example,), signature, "my-encoder", onnx_folder())
    features = encoder(pixels)  # a Tensor, as module(pixels) gives
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import io
import re
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from mispair.atomic import atomic_write, ensure_directory
from mispair.errors import ConfigError, DataError

RUNTIMES = ("auto", "torch", "onnx")
INSTALL_HINT = "ONNX Runtime is not installed: pip install 'mispair[onnx]'"
EXPORT_VERSION = 1  # a change in how modules are exported makes new files
OPSET = 17


def check_runtime(runtime: str, key: str = "data.encoder_runtime") -> str:
    """``runtime`` when it is one of :data:`RUNTIMES`, else a one-line error (ONNX Runtime itself
    is imported when a model is first run: :func:`require_runtime` checks it beforehand)."""
    if runtime not in RUNTIMES:
        raise ConfigError(f"{key}: one of {', '.join(RUNTIMES)}, got {runtime!r}")
    return runtime


def installed() -> bool:
    """Whether ONNX Runtime and ONNX (its exporter's) are installed, without importing them."""
    return all(importlib.util.find_spec(name) is not None for name in ("onnxruntime", "onnx"))


def require_runtime(runtime: str, key: str = "data.encoder_runtime") -> str:
    """:func:`check_runtime`, and for ``onnx`` that ONNX Runtime is installed (a one-line error
    saying how to install it): what a run checks before it writes anything."""
    if check_runtime(runtime, key) == "onnx" and importlib.util.find_spec("onnxruntime") is None:
        raise ConfigError(f"{key}=onnx: {INSTALL_HINT}")
    return runtime


def weights_digest(module: nn.Module) -> str:
    """A digest of every tensor of ``module``'s state dict: its name, dtype, shape and bytes."""
    digest = hashlib.blake2b(f"export-v{EXPORT_VERSION}-opset{OPSET}".encode(), digest_size=12)
    for name, tensor in module.state_dict().items():
        flat = tensor.detach().to("cpu").contiguous().reshape(-1)
        digest.update(f"{name}:{flat.dtype}:{tuple(tensor.shape)}".encode())
        digest.update(flat.view(torch.uint8).numpy())
    return digest.hexdigest()


@dataclass(frozen=True)
class Signature:
    """What an exported module takes and gives: input names in the order of ``forward``, the
    output's name, and the dynamic axes of each (``{"pixels": {0: "batch"}}``)."""

    inputs: tuple[str, ...]
    output: str
    dynamic_axes: dict[str, dict[int, str]]


def exported(
    module: nn.Module,
    example: tuple[Tensor, ...],
    signature: Signature,
    name: str,
    folder: Path,
) -> Path:
    """The ONNX file of ``module`` (eval mode) in ``folder``:
    ``{name}-{weights digest}.onnx``, exported from ``module(*example)`` when not there yet.

    Raises:
        ConfigError: the module cannot be exported (the message names it).
        DataError: the folder cannot be written.
    """
    path = export_path(module, name, folder)
    folder = path.parent
    if path.is_file():
        return path
    model = _export(module.train(False), example, signature, name)
    try:
        ensure_directory(folder, "ONNX model cache")
        atomic_write(path, lambda handle: handle.write(model))
    except DataError as exc:
        raise DataError(f"{exc}; set MISPAIR_CACHE to a writable folder") from None
    return path


def export_path(module: nn.Module, name: str, folder: Path) -> Path:
    """Where :func:`exported` keeps ``module``'s ONNX file in ``folder`` (it may not be there yet)."""
    return Path(folder) / f"{re.sub(r'[^A-Za-z0-9._-]', '_', name)}-{weights_digest(module)}.onnx"


def _export(module: nn.Module, example: tuple[Tensor, ...], signature: Signature, name: str) -> bytes:
    """``module`` as an ONNX model (bytes), traced on ``example``."""
    buffer = io.BytesIO()
    try:
        with warnings.catch_warnings(), torch.inference_mode(False), torch.no_grad():
            warnings.simplefilter("ignore")  # the exporter's deprecation and tracer notes
            torch.onnx.export(
                module,
                example,
                buffer,
                dynamo=False,  # the TorchScript exporter: needs onnx only, not onnxscript
                input_names=list(signature.inputs),
                output_names=[signature.output],
                dynamic_axes=signature.dynamic_axes,
                opset_version=OPSET,
            )
    except Exception as exc:  # any failure of the tracer is the same: this model does not export
        first = (str(exc).strip().splitlines() or [""])[0][:200]
        raise ConfigError(
            f"data.encoder_runtime=onnx: {name} cannot be exported to ONNX ({type(exc).__name__}: "
            f"{first}); use data.encoder_runtime=torch"
        ) from None
    return buffer.getvalue()


class OnnxModule:
    """An exported module run by ONNX Runtime on the CPU: ``module(*tensors) -> Tensor``, as the
    PyTorch module it came from (inputs in the order of :attr:`Signature.inputs`, the output on
    the first input's device)."""

    def __init__(self, path: Path, threads: int | None = None) -> None:
        ort = onnxruntime()
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads or torch.get_num_threads()
        options.inter_op_num_threads = 1
        options.log_severity_level = 3  # errors only
        # threads sleep between runs instead of spinning: the pictures' loader and writer threads
        # need the cores then (1,500 pictures on 2 cores: 69.4 against 63.7 a second, medians of 5
        # interleaved pairs, each pair faster; the same arithmetic)
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.path = Path(path)
        self.session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        self.inputs = [node.name for node in self.session.get_inputs()]

    @classmethod
    def of(
        cls,
        module: nn.Module,
        example: tuple[Tensor, ...],
        signature: Signature,
        name: str,
        folder: Path,
    ) -> OnnxModule:
        """``module`` run by ONNX Runtime: exported once into ``folder`` (:func:`exported`), then
        loaded; a missing ONNX Runtime is a one-line error before anything is exported. The file
        found there is run as it is: give a folder only this user may write
        (:func:`mispair.data.cache_folder.onnx_folder`)."""
        onnxruntime()
        return cls(exported(module, example, signature, name, folder))

    def __call__(self, *tensors: Tensor) -> Tensor:
        feeds = {name: t.detach().to("cpu").numpy() for name, t in zip(self.inputs, tensors)}
        return torch.from_numpy(self.session.run(None, feeds)[0]).to(tensors[0].device)


def onnxruntime() -> Any:
    """``import onnxruntime``, or a one-line error saying how to install it."""
    try:
        return importlib.import_module("onnxruntime")
    except ImportError:
        raise ConfigError(INSTALL_HINT) from None
