"""make_optimizer's optimizers (`veil.methods.optim`) step exactly as torch's own do, and a process that trains
with them never imports torch._dynamo (the cost they exist to avoid)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import torch

from veil.datasets.dataset import Split, TaskSpec
from veil.methods import create_method, nets, optim


def test_adam_is_fused_on_cpu() -> None:
    opt = nets.make_optimizer(torch.nn.Linear(3, 2).parameters(), 1e-3)
    assert isinstance(opt, optim.Adam) and opt.fused is True


def test_param_groups_are_refused() -> None:
    """A param group's own learning rate has nowhere to go in a one-rate optimizer: refused, not flattened."""
    net = torch.nn.Linear(3, 2)
    with pytest.raises(TypeError, match="not param groups"):
        nets.make_optimizer([{"params": list(net.parameters()), "lr": 1.0}], 1e-3)


def _net(seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))


def _train(net: torch.nn.Module, opt, steps: int, frozen: int | None = None, start: int = 0) -> None:
    """`steps` steps on batches `start`, `start` + 1, ... of one seeded stream."""
    gen = torch.Generator().manual_seed(1)
    for _ in range(start):
        torch.randn(32, 6, generator=gen)
    for t in range(steps):
        opt.zero_grad(set_to_none=True)
        loss = net(torch.randn(32, 6, generator=gen)).pow(2).mean()
        loss.backward()
        if frozen is not None and t % 2:  # a tensor without a gradient this step: both optimizers skip it
            list(net.parameters())[frozen].grad = None
        opt.step()


@pytest.mark.parametrize(
    "ours, theirs",
    [
        (lambda p: optim.Adam(p, 1e-2, fused=True), lambda p: torch.optim.Adam(p, lr=1e-2, fused=True)),
        (lambda p: optim.Adam(p, 1e-2, fused=False), lambda p: torch.optim.Adam(p, lr=1e-2, fused=False)),
        (lambda p: optim.Adam(p, 1e-2), lambda p: torch.optim.Adam(p, lr=1e-2)),
        (lambda p: optim.SGD(p, 1e-2), lambda p: torch.optim.SGD(p, lr=1e-2)),
    ],
    ids=["adam-fused", "adam-single-tensor", "adam-default", "sgd"],
)
def test_the_same_weights_as_torchs_optimizer_bit_for_bit(ours, theirs) -> None:
    a, b = _net(0), _net(0)
    _train(a, ours(list(a.parameters())), 25, frozen=2)
    _train(b, theirs(list(b.parameters())), 25, frozen=2)
    for p, q in zip(a.parameters(), b.parameters()):
        torch.testing.assert_close(p, q, atol=0, rtol=0)


def test_a_state_dict_resumes_the_same_trajectory_and_refuses_a_misfit() -> None:
    """Stopped after 10 steps and resumed from its state dict, Adam ends where 20 uninterrupted steps do."""
    whole, first = _net(0), _net(0)
    _train(whole, optim.Adam(list(whole.parameters()), 1e-2, fused=True), 20)
    opt = optim.Adam(list(first.parameters()), 1e-2, fused=True)
    _train(first, opt, 10)
    again = _net(1)
    again.load_state_dict(first.state_dict())
    resumed = optim.Adam(list(again.parameters()), 1e-2, fused=True)
    resumed.load_state_dict(opt.state_dict())
    _train(again, resumed, 10, start=10)
    for p, q in zip(again.parameters(), whole.parameters()):
        torch.testing.assert_close(p, q, atol=0, rtol=0)
    with pytest.raises(ValueError, match="optimizer state for 'adam' over 4 tensors does not fit this sgd"):
        optim.SGD(list(again.parameters()), 1e-2).load_state_dict(opt.state_dict())


def test_training_imports_no_dynamo() -> None:
    """A fresh process that builds a method and trains it never imports torch._dynamo (torch.optim's optimizers
    import it on first use: seconds per process)."""
    code = (
        "import sys, numpy as np\n"
        "from veil.datasets.dataset import Split, TaskSpec\n"
        "from veil.methods import create_method\n"
        "x = np.random.default_rng(0).standard_normal((256, 6)).astype(np.float32)\n"
        "split = Split(x, {'u': (x[:, 0] > 0).astype(np.int64)}, {'s': (x[:, 1] > 0).astype(np.int64)})\n"
        "for m in ('gpp', 'eigan', 'ldp-frl', 'adjustable-ae'):\n"
        "    create_method(m, {'epochs': 1}, TaskSpec(6, {'u': 2}, {'s': 2})).fit(split)\n"
        "print('torch._dynamo' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip() == "False"


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
