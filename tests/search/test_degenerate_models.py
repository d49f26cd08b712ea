"""A checkpoint with NaN, infinite or absurd weights, or damaged fields, never scores anything."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from mispair.engine.trained import load_checkpoint, save_checkpoint
from mispair.errors import DivergedError, MispairError
from mispair.sanity import check_finite, check_weights
from tests.cli_errors import one_line_error
from tests.search.conftest import run_cli


def _tampered(source, tmp_path, change) -> str:
    state = load_checkpoint(source)
    change(state)
    path = tmp_path / "tampered.pt"
    save_checkpoint(path, {k: v for k, v in state.items() if k != "format"})
    return str(path)


def _set_first_weight(value: float):
    def change(state):
        name, tensor = next((k, v) for k, v in state["models"][0].items() if v.is_floating_point())
        tensor = tensor.clone()
        tensor.view(-1)[0] = value
        state["models"][0][name] = tensor

    return change


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (math.nan, "holds NaN or infinite"),
        (math.inf, "holds NaN or infinite"),
        (1e30, "reaches 1e+30, beyond 1,000,000"),
    ],
)
@pytest.mark.parametrize("command", ["eval", "index"])
def test_a_degenerate_checkpoint_is_refused_by_every_command(
    cosine_checkpoint, collection, tmp_path, value, message, command
):
    bad = _tampered(cosine_checkpoint, tmp_path, _set_first_weight(value))
    argv = ["eval", bad] if command == "eval" else ["index", bad, collection, "--out", tmp_path / "idx"]
    code, _, err = run_cli(*argv, "--quiet")
    one_line_error(code, err, "tampered.pt (model 1): weight", message)
    assert not (tmp_path / "idx").exists()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda s: s.pop("config"), "not a mispair run checkpoint (its 'config' is missing or malformed)"),
        (lambda s: s.update(feature_dim="64"), "not a mispair run checkpoint (malformed feature_dim"),
        (lambda s: s.update(models=[]), "not a trained run's checkpoint (it holds no model)"),
        (lambda s: s.update(models=[{"w": [1.0, 2.0]}]), "a damaged checkpoint (its models are not name"),
    ],
)
def test_a_checkpoint_with_damaged_fields_is_one_line(cosine_checkpoint, tmp_path, change, message):
    bad = _tampered_unchecked(cosine_checkpoint, tmp_path, change)
    code, _, err = run_cli("eval", bad, "--quiet")
    one_line_error(code, err, "tampered.pt: ", message)


def _tampered_unchecked(source, tmp_path, change) -> str:
    state = torch.load(source, weights_only=True)
    change(state)
    path = tmp_path / "tampered.pt"
    torch.save(state, path)
    return str(path)


def test_weights_of_another_shape_are_one_line(cosine_checkpoint, tmp_path):
    def change(state):
        name = next(k for k, v in state["models"][0].items() if v.ndim == 2)
        state["models"][0][name] = torch.zeros(3, 3)

    code, _, err = run_cli("eval", _tampered(cosine_checkpoint, tmp_path, change), "--quiet")
    one_line_error(code, err, "tampered.pt: its weights do not fit the model")


def test_check_weights_and_scores_against_a_brute_force_scan():
    good = {"a": torch.ones(3), "steps": torch.tensor(7), "b": -torch.full((2, 2), 999_999.0)}
    check_weights(good, "ok")
    with pytest.raises(DivergedError, match="x: weight b reaches"):
        check_weights({**good, "b": torch.tensor([0.0, -2e6])}, "x")
    scores = np.array([0.5, np.nan, 1.0, -np.inf])
    with pytest.raises(DivergedError, match="s: 2 of 4 pair scores are NaN or infinite"):
        check_finite(scores, "pair scores", "s")
    check_finite(np.zeros(3), "pair scores", "s")
    assert issubclass(DivergedError, MispairError)
