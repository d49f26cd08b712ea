"""Training on two CPU processes (Gloo): the tiny run of every recipe, the parts that must be
global (division losses, evaluation), and a run whose second process is killed.

The processes are spawned by :func:`spawn` with the environment torchrun gives its workers; each
writes what it saw to a JSON file that the tests read. One spawned job trains several recipes, so
that process start-up is paid once: the default suite trains the recipes whose distributed paths
differ (co-training with PC²'s classifiers, L2RM's two optimizers and generator steps, out-of-fold
folds dealt over the ranks); ``-m slow`` the others.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
import torch
import torch.distributed as dist

from mispair import distributed
from mispair.cli import main
from mispair.config import ModelConfig
from mispair.data.batching import TrainingPairs, encode_captions
from mispair.data.noise import inject_noise
from mispair.data.synthetic import make_synthetic
from mispair.data.vocab import Vocabulary
from mispair.distributed import Shard
from mispair.engine.evaluation import evaluate_split
from mispair.engine.run import train_run
from mispair.engine.trainer import Trainer
from mispair.errors import MispairError
from mispair.methods.scoring import per_sample_losses
from mispair.nn.assembly import build_model
from tests.engine.tiny_runs import BASE, RECIPES, log_rows, tiny_config

GOLDEN = json.loads(Path(__file__).with_name("single_process_golden.json").read_text(encoding="utf-8"))
TIMEOUT = 60.0  # seconds a process waits for the other before its run fails
FAST = ("pc2", "l2rm", "holdout")
SLOW = tuple(r for r in RECIPES if r not in FAST)
RSUM_TOLERANCE = 0.25
"""How far the test rSum of a two-process run may be from the single-process run with the same
global batch and seed, relative to the latter. The runs differ by design (each process's batch has
half the in-batch negatives; dropout draws differ), and on a three-epoch run of 200 images that
moves the rSum by up to ~15% (measured); 25% still tells a working run from a broken one, whose
rSum falls to chance (~16 of 600)."""


# ------------------------------------------------------------------------------- launching
def spawn(target, world: int, *args, deadline: float = 600.0) -> list[int]:
    """Run ``target(rank, *args)`` in ``world`` fresh processes joined as torchrun joins its
    workers; their exit codes (a process still alive at ``deadline`` seconds is killed)."""
    with socket.socket() as probe:  # a free port for the rendezvous
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    context = multiprocessing.get_context("spawn")
    processes = [
        context.Process(target=_as_rank, args=(target, rank, world, port, *args)) for rank in range(world)
    ]
    with mock.patch.dict(os.environ, TORCH_CPP_LOG_LEVEL="ERROR"):  # as mispair's launcher: no DDP note
        for process in processes:
            process.start()
    stop = time.monotonic() + deadline
    for process in processes:
        process.join(max(0.0, stop - time.monotonic()))
        if process.is_alive():
            process.kill()
            process.join()
    return [process.exitcode for process in processes]


def _as_rank(target, rank: int, world: int, port: int, *args) -> None:
    os.environ.update(
        RANK=str(rank),
        LOCAL_RANK=str(rank),
        WORLD_SIZE=str(world),
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        OMP_NUM_THREADS="1",
    )
    torch.set_num_threads(1)
    target(rank, *args)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # as mispair's torchrun entry ends (mispair/__main__.py): no C++ teardown to abort in


def _one_group(timeout: float = TIMEOUT) -> None:
    """Join the processes once for all the runs of a worker (each run then uses this group)."""
    dist.init_process_group("gloo", timeout=timedelta(seconds=timeout))


def _digest(modules) -> str:
    """A fingerprint of the weights of ``modules``, equal only when every tensor is."""
    digest = hashlib.blake2b(digest_size=16)
    for module in modules:
        for name, tensor in module.state_dict().items():
            digest.update(name.encode() + tensor.detach().cpu().numpy().tobytes())
    return digest.hexdigest()


SEEN: dict = {}
"""What the trainers of this process saw: ``divisions`` and ``weights`` (:func:`_record_training`)."""


def _record_training() -> None:
    """Make every :class:`Trainer` of this process note in :data:`SEEN`, after each epoch, its
    recipe's division (``export_scores``) and, after training, a fingerprint of its weights."""
    train_epoch, fit = Trainer.train_epoch, Trainer.fit

    def recording_epoch(self, epoch):
        values = train_epoch(self, epoch)
        if self.out_dir is not None:  # the run's trainer, not an out-of-fold scorer
            division = {k: np.asarray(v).tolist() for k, v in self.recipe.export_scores().items()}
            SEEN.setdefault("divisions", []).append(division)
        return values

    def recording_fit(self, resume=True):
        result = fit(self, resume)
        SEEN["weights"] = _digest(self.recipe.models)
        return result

    Trainer.train_epoch, Trainer.fit = recording_epoch, recording_fit


# ------------------------------------------------------------------------------- workers
def tiny_runs(rank: int, folder: Path, recipes: tuple[str, ...], kill: bool) -> None:
    """In one process group: :func:`global_parts`, the tiny run of each recipe (its summary,
    divisions, weights and log go to ``rank{rank}.json``) and, with ``kill``, last, the tiny
    ``l2rm`` run again in ``folder/killed`` with process 1 killed (SIGKILL) as its third epoch
    begins (what process 0 was told goes to ``killed.json``)."""
    _one_group()
    try:
        found = {"global": global_parts(Shard(rank, 2))}
        _record_training()
        for recipe in recipes:
            SEEN.clear()
            summary = train_run(
                tiny_config(recipe, folder / recipe), progress=False, log=lambda m: None, timeout=TIMEOUT
            )
            found[recipe] = {"summary": summary.to_dict(), **SEEN}
            if rank == 0:
                found[recipe]["log"] = log_rows(folder / recipe)
        (folder / f"rank{rank}.json").write_text(json.dumps(found), encoding="utf-8")
        if kill:
            killed_at_third_epoch(rank, folder / "killed")
    finally:  # a group left open, broken by the killed process, can abort this one at exit
        dist.destroy_process_group()


def _small_problem():
    pairs = make_synthetic(40, 5, seed=0)
    vocab = Vocabulary.build(pairs.captions, 1)
    noise = inject_noise(40, 5, 0.4, "pmp", seed=0)
    train = TrainingPairs(pairs, encode_captions(pairs, vocab), noise.image_of_caption)
    torch.manual_seed(0)
    small = ModelConfig(embed_dim=32, word_dim=16)
    models = [build_model(small, pairs.feature_dim, len(vocab)) for _ in range(2)]
    return pairs, train, models


def global_parts(shard: Shard) -> dict:
    """The division's per-sample losses and the evaluation, each computed once by the two
    processes together and once by this process alone, from the same models."""
    pairs, train, models = _small_problem()

    def parts(shard: Shard) -> dict:
        losses = per_sample_losses(models, train.sharded(shard), batch_size=16, seed=3)
        metrics = evaluate_split(models, pairs, train.tokens, batch_size=16, shard=shard)
        return {"losses": losses.tolist(), "metrics": metrics}

    return {"together": parts(shard), "alone": parts(Shard())}


def killed_at_third_epoch(rank: int, folder: Path) -> None:
    train_epoch = Trainer.train_epoch

    def dying(self, epoch):
        if rank == 1 and epoch == 2:
            os.kill(os.getpid(), signal.SIGKILL)
        return train_epoch(self, epoch)

    Trainer.train_epoch = dying
    began = time.monotonic()
    try:
        train_run(tiny_config("l2rm", folder), progress=False, log=lambda m: None, timeout=TIMEOUT)
        message = None
    except MispairError as exc:
        message = str(exc)
    told = {"error": message, "seconds": time.monotonic() - began}
    (folder.parent / "killed.json").write_text(json.dumps(told), encoding="utf-8")


def resumed(rank: int, folder: Path) -> None:
    """The tiny ``l2rm`` run in ``folder`` resumed on two processes (``resumed{rank}.json``)."""
    _record_training()
    summary = train_run(tiny_config("l2rm", folder), progress=False, log=lambda m: None, timeout=TIMEOUT)
    (folder.parent / f"resumed{rank}.json").write_text(json.dumps({"summary": summary.to_dict(), **SEEN}))


# ------------------------------------------------------------------------------- tests
def two_processes(folder: Path, recipes: tuple[str, ...], kill: bool = False) -> dict[int, dict]:
    """:func:`tiny_runs` on two processes: what each rank saw."""
    assert spawn(tiny_runs, 2, folder, recipes, kill) == [0, -signal.SIGKILL if kill else 0]
    return {rank: json.loads((folder / f"rank{rank}.json").read_text()) for rank in range(2)}


def check_runs(ranks: dict[int, dict], folder: Path, recipe: str) -> None:
    """Every rank trained on the same division and ends with the same weights and metrics; the
    test rSum is within :data:`RSUM_TOLERANCE` of the single-process run's; rank 0 logged."""
    first, second = ranks[0][recipe], ranks[1][recipe]
    assert first["divisions"] == second["divisions"]
    if recipe in ("ncr", "asl", "pc2", "l2rm", "holdout"):  # a division from the second epoch
        assert len(first["divisions"]) == 3 and all("clean_prob" in d for d in first["divisions"][1:])
    assert first["weights"] == second["weights"]
    assert first["summary"] == second["summary"]  # the metrics rank 0 computed, on every rank
    alone = GOLDEN[recipe]["summary"]["test"]["rsum"]  # this run in one process (same global batch, seed)
    together = first["summary"]["test"]["rsum"]
    assert abs(together - alone) <= RSUM_TOLERANCE * alone, (recipe, together, alone)
    assert [row["epoch"] for row in first["log"]] == [0, 1, 2]
    assert json.loads((folder / recipe / "metrics.json").read_text())["test"]["rsum"] == together


@pytest.fixture(scope="module")
def fast_runs(tmp_path_factory) -> tuple[dict[int, dict], Path]:
    folder = tmp_path_factory.mktemp("ddp")
    return two_processes(folder, FAST, kill=True), folder


@pytest.mark.parametrize("recipe", FAST)
def test_two_processes_share_the_division_and_the_weights_and_reach_the_single_process_metrics(
    fast_runs, recipe
):
    check_runs(*fast_runs, recipe)


@pytest.mark.slow
def test_the_other_recipes_on_two_processes(tmp_path):
    ranks = two_processes(tmp_path, SLOW)
    for recipe in SLOW:
        check_runs(ranks, tmp_path, recipe)


def test_the_division_losses_and_the_evaluation_are_those_of_one_process(fast_runs):
    ranks, _ = fast_runs
    for rank in range(2):
        assert ranks[rank]["global"]["together"] == ranks[rank]["global"]["alone"]


def test_a_killed_process_ends_the_run_and_it_resumes_on_any_number_of_processes(fast_runs):
    ranks, folder = fast_runs
    run = folder / "killed"
    told = json.loads((folder / "killed.json").read_text())
    assert told["error"].startswith("process 0 of 2 lost the others")
    assert "rerun the same command to resume" in told["error"]
    assert told["seconds"] < TIMEOUT  # told at once, not after the timeout
    assert [row["epoch"] for row in log_rows(run)] == [0, 1]
    shutil.copytree(run, folder / "killed_copy")
    # on two processes again: the run the kill interrupted, to the last bit
    assert spawn(resumed, 2, run) == [0, 0]
    uninterrupted = ranks[0]["l2rm"]
    for rank in range(2):
        found = json.loads((folder / f"resumed{rank}.json").read_text())
        assert found["summary"] == uninterrupted["summary"]
        assert found["weights"] == uninterrupted["weights"]
        assert found["divisions"] == uninterrupted["divisions"][2:]
    assert log_rows(run) == uninterrupted["log"]
    # on one process, from the same checkpoint: it continues and finishes
    shutil.rmtree(run)
    (folder / "killed_copy").rename(run)
    train_run(tiny_config("l2rm", run), progress=False, log=lambda m: None)
    log = log_rows(run)
    assert [row["epoch"] for row in log] == [0, 1, 2] and log[:2] == uninterrupted["log"][:2]


def test_a_shard_deals_every_pair_of_a_batch_to_exactly_one_rank():
    batch = np.array([7, 3, 9, 1, 4])
    parts = [Shard(rank, 2).part(batch) for rank in range(2)]
    assert sorted(np.concatenate(parts).tolist()) == sorted(batch.tolist())
    assert [len(p) for p in parts] == [3, 2]
    assert [Shard(rank, 3).part(np.array([5])).tolist() for rank in range(3)] == [[5], [5], [5]]  # padded
    assert Shard().part(batch) is batch
    blocks = [Shard(rank, 3).block(10) for rank in range(3)]
    assert [list(range(10)[b]) for b in blocks] == [[0, 1, 2], [3, 4, 5], [6, 7, 8, 9]]
    assert Shard(1, 2).salt(5, 6) == [5, 6, 1] and Shard().salt(5, 6) == [5, 6]


def test_in_one_process_every_helper_is_the_identity():
    one = Shard()
    values = np.arange(6.0)
    rows = torch.arange(12.0).reshape(4, 3)
    assert distributed.sum_over(one, values) is values
    assert distributed.broadcast(one, values) is values
    assert distributed.from_main(one, lambda: values) is values
    assert distributed.mean_over(one, {"a": 1.5}) == {"a": 1.5}
    assert distributed.gather_rows(one, rows, 4) is rows
    distributed.barrier(one)
    distributed.sync_buffers(one, [torch.nn.BatchNorm1d(3)])
    with distributed.main_first(one):
        pass
    assert distributed.replicated_step(one, [])(lambda a, b: a + b, 2, 3) == 5
    with distributed.process_group(torch.device("cpu")) as (shard, device):  # not under torchrun
        assert shard == one and device == torch.device("cpu") and not dist.is_initialized()


@pytest.mark.slow
def test_mispair_train_nproc_runs_the_command_in_every_process_and_reports_one_that_fails(tmp_path):
    def mispair(*args: str) -> subprocess.CompletedProcess:
        command = [
            sys.executable,
            "-m",
            "mispair",
            "train",
            *BASE,
            *RECIPES["vse"],
            "--nproc",
            "2",
            "--quiet",
            *args,
        ]
        return subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=tmp_path)

    done = mispair("--out", str(tmp_path / "vse"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("test (") == 1  # the results, printed by rank 0 alone
    rsum = json.loads((tmp_path / "vse" / "metrics.json").read_text())["test"]["rsum"]
    alone = GOLDEN["vse"]["summary"]["test"]["rsum"]
    assert abs(rsum - alone) <= RSUM_TOLERANCE * alone
    failed = mispair("--out", str(tmp_path / "none"), "data.source=precomp", f"data.root={tmp_path / 'none'}")
    assert failed.returncode == 2
    last = failed.stderr.strip().splitlines()[-1]
    assert last.startswith("mispair: error: process ") and "exited with status 2, which ended the run" in last


@pytest.mark.parametrize("command", [["train"], ["audit", "photos", "--out", "audit"]])
@pytest.mark.parametrize("option", [["--nproc", "0"], ["--timeout", "0"], ["--timeout", "soon"]])
def test_bad_process_counts_and_timeouts_are_one_line_errors(command, option, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as stop:
        main([*command, *option])
    err = capsys.readouterr().err.strip().splitlines()
    assert stop.value.code == 2 and len(err) == 1 and err[0].startswith("mispair: error: ")
    assert not (tmp_path / "runs").exists() and not (tmp_path / "audit").exists()
