"""A method's whole training step captured once in a CUDA graph and replayed for every later minibatch.

On a GPU a small model's step is bound by launching its kernels one by one from Python, not by its arithmetic,
and a replay launches them all at once (benchmarks/README.md, GPU), with the same parameters (tests/methods/test_cuda_graph.py, to 1e-6). `Method.fit` uses it where it is exact: the method declares `graph_safe` (its step has
fixed shapes, no host sync, no random draws and reads only its `batch`), training runs on CUDA with one worker
(a data-parallel step all-reduces through the host), and `TrainContext.cuda_graph` is on.

The first `WARMUP` steps run eagerly on a side stream (CUDA graphs' rule: the optimizers' state exists before
capture); capture records the step without running it, then every step copies its batch into the captured
inputs and replays. Each step trains on its own batch exactly as the eager loop would.
"""

from __future__ import annotations

import warnings
from typing import Any, Callable, Mapping, TypeVar

import torch

from veil.methods.optim import Optimizer

# a `veil.methods.method.Batch` (its `clone` and `copy_`), not imported: `method` imports this module
Batch = Any

WARMUP = 3
T = TypeVar("T")


def optimizers_of(owner: object) -> list[Optimizer]:
    """The optimizers a method holds as attributes (opt_e, opt_a, ...)."""
    return [v for v in vars(owner).values() if isinstance(v, Optimizer)]


def on_side_stream(fn: Callable[[], T]) -> T:
    """fn() on a fresh side stream, joined to the current one both ways: CUDA graphs' warm-up rule (cuBLAS, the
    allocator and the optimizers' state initialise outside the capture)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        out = fn()
    torch.cuda.current_stream().wait_stream(side)
    return out


class GraphedStep:
    """`step(batch)` -> the step's losses: eager for the first WARMUP calls, then one captured graph replayed
    (eager throughout, with a warning, where this torch or driver refuses the capture). Use as a context manager:
    leaving it returns the optimizers to eager use."""

    def __init__(self, step: Callable[[Batch], Mapping[str, Any]], optimizers: list[Optimizer]):
        self.step, self.optimizers = step, optimizers
        self.calls = 0
        self.graph: torch.cuda.CUDAGraph | None = None
        self.static: Batch | None = None
        self.out: Mapping[str, Any] = {}
        self.eager = False

    def __enter__(self) -> "GraphedStep":
        self._capturable(True)
        return self

    def __exit__(self, *exc: object) -> None:
        self._capturable(False)
        self.graph = None  # frees the graph; the parameters and optimizer state stay where they are

    def _capturable(self, on: bool) -> None:
        for opt in self.optimizers:
            opt.capturable = on

    def _warm_up(self, batch: Batch) -> Mapping[str, Any]:
        with warnings.catch_warnings():
            # capturable Adam warns when stepped outside a capture: these eager steps are the capture's warm-up
            warnings.filterwarnings("ignore", message=".*capturable=True.*")
            return on_side_stream(lambda: self.step(batch))

    def _capture(self, batch: Batch) -> None:
        self.static = batch.clone()
        graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(graph):
                self.out = self.step(self.static)
        except RuntimeError as e:  # capture records without running: nothing trained, the eager step is the same
            warnings.warn(f"training: CUDA graph capture failed ({e}); stepping eagerly", stacklevel=3)
            self.eager = True
            self._capturable(False)
            return
        self.graph = graph

    def __call__(self, batch: Batch) -> Mapping[str, Any]:
        self.calls += 1
        if self.eager:
            return self.step(batch)
        if self.calls <= WARMUP:
            return self._warm_up(batch)
        if self.graph is None:
            self._capture(batch)
            if self.graph is None:
                return self.step(batch)
        assert self.static is not None and self.graph is not None
        self.static.copy_(batch)
        self.graph.replay()
        return self.out
