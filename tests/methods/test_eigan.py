"""EIGAN's adversary schedule: every adversary takes `adversary_steps` updates per encoder update (Veil's default
5, Alg. A1's 1 under `preset: paper`), in a single run and on every D-EIGAN node alike, counted in the optimizers'
own step counters."""

from __future__ import annotations

import pytest

from veil.datasets import load_dataset
from veil.methods import create_method, method_config
from veil.methods.builtin import get_method
from veil.methods.federated.ensemble import StackedOptimizer


@pytest.fixture(scope="module")
def data():
    return load_dataset("gaussian-correlated", {"n": 400, "seed": 1})


def adam_steps(opt) -> set[int]:
    """The distinct step counts of an Adam's parameters (one value when every parameter stepped alike)."""
    return {int(s["step"]) for s in opt.state}


@pytest.mark.parametrize("k", [1, 3])
def test_each_minibatch_steps_every_adversary_k_times(data, k: int):
    m = create_method("eigan", {"epochs": 2, "encoder_hidden": (8,), "adversary_steps": k}, data.task())
    m.fit(data.train)
    (encoder,) = adam_steps(m.opt_e)
    assert adam_steps(m.opt_a) == {encoder} and encoder > 0
    assert adam_steps(m.opt_v) == {k * encoder}


def test_every_d_eigan_node_steps_its_adversaries_k_times(data, monkeypatch):
    """Each stacked optimizer's step counter per node, read as it steps (the players are told apart by their
    learning rates): the adversaries' counters end at k times the encoder's, on every node."""
    lrs = {"lr_encoder": 1e-3, "lr_ally": 2e-3, "lr_adversary": 3e-3}
    counters: dict[float, list[float]] = {}
    real_step = StackedOptimizer.step

    def counted(self: StackedOptimizer, grads, active) -> None:
        real_step(self, grads, active)
        counters[float(self.lr)] = self.t.tolist()

    monkeypatch.setattr(StackedOptimizer, "step", counted)
    config = {"epochs": 2, "encoder_hidden": (8,), "K": 3, "adversary_steps": 4, **lrs}
    create_method("d-eigan", config, data.task()).fit(data.train)
    encoder, ally, adversary = (counters[lr] for lr in lrs.values())
    assert len(encoder) == 3 and min(encoder) > 0
    assert ally == encoder
    assert adversary == [4 * t for t in encoder]


@pytest.mark.parametrize("method", ["eigan", "d-eigan"])
def test_the_paper_preset_steps_once_and_the_default_names_its_departure(method: str):
    card = get_method(method)
    assert method_config(method, {"preset": "paper"}).adversary_steps == 1
    default = method_config(method, {})
    assert default.adversary_steps == 5
    assert "5 instead of the paper's 1" in card.recorded_deviations(default)["adversary_steps"]
    assert "adversary_steps" not in card.recorded_deviations(method_config(method, {"preset": "paper"}))


@pytest.mark.parametrize("method", ["eigan", "d-eigan"])
def test_release_noise_adds_gaussian_noise_of_its_std_to_the_encoders_output(data, method: str):
    """release_noise 0 (`preset: paper`, the paper's release) releases E(x) itself; s > 0 (Veil's default 0.1)
    adds N(0, s^2) per entry, keyed by the method's secret release key and the row (the same row, the same z; a
    new key, new noise), the key derived from release_seed when one is set (then
    reproducible, which is what makes this check deterministic), and is recorded as a departure from the paper. Over the 300 x 4 released entries the
    added noise's std is within 0.025 of s and its mean within 0.035 of 0 (about 4 standard errors each)."""
    import numpy as np
    import torch

    card = get_method(method)
    base = {"epochs": 1, "encoder_hidden": (8,), "d_z": 4, **({"K": 2} if method == "d-eigan" else {})}
    assert method_config(method, {}).release_noise == 0.1
    assert method_config(method, {"preset": "paper"}).release_noise == 0.0
    plain = create_method(method, {**base, "release_noise": 0.0}, data.task())
    plain.fit(data.train)
    with torch.no_grad():
        exact = plain.modules()["encoder"](torch.as_tensor(data.train.x)).numpy()
    assert np.array_equal(plain.encode(data.train.x), exact) and "release_noise" not in card.recorded_deviations(
        plain.config
    )
    noisy = create_method(method, {**base, "release_noise": 0.3}, data.task())
    noisy.load_state(plain.state())
    z = noisy.encode(data.train.x)
    assert np.array_equal(z, noisy.encode(data.train.x))  # permanent randomization: the same rows, the same z
    other = create_method(method, {**base, "release_noise": 0.3}, data.task())  # another release key
    other.load_state(plain.state())
    assert not np.allclose(z, other.encode(data.train.x))
    seeded = [create_method(method, {**base, "release_noise": 0.3, "release_seed": 7}, data.task()) for _ in range(2)]
    for m in seeded:
        m.load_state(plain.state())
    a, b = (m.encode(data.train.x) for m in seeded)
    assert np.array_equal(a, b)
    added = a - exact
    assert added.size == 1200 and abs(added.std() - 0.3) < 0.025 and abs(added.mean()) < 0.035
    assert "0.3 instead of the paper's 0.0" in card.recorded_deviations(noisy.config)["release_noise"]
