"""train.optimizer / train.weight_decay: validated, and the trainer steps like torch's Adam / AdamW
(its fused kernel, where this torch has one for the CPU: the default loop's update to float rounding)."""

import pytest
import torch

from mispair.config import TrainConfig, load_config
from mispair.engine.trainer import build_optimizer
from mispair.errors import ConfigError


@pytest.mark.parametrize(
    "override, message",
    [
        ("train.optimizer=sgd", "train.optimizer: one of adam, adamw"),
        ("train.weight_decay=-0.1", "train.weight_decay: must be >= 0"),
    ],
)
def test_bad_optimizer_settings_are_config_errors(override, message):
    with pytest.raises(ConfigError, match=message):
        load_config(None, [override])


def test_omit_configs_use_adamw():
    config = load_config("configs/omit/tuxpaint.yaml", [])
    assert (config.train.optimizer, config.train.weight_decay) == ("adamw", 5e-4)


@pytest.mark.parametrize("name, reference", [("adam", torch.optim.Adam), ("adamw", torch.optim.AdamW)])
def test_optimizer_steps_like_torch(name, reference):
    torch.manual_seed(0)
    start = [torch.randn(4, 3), torch.randn(3)]
    grads = [[torch.randn_like(p) for p in start] for _ in range(3)]
    ours_params = [p.clone().requires_grad_() for p in start]
    ref_params = [p.clone().requires_grad_() for p in start]
    config = TrainConfig(optimizer=name, weight_decay=0.3)
    ours = build_optimizer([{"params": ours_params, "lr": 0.1}], config)
    ref = reference(ref_params, lr=0.1, weight_decay=0.3, foreach=False)  # the plain loop over tensors
    assert type(ours) is reference
    assert ours.defaults["fused"] == _cpu_has_fused()
    for step in grads:
        for opt, params in ((ours, ours_params), (ref, ref_params)):
            for p, g in zip(params, step):
                p.grad = g.clone()
            opt.step()
    for a, b in zip(ours_params, ref_params):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-7)
    moved = ours_params[0] - start[0]
    assert moved.abs().max() > 0


def _cpu_has_fused() -> bool:
    """Whether this torch has a fused Adam kernel for CPU tensors (2.4 on)."""
    try:
        torch.optim.Adam([torch.zeros(1, requires_grad=True)], fused=True)
    except RuntimeError:
        return False
    return True
