"""Several processes on ``torch.distributed``: the process group, each process's shard, the few
collectives mispair needs, and DDP around a training step.

``torchrun --nproc_per_node N -m mispair train ...`` (or ``mispair train --nproc N``, which meets
them at a private file, with nothing listening beyond loopback) starts one process per rank;
:func:`process_group` joins them (NCCL on CUDA, Gloo on the CPU) and gives each its
:class:`Shard`. Every function here is the identity for ``Shard()`` (rank 0 of 1), so a run
without torchrun computes exactly what it computed before. The data, methods and engine layers all
read a shard, so this module sits beside :mod:`mispair.progress`, below them.

Per rank: the training batches (each rank trains its share of every global batch: in-batch
negatives, L2RM's reconstructed pairs and OT rematch see that share), dropout and augmentation
draws. Global: the gradients (DDP averages them), the division's per-sample losses (whole batches
dealt over the ranks and summed), mixture fits (on rank 0, broadcast), out-of-fold scorers (folds
dealt over the ranks), evaluation (image blocks gathered on rank 0), checkpoints and logs (rank 0).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import torch
import torch.distributed as dist
from torch import Tensor, nn

from mispair.errors import MispairError
from mispair.progress import set_quiet

T = TypeVar("T")

DEFAULT_TIMEOUT = 3600.0
"""Seconds a collective waits for the other processes before the run fails (``--timeout``)."""

STORE_ENV = "MISPAIR_STORE_FILE"
"""The variable through which :func:`launch` hands its processes the file they meet at."""


@dataclass(frozen=True)
class Shard:
    """Process ``rank`` of ``world``: its share of every training batch and of every scored split."""

    rank: int = 0
    world: int = 1

    @property
    def is_main(self) -> bool:
        """Rank 0: the process that fits mixtures, writes checkpoints and logs."""
        return self.rank == 0

    def part(self, batch: np.ndarray) -> np.ndarray:
        """This rank's share of a global batch of indices: every ``world``-th one from ``rank`` (as
        ``DistributedSampler`` deals them). A batch smaller than the world is repeated up to its
        size first, so that no rank is left without pairs."""
        if self.world == 1:
            return batch
        if len(batch) < self.world:
            batch = np.resize(batch, self.world)
        return batch[self.rank :: self.world]

    def block(self, n: int) -> slice:
        """This rank's contiguous block of ``n`` items (the blocks' sizes differ by at most one)."""
        return slice(n * self.rank // self.world, n * (self.rank + 1) // self.world)

    def salt(self, *words: int) -> list[int]:
        """Seed words of this rank's random draws: ``words`` on rank 0 (what a single process
        draws), ``words`` and the rank on the others, so that their draws differ."""
        return list(words) if self.rank == 0 else [*words, self.rank]


SINGLE_PROCESS = Shard()
"""The shard of a run in one process: rank 0 of 1, every batch whole."""


def main_only(shard: Shard, log: Callable[[str], None]) -> Callable[[str], None]:
    """``log`` on rank 0; on the other ranks, a log that drops every message."""
    return log if shard.is_main else _drop


def _drop(message: str) -> None:
    pass


def launched() -> bool:
    """Whether this process is one of several started by torchrun (``WORLD_SIZE`` > 1)."""
    return int(os.environ.get("WORLD_SIZE", "1")) > 1


def is_main_process() -> bool:
    """Whether this process prints a run's results: rank 0, or the only process."""
    return int(os.environ.get("RANK", "0")) == 0


@contextlib.contextmanager
def process_group(
    device: torch.device, timeout: float = DEFAULT_TIMEOUT
) -> Iterator[tuple[Shard, torch.device]]:
    """Join the processes of a torchrun launch for the block; yields ``(shard, device)``.

    Outside torchrun: ``(Shard(), device)``, nothing else. Under it: NCCL when ``device`` is CUDA
    (this process on ``cuda:LOCAL_RANK``), Gloo otherwise; a collective that waits more than
    ``timeout`` seconds fails. A group the caller has initialised already (e.g. to train several
    runs in one launch) is used as it is and left open. Ranks other than 0 show no progress bars
    and no warnings. A collective that fails (another process died, or stalled beyond the
    timeout) ends the block with a one-line :class:`~mispair.errors.MispairError`.
    """
    owned = not (dist.is_available() and dist.is_initialized())
    if owned and not launched():
        yield SINGLE_PROCESS, device
        return
    if device.type == "cuda":
        device = _local_gpu()
    if owned:
        gpu = device.type == "cuda"
        dist.init_process_group(
            "nccl" if gpu else "gloo",
            timeout=timedelta(seconds=timeout),
            device_id=device if gpu else None,
            **_meeting_point(),
        )
    shard = Shard(dist.get_rank(), dist.get_world_size())
    if not shard.is_main:
        set_quiet(True)
    try:
        with warnings.catch_warnings():
            if not shard.is_main:
                warnings.simplefilter("ignore")
            yield shard, device
    except RuntimeError as exc:
        if not _collective_failure(exc):
            raise
        raise MispairError(
            f"process {shard.rank} of {shard.world} lost the others ({_cause(exc)}): a "
            "process died, or waited longer than the timeout (--timeout); rerun the same "
            "command to resume from the last checkpoint"
        ) from None
    finally:
        if owned:
            dist.destroy_process_group()


def _meeting_point() -> dict[str, Any]:
    """How the processes find each other: the file :func:`launch` named (nothing listening on the
    network), else torchrun's environment (``MASTER_ADDR`` and ``MASTER_PORT``)."""
    store = os.environ.get(STORE_ENV)
    if not store:
        return {}
    return {
        "init_method": Path(store).as_uri(),
        "rank": int(os.environ["RANK"]),
        "world_size": int(os.environ["WORLD_SIZE"]),
    }


def _local_gpu() -> torch.device:
    local = int(os.environ.get("LOCAL_RANK", "0"))
    if local >= torch.cuda.device_count():
        count = torch.cuda.device_count()
        raise MispairError(
            f"train.device: process {local} on this machine needs cuda:{local}, but there are "
            f"{count} GPUs (start at most one process per GPU)"
        )
    torch.cuda.set_device(local)
    return torch.device("cuda", local)


def _cause(exc: RuntimeError) -> str:
    """The first sentence of a backend's error, without its source location."""
    first = re.sub(r"^\[[^\]]*\]\s*", "", str(exc).strip().splitlines()[0])
    return first.split(". ")[0].rstrip(".")


def _collective_failure(exc: RuntimeError) -> bool:
    text = str(exc).lower()
    return isinstance(exc, dist.DistError) or any(
        word in text for word in ("gloo", "nccl", "connection closed", "connection reset", "timed out")
    )


def _comm_device() -> torch.device:
    """Where a collective's tensors must live: the GPU for NCCL, the CPU for Gloo."""
    if dist.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


# ------------------------------------------------------------------------------- collectives
def barrier(shard: Shard) -> None:
    """Wait for every rank."""
    if shard.world > 1:
        dist.barrier()


def sum_over(shard: Shard, values: np.ndarray) -> np.ndarray:
    """The element-wise sum of ``values`` over the ranks (each rank fills its own entries and
    leaves zeros elsewhere, so the sum is exact)."""
    if shard.world == 1:
        return values
    tensor = torch.from_numpy(np.ascontiguousarray(values)).to(_comm_device())
    dist.all_reduce(tensor)
    return tensor.cpu().numpy()


def broadcast(shard: Shard, value: T) -> T:
    """Rank 0's ``value`` (any picklable object) on every rank."""
    if shard.world == 1:
        return value
    box = [value if shard.is_main else None]
    dist.broadcast_object_list(box, src=0, device=_comm_device())
    return box[0]


def from_main(shard: Shard, compute: Callable[[], T]) -> T:
    """``compute()`` run once, on rank 0, and its result on every rank; a
    :class:`~mispair.errors.MispairError` it raises is raised on every rank."""
    if shard.world == 1:
        return compute()
    result, error = None, None
    if shard.is_main:
        try:
            result = compute()
        except MispairError as exc:
            error = exc
    result, error = broadcast(shard, (result, error))
    if error is not None:
        raise error
    return result


def mean_over(shard: Shard, values: dict[str, float]) -> dict[str, float]:
    """Each named value averaged over the ranks that have it (e.g. an epoch's loss terms)."""
    if shard.world == 1:
        return values
    every: list[dict[str, float]] = [{} for _ in range(shard.world)]
    dist.all_gather_object(every, values)
    names = dict.fromkeys(name for ranks in every for name in ranks)
    return {name: float(np.mean([r[name] for r in every if name in r])) for name in names}


def gather_rows(shard: Shard, rows: Tensor, total: int) -> Tensor | None:
    """``[total, ...]`` on rank 0: every rank's rows ``shard.block(total)`` in order; None on the
    other ranks. ``rows`` is this rank's block (returned as it is in a single process)."""
    if shard.world == 1:
        return rows
    sizes = [len(range(total)[Shard(r, shard.world).block(total)]) for r in range(shard.world)]
    padded = rows.new_zeros((max(sizes), *rows.shape[1:]))
    padded[: len(rows)] = rows
    padded = padded.to(_comm_device())
    parts = [torch.empty_like(padded) for _ in sizes] if shard.is_main else None
    dist.gather(padded, parts, dst=0)
    return None if parts is None else torch.cat([p[:n] for p, n in zip(parts, sizes)]).to(rows.device)


@contextlib.contextmanager
def main_first(shard: Shard) -> Iterator[None]:
    """Rank 0 runs the block first, the others after it (e.g. rank 0 fills a cache the others read)."""
    if not shard.is_main:
        barrier(shard)
    yield
    if shard.is_main:
        barrier(shard)


def sync_buffers(shard: Shard, modules: Iterable[nn.Module]) -> None:
    """Rank 0's buffers (e.g. batch-norm statistics, which each rank updates on its own share of
    the batches) copied to every rank, so that every rank evaluates the model rank 0 saves."""
    if shard.world == 1:
        return
    for module in modules:
        for buffer in module.buffers():
            dist.broadcast(buffer, src=0)


# ------------------------------------------------------------------------------- DDP
class _Step(nn.Module):
    """What DDP wraps: a recipe's trained parameters (registered here too, not copied) and a
    forward that runs the step computation it is given."""

    def __init__(self, parameters: list[nn.Parameter]) -> None:
        super().__init__()
        self.trained = nn.ParameterList(parameters)

    def forward(self, compute: Callable[..., T], *args: Any) -> T:
        return compute(*args)


def _call(compute: Callable[..., T], *args: Any) -> T:
    return compute(*args)


def replicated_step(shard: Shard, parameters: Iterable[nn.Parameter]) -> Callable[..., Any]:
    """``run(compute, *args) -> compute(*args)``; in a multi-process run, inside the forward of a
    ``DistributedDataParallel`` over ``parameters``, so that the backward of what ``compute``
    returns averages their gradients over the ranks.

    One DDP covers every trained part of a recipe (both co-trained models, PC²'s classifiers,
    L2RM's cost function): a step that uses only some of them (co-training updates one model,
    L2RM's cost update only the cost) leaves the others' gradients untouched
    (``find_unused_parameters``), exactly as in a single process. Building it copies rank 0's
    parameters to every rank.
    """
    if shard.world == 1:
        return _call
    unique = list({id(p): p for p in parameters if p.requires_grad}.values())
    return nn.parallel.DistributedDataParallel(_Step(unique), find_unused_parameters=True)


# ------------------------------------------------------------------------------- launcher
def launch(nproc: int, args: list[str]) -> None:
    """Run ``python -m mispair ARGS`` in ``nproc`` processes on this machine (one CPU thread per
    process unless ``OMP_NUM_THREADS`` says otherwise). When one fails, the others are stopped and
    this raises a one-line :class:`~mispair.errors.MispairError` naming it.

    Nothing listens beyond loopback: the processes meet at a file in a private temporary folder
    (torch's TCP store, which torchrun's rendezvous uses, binds every interface whatever host it is
    given), and Gloo and NCCL connect over the loopback interface only."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    # DDP's C++ warning that find_unused_parameters may be off (it may not: co-training uses one
    # model per step), printed once per process, is hidden with the other C++ warnings
    os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")
    with tempfile.TemporaryDirectory(prefix="mispair-processes-") as folder:  # mode 0700
        store = Path(folder) / "store"
        command = [sys.executable, "-u", "-m", "mispair", *args]
        children = [subprocess.Popen(command, env=_process_env(rank, nproc, store)) for rank in range(nproc)]
        try:
            failed = _first_failure(children)
        finally:
            _stop(children)
    if failed is not None:
        rank, code = failed
        how = f"was killed by {_signal_name(-code)}" if code < 0 else f"exited with status {code}"
        raise MispairError(
            f"process {rank} of {nproc} {how}, which ended the run; rerun the same command "
            "to resume from the last checkpoint"
        )


def _process_env(rank: int, world: int, store: Path) -> dict[str, str]:
    """Process ``rank``'s environment: torchrun's variables, the store file, loopback sockets."""
    loopback = _loopback_interface()
    return {
        **os.environ,
        "RANK": str(rank),
        "LOCAL_RANK": str(rank),
        "GROUP_RANK": "0",
        "WORLD_SIZE": str(world),
        "LOCAL_WORLD_SIZE": str(world),
        STORE_ENV: str(store),
        "GLOO_SOCKET_IFNAME": loopback,
        "NCCL_SOCKET_IFNAME": loopback,
    }


def _loopback_interface() -> str:
    """The name of this machine's loopback interface (``lo`` on Linux, ``lo0`` on macOS)."""
    names = [name for _, name in socket.if_nameindex() if name.startswith("lo")]
    return min(names, key=len) if names else "lo"


def _first_failure(children: list[subprocess.Popen[bytes]]) -> tuple[int, int] | None:
    """Wait until every process has ended well (None) or one has failed: its ``(rank, status)``."""
    while True:
        codes = [child.poll() for child in children]
        for rank, code in enumerate(codes):
            if code not in (None, 0):
                return rank, code
        if all(code == 0 for code in codes):
            return None
        time.sleep(0.1)


def _stop(children: list[subprocess.Popen[bytes]], grace: float = 10.0) -> None:
    """End the processes still running: asked first, killed after ``grace`` seconds."""
    for child in children:
        if child.poll() is None:
            child.terminate()
    for child in children:
        try:
            child.wait(grace)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"
