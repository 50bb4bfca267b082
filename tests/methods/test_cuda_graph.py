"""A graph-safe method's step replayed as one CUDA graph trains exactly as the eager loop does (`veil.methods.cuda_graph`).

The CUDA tests run on a lent GPU machine (`python benchmarks/gpu.py --only tests`) and skip elsewhere; the
contract they rely on (no training step reads a loss back to the host) is checked on the CPU here too."""

from __future__ import annotations

from typing import Any

import pytest
import torch

import veil.methods.method as method_module
from veil.datasets import load_dataset
from veil.datasets.catalog import dataset_params
from veil.methods import create_method
from veil.methods.cards import method_names
from veil.methods.cuda_graph import GraphedStep
from veil.methods.federated.fed_method import FederatedMethod
from veil.methods.method import BatchSampler, TrainContext

needs_cuda = pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs a CUDA GPU (a lent GPU machine: benchmarks/gpu.py)"
)
EIGAN = {"epochs": 3, "encoder_hidden": (32,), "d_z": 4, "batch_size": 64, "seed": 3}


@pytest.fixture(scope="module")
def data():
    return load_dataset("gaussian-correlated", dataset_params("gaussian-correlated", {"n": 1200, "seed": 1}))


def fit(data, params: dict[str, Any], ctx: TrainContext) -> tuple[Any, list[dict[str, float]]]:
    method = create_method("eigan", params, data.task())
    return method, method.fit(data.train, ctx)


class CountingStep(GraphedStep):
    replays = 0

    def __call__(self, batch):  # type: ignore[no-untyped-def]
        out = super().__call__(batch)
        CountingStep.replays += self.graph is not None
        return out


@needs_cuda
@pytest.mark.parametrize("preset", ["default", "paper"])
def test_graphed_eigan_trains_exactly_as_eager_steps(data, monkeypatch, preset: str):
    """Every parameter and every epoch's mean losses equal the eager loop's on the same GPU (fused Adam, and the
    paper preset's plain SGD), and the graph did replay all but the warm-up steps."""
    monkeypatch.setattr(method_module, "GraphedStep", CountingStep)
    CountingStep.replays = 0
    params = {**EIGAN, "preset": preset}
    graphed, graphed_history = fit(data, params, TrainContext("cuda"))
    eager, eager_history = fit(data, params, TrainContext("cuda", cuda_graph=False))
    steps = EIGAN["epochs"] * (len(data.train) // EIGAN["batch_size"])
    assert CountingStep.replays == steps - 3
    for name, module in eager.modules().items():
        for p, q in zip(graphed.modules()[name].parameters(), module.parameters()):
            torch.testing.assert_close(p, q, atol=1e-6, rtol=0, msg=name)
    assert len(graphed_history) == len(eager_history) == EIGAN["epochs"]
    for row, eager_row in zip(graphed_history, eager_history):
        assert row == pytest.approx(eager_row, abs=1e-6)


@needs_cuda
def test_after_a_graphed_fit_the_optimizers_step_eagerly_again(data):
    method, _ = fit(data, EIGAN, TrainContext("cuda"))
    assert not method.opt_e.capturable
    sampler = BatchSampler(data.train, 64, torch.device("cuda"), 0)
    before = [p.detach().clone() for p in method.encoder.parameters()]
    method.train_step(sampler.sample(), sampler, TrainContext("cuda"))
    assert any(not torch.equal(a, p) for a, p in zip(before, method.encoder.parameters()))


def test_graphs_only_for_one_cuda_worker_and_when_asked():
    assert TrainContext("cuda").graphs
    assert not TrainContext("cpu").graphs
    assert not TrainContext("cuda", rank=0, world_size=2).graphs
    assert not TrainContext("cuda", cuda_graph=False).graphs


@pytest.mark.parametrize("name", sorted(method_names()))
def test_no_training_step_reads_a_loss_back_to_the_host(data, monkeypatch, name: str):
    """A training step that calls `.item()` waits for the GPU on every step, and cannot be captured in a graph:
    every method's step returns its losses as tensors, which `fit` reads once per epoch."""
    method = create_method(name, {"epochs": 1, "seed": 0}, data.task())
    if not method.iterative or isinstance(method, FederatedMethod):
        pytest.skip(f"{name} has no central minibatch step (closed form, or federated: its nodes train)")
    method.to("cpu")
    sampler = BatchSampler(data.train, 64, torch.device("cpu"), 0)
    reads: list[str] = []
    real_item = torch.Tensor.item
    monkeypatch.setattr(torch.Tensor, "item", lambda t: reads.append("item") or real_item(t))
    out = method.train_step(next(sampler.epoch()), sampler, TrainContext())
    assert reads == []
    assert out and all(isinstance(v, torch.Tensor) and v.dim() == 0 for v in out.values())


def test_a_captured_batch_is_a_copy_refilled_in_place(data):
    """What the replay feeds the graph: `clone` owns new memory, `copy_` refills it in place with the next batch."""
    sampler = BatchSampler(data.train, 64, torch.device("cpu"), 0)
    first, second = list(sampler.epoch())[:2]
    static = first.clone()
    buffers = [static.x, *static.utility.values(), *static.sensitive.values()]
    assert static.x.data_ptr() != first.x.data_ptr() and torch.equal(static.x, first.x)
    static.copy_(second)
    refilled = [static.x, *static.utility.values(), *static.sensitive.values()]
    assert all(a is b for a, b in zip(refilled, buffers, strict=True))  # the same tensors, refilled
    assert torch.equal(static.x, second.x) and not torch.equal(static.x, first.x)
    for name in second.utility:
        assert torch.equal(static.utility[name], second.utility[name])
    for name in second.sensitive:
        assert torch.equal(static.sensitive[name], second.sensitive[name])
