"""make_optimizer's fused Adam trains as torch's per-tensor Adam does, up to float rounding."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from veil.datasets.dataset import Split, TaskSpec
from veil.methods import create_method, nets


def test_adam_is_fused_on_cpu() -> None:
    opt = nets.make_optimizer(torch.nn.Linear(3, 2).parameters(), 1e-3)
    assert opt.defaults["fused"] is True


@pytest.mark.parametrize("method", ["eigan", "gpp"])
def test_fused_adam_trains_like_plain_adam(method: str, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((512, 12)).astype(np.float32)
    split = Split(x, {"u": (x[:, 0] > 0).astype(np.int64)}, {"s": (x[:, 1] > 0).astype(np.int64)})
    task = TaskSpec(12, {"u": 2}, {"s": 2})
    params = {"epochs": 5, "batch_size": 64, "encoder_hidden": [32, 32], "head_hidden": [16]}
    states, losses = [], []
    for devices in (nets.FUSED_ADAM_DEVICES, ()):
        monkeypatch.setattr(nets, "FUSED_ADAM_DEVICES", devices)
        m = create_method(method, params, task)
        losses.append(m.fit(split)[-1])
        states.append(m.state())
    # 40 steps: fused and per-tensor Adam round differently, by about 1e-7 of the weights per step
    for k, v in states[0].items():
        torch.testing.assert_close(v, states[1][k], rtol=1e-5, atol=1e-6, msg=k)
    for k, v in losses[0].items():
        assert v == pytest.approx(losses[1][k], rel=1e-5), k
