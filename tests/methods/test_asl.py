"""The asl recipe: its default gradient is the paper's (ASL Eq. 5–6), and a tiny noisy run."""

import json
import math
from types import SimpleNamespace

import pytest
import torch

from mispair.config import load_config
from mispair.engine.run import train_run
from mispair.methods.asl import ASL
from mispair.methods.base import build_options


def _direction_gradient(s_p: float, negatives: list[float], lam: float, m0: float) -> float:
    """∂l/∂S_p of one direction of Eq. 5 at σ = 1, by the formula printed below Eq. 6:
    ``λA(2S_p − σU_p − m_p)`` with ``A = 1 − e^{−l}``."""
    u_p, m_p = 1 + m0, 1 - m0
    pos = -lam * (u_p - s_p) * (s_p - m_p)
    neg = [lam * max(s + m0, 0.0) * (s - m0) for s in negatives]
    loss = math.log1p(math.exp(pos) * sum(math.exp(x) for x in neg))
    return lam * (1 - math.exp(-loss)) * (2 * s_p - u_p - m_p)


@pytest.mark.parametrize("lam", [16.0, 64.0])
def test_default_gradient_is_the_papers(lam):
    options = build_options(ASL, {"scale": lam})
    assert options.detach_weights is False
    recipe = SimpleNamespace(options=options)
    sims = torch.tensor(
        [[0.5, 0.45, 0.3], [0.2, 0.8, 0.1], [0.4, 0.0, 0.6]], dtype=torch.float64, requires_grad=True
    )
    ASL._pair_loss(recipe, sims, torch.ones(3, dtype=torch.float64)).sum().backward()
    rows = sims.detach().tolist()
    # S_00 is the positive of image 0 (row 0) and of caption 0 (column 0): both directions
    expected = _direction_gradient(0.5, [rows[0][1], rows[0][2]], lam, 0.2) + _direction_gradient(
        0.5, [rows[1][0], rows[2][0]], lam, 0.2
    )
    assert sims.grad[0, 0].item() == pytest.approx(expected, rel=1e-9)
    # with μ_p detached, the same point gets −λA μ_p = −0.7 λA per direction instead of −λA
    detached = sims.detach().clone().requires_grad_(True)
    recipe = SimpleNamespace(options=build_options(ASL, {"scale": lam, "detach_weights": True}))
    ASL._pair_loss(recipe, detached, torch.ones(3, dtype=torch.float64)).sum().backward()
    assert detached.grad[0, 0].item() == pytest.approx(0.7 * expected, rel=1e-9)


@pytest.mark.slow  # twin in the default run: test_single_process_unchanged.py[asl] (every number)
def test_tiny_asl_run_detects_noise(tmp_path):
    overrides = [
        "recipe=asl",
        "data.source=synthetic",
        "data.synthetic_images=300",
        "data.noise.rate=0.5",
        "data.noise.protocol=pmp",
        "model.embed_dim=64",
        "model.word_dim=32",
        "train.epochs=5",
        "train.batch_size=64",
        "train.lr=2e-3",
        "train.threads=1",
        "method.warmup_epochs=2",
        f"output={tmp_path}",
    ]
    summary = train_run(load_config(None, overrides), progress=False, log=lambda m: None)
    log = [json.loads(line) for line in (tmp_path / "log.jsonl").read_text().splitlines()]
    assert "division/0/auc" not in log[1] and log[2]["division/0/auc"] > 0.8
    assert {"loss/labeled_0", "loss/labeled_1"} <= set(log[-1])
    assert summary["test"]["rsum"] > 100
