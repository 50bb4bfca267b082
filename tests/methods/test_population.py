"""Population trials: the grouping rule (members differ only in the method's continuous knobs, every other run
is said to train apart, with the reason), and every method's vectorised population matching separately
trained runs within floating-point tolerance at a fixed seed (weights, per-epoch losses and releases at a
fixed release_seed)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

from veil.datasets import load_dataset
from veil.datasets.catalog import dataset_params
from veil.methods import create_method, method_config
from veil.methods.federated.ensemble import StackedOptimizer
from veil.methods.method import TrainContext
from veil.methods.population import LoneAdam, fit_population, plan_population, population_form, population_groups

SMALL = {"epochs": 2, "d_z": 4, "encoder_hidden": (16, 16), "head_hidden": (8,), "k": 2, "seed": 3}


def gpp(**values: Any):
    return method_config("gpp", {**SMALL, **values})


@pytest.fixture(scope="module")
def data():
    return load_dataset("gaussian-correlated", dataset_params("gaussian-correlated", {"n": 600, "seed": 1}))


def test_members_may_differ_only_in_knobs():
    configs = [gpp(beta=0.1), gpp(beta=2.0, lambda_kl=0.5, lr=1e-3), gpp(d_z=8), gpp(beta=3.0, release_seed=7)]
    plan = plan_population(configs, "gpp")
    assert plan.groups == [[0, 1, 3], [2]]
    assert plan.reasons == ["run 2 trains alone: d_z differs (8 vs 4 in run 0)"]
    assert population_groups(configs, "gpp") == plan.groups


@pytest.mark.parametrize(
    ("other", "reason"),
    [
        ({"seed": 4}, "seed differs (4 vs 3 in run 0)"),
        ({"encoder_hidden": (32,)}, "encoder_hidden differs ([32] vs [16, 16] in run 0)"),
        ({"preset": "paper"}, "preset differs (paper vs default in run 0), privacy_loss differs (neg-ce vs uniform"),
        ({"epochs": 3, "k": 1}, "epochs differs (3 vs 2 in run 0)"),
        ({"release": "mean"}, "release differs (mean vs sample in run 0)"),
    ],
)
def test_structural_differences_are_named(other: dict[str, Any], reason: str):
    configs = [gpp(beta=0.5), gpp(beta=1.0), gpp(**other), gpp(**other)]
    plan = plan_population(configs, "gpp", labels=["a", "b", "c", "d"])
    assert plan.groups == [[0, 1], [2, 3]]
    assert len(plan.reasons) == 1
    assert plan.reasons[0].startswith("c, d train as a separate population: ")
    assert reason.replace("run 0", "a") in plan.reasons[0]


def test_lone_runs_are_said_to_train_alone():
    plan = plan_population([gpp(d_z=2), gpp(d_z=3)], "gpp")
    assert plan.groups == [[0], [1]]
    assert plan.reasons == [
        "run 0 trains alone: no other run differs from it only in beta, lambda_kl, lr",
        "run 1 trains alone: d_z differs (3 vs 2 in run 0)",
    ]


def test_method_without_population_form_falls_back(data):
    configs = [method_config("pca", {"d_z": 2}), method_config("pca", {"d_z": 2})]
    assert population_form("pca") is None
    plan = plan_population(configs, "pca")
    assert plan.groups == [[0], [1]]
    assert plan.reasons == ["method 'pca' has no population form: run 0, run 1 train one by one"]
    with pytest.raises(ValueError, match="method 'pca' has no population form"):
        fit_population("pca", configs, data.task(), data.train)


def test_fit_population_refuses_runs_that_are_not_one_population(data):
    with pytest.raises(ValueError, match=r"d_z differs \(8 vs 4 in run 0\)"):
        fit_population("gpp", [gpp(), gpp(d_z=8)], data.task(), data.train)


def assert_members_match_solo(method: str, configs: list, data, device: str = "cpu", tol: float = 1e-5) -> None:
    """Each member against `create_method(method, config).fit` at the same seed on the same device: weights within
    `tol` after 2 epochs (measured on the CPU: ~1e-6 at most), the same history keys with losses within `tol`, and
    the same z (a fixed release_seed where the release is random)."""
    fitted = fit_population(method, configs, data.task(), data.train, TrainContext(device))
    assert len(fitted) == len(configs)
    for config, (member, history) in zip(configs, fitted):
        solo = create_method(method, config, data.task())
        solo_history = solo.fit(data.train, TrainContext(device))
        solo.to("cpu")
        assert type(member) is type(solo) and member.config == config
        mine, theirs = member.state(), solo.state()
        assert mine.keys() == theirs.keys()
        for key in theirs:
            torch.testing.assert_close(mine[key], theirs[key], atol=tol, rtol=0, msg=key)
        assert len(history) == len(solo_history) == config.epochs
        for row, solo_row in zip(history, solo_history):
            assert list(row) == list(solo_row)
            assert row == pytest.approx(solo_row, abs=tol)
        np.testing.assert_allclose(member.encode(data.test.x), solo.encode(data.test.x), atol=tol)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (a lent GPU machine: benchmarks/gpu.py)")
@pytest.mark.parametrize("method", ["gpp", "eigan", "ldp-frl", "adjustable-ae"])
def test_populations_on_the_gpu_match_separate_runs_there(data, method: str):
    """Every population form trains on a GPU as separate runs do there: within 1e-4 (the device's reductions run in
    another order than the stacked ones)."""
    knobs = {
        "gpp": [{"beta": 0.1}, {"beta": 3.0, "lr": 1e-3}],
        "eigan": [{"alpha": 0.2}, {"alpha": 0.8, "lr_ally": 1e-2}],
        "ldp-frl": [{"eps": 1.0}, {"eps": float("inf"), "beta": 3.0}],
        "adjustable-ae": [{"noise": 0.0}, {"noise": 60.0, "lam": -1000.0}],
    }[method]
    base = {
        "gpp": SMALL,
        "eigan": {"epochs": 2, "encoder_hidden": (16,), "head_hidden": (8,), "seed": 3},
        "ldp-frl": {"epochs": 2, "d_z": 3, "encoder_hidden": (16,), "utility_hidden": (8,), "side_hidden": (8,)},
        "adjustable-ae": {"epochs": 2, "encoder_hidden": (16,), "decoder_hidden": (16,), "code_width": 8, "seed": 3},
    }[method]
    configs = [method_config(method, {**base, **k, "release_seed": 5}) for k in knobs]
    assert_members_match_solo(method, configs, data, device="cuda", tol=1e-4)


@pytest.mark.parametrize("privacy_loss", ["uniform", "neg-ce"])
def test_gpp_population_matches_separate_runs(data, privacy_loss: str):
    configs = [
        gpp(beta=0.1, privacy_loss=privacy_loss, release_seed=5),
        gpp(beta=1.0, lambda_kl=0.5, privacy_loss=privacy_loss, release_seed=5),
        gpp(beta=3.0, lr=1e-3, privacy_loss=privacy_loss, release_seed=9),
    ]
    assert_members_match_solo("gpp", configs, data)


def test_adjustable_ae_population_trains_once_for_every_release_knob(data):
    """noise, lam and apply_g are release knobs: one training serves every member, which matches its solo run."""
    base = {"epochs": 2, "encoder_hidden": (16,), "decoder_hidden": (16,), "code_width": 8, "seed": 3}
    knobs = [
        {"noise": 0.0, "release_seed": 1},
        {"noise": 60.0, "lam": -1000.0, "release_seed": 1},
        {"noise": 200.0, "apply_g": False, "release_seed": 2},
    ]
    configs = [method_config("adjustable-ae", {**base, **k}) for k in knobs]
    assert population_groups(configs, "adjustable-ae") == [[0, 1, 2]]
    assert_members_match_solo("adjustable-ae", configs, data)


@pytest.mark.parametrize(("optimizer", "adversary_steps"), [("adam", 5), ("sgd", 1), ("adam", 1)])
def test_eigan_population_matches_separate_runs(data, optimizer: str, adversary_steps: int):
    base = {"epochs": 2, "encoder_hidden": (16,), "head_hidden": (8,), "seed": 3, "optimizer": optimizer}
    base |= {"adversary_steps": adversary_steps, "release_seed": 4}  # the default release noise, drawn alike
    knobs = [
        {"alpha": 0.2},
        {"alpha": 0.5, "lr_encoder": 1e-2},
        {"alpha": 0.8, "lr_ally": 1e-2, "lr_adversary": 3e-3},
    ]
    assert population_form("eigan").knobs == ("alpha", "lr_encoder", "lr_ally", "lr_adversary")  # type: ignore[union-attr]
    assert_members_match_solo("eigan", [method_config("eigan", {**base, **k}) for k in knobs], data)


@pytest.mark.parametrize(("bound", "optimizer"), [("clip", "adam"), ("tanh", "sgd")])
def test_ldp_frl_population_matches_separate_runs(data, bound: str, optimizer: str):
    """eps (inf among them: no noise, no draw), beta and lr differ; each member adds its own scale times the one
    Laplace draw its solo run makes."""
    base = {"epochs": 2, "d_z": 3, "encoder_hidden": (16,), "utility_hidden": (8,), "side_hidden": (8,), "seed": 3}
    base = {**base, "bound": bound, "optimizer": optimizer, "release_seed": 4}
    knobs = [{"eps": 1.0}, {"eps": 8.0, "beta": 0.1}, {"eps": float("inf"), "beta": 3.0, "lr": 3e-3}]
    configs = [method_config("ldp-frl", {**base, **k}) for k in knobs]
    assert population_form("ldp-frl").knobs == ("eps", "beta", "lr")  # type: ignore[union-attr]
    assert population_groups(configs, "ldp-frl") == [[0, 1, 2]]
    assert_members_match_solo("ldp-frl", configs, data)


def test_members_train_with_their_own_learning_rate(data):
    """lr differs: a population of one member per lr moves each member exactly as far as its solo run."""
    fast, slow = fit_population("gpp", [gpp(lr=1e-2, epochs=1), gpp(lr=1e-5, epochs=1)], data.task(), data.train)
    start = create_method("gpp", gpp(epochs=1), data.task()).state()
    moved = [max((m.state()[k] - start[k]).abs().max().item() for k in start) for m in (fast[0], slow[0])]
    assert moved[0] > 100 * moved[1] > 0


def test_stacked_optimizer_per_copy_lr_shape_is_checked():
    with pytest.raises(ValueError, match=r"per-copy lr must have shape \(2,\)"):
        StackedOptimizer([torch.zeros(2, 3)], torch.tensor([1e-3, 1e-3, 1e-3]))


@pytest.mark.parametrize("kind", ["adam", "sgd"])
@pytest.mark.parametrize("fused", [True, False])
def test_lone_adam_steps_each_copy_exactly_as_torch(kind: str, fused: bool, monkeypatch):
    """Same gradients in, the same weights out as one torch optimizer per copy, bit for bit (per-copy lr): Adam as
    a solo run's `make_optimizer` (the fused kernel), or torch's single-tensor loop where the device has no fused
    kernel; SGD as torch's single-tensor SGD."""
    import veil.methods.population as population

    if not fused:
        monkeypatch.setattr(population, "fusable", lambda p: False)
    gen = torch.Generator().manual_seed(0)
    lrs = [1e-3, 3e-2, 1e-4]
    start = [torch.randn(3, 5, 4, generator=gen), torch.randn(3, 7, generator=gen)]
    grads = [[torch.randn(t.shape, generator=gen) for t in start] for _ in range(6)]
    stacked = [t.clone() for t in start]
    opt = LoneAdam(stacked, torch.tensor(lrs, dtype=torch.float64), kind)
    for g in grads:
        opt.step(g, torch.ones(3, dtype=torch.bool))
    for c, lr in enumerate(lrs):
        alone = [t[c].clone().requires_grad_(True) for t in start]
        torch_opt = (
            torch.optim.Adam(alone, lr=lr, foreach=False, fused=fused)
            if kind == "adam"
            else torch.optim.SGD(alone, lr=lr, foreach=False)
        )
        for g in grads:
            for p, gi in zip(alone, g):
                p.grad = gi[c].clone()
            torch_opt.step()
        for p, s in zip(alone, stacked):
            torch.testing.assert_close(s[c], p.detach(), atol=0, rtol=0)
