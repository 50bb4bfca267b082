"""The Method interface every PRL method and baseline implements, and the shared training loop.

A method is built from a typed config and a TaskSpec (input width, label class counts). `fit` plays
the method's game on a training split, reporting one row of losses per epoch through a TrainContext
(inline: a progress bar; under Ray Train: `ray.train.report`); `encode` releases z, drawing any release
noise from the method's secret `release_key` and each row's content (`veil.randomness`: the same row released
twice gets the same z); `state` / `load_state` move trained weights
between processes (checkpoints load with weights_only=True)."""

from __future__ import annotations

from abc import ABC
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Iterable, Iterator, Mapping

import numpy as np
import torch
from torch import nn

from veil.config import as_params
from veil.datasets.dataset import Split, TaskSpec
from veil.methods.configs.method_card import MethodCard, MethodConfig
from veil.methods.cuda_graph import GraphedStep, optimizers_of
from veil.methods.optim import Optimizer
from veil.randomness import MissingKey, Noise, ReleaseKey, for_rows


@dataclass
class Batch:
    """A minibatch on the training device."""

    x: torch.Tensor
    utility: dict[str, torch.Tensor]
    sensitive: dict[str, torch.Tensor]

    def clone(self) -> "Batch":
        """A copy in new memory (a CUDA graph's captured inputs)."""
        return Batch(
            self.x.clone(),
            {k: v.clone() for k, v in self.utility.items()},
            {k: v.clone() for k, v in self.sensitive.items()},
        )

    def copy_(self, other: "Batch") -> None:
        """Overwrite these tensors in place with `other`'s (same names and shapes)."""
        self.x.copy_(other.x)
        for into, frm in ((self.utility, other.utility), (self.sensitive, other.sensitive)):
            for k, t in into.items():
                t.copy_(frm[k])


class BatchSampler:
    """Seeded minibatches over this worker's rows: `epoch()` is one shuffled pass, `sample()` one random batch."""

    def __init__(
        self, split: Split, batch_size: int, device: torch.device, seed: int, rows: np.ndarray | None = None
    ) -> None:
        rows = np.arange(len(split)) if rows is None else rows
        t = lambda a, dt: torch.as_tensor(np.asarray(a)[rows], dtype=dt, device=device)  # noqa: E731
        self.x = t(split.x, torch.float32)
        self.utility = {k: t(v, torch.long) for k, v in split.utility.items()}
        self.sensitive = {k: t(v, torch.long) for k, v in split.sensitive.items()}
        self.n = len(rows)
        self.batch_size = min(batch_size, self.n)
        self.gen = torch.Generator().manual_seed(seed)
        self._order = torch.empty(0, dtype=torch.long)
        self._next = self.n  # the first `sample()` shuffles

    def _take(self, idx: torch.Tensor) -> Batch:
        idx = idx.to(self.x.device)
        return Batch(
            self.x[idx], {k: v[idx] for k, v in self.utility.items()}, {k: v[idx] for k, v in self.sensitive.items()}
        )

    @property
    def steps_per_epoch(self) -> int:
        return max(1, self.n // self.batch_size)

    def epoch(self) -> Iterator[Batch]:
        # Full batches only, so every data-parallel worker takes the same number of steps.
        perm = torch.randperm(self.n, generator=self.gen).to(self.x.device)  # one copy per epoch, not per step
        for i in range(self.steps_per_epoch):
            yield self._take(perm[i * self.batch_size : (i + 1) * self.batch_size])

    def sample(self) -> Batch:
        """A batch of distinct random rows: the next `batch_size` of a shuffled order, shuffled again once used up.
        A draw then costs its batch, not the whole table, as a permutation per draw would; the order moves to the
        rows' device once per shuffle, as `epoch()`'s does, not once per draw."""
        if self._next + self.batch_size > self.n:
            self._order, self._next = torch.randperm(self.n, generator=self.gen).to(self.x.device), 0
        idx = self._order[self._next : self._next + self.batch_size]
        self._next += self.batch_size
        return self._take(idx)


@dataclass(frozen=True)
class LDPRelease:
    """An eps-LDP release z = M(v(x)): the mechanism, the bounded map v, and the bound c on v's coordinates."""

    mechanism: Any
    """a `veil.methods.mechanisms.LaplaceMechanism`"""
    bounded: Callable[[torch.Tensor], torch.Tensor]
    """x -> v, every coordinate in [-bound, bound]"""
    bound: float
    """c: the bound on every coordinate of v"""
    width: int
    """width of v (and of z)"""


class TrainContext:
    """Where training runs: device, this worker's rank, how gradients sync and where epoch rows go.
    The default is one in-process worker on the CPU."""

    def __init__(
        self,
        device: str | torch.device = "cpu",
        rank: int = 0,
        world_size: int = 1,
        on_epoch: Callable[[int, dict[str, float]], None] | None = None,
        cuda_graph: bool = True,
    ) -> None:
        self.device = torch.device(device)
        self.rank, self.world_size = rank, world_size
        self.on_epoch = on_epoch
        self.cuda_graph = cuda_graph  # False: every step eager, even where a CUDA graph could replay it

    @property
    def graphs(self) -> bool:
        """Whether steps of a graph-safe method are captured and replayed here."""
        return self.cuda_graph and self.device.type == "cuda" and self.world_size == 1

    def rows(self, n: int) -> np.ndarray:
        """The training rows this worker owns (all rows for one worker; equal strided shards otherwise)."""
        if self.world_size == 1:
            return np.arange(n)
        per = n // self.world_size
        return np.arange(self.rank, n, self.world_size)[:per]

    def sync_grads(self, params: Iterable[torch.Tensor]) -> None:
        """Average gradients over data-parallel workers (no-op for one worker)."""
        if self.world_size == 1:
            return
        import torch.distributed as dist

        for p in params:
            if p.grad is not None:
                dist.all_reduce(p.grad, op=dist.ReduceOp.SUM)
                p.grad /= self.world_size

    def report(self, epoch: int, row: dict[str, float]) -> None:
        if self.on_epoch is not None:
            self.on_epoch(epoch, row)


class Method(MethodCard, ABC):
    """A private-representation method: build from config and task, `fit`, `encode`, `state`. What it is (name,
    Config, description, paper values, privacy knob, deviations) comes from its card (`MethodCard`, torch-free)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Say on each method class whether it releases through an eps-LDP mechanism (it overrides `ldp_release`):
        a built-in card declares `eps_ldp` torch-free, and a test checks the two agree; a plugin's class is told."""
        super().__init_subclass__(**kwargs)
        cls.eps_ldp = cls.ldp_release is not Method.ldp_release

    def __init__(self, config: MethodConfig, task: TaskSpec) -> None:
        self.config = config
        self.task = task
        self.device = torch.device("cpu")
        self.release_calls = 0  # encode calls so far
        self.release_draws = 0  # keyed noise draws of the last encode call (0: a deterministic release)
        # the secret the release noise derives from (with each row's content): fresh OS entropy per method; a run
        # keeps it outside MLflow (`veil.keystore`) and `veil release` loads it back. A set release_seed replaces it.
        self.release_key: ReleaseKey | MissingKey = ReleaseKey.new()
        torch.manual_seed(config.seed)
        self.build()
        self.make_optimizers()

    # -- to implement ---------------------------------------------------------------------------
    def build(self) -> None:  # noqa: B027  a hook: methods without networks (pca) keep the default
        """Create networks and optimizers (called once from __init__, after seeding)."""

    def make_optimizers(self) -> None:  # noqa: B027  a hook: closed-form methods have no optimizer
        """Create optimizers over the current parameters (called after `build` and after every `to`)."""

    def modules(self) -> dict[str, nn.Module]:
        """Every network of the method by role; the encoder must be under 'encoder'."""
        raise NotImplementedError

    def train_step(self, batch: Batch, sampler: BatchSampler, ctx: TrainContext) -> Mapping[str, float | torch.Tensor]:
        """One iteration of the method's algorithm on `batch`; returns scalar losses by name, as floats or as
        0-d tensors (which `fit` sums without a host sync, reading them once per epoch)."""
        raise NotImplementedError

    def fit_closed_form(self, train: Split) -> None:
        """Methods without iterative training (PCA, random projection) override this instead."""
        raise NotImplementedError

    def release(self, x: torch.Tensor, generator: Noise) -> torch.Tensor:
        """Map a batch of inputs to the released representation z (default: the encoder's output); any
        noise of the release is drawn from `generator` (the batch's keyed rows, `veil.randomness.RowNoise`,
        through `gaussian_like` or the mechanism), never from the global RNG."""
        return self.modules()["encoder"](x)

    def ldp_release(self) -> LDPRelease | None:
        """For a release made by an eps-LDP mechanism: the mechanism and the map it is applied to (the
        certificate tests the mechanism's epsilon empirically); None for every other release."""
        return None

    graph_safe: ClassVar[bool] = False
    """its train_step may be captured in a CUDA graph (`veil.methods.cuda_graph`): fixed shapes, no host sync,
    no random draws, no data but its batch"""

    # -- shared ---------------------------------------------------------------------------------
    @property
    def iterative(self) -> bool:
        return type(self).train_step is not Method.train_step

    def to(self, device: torch.device | str) -> "Method":
        self.device = torch.device(device)
        for m in self.modules().values():
            m.to(self.device)
        self.make_optimizers()  # optimizers must see the moved parameters
        return self

    def parameters_of(self, *roles: str) -> list[torch.nn.Parameter]:
        mods = self.modules()
        return [p for r in roles for p in mods[r].parameters()]

    def fit(self, train: Split, ctx: TrainContext | None = None) -> list[dict[str, float]]:
        """Train on `train`; returns one row of mean losses per epoch."""
        ctx = ctx or TrainContext()
        self.to(ctx.device)
        if not self.iterative:
            self.fit_closed_form(train)
            return []
        sampler = BatchSampler(
            train, self.config.batch_size, ctx.device, self.config.seed + 1000 * ctx.rank, rows=ctx.rows(len(train))
        )
        if self.graph_safe and ctx.graphs:
            with GraphedStep(lambda b: self.train_step(b, sampler, ctx), optimizers_of(self)) as graphed:
                return self.fit_epochs(sampler, ctx, graphed)
        return self.fit_epochs(sampler, ctx, lambda b: self.train_step(b, sampler, ctx))

    def fit_epochs(
        self,
        sampler: BatchSampler,
        ctx: TrainContext,
        train_step: Callable[[Batch], Mapping[str, float | torch.Tensor]],
    ) -> list[dict[str, float]]:
        """The epochs of `fit`: `train_step` on every minibatch, one row of mean losses per epoch."""
        history: list[dict[str, float]] = []
        for epoch in range(self.config.epochs):
            for m in self.modules().values():
                m.train()
            sums: dict[str, float | torch.Tensor] = {}
            steps = 0
            for batch in sampler.epoch():
                for k, v in train_step(batch).items():
                    # an accelerator's loss is summed on its device in float64 (no host sync per step); on the
                    # CPU reading it is cheaper than another op
                    if isinstance(v, torch.Tensor) and v.device.type != "cpu":
                        sums[k] = sums.get(k, 0.0) + v.detach().double()
                    else:
                        sums[k] = sums.get(k, 0.0) + float(v)
                steps += 1
            row = {k: float(v) / steps for k, v in sums.items()}
            history.append(row)
            ctx.report(epoch, row)
        return history

    @property
    def release_width(self) -> int:
        width = self.release_width_for(self.config, self.task)
        assert width is not None
        return width

    def release_source(self) -> ReleaseKey | MissingKey:
        """The key of this method's releases: its secret `release_key`, or the key a set release_seed stands for."""
        seed = self.config.release_seed
        return self.release_key if seed is None else ReleaseKey.from_seed(seed)

    def encode(self, x: np.ndarray, batch_size: int = 4096) -> np.ndarray:
        """Release z for rows `x` (float32 array), in eval mode: a row's noise derives from the release key and the
        row's content, so the same row gets the same noise in every call, batch and position (z up to the float
        rounding of the encoder's arithmetic, which can differ with the batch's size)."""
        return self.release_in_batches(x, batch_size, lambda xb, gen, rows: self.release(xb, gen))

    @torch.no_grad()
    def release_in_batches(
        self,
        x: np.ndarray,
        batch_size: int,
        release: Callable[[torch.Tensor, Noise, slice], torch.Tensor],
    ) -> np.ndarray:
        """`release(batch, noise, rows)` over `x` in batches of `batch_size` rows (`rows`: the batch's slice of
        x), in eval mode, `noise` the batch's rows under the release key (`release_source`); the results as one
        float32 array."""
        for m in self.modules().values():
            m.eval()
        source = self.release_source()
        self.release_calls += 1
        self.release_draws = 0
        out = []
        for i in range(0, len(x), batch_size):
            xn = np.array(x[i : i + batch_size], dtype=np.float32)
            xb = torch.from_numpy(xn).to(self.device)
            noise = for_rows(source, xn)
            out.append(release(xb, noise, slice(i, i + batch_size)).float().cpu().numpy())
            self.release_draws += getattr(noise, "draws", 0)
        return np.concatenate(out) if out else np.zeros((0, self.release_width), np.float32)

    def state(self) -> dict[str, torch.Tensor]:
        """All weights as one flat dict of CPU tensors ('<role>.<param>')."""
        return {
            f"{role}.{k}": v.detach().cpu() for role, m in self.modules().items() for k, v in m.state_dict().items()
        }

    def load_state(self, state: Mapping[str, torch.Tensor]) -> None:
        """Inverse of `state`."""
        for role, m in self.modules().items():
            sub = {k[len(role) + 1 :]: v for k, v in state.items() if k.startswith(role + ".")}
            m.load_state_dict(sub)

    def params(self) -> dict[str, Any]:
        """The config and any named deviations, as flat MLflow params."""
        out = as_params(self.config)
        out.update({f"deviation.{k}": v for k, v in self.recorded_deviations(self.config).items()})
        return out


def step(loss: torch.Tensor, opt: Optimizer, ctx: TrainContext, params: list[torch.Tensor]) -> None:
    """zero_grad, backward, sync gradients across workers, optimizer step."""
    opt.zero_grad(set_to_none=True)
    loss.backward()
    ctx.sync_grads(params)
    opt.step()
