"""The one trainer of small MLP classifiers on a representation, and the helpers every audit shares.

The fresh-probe audit, the adversary-capacity sweep, the obfuscation audit and the variational MI
bound all fit a classifier ``q(label | z)`` on a released train representation and read its class
probabilities on a test representation. They do it with `train_classifier`: seeded, Adam on softmax
cross-entropy, fixed epochs of shuffled minibatches, optional z-scoring with training statistics. Training leaves torch's global RNG as it found it.

`train_classifiers_stacked` trains many such probes as ONE stacked model (torch.func: parameters stacked on a
leading axis, `vmap(functional_call)`, Adam over the stacked tensors), each member exactly as
`train_classifier` would train it alone (same initialisation, minibatch order and update rule) up to
floating-point order: the per-node audit of a federation fits a thousand small probes in a few batched steps.
"""

from __future__ import annotations

import contextlib
import copy
from dataclasses import dataclass
from typing import Any, Iterator, Sequence

import numpy as np
import torch
from torch.func import functional_call, vmap
from torch.nn import functional as F

from veil.errors import ConfigError, DataError
from veil.methods.federated.ensemble import linear_chain, run_chain
from veil.methods.nets import mlp

__all__ = [
    "MIN_SCALE",
    "Classifier",
    "Standardizer",
    "seeded_torch",
    "sklearn_proba",
    "torch_threads",
    "train_classifier",
    "train_classifiers_stacked",
]

#: columns whose standard deviation is at most this are left unscaled (only centred) by `Standardizer`
MIN_SCALE = 1e-8

#: at most this many stacked parameters (all members together) train at once, more in chunks: a chunk's
#: parameters, gradients and Adam moments then stay in cache (measured: ~30 members of a 256-128 probe beat 8 or 135)
STACK_PARAMS = 1 << 20


@dataclass(frozen=True)
class Standardizer:
    """Column z-scoring with statistics fitted on training rows; applied unchanged to any other rows.

    Works in the dtype it is fitted on (float32 arrays stay float32)."""

    mean: np.ndarray
    scale: np.ndarray

    @classmethod
    def fit(cls, a: np.ndarray) -> Standardizer:
        mean, sd = a.mean(axis=0), a.std(axis=0)
        return cls(mean, np.where(sd > MIN_SCALE, sd, 1.0).astype(sd.dtype, copy=False))

    def __call__(self, a: np.ndarray) -> np.ndarray:
        return (a - self.mean) / self.scale

    @classmethod
    def fit_transform(cls, a: np.ndarray) -> np.ndarray:
        """`a` z-scored with its own statistics."""
        return cls.fit(a)(a)


@contextlib.contextmanager
def torch_threads(n: int | None) -> Iterator[None]:
    """Run with ``n`` intra-op torch threads, restoring the previous count afterwards.

    Small probes are fastest single-threaded (thread hand-off costs more than the arithmetic and
    degrades badly on busy shared cores); ``None`` leaves torch's setting alone."""
    if n is None:
        yield
        return
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ConfigError("num_threads", n, "an integer >= 1 or None")
    old = torch.get_num_threads()
    torch.set_num_threads(int(n))
    try:
        yield
    finally:
        torch.set_num_threads(old)


@contextlib.contextmanager
def seeded_torch(seed: int, num_threads: int | None = None) -> Iterator[torch.Generator]:
    """Inside: torch's CPU RNG seeded with `seed` (network initialisation draws from it) and a fresh
    generator seeded with `seed` for batch order; torch's global CPU RNG is restored on exit."""
    with torch.random.fork_rng(devices=[]), torch_threads(num_threads):
        gen = torch.Generator().manual_seed(seed)
        torch.default_generator.manual_seed(seed)
        yield gen


def _tensor(a: np.ndarray) -> torch.Tensor:
    return torch.tensor(a, dtype=torch.float32)


@dataclass(frozen=True)
class Classifier:
    """A trained MLP classifier (eval mode) with the input standardisation it was trained with."""

    net: torch.nn.Module
    n_classes: int
    scaler: Standardizer | None = None

    def logits(self, z: np.ndarray) -> torch.Tensor:
        with torch.no_grad():
            return self.net(_tensor(self.scaler(z) if self.scaler is not None else z))

    def predict_proba(self, z: np.ndarray) -> np.ndarray:
        """Class probabilities, rows x n_classes (float32)."""
        return torch.softmax(self.logits(z), dim=1).numpy()

    def predict_log_proba(self, z: np.ndarray) -> np.ndarray:
        """Log class probabilities, rows x n_classes (float64)."""
        return torch.log_softmax(self.logits(z), dim=1).double().numpy()


def train_classifier(
    z: np.ndarray,
    y: np.ndarray,
    n_classes: int,
    *,
    hidden: Sequence[int],
    epochs: int,
    lr: float,
    batch_size: int,
    seed: int,
    weight_decay: float = 0.0,
    standardize: bool = False,
    drop_last: bool = True,
    num_threads: int | None = None,
) -> Classifier:
    """A fresh ReLU MLP ``z.shape[1] -> hidden... -> n_classes`` trained on (z, y) by softmax cross-entropy.

    Seeded by `seed` (initialisation and minibatch order; torch's global RNG is left untouched), Adam
    (`lr`, `weight_decay`) for `epochs` passes over shuffled minibatches of ``min(batch_size, rows)``
    rows; `drop_last` skips the incomplete last batch of each pass (the fresh-probe audit's protocol),
    otherwise it is a smaller step. `y` holds class codes 0..n_classes-1.
    `standardize` z-scores the columns with statistics of `z` (in z's dtype) and applies the same map
    to whatever the returned classifier predicts on. `num_threads`: torch intra-op threads while
    training (restored afterwards; None leaves torch's setting alone)."""
    scaler = Standardizer.fit(z) if standardize else None
    with seeded_torch(seed, num_threads) as gen:
        net = mlp(z.shape[1], [int(h) for h in hidden], n_classes)
        # fused: one kernel per step instead of a pass per tensor (the same update up to float rounding)
        opt = torch.optim.Adam(net.parameters(), lr=lr, weight_decay=weight_decay, fused=True)
        zt = _tensor(scaler(z) if scaler is not None else z)
        yt = torch.as_tensor(y, dtype=torch.long)
        n = len(zt)
        bs = min(batch_size, n)
        for _ in range(epochs):
            perm = torch.randperm(n, generator=gen)
            for i in range(0, n - bs + 1 if drop_last else n, bs):
                idx = perm[i : i + bs]
                loss = F.cross_entropy(net(zt[idx]), yt[idx])
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
    return Classifier(net.eval(), n_classes, scaler)


def _batch_starts(n: int, batch_size: int, drop_last: bool) -> range:
    """Start offsets of one pass's minibatches over n rows, as `train_classifier` walks them."""
    bs = min(batch_size, n)
    return range(0, n - bs + 1 if drop_last else n, bs)


def _batch_plan(n: int, seed: int, epochs: int, batch_size: int, drop_last: bool) -> torch.Tensor:
    """Row indices (steps, min(batch_size, n)) of every minibatch a solo probe on n rows draws (-1 pads a short
    last batch): one permutation per epoch from a generator seeded with `seed`."""
    gen = torch.Generator().manual_seed(seed)
    bs = min(batch_size, n)
    starts = _batch_starts(n, batch_size, drop_last)
    out = torch.full((epochs * len(starts), bs), -1, dtype=torch.long)
    for e in range(epochs):
        perm = torch.randperm(n, generator=gen)
        for j, i in enumerate(starts):
            rows = perm[i : i + bs]
            out[e * len(starts) + j, : len(rows)] = rows
    return out


class _StackedAdam:
    """torch.optim.Adam's (single-tensor) update over stacked tensors, applied to the first `active` members.

    Members train in order of decreasing step count, so those still stepping at step t are a prefix and have all
    taken exactly t steps: one step count serves them all and members that are done are left untouched."""

    def __init__(self, params: list[torch.Tensor], lr: float, weight_decay: float) -> None:
        self.params, self.lr, self.weight_decay = params, lr, weight_decay
        self.m = [torch.zeros_like(p) for p in params]
        self.v = [torch.zeros_like(p) for p in params]
        self.denom = [torch.empty_like(p) for p in params]  # reused, so no step allocates a parameter-sized tensor
        self.t = 0

    @torch.no_grad()
    def step(self, grads: Sequence[torch.Tensor], active: int, betas: tuple[float, float] = (0.9, 0.999)) -> None:
        b1, b2 = betas
        self.t += 1
        step_size = self.lr / (1 - b1**self.t)
        bc2_sqrt = (1 - b2**self.t) ** 0.5
        for p, m, v, denom, g in zip(self.params, self.m, self.v, self.denom, grads):
            p, m, v, denom = p[:active], m[:active], v[:active], denom[:active]
            if self.weight_decay:
                g = g.add(p, alpha=self.weight_decay)
            m.lerp_(g, 1 - b1)
            v.mul_(b2).addcmul_(g, g, value=1 - b2)
            torch.sqrt(v, out=denom).div_(bc2_sqrt).add_(1e-8)
            p.addcdiv_(m, denom, value=-step_size)


def _train_chunk(
    base: torch.nn.Module,
    params: dict[str, torch.Tensor],
    z: torch.Tensor,
    y: torch.Tensor,
    plan: torch.Tensor,
    steps: torch.Tensor,
    lr: float,
    weight_decay: float,
) -> None:
    """Train stacked `params` in place: member i takes its first steps[i] minibatches of plan (P, T, b); members
    are sorted by decreasing steps. Per-member mean cross-entropies are summed, so each member's gradient is
    its own loss's (a mean over members would rescale Adam's eps)."""
    names = list(params)
    opt = _StackedAdam([params[n] for n in names], lr, weight_decay)

    chain = linear_chain(base)  # an MLP: batched matmuls, no vmap dispatch

    def one(p: dict[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
        return functional_call(base, p, (x,))

    def forward(p: dict[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
        return run_chain(chain, p, x) if chain is not None else vmap(one)(p, x)

    for t in range(int(steps[0]) if len(steps) else 0):
        active = int((steps > t).sum())
        idx = plan[:active, t]
        w = (idx >= 0).to(torch.float32)
        safe = idx.clamp(min=0)
        rows = torch.arange(active).unsqueeze(1)
        sub = {n: params[n][:active].detach().requires_grad_(True) for n in names}
        logits = forward(sub, z[rows, safe])
        ce = F.cross_entropy(logits.flatten(0, 1), y[rows, safe].flatten(), reduction="none").view(w.shape)
        loss = ((ce * w).sum(1) / w.sum(1)).sum()
        opt.step(torch.autograd.grad(loss, [sub[n] for n in names]), active)


def train_classifiers_stacked(
    zs: Sequence[np.ndarray],
    ys: Sequence[np.ndarray],
    n_classes: int,
    *,
    hidden: Sequence[int],
    epochs: int,
    lr: float,
    batch_size: int,
    seed: int | Sequence[int],
    weight_decay: float = 0.0,
    standardize: bool = False,
    drop_last: bool = True,
    num_threads: int | None = None,
) -> list[Classifier]:
    """Member i is `train_classifier(zs[i], ys[i], n_classes, ...)` with the same settings, all trained as one
    stacked model; `seed` is one seed for every member or one per member.

    Same initialisation (each member's net built right after seeding with its seed), same minibatch order
    (the permutations a solo probe on that many rows draws) and the same Adam update; only floating-point
    order differs. Members may have different row counts (padded; a member with fewer minibatches stops
    stepping when it has none left) but must share the column count. Returns ordinary Classifiers."""
    count = len(zs)
    if len(ys) != count:
        raise DataError(f"train_classifiers_stacked: {count} representations (zs) but {len(ys)} label arrays (ys)")
    seeds = [int(seed)] * count if isinstance(seed, (int, np.integer)) else [int(s) for s in seed]
    if len(seeds) != count:
        raise ConfigError("seed", f"{len(seeds)} seeds", f"one seed, or one per member ({count})")
    if count == 0:
        return []
    widths = {int(np.shape(z)[1]) for z in zs}
    if len(widths) > 1:
        raise DataError(f"train_classifiers_stacked: every member needs the same column count; got {sorted(widths)}")
    empty = [i for i, z in enumerate(zs) if len(z) == 0]
    if empty:
        raise DataError(f"train_classifiers_stacked: members {empty[:5]} have no training rows")
    d = widths.pop()
    scalers = [Standardizer.fit(z) if standardize else None for z in zs]
    sizes = [len(z) for z in zs]
    with torch.random.fork_rng(devices=[]), torch_threads(num_threads):
        inits: dict[int, torch.nn.Module] = {}
        for s in dict.fromkeys(seeds):
            torch.manual_seed(s)
            inits[s] = mlp(d, [int(h) for h in hidden], n_classes)
        plans = {
            key: _batch_plan(key[0], key[1], epochs, batch_size, drop_last) for key in dict.fromkeys(zip(sizes, seeds))
        }
        order = sorted(range(count), key=lambda i: -len(plans[sizes[i], seeds[i]]))
        per_member = sum(p.numel() for p in inits[seeds[0]].parameters())
        chunk = max(1, STACK_PARAMS // per_member)
        trained: dict[int, dict[str, torch.Tensor]] = {}
        for lo in range(0, count, chunk):
            members = order[lo : lo + chunk]
            params = _train_members(members, zs, ys, scalers, seeds, inits, plans, lr, weight_decay)
            for j, i in enumerate(members):
                trained[i] = {n: p[j] for n, p in params.items()}
    out = []
    for i in range(count):
        net = copy.deepcopy(inits[seeds[i]])
        net.load_state_dict(trained[i])
        out.append(Classifier(net.eval(), n_classes, scalers[i]))
    return out


def _train_members(
    members: Sequence[int],
    zs: Sequence[np.ndarray],
    ys: Sequence[np.ndarray],
    scalers: Sequence[Standardizer | None],
    seeds: Sequence[int],
    inits: dict[int, torch.nn.Module],
    plans: dict[tuple[int, int], torch.Tensor],
    lr: float,
    weight_decay: float,
) -> dict[str, torch.Tensor]:
    """Pad members' rows and minibatch plans into stacked tensors, train them together, return the stacked
    parameters (members in the given order, which must be by decreasing step count)."""
    n_max = max(len(zs[i]) for i in members)
    d = int(np.shape(zs[members[0]])[1])
    z = torch.zeros(len(members), n_max, d)
    y = torch.zeros(len(members), n_max, dtype=torch.long)
    member_plans = [plans[len(zs[i]), seeds[i]] for i in members]
    t_max, b_max = max(len(p) for p in member_plans), max(p.shape[1] for p in member_plans)
    plan = torch.full((len(members), t_max, b_max), -1, dtype=torch.long)
    for j, i in enumerate(members):
        zi, scaler = zs[i], scalers[i]
        z[j, : len(zi)] = _tensor(scaler(zi) if scaler is not None else zi)
        y[j, : len(zi)] = torch.as_tensor(ys[i], dtype=torch.long)
        p = member_plans[j]
        plan[j, : len(p), : p.shape[1]] = p
    states = [dict(inits[seeds[i]].named_parameters()) for i in members]
    params = {n: torch.stack([s[n].detach() for s in states]) for n in states[0]}
    base = copy.deepcopy(inits[seeds[members[0]]]).to("meta")
    steps = torch.tensor([len(p) for p in member_plans])
    _train_chunk(base, params, z, y, plan, steps, lr, weight_decay)
    return params


def sklearn_proba(model: Any, z: np.ndarray, n_classes: int) -> np.ndarray:
    """Class probabilities (rows x n_classes) of a fitted scikit-learn classifier trained on class codes;
    classes absent from its training labels get probability 0."""
    proba = np.zeros((len(z), n_classes))
    proba[:, model.classes_] = model.predict_proba(z)
    return proba
