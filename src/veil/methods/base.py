"""The Method interface every PRL method and baseline implements, and the shared training loop.

A method is built from a typed config and a TaskSpec (input width, label class counts). `fit` plays
the method's game on a training split, reporting one row of losses per epoch through a TrainContext
(inline: a progress bar; under Ray Train: `ray.train.report`); `encode` releases z, drawing any release
noise from a fresh generator (`veil.randomness`); `state` / `load_state` move trained weights
between processes (checkpoints load with weights_only=True)."""

from __future__ import annotations

import dataclasses
import math
from abc import ABC
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Iterable, Iterator, Literal, Mapping

import numpy as np
import torch
from torch import nn

from veil.config import MAX_EPOCHS, as_params, param
from veil.datasets.base import Split, TaskSpec
from veil.methods.deviations import release_seed_deviation
from veil.randomness import METHOD_STREAM, release_generator

#: the values of every method's `preset` field
PRESETS = ("default", "paper")
UNSTATED = " (the paper gives no value: Veil's earlier choice)"


@dataclass(frozen=True)
class MethodConfig:
    """Fields every method shares."""

    d_z: int = param(8, "width of the released representation z", ge=1)
    epochs: int = param(20, "passes over the training data", ge=0, le=MAX_EPOCHS)
    batch_size: int = param(64, "minibatch size", ge=1)
    seed: int = param(0, "seed of initialisation, minibatch order and training noise (not of releases)", ge=0)
    release_seed: int | None = param(
        None,
        "seed of the release noise; unset = fresh OS entropy at every release. Setting it makes releases "
        "reproducible from the run's params and voids their privacy guarantee (recorded as a deviation)",
        ge=0,
    )
    preset: str = param(
        "default",
        "what fills the fields you do not set: Veil's protective defaults ('default', measured to hide the "
        "sensitive label) or the letter of the method's paper ('paper'; see `veil methods NAME`)",
        choices=PRESETS,
    )


@dataclass(frozen=True)
class ClosedFormConfig(MethodConfig):
    """Fields of a method fitted in closed form (no training loop): `epochs` and `batch_size` stay, so every
    method takes the same keys, but say that they are unused."""

    epochs: int = param(
        20, "unused: the method is fitted in closed form, with no passes over the data", ge=0, le=MAX_EPOCHS
    )
    batch_size: int = param(64, "unused: the closed-form fit uses every training row at once", ge=1)


@dataclass(frozen=True)
class PaperValue:
    """A field whose Veil default differs from its `preset: paper` value: that value and why the default differs."""

    value: Any
    why: str
    stated: bool = True
    """False where the paper gives no value and `preset: paper` keeps Veil's earlier choice: not a deviation."""


@dataclass(frozen=True)
class PrivacyKnob:
    """The config field that trades utility for privacy, and the range calibration searches it over (`veil.calibrate`):
    GPP's beta, EIGAN's alpha, LDP's eps, the adjustable AE's noise. Positions run from 0 (the private end) to 1
    (the useful end) in the knob's scale, so one search serves knobs that hide more when they grow and when they
    shrink."""

    field: str
    """the method's config field"""
    low: float
    """smallest value searched"""
    high: float
    """largest value searched"""
    scale: Literal["log", "logit", "linear"] = "log"
    """how values are spaced between low and high ('logit' for weights in (0, 1))"""
    private_end: Literal["low", "high"] = "low"
    """which end of the range hides more ('low': beta, alpha, eps; 'high': noise)"""

    def __post_init__(self) -> None:
        if not self.low < self.high:
            raise ValueError(f"knob {self.field}: low {self.low} must be below high {self.high}")
        if self.scale == "log" and self.low <= 0:
            raise ValueError(f"knob {self.field}: a log scale needs low > 0")
        if self.scale == "logit" and not 0 < self.low < self.high < 1:
            raise ValueError(f"knob {self.field}: a logit scale needs 0 < low < high < 1")

    def _warp(self, v: float) -> float:
        if self.scale == "log":
            return math.log(v)
        if self.scale == "logit":
            return math.log(v / (1 - v))
        return v

    def _unwarp(self, w: float) -> float:
        if self.scale == "log":
            return math.exp(w)
        if self.scale == "logit":
            return 1 / (1 + math.exp(-w))
        return w

    def value_at(self, position: float) -> float:
        """The knob value at `position` in [0, 1] (0: the private end, 1: the useful end)."""
        t = position if self.private_end == "low" else 1 - position
        lo, hi = self._warp(self.low), self._warp(self.high)
        return float(self._unwarp(lo + min(max(t, 0.0), 1.0) * (hi - lo)))

    def position_of(self, value: float) -> float:
        """Inverse of `value_at` (clipped to [0, 1])."""
        lo, hi = self._warp(self.low), self._warp(self.high)
        t = (self._warp(min(max(value, self.low), self.high)) - lo) / (hi - lo)
        return t if self.private_end == "low" else 1 - t

    def read(self, config: "MethodConfig") -> float:
        """The knob's value in `config` (the first client's for a per-client tuple)."""
        v = getattr(config, self.field)
        return float(v[0] if isinstance(v, tuple) else v)

    def apply(self, config: "MethodConfig", value: float) -> "MethodConfig":
        """`config` with the knob set to `value` (every client's, for a per-client tuple)."""
        current = getattr(config, self.field)
        new: Any = (float(value),) if isinstance(current, tuple) else value
        return dataclasses.replace(config, **{self.field: new})


@dataclass
class Batch:
    """A minibatch on the training device."""

    x: torch.Tensor
    utility: dict[str, torch.Tensor]
    sensitive: dict[str, torch.Tensor]


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
        perm = torch.randperm(self.n, generator=self.gen)
        for i in range(self.steps_per_epoch):
            yield self._take(perm[i * self.batch_size : (i + 1) * self.batch_size])

    def sample(self) -> Batch:
        return self._take(torch.randperm(self.n, generator=self.gen)[: self.batch_size])


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
    ) -> None:
        self.device = torch.device(device)
        self.rank, self.world_size = rank, world_size
        self.on_epoch = on_epoch

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


class Method(ABC):
    """A private-representation method: build from config and task, `fit`, `encode`, `state`."""

    name: ClassVar[str]
    Config: ClassVar[type[MethodConfig]] = MethodConfig
    description: ClassVar[str] = ""
    paper: ClassVar[str] = ""
    releases_input_format: ClassVar[bool] = False  # z is an obfuscated record in x's format (adds seed 003's audit)
    #: the paper's value of every field whose default departs from it; `preset: paper` restores them all
    paper_values: ClassVar[Mapping[str, PaperValue]] = {}
    #: the field that trades utility for privacy, which calibration sets to meet a leakage target (None: the
    #: method has no privacy knob, e.g. the no-privacy autoencoder)
    privacy_knob: ClassVar[PrivacyKnob | None] = None

    def __init__(self, config: MethodConfig, task: TaskSpec) -> None:
        self.config = config
        self.task = task
        self.device = torch.device("cpu")
        self.release_calls = 0  # encode calls so far: with a release_seed, call n draws stream n
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

    def release(self, x: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """Map a batch of inputs to the released representation z (default: the encoder's output); any
        noise of the release is drawn from `generator`, never from the global RNG."""
        return self.modules()["encoder"](x)

    def ldp_release(self) -> LDPRelease | None:
        """For a release made by an eps-LDP mechanism: the mechanism and the map it is applied to (the
        certificate tests the mechanism's epsilon empirically); None for every other release."""
        return None

    @classmethod
    def deviations(cls, config: MethodConfig) -> dict[str, Any]:
        """Choices in `config` that depart from the paper, in the method's own words (empty = faithful)."""
        return {}

    @classmethod
    def preset_values(cls, preset: str) -> dict[str, Any]:
        """The field values preset `preset` sets before the user's own ('default': none, the fields' defaults)."""
        return {k: p.value for k, p in cls.paper_values.items()} if preset == "paper" else {}

    @classmethod
    def preset_differences(cls, defaults: MethodConfig) -> list[tuple[str, str, str, str]]:
        """(field, default, paper value, why) for every field `preset: paper` changes, as a user writes them;
        the paper value notes when the paper gives none (`veil methods NAME` and docs/methods.md show these)."""
        return [
            (key, show(getattr(defaults, key)), show(p.value) + ("" if p.stated else UNSTATED), p.why)
            for key, p in cls.paper_values.items()
        ]

    @classmethod
    def recorded_deviations(cls, config: MethodConfig) -> dict[str, Any]:
        """Every departure from the paper a run records as `method.deviation.<key>`: the method's own texts, each
        field of `paper_values` set otherwise (with the paper's value and why Veil's default differs), and an
        explicit release_seed."""
        out = dict(cls.deviations(config))
        for name, p in cls.paper_values.items():
            value = getattr(config, name)
            if p.stated and name not in out and value != p.value:
                out[name] = f"{show(value)} instead of the paper's {show(p.value)}: {p.why}"
        return {**out, **release_seed_deviation(config.release_seed)}

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
        history: list[dict[str, float]] = []
        for epoch in range(self.config.epochs):
            for m in self.modules().values():
                m.train()
            sums: dict[str, float | torch.Tensor] = {}
            steps = 0
            for batch in sampler.epoch():
                for k, v in self.train_step(batch, sampler, ctx).items():
                    # a loss tensor is summed on its device (no host sync per step), in float64 as floats are
                    sums[k] = sums.get(k, 0.0) + (v.detach().double() if isinstance(v, torch.Tensor) else float(v))
                steps += 1
            row = {k: float(v) / steps for k, v in sums.items()}
            history.append(row)
            ctx.report(epoch, row)
        return history

    @classmethod
    def release_width_for(cls, config: MethodConfig, task: TaskSpec | None) -> int | None:
        """Width of the z that `config` releases on `task` (d_z, unless the method derives it); None when it
        depends on a task not given."""
        return config.d_z

    @property
    def release_width(self) -> int:
        width = self.release_width_for(self.config, self.task)
        assert width is not None
        return width

    def release_generator(self) -> torch.Generator:
        """The generator of the next release: fresh OS entropy, or (release_seed, call number) when set."""
        gen = release_generator(self.config.release_seed, METHOD_STREAM, self.release_calls, device=self.device)
        self.release_calls += 1
        return gen

    @torch.no_grad()
    def encode(self, x: np.ndarray, batch_size: int = 4096) -> np.ndarray:
        """Release z for rows `x` (float32 array), in eval mode, with noise independent of every other call."""
        for m in self.modules().values():
            m.eval()
        gen = self.release_generator()
        out = []
        for i in range(0, len(x), batch_size):
            xb = torch.from_numpy(np.array(x[i : i + batch_size], dtype=np.float32)).to(self.device)
            out.append(self.release(xb, gen).float().cpu().numpy())
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


def show(value: Any) -> str:
    """A config value as a user writes it (tuples as lists, no quotes around strings)."""
    if isinstance(value, tuple):
        return "[" + ", ".join(show(v) for v in value) + "]"
    return str(value)


def step(loss: torch.Tensor, opt: torch.optim.Optimizer, ctx: TrainContext, params: list[torch.Tensor]) -> None:
    """zero_grad, backward, sync gradients across workers, optimizer step."""
    opt.zero_grad(set_to_none=True)
    loss.backward()
    ctx.sync_grads(params)
    opt.step()
