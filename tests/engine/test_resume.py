"""Training end to end: beats chance, eval reproduces, an interrupted run resumes exactly."""

import json

import pytest
import torch

from mispair.cli import main
from mispair.config import load_config
from mispair.data.synthetic import write_synthetic_dataset
from mispair.engine.run import evaluate_checkpoint, train_run
from mispair.errors import ConfigError

OVERRIDES = [
    "data.source=synthetic",
    "data.synthetic_images=200",
    "model.embed_dim=48",
    "model.word_dim=24",
    "train.epochs=3",
    "train.batch_size=50",
    "train.threads=1",
    "train.lr_decay_epochs=[2]",
]


def _run(out, extra=(), log=lambda m: None):
    return train_run(load_config(None, [*OVERRIDES, *extra, f"output={out}"]), progress=False, log=log)


class Interrupt(Exception):
    pass


def _stop_after(n):
    seen = []

    def log(message):
        seen.append(message)
        if sum(m.startswith("epoch ") for m in seen) == n:
            raise Interrupt

    return log


def test_train_eval_and_resume(tmp_path):
    full = _run(tmp_path / "a")
    # chance rSum for 200 test images with 5 captions each is far below 10
    assert full["test"]["rsum"] > 100
    assert evaluate_checkpoint(tmp_path / "a" / "best.pt") == full["test"]
    with pytest.raises(Interrupt):
        _run(tmp_path / "b", log=_stop_after(2))
    assert len((tmp_path / "b" / "log.jsonl").read_text().splitlines()) == 2
    resumed = _run(tmp_path / "b")
    assert resumed == full
    a = torch.load(tmp_path / "a" / "last.pt", weights_only=True)["models"][0]
    b = torch.load(tmp_path / "b" / "last.pt", weights_only=True)["models"][0]
    assert all(torch.equal(a[k], b[k]) for k in a)
    log = [json.loads(line) for line in (tmp_path / "b" / "log.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in log] == [0, 1, 2]
    assert all("loss/triplet" in r and "dev/rsum" in r for r in log)
    with pytest.raises(ConfigError, match="different config"):
        _run(tmp_path / "b", extra=["train.lr=0.01"])


def _same(a, b) -> bool:
    """Nested state dicts equal, tensors bit for bit."""
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and torch.equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


def test_l2rm_resumes_its_cost_function_and_optimizer_exactly(tmp_path):
    extra = ["recipe=l2rm", "method.warmup_epochs=1", "method.cost_lr_decay_epochs=[2]"]
    full = _run(tmp_path / "a", extra)
    with pytest.raises(Interrupt):
        _run(tmp_path / "b", extra, log=_stop_after(2))
    assert _run(tmp_path / "b", extra) == full
    a, b = (torch.load(tmp_path / run / "last.pt", weights_only=True) for run in "ab")
    assert all(torch.equal(a["models"][0][k], b["models"][0][k]) for k in a["models"][0])
    assert _same(a["recipe"]["cost_fn"], b["recipe"]["cost_fn"])
    assert _same(a["recipe"]["cost_optimizer"], b["recipe"]["cost_optimizer"])
    rows = [(tmp_path / run / "log.jsonl").read_text().splitlines() for run in "ab"]
    strip = [
        [{k: v for k, v in json.loads(r).items() if not k.startswith("seconds")} for r in x] for x in rows
    ]
    assert strip[0] == strip[1] and "loss/cost_ot" in strip[1][-1]


def test_cli_user_errors_are_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for argv in (
        ["eval", str(tmp_path / "missing.pt")],
        ["train", str(tmp_path / "none.yaml")],
        ["train", "train.lr=abc"],
        ["train", "bogus.key=1"],
        ["train", "method.nope=1"],
    ):
        assert main([*argv, "--quiet"] if argv[0] == "train" else argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("mispair: error: "), err
    assert not (tmp_path / "runs").exists()


def test_auto_source_says_why_it_falls_back_to_synthetic(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no data/tuxpaint_precomp here
    seen = []
    summary = _run(tmp_path / "auto", ["data.source=auto", "train.epochs=1"], log=seen.append)
    notes = [m for m in seen if m.startswith("note: no prepared data in")]
    assert len(notes) == 1 and str(tmp_path / "data" / "tuxpaint_precomp") in notes[0]
    assert any(m.startswith("vse on synthetic") for m in seen)
    saved = torch.load(tmp_path / "auto" / "best.pt", weights_only=True)["config"]["data"]
    assert saved["source"] == "synthetic"  # evaluating it elsewhere reads the same data
    # --data-root reads a precomputed folder instead: here the same synthetic test split written out
    folder = write_synthetic_dataset(tmp_path / "syn", n_train=10, n_dev=10, n_test=200)
    assert evaluate_checkpoint(tmp_path / "auto" / "best.pt", data_root=str(folder)) == summary["test"]
    seen.clear()
    _run(tmp_path / "explicit", ["train.epochs=1"], log=seen.append)  # data.source=synthetic
    assert not any(m.startswith("note:") for m in seen)


def test_auto_source_records_the_prepared_folder_it_found(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_synthetic_dataset("data/tuxpaint_precomp", n_train=60, n_dev=20, n_test=20)
    summary = _run(tmp_path / "auto", ["data.source=auto", "train.epochs=1", "train.batch_size=20"])
    saved = torch.load(tmp_path / "auto" / "best.pt", weights_only=True)["config"]["data"]
    assert saved["source"] == "precomp"
    assert saved["root"] == str((tmp_path / "data" / "tuxpaint_precomp").resolve())
    monkeypatch.chdir(tmp_path / "data")  # from elsewhere: the same test split, the same metrics
    assert evaluate_checkpoint(tmp_path / "auto" / "best.pt") == summary["test"]


@pytest.mark.parametrize("override", ["train.epochs=0", "train.batch_size=0", "train.lr=0"])
def test_nonpositive_training_sizes_are_config_errors(override):
    with pytest.raises(ConfigError, match=override.split("=")[0]):
        load_config(None, [override])
