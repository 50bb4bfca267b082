"""Population trials: P runs of one method that differ only in the method's continuous knobs (GPP's beta,
lambda_kl and lr, say) trained as ONE vectorised model, then handed back as P ordinary fitted `Method`s.

A method offers a population form by registering a trainer under its name, with the knobs its members may
differ in (`register_population`). Members share everything else -- widths, d_z, k, epochs, batch size, seed,
the preset's choices -- and so share their initialisation, minibatch order and training noise: each member
sees exactly what it would have seen alone, and matches a separately trained run within floating-point
tolerance. `plan_population` splits a list of configs into such groups and says why every run that cannot
join the largest one trains apart; `fit_population` trains one group."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable, Mapping, Protocol, Sequence, cast

import torch
from torch.optim.adam import adam

from veil.datasets.dataset import Split, TaskSpec
from veil.methods.configs.method_card import show
from veil.methods.federated.ensemble import Stack, StackedOptimizer
from veil.methods.method import Batch, BatchSampler, Method, MethodConfig, TrainContext
from veil.methods.nets import ClassifierBank, fusable
from veil.registry import Registry

#: each member's fitted method and its per-epoch loss rows (the rows `Method.fit` returns)
Fitted = list[tuple[Method, list[dict[str, float]]]]

#: fields that never touch training (`Method.fit` does not read them): members may differ in them
RELEASE_ONLY = ("release_seed",)


class PopulationTrainer(Protocol):
    def __call__(self, configs: Sequence[MethodConfig], task: TaskSpec, train: Split, ctx: TrainContext) -> Fitted:
        """Train configs (one group: equal but for the knobs) as one model; each member's method and history."""
        ...


@dataclass(frozen=True)
class PopulationForm:
    """A method's population trainer and the continuous knobs its members may differ in."""

    method: str
    knobs: tuple[str, ...]
    train: PopulationTrainer

    def __call__(self, configs: Sequence[MethodConfig], task: TaskSpec, train: Split, ctx: TrainContext) -> Fitted:
        return self.train(configs, task, train, ctx)


POPULATIONS: Registry[PopulationForm] = Registry("population form", plugins=False)


def register_population(method_name: str, knobs: Sequence[str]) -> Callable[[PopulationTrainer], PopulationTrainer]:
    """Decorator registering the population trainer of method `method_name`, whose members may differ in `knobs`."""
    return POPULATIONS.decorator(method_name, lambda fn: PopulationForm(method_name, tuple(knobs), fn))


def population_form(name: str) -> PopulationForm | None:
    """The population trainer of method `name`, or None when it has none (its runs train one by one)."""
    return POPULATIONS.get(name)


def population_methods() -> list[str]:
    """Names of the methods with a population form, sorted."""
    return sorted(POPULATIONS)


def structural_differences(a: MethodConfig, b: MethodConfig, knobs: Sequence[str], of_b: str = "") -> list[str]:
    """What keeps configs a and b apart, as 'd_z differs (8 vs 16<of_b>)'; empty when they may train together."""
    if type(a) is not type(b):
        return [f"config type differs ({type(a).__name__} vs {type(b).__name__})"]
    out = []
    for f in dataclasses.fields(a):
        if f.name in knobs or f.name in RELEASE_ONLY:
            continue
        va, vb = getattr(a, f.name), getattr(b, f.name)
        if va != vb:
            out.append(f"{f.name} differs ({show(va)} vs {show(vb)}{of_b})")
    return out


@dataclass(frozen=True)
class PopulationPlan:
    """Groups of run indices that train together, and why each run outside the largest group trains apart."""

    groups: list[list[int]]
    reasons: list[str]


def plan_population(
    configs: Sequence[MethodConfig], method: str, labels: Sequence[str] | None = None
) -> PopulationPlan:
    """Group `configs` (runs of `method`, in order) into populations; every group apart from the largest one
    comes with the reason it is apart ("run 2 trains alone: d_z differs (8 vs 16 in run 0)"). `labels` name
    the runs in those reasons (default 'run <index>')."""
    names = list(labels) if labels is not None else [f"run {i}" for i in range(len(configs))]
    form = population_form(method)
    if form is None:
        verb = "trains alone" if len(names) == 1 else "train one by one"
        why = f"method {method!r} has no population form: {', '.join(names)} {verb}"
        return PopulationPlan([[i] for i in range(len(configs))], [why] if configs else [])
    groups: list[list[int]] = []
    for i, c in enumerate(configs):
        home = next((g for g in groups if not structural_differences(configs[g[0]], c, form.knobs)), None)
        if home is None:
            groups.append([i])
        else:
            home.append(i)
    if not groups:
        return PopulationPlan([], [])
    main = max(groups, key=len)
    reasons = []
    for g in groups:
        who = ", ".join(names[i] for i in g)
        if g is main and len(g) == 1:
            reasons.append(f"{who} trains alone: no other run differs from it only in {', '.join(form.knobs)}")
        elif g is not main:
            diffs = structural_differences(configs[g[0]], configs[main[0]], form.knobs, f" in {names[main[0]]}")
            verb = "trains alone" if len(g) == 1 else "train as a separate population"
            reasons.append(f"{who} {verb}: {', '.join(diffs)}")
    return PopulationPlan(groups, reasons)


def population_groups(configs: Sequence[MethodConfig], method: str) -> list[list[int]]:
    """Indices of `configs` grouped into populations: members differ only in `method`'s continuous knobs (and
    release_seed); a method without a population form gives one group per run."""
    return plan_population(configs, method).groups


def fit_population(
    method_name: str,
    configs: Sequence[MethodConfig],
    task: TaskSpec,
    train_split: Split,
    ctx: TrainContext | None = None,
) -> Fitted:
    """Train `configs` (one population of `method_name`) as one vectorised model on `train_split`; each member's
    ordinary fitted `Method` (on the CPU, as the inline executor leaves it) and per-epoch loss rows. `ctx.on_epoch`
    hears the first member's row after each epoch (for progress); every member's rows come back with it."""
    form = population_form(method_name)
    if form is None:
        raise ValueError(f"method {method_name!r} has no population form (methods with one: {sorted(POPULATIONS)})")
    if not configs:
        return []
    plan = plan_population(configs, method_name)
    if len(plan.groups) != 1:
        raise ValueError(f"configs of {method_name!r} are not one population: " + "; ".join(plan.reasons))
    ctx = ctx or TrainContext()
    if ctx.world_size != 1:
        raise ValueError(f"a population trains on one worker, not {ctx.world_size} (TrainContext.world_size)")
    return form(configs, task, train_split, ctx)


# -- what every population trainer does alike ------------------------------------------------------
def per_member(configs: Sequence[MethodConfig], key: str, device: torch.device) -> torch.Tensor:
    """The (P,) tensor of every member's value of config field `key`."""
    return torch.tensor([float(getattr(c, key)) for c in configs], dtype=torch.float32, device=device)


def member_lr(configs: Sequence[MethodConfig], key: str) -> float | torch.Tensor:
    """One learning rate when every member has the same, else a float64 (P,) tensor of each member's."""
    values = [float(getattr(c, key)) for c in configs]
    return values[0] if len(set(values)) == 1 else torch.tensor(values, dtype=torch.float64)


def per_copy(values: Sequence[float], like: torch.Tensor) -> torch.Tensor:
    """One scalar per copy of stacked tensor `like`, in its dtype, shaped to broadcast over each copy."""
    shape = (like.shape[0],) + (1,) * (like.dim() - 1)
    return torch.tensor(values, dtype=like.dtype, device=like.device).view(shape)


class LoneAdam(StackedOptimizer):
    """A StackedOptimizer that steps each copy exactly as a lone run's optimizer steps its own model. Adam is
    torch's fused kernel (what `make_optimizer` gives a solo run), called on the stacked tensors, or on each
    learning rate's copies when they differ: the kernel is elementwise, so copy p's weights come out bit for bit
    as member p's solo optimizer leaves them for the same gradients. Where the kernel is missing (a device
    without it) Adam and SGD step op for op as torch's single-tensor optimizers, in double-precision per-copy
    scalars. (Batched matmuls still round a few gradient entries differently from a lone model's, ~1e-9;
    adversarial training amplifies that over epochs, so long populations match solo runs in distribution, not bit
    for bit.) Every copy steps at every call."""

    @torch.no_grad()
    def step(self, grads: Sequence[torch.Tensor | None], active: torch.Tensor | None = None) -> None:
        if active is not None and not bool(active.all()):
            raise ValueError("LoneAdam steps every copy at every call (a population has no idle members)")
        p0 = self.tensors[0]
        self.t += 1
        lrs = self.lr.tolist() if isinstance(self.lr, torch.Tensor) else [self.lr] * p0.shape[0]
        given = [torch.zeros_like(p) if g is None else g for p, g in zip(self.tensors, grads)]
        if self.kind == "adam" and all(fusable(p) and dense(p) for p in self.tensors):
            self._fused(given, lrs)
            return
        b1, b2 = self.betas
        steps = self.t.tolist()
        bc2_sqrt = [(1 - b2**t) ** 0.5 for t in steps]
        step_size = [-(lr / (1 - b1**t)) for lr, t in zip(lrs, steps)]
        for i, (p, g) in enumerate(zip(self.tensors, given)):
            if self.kind == "sgd":
                self._sgd(p, g, lrs)
                continue
            m, v = self.m[i], self.v[i]
            m.lerp_(g, 1 - b1)
            v.mul_(b2).addcmul_(g, g, value=1 - b2)
            denom = (v.sqrt() / per_copy(bc2_sqrt, p)).add_(self.eps)
            p.add_(per_copy(step_size, p) * m / denom)  # addcdiv_(m, denom, value=step_size)'s order

    def _fused(self, grads: Sequence[torch.Tensor], lrs: list[float]) -> None:
        """One fused Adam call per distinct learning rate, over those copies' slices of every tensor."""
        copies = len(lrs)
        by_lr: dict[float, list[int]] = {}
        for c, lr in enumerate(lrs):
            by_lr.setdefault(lr, []).append(c)
        done = float(self.t[0]) - 1.0  # every copy steps at every call: one count for all
        for lr, members in by_lr.items():
            params: list[torch.Tensor] = []
            gs: list[torch.Tensor] = []
            ms: list[torch.Tensor] = []
            vs: list[torch.Tensor] = []
            for p, g, m, v in zip(self.tensors, grads, self.m, self.v):
                if g.stride() != p.stride():  # the kernel reads a gradient as laid out like its parameter
                    g = torch.empty_like(p).copy_(g)
                for x, out in ((p, params), (g, gs), (m, ms), (v, vs)):
                    out += [row_major(x)] if len(members) == copies else [row_major(x[c]) for c in members]
            adam(
                params,
                gs,
                ms,
                vs,
                [],
                [torch.tensor(done) for _ in params],  # adam() counts this step before using it
                fused=True,
                amsgrad=False,
                beta1=self.betas[0],
                beta2=self.betas[1],
                lr=lr,
                weight_decay=0.0,
                eps=self.eps,
                maximize=False,
            )

    @staticmethod
    def _sgd(p: torch.Tensor, g: torch.Tensor, lrs: list[float]) -> None:
        if len(set(lrs)) == 1:
            p.add_(g, alpha=-lrs[0])
            return
        for c, lr in enumerate(lrs):  # add_ with alpha fuses the multiply: per copy, as SGD does it
            p[c].add_(g[c], alpha=-lr)


def dense(p: torch.Tensor) -> bool:
    """Whether `p` fills its memory in row-major order or in its last two axes' transpose (`matmul_layout`)."""
    return row_major(p).is_contiguous()


def row_major(x: torch.Tensor) -> torch.Tensor:
    """A dense `x` as a row-major view of the same memory (its last two axes swapped where it is stored transposed):
    the fused kernel copies any other layout in and out, and an elementwise step does not care which view it gets."""
    return x if x.is_contiguous() else x.transpose(-1, -2)


def bank_stacks(members: Sequence[Method], role: str) -> dict[str, Stack]:
    """One stack per head of every member's ClassifierBank `role` (copy p is member p's head), keyed by the
    head's prefix in `Method.state` ('<role>.heads.<h>')."""
    banks = [cast(ClassifierBank, m.modules()[role]) for m in members]
    return {f"{role}.heads.{h}": Stack([b.heads[h] for b in banks]) for h in range(len(banks[0].heads))}


def shared(labels: Mapping[str, torch.Tensor], copies: int) -> dict[str, torch.Tensor]:
    """Every member's labels: the batch's own (b,), viewed as (P, b)."""
    return {k: v.expand(copies, -1) for k, v in labels.items()}


def train_members(
    sampler: BatchSampler,
    epochs: int,
    copies: int,
    train_step: Callable[[Batch], Mapping[str, torch.Tensor]],
    ctx: TrainContext | None = None,
) -> list[list[dict[str, float]]]:
    """`epochs` passes of `sampler` as `Method.fit` makes them; `train_step` returns each loss as a (P,) tensor.
    Every member's per-epoch mean loss rows; `ctx.report` hears the first member's row after each epoch (progress)."""
    histories: list[list[dict[str, float]]] = [[] for _ in range(copies)]
    for _ in range(epochs):
        sums: list[dict[str, float]] = [{} for _ in range(copies)]
        steps = 0
        for batch in sampler.epoch():
            for k, v in train_step(batch).items():
                for p, x in enumerate(v.tolist()):
                    sums[p][k] = sums[p].get(k, 0.0) + float(x)
            steps += 1
        for p in range(copies):
            histories[p].append({k: v / steps for k, v in sums[p].items()})
        if ctx is not None:
            ctx.report(len(histories[0]) - 1, histories[0][-1])
    return histories


def load_members(members: Sequence[Method], stacks: Mapping[str, Stack]) -> None:
    """Load copy p of every stack (keyed by its prefix in `Method.state`) into member p, then move it to the CPU."""
    for p, m in enumerate(members):
        m.load_state({f"{prefix}.{k}": v for prefix, s in stacks.items() for k, v in s.state_dict(p).items()})
        m.to("cpu")
