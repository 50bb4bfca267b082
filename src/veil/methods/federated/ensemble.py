"""Many nodes' copies of one network as one vectorised ensemble (torch.func).

`Stack` holds P copies of a module with every parameter stacked on a leading axis
(`torch.func.stack_module_state`) and runs them with `vmap(functional_call)`. `StackedOptimizer` is
Adam (or SGD) over the stacked tensors with a per-copy step count and a per-copy mask: copies that
do not step this iteration (a node with fewer minibatches, or that is not taking part) are left
exactly as they are, moments included. Per-copy losses are SUMMED before differentiating, so each
copy's gradient is its own loss's gradient (STACK-NOTES: averaging rescales Adam's epsilon).

A host with one node (one actor per node) runs the very same code with P = 1, so a virtual host
and one-node-per-actor differ only in floating-point order inside the batched kernels.

`ShardStack` pads the nodes' shards to one (P, N_max, d) tensor and builds each round's minibatch
plan from every node's own generator (same draws whatever else the host holds)."""

from __future__ import annotations

import copy
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import torch
from torch import nn
from torch.func import functional_call, stack_module_state, vmap
from torch.nn import functional as F

from veil.methods.federated.core import Node


def seeded_modules(factory: Callable[[], nn.Module], seeds: Sequence[int]) -> list[nn.Module]:
    """One module per seed, each built (on the CPU) right after seeding torch's CPU generator with the seed, as
    `torch.manual_seed(seed)` seeds it; the global RNG is restored. Only the CPU generator: `torch.manual_seed` also
    registers lazy CUDA/XPU/MTIA seeding with a stack trace each call (~0.6 ms, 1.8 s for a K=1000 federation)."""
    state = torch.get_rng_state()
    try:
        out = []
        for s in seeds:
            torch.default_generator.manual_seed(int(s))
            out.append(factory())
        return out
    finally:
        torch.set_rng_state(state)


def _resets(module: nn.Module) -> list[nn.Module]:
    return [m for m in module.modules() if callable(getattr(m, "reset_parameters", None))]


def seeded_copies(factory: Callable[[], nn.Module], seeds: Sequence[int]) -> "Stack":
    """`Stack(seeded_modules(factory, seeds))`, built faster where it can be: one module is built and, per seed,
    re-initialised by its submodules' `reset_parameters()` in `modules()` order, which draws what building it
    draws for every MLP here (checked on the first seed; otherwise one module is built per seed). Building a
    torch module costs far more than its few draws, and a federation builds one per node, role and label."""
    seeds = [int(s) for s in seeds]
    if len(seeds) < 2:
        return Stack(seeded_modules(factory, seeds))
    state = torch.get_rng_state()
    try:
        torch.default_generator.manual_seed(seeds[0])
        template = factory()
        after_build = torch.default_generator.get_state()
        built = {k: v.detach().clone() for k, v in template.state_dict().items()}
        resets = _resets(template)

        def reinit(seed: int) -> None:
            torch.default_generator.manual_seed(seed)
            for m in resets:
                m.reset_parameters()  # type: ignore[operator]

        reinit(seeds[0])
        now = template.state_dict()
        # the same values and the generator left in the same place: building drew nothing else
        same = torch.equal(after_build, torch.default_generator.get_state())
        if not resets or not same or any(not torch.equal(built[k], now[k]) for k in built):
            torch.set_rng_state(state)
            return Stack(seeded_modules(factory, seeds))
        named = dict(template.named_parameters())
        bufs = dict(template.named_buffers())
        params = {k: torch.empty((len(seeds), *p.shape), dtype=p.dtype) for k, p in named.items()}
        buffers = {k: torch.empty((len(seeds), *b.shape), dtype=b.dtype) for k, b in bufs.items()}
        with torch.no_grad():
            for i, seed in enumerate(seeds):
                if i:
                    reinit(seed)
                for k, p in named.items():
                    params[k][i] = p
                for k, b in bufs.items():
                    buffers[k][i] = b
        return Stack(base=copy.deepcopy(template).to("meta"), params=params, buffers=buffers)
    finally:
        torch.set_rng_state(state)


class Stack:
    """P copies of one architecture, parameters stacked on axis 0, called as one vmapped function."""

    def __init__(
        self,
        modules: Sequence[nn.Module] | None = None,
        *,
        base: nn.Module | None = None,
        params: Mapping[str, torch.Tensor] | None = None,
        buffers: Mapping[str, torch.Tensor] | None = None,
    ) -> None:
        if modules is not None:
            p, b = stack_module_state(list(modules))
            base = copy.deepcopy(modules[0]).to("meta")
            params, buffers = p, b
        assert base is not None and params is not None
        self.base = base
        self.chain = linear_chain(base)
        batched = self.chain is not None or hasattr(base, "stacked_forward")
        weights = linear_weights(base) if batched else set()
        self.params = {
            k: (matmul_layout(v) if k in weights else v.detach().clone()).requires_grad_(True)
            for k, v in params.items()
        }
        self.buffers = {k: v.detach().clone() for k, v in (buffers or {}).items()}
        self.names = list(self.params)
        self.sizes = [int(self.params[n][0].numel()) for n in self.names]
        self.offsets = np.concatenate([[0], np.cumsum(self.sizes)]).astype(np.int64)
        self.size = int(self.offsets[-1])

    @property
    def copies(self) -> int:
        return int(self.params[self.names[0]].shape[0])

    def tensors(self) -> list[torch.Tensor]:
        return [self.params[n] for n in self.names]

    def __call__(self, x: torch.Tensor) -> torch.Tensor | tuple[torch.Tensor, ...]:
        """Run every copy on its own input: x has shape (P, ...)."""
        if self.chain is not None and x.dim() == 3:
            return run_chain(self.chain, self.params, x)
        stacked = getattr(self.base, "stacked_forward", None)
        if stacked is not None and x.dim() == 3:  # a module that runs its own copies as batched matmuls
            return stacked(self.params, x)
        base = self.base

        def one(p, b, xi):
            return functional_call(base, (p, b), (xi,))

        return vmap(one)(self.params, self.buffers, x)

    # -- selecting and writing back copies ------------------------------------------------------
    def take(self, members: torch.Tensor) -> "Stack":
        """A new stack of copies `members` (fresh leaves, so training it leaves this one untouched)."""
        return Stack(
            base=self.base,
            params={n: p.detach()[members] for n, p in self.params.items()},
            buffers={n: b[members] for n, b in self.buffers.items()},
        )

    @torch.no_grad()
    def put(self, members: torch.Tensor, sub: "Stack") -> None:
        for n in self.names:
            self.params[n][members] = sub.params[n].detach()

    # -- flat views (the order of named_parameters, as parameters_to_vector) ---------------------
    @torch.no_grad()
    def flat_all(self) -> torch.Tensor:
        """Every copy's flat vector, one row per copy: (P, size)."""
        return torch.cat([self.params[n].detach().reshape(self.copies, -1) for n in self.names], dim=1)

    @torch.no_grad()
    def set_flat(self, copy_index: int, vec: torch.Tensor) -> None:
        for n, o, s in zip(self.names, self.offsets[:-1], self.sizes):
            p = self.params[n]
            p[copy_index] = vec[o : o + s].view_as(p[copy_index]).to(p.dtype)

    @torch.no_grad()
    def set_entries_many(self, copy_indices: Sequence[int], idx: np.ndarray, values: torch.Tensor) -> None:
        """Overwrite flat entries `idx` (sorted) of the copies `copy_indices` with `values`, one row per copy, in
        one indexed write per parameter."""
        rows = torch.as_tensor(list(copy_indices), dtype=torch.long).unsqueeze(1)
        for n, o, s in zip(self.names, self.offsets[:-1], self.sizes):
            lo, hi = np.searchsorted(idx, [o, o + s])
            if hi <= lo:
                continue
            local = torch.as_tensor(idx[lo:hi] - o).unsqueeze(0)
            p = self.params[n]
            at = torch.unravel_index(local, p.shape[1:])  # flat entries in named_parameters order, any layout
            p[(rows,) + tuple(at)] = values[:, lo:hi].to(p.dtype)

    def state_dict(self, copy_index: int) -> dict[str, torch.Tensor]:
        out = {n: self.params[n][copy_index].detach().clone() for n in self.names}
        out.update({n: b[copy_index].clone() for n, b in self.buffers.items()})
        return out


#: one step of a stacked MLP: ("linear", weight name, bias name or None) or ("act", elementwise function)
ChainStep = tuple[str, Any, Any]
ACTIVATIONS: dict[type, Callable[[torch.Tensor], torch.Tensor]] = {
    nn.ReLU: torch.relu,
    nn.Tanh: torch.tanh,
    nn.Sigmoid: torch.sigmoid,
}


def linear_chain(base: nn.Module) -> list[ChainStep] | None:
    """`base` as a chain of Linear layers and elementwise activations (an `nn.Sequential` MLP), or None when it is
    anything else. Stacks of such chains run as batched matmuls: the same arithmetic as vmap(functional_call),
    without its per-call dispatch (about half the time of a small MLP's step)."""
    if not isinstance(base, nn.Sequential):
        return None
    chain: list[ChainStep] = []
    for name, child in base.named_children():
        if type(child) is nn.Linear:
            chain.append(("linear", f"{name}.weight", f"{name}.bias" if child.bias is not None else None))
        elif type(child) in ACTIVATIONS:
            chain.append(("act", ACTIVATIONS[type(child)], None))
        else:
            return None
    return chain


def linear_weights(base: nn.Module) -> set[str]:
    """The names of `base`'s Linear weights."""
    return {f"{name}.weight" if name else "weight" for name, m in base.named_modules() if type(m) is nn.Linear}


def matmul_layout(w: torch.Tensor) -> torch.Tensor:
    """A fresh copy of stacked Linear weights (P, out, in) stored as (P, in, out): batched matmuls then hand back
    each weight's gradient in its own layout, so the optimizer steps it without copying the gradient first. The
    values, and the arithmetic of every matmul that reads them, are those of the row-major copy."""
    return w.detach().transpose(1, 2).clone(memory_format=torch.contiguous_format).transpose(1, 2)


def run_chain(chain: Sequence[ChainStep], params: Mapping[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    """Every copy's MLP on its own rows: x (P, b, d_in) -> (P, b, d_out), one batched matmul per layer."""
    h = x
    for kind, a, b in chain:
        if kind == "act":
            h = a(h)
        elif b is None:
            h = torch.bmm(h, params[a].transpose(1, 2))
        else:
            h = torch.baddbmm(params[b].unsqueeze(1), h, params[a].transpose(1, 2))
    return h


def flat_module(module: nn.Module) -> torch.Tensor:
    """A module's parameters as one vector (named_parameters order)."""
    return torch.nn.utils.parameters_to_vector(module.parameters()).detach().clone()


@torch.no_grad()
def load_flat_module(module: nn.Module, vec: torch.Tensor | np.ndarray) -> None:
    v = torch.as_tensor(np.asarray(vec)) if isinstance(vec, np.ndarray) else vec
    torch.nn.utils.vector_to_parameters(v.to(next(module.parameters()).dtype), module.parameters())


class StackedOptimizer:
    """Adam (torch's update rule) or plain SGD over stacked tensors, stepping only the copies in `active`;
    one learning rate for all copies or one per copy."""

    def __init__(
        self,
        tensors: Sequence[torch.Tensor],
        lr: float | torch.Tensor,
        kind: str = "adam",
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
    ) -> None:
        """`lr`: one learning rate for every copy, or a (P,) tensor of one per copy."""
        if kind not in ("adam", "sgd"):
            raise ValueError(f"unknown optimizer {kind!r}; use 'adam' or 'sgd'")
        self.tensors = list(tensors)
        p0 = self.tensors[0]
        if isinstance(lr, torch.Tensor) and lr.shape != (p0.shape[0],):
            raise ValueError(f"per-copy lr must have shape ({p0.shape[0]},), got {tuple(lr.shape)}")
        self.lr = lr.to(p0.device) if isinstance(lr, torch.Tensor) else float(lr)  # as given: float64 stays
        self.kind, self.betas, self.eps = kind, betas, eps
        self.t = torch.zeros(p0.shape[0], dtype=p0.dtype, device=p0.device)
        self.m = [torch.zeros_like(p) for p in self.tensors] if kind == "adam" else []
        self.v = [torch.zeros_like(p) for p in self.tensors] if kind == "adam" else []

    def take(self, members: torch.Tensor, tensors: Sequence[torch.Tensor]) -> "StackedOptimizer":
        sub = StackedOptimizer.__new__(StackedOptimizer)
        sub.tensors, sub.kind, sub.betas, sub.eps = list(tensors), self.kind, self.betas, self.eps
        sub.lr = self.lr[members].clone() if isinstance(self.lr, torch.Tensor) else self.lr
        sub.t = self.t[members].clone()
        sub.m = [m[members].clone() for m in self.m]
        sub.v = [v[members].clone() for v in self.v]
        return sub

    def put(self, members: torch.Tensor, sub: "StackedOptimizer") -> None:
        self.t[members] = sub.t
        for mine, theirs in zip(self.m, sub.m):
            mine[members] = theirs
        for mine, theirs in zip(self.v, sub.v):
            mine[members] = theirs

    @torch.no_grad()
    def step(self, grads: Sequence[torch.Tensor | None], active: torch.Tensor) -> None:
        if not bool(active.any()):
            return
        self.t += active.to(self.t.dtype)
        everyone = bool(active.all())
        b1, b2 = self.betas
        for i, (p, g) in enumerate(zip(self.tensors, grads)):
            if g is None:
                g = torch.zeros_like(p)
            shape = (p.shape[0],) + (1,) * (p.dim() - 1)
            act = active.view(shape)
            lr = self.lr.to(p.dtype).view(shape) if isinstance(self.lr, torch.Tensor) else self.lr
            if self.kind == "sgd":
                p.copy_(p - lr * g if everyone else torch.where(act, p - lr * g, p))
                continue
            m, v = self.m[i], self.v[i]
            t = self.t.clamp(min=1).view(shape)
            bc1 = 1 - b1**t
            bc2_sqrt = (1 - b2**t).sqrt()
            if everyone:  # in place, the same arithmetic in the same order as the masked path below
                m.add_((g - m).mul_(1 - b1))
                v.mul_(b2).add_(g.mul(1 - b2).mul_(g))
                p.sub_(((lr / bc1) * m).div_(v.sqrt().div_(bc2_sqrt).add_(self.eps)))
                continue
            m.copy_(torch.where(act, m + (g - m) * (1 - b1), m))
            v.copy_(torch.where(act, v * b2 + (1 - b2) * g * g, v))
            upd = (lr / bc1) * m / (v.sqrt() / bc2_sqrt + self.eps)
            p.copy_(torch.where(act, p - upd, p))


def step_all(loss: torch.Tensor, tensors: Sequence[torch.Tensor], opt: StackedOptimizer, active: torch.Tensor) -> None:
    """Gradient of the summed per-copy loss w.r.t. `tensors`, then a masked optimizer step."""
    grads = torch.autograd.grad(loss, list(tensors), allow_unused=True)
    opt.step(grads, active)


# -- per-copy losses (rows weighted by w: 1 for real rows, 0 for padding) -------------------------
def copy_ce(logits: torch.Tensor, y: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of each copy over its own rows: logits (P, b, C), y and w (P, b) -> (P,)."""
    ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1), reduction="none").view(y.shape)
    return (ce * w).sum(1) / w.sum(1).clamp_min(1.0)


def copy_uniform_ce(logits: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """CE against the uniform distribution per copy (`nets.uniform_ce`, one value per copy)."""
    ce = -F.log_softmax(logits, dim=-1).mean(dim=-1)
    return (ce * w).sum(1) / w.sum(1).clamp_min(1.0)


def copy_mean(rows: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Weighted mean over rows of a (P, b) tensor."""
    return (rows * w).sum(1) / w.sum(1).clamp_min(1.0)


class ShardStack:
    """The training shards of P nodes padded into one tensor, and each round's minibatch plan."""

    def __init__(self, nodes: Sequence[Node], labels: Sequence[str]) -> None:
        self.sizes = torch.tensor([n.num_examples for n in nodes], dtype=torch.long)
        n_max = int(self.sizes.max())
        d = nodes[0].train.x.shape[1]
        self.x = torch.zeros(len(nodes), n_max, d)
        self.y = {lab: torch.zeros(len(nodes), n_max, dtype=torch.long) for lab in labels}
        for i, node in enumerate(nodes):
            k = node.num_examples
            self.x[i, :k] = torch.tensor(np.asarray(node.train.x), dtype=torch.float32)
            labs = node.train.labels()
            for lab in labels:
                self.y[lab][i, :k] = torch.tensor(np.asarray(labs[lab]), dtype=torch.long)

    @staticmethod
    def batch_size(n: int, batch_size: int) -> int:
        return min(batch_size, n)

    @staticmethod
    def epoch_plan(
        nodes: Sequence[Node], epochs: int | Sequence[int], batch_size: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Row indices (P, T, b_max), -1 padded, for `epochs` shuffled passes of full minibatches per node (one
        count for all, or one per node; as `BatchSampler.epoch`), and each node's number of steps (P,)."""
        plans: list[torch.Tensor] = []
        passes = [epochs] * len(nodes) if isinstance(epochs, int) else list(epochs)
        for node, e in zip(nodes, passes, strict=True):
            n = node.num_examples
            b = min(batch_size, n)
            spe = max(1, n // b)
            # each pass's full minibatches are its permutation's first spe * b entries, one row per step
            perms = [torch.randperm(n, generator=node.batch_gen)[: spe * b].view(spe, b) for _ in range(e)]
            if len(perms) == 1:  # one local pass a round, the common case: no concatenation per node
                plans.append(perms[0])
            else:
                plans.append(torch.cat(perms) if perms else torch.empty(0, b, dtype=torch.long))
        steps = [p.shape[0] for p in plans]
        return _pad_plan(plans), torch.tensor(steps)

    @staticmethod
    def sample_plan(nodes: Sequence[Node], count: int, batch_size: int) -> torch.Tensor:
        """`count` random minibatches per node (as `BatchSampler.sample`): (P, count, b_max), -1 padded."""
        plans = []
        for node in nodes:
            n = node.num_examples
            b = min(batch_size, n)
            draws = [torch.randperm(n, generator=node.batch_gen)[:b] for _ in range(count)]
            plans.append(torch.stack(draws) if draws else torch.empty(0, b, dtype=torch.long))
        return _pad_plan(plans)

    def gather(self, idx: torch.Tensor, members: torch.Tensor | None = None):
        """x (P, b, d), labels {name: (P, b)}, weights (P, b) for row indices idx (P, b) (-1 = padding)."""
        w = (idx >= 0).to(torch.float32)
        safe = idx.clamp(min=0)
        rows = torch.arange(idx.shape[0]).unsqueeze(1) if members is None else members.unsqueeze(1)
        x = self.x[rows, safe]
        y = {k: v[rows, safe] for k, v in self.y.items()}
        return x, y, w


def _pad_plan(plans: Sequence[torch.Tensor]) -> torch.Tensor:
    """Each node's (steps, b) row indices in one (P, most steps, widest b) tensor, -1 padded; nodes whose plans
    share a shape are written together (a host runs thousands of nodes)."""
    t_max = max((p.shape[0] for p in plans), default=0)
    b_max = max((p.shape[1] for p in plans if p.shape[0]), default=1)
    out = torch.full((len(plans), t_max, b_max), -1, dtype=torch.long)
    shapes: dict[tuple[int, int], list[int]] = {}
    for i, p in enumerate(plans):
        shapes.setdefault((p.shape[0], p.shape[1]), []).append(i)
    for (t, b), idx in shapes.items():
        if t:
            out[idx, :t, :b] = torch.stack([plans[i] for i in idx])
    return out


def noise_like(
    nodes: Sequence[Node],
    idx: torch.Tensor,
    width: int,
    draw: Callable[[tuple[int, ...], torch.Generator], torch.Tensor],
    released: bool = False,
) -> torch.Tensor:
    """Per-node noise (P, b_max, width) drawn from each node's own generator for its real rows only,
    zero on padding, so a node's draws do not depend on which other nodes share its host. `released`:
    the noise goes into what the node sends, so it comes from the node's release stream, not its seeded one."""
    out = torch.zeros(idx.shape[0], idx.shape[1], width)
    for i, node in enumerate(nodes):
        b = int((idx[i] >= 0).sum())
        if b:
            out[i, :b] = draw((b, width), node.release_gen if released else node.noise_gen)
    return out
