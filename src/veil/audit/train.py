"""The one trainer of small MLP classifiers on a representation, and the helpers every audit shares.

The fresh-probe audit, the adversary-capacity sweep, the obfuscation audit and the variational MI
bound all fit a classifier ``q(label | z)`` on a released train representation and read its class
probabilities on a test representation. They do it with `train_classifier`: seeded, Adam on softmax
cross-entropy, fixed epochs of shuffled minibatches, optional z-scoring with training statistics. Training leaves
torch's global RNG as it found it.

`train_classifiers_stacked` trains many such probes as ONE stacked model (`StackedMLP`: parameters stacked on a
leading axis, one batched matmul per layer, the backward pass written out, torch's fused Adam), each member exactly as
the plain loop would train it alone (same initialisation, minibatch order and update rule) up to floating-point
order; `train_classifier` is its one-member case. The per-node audit of a federation fits a thousand small probes in a
few batched steps, and a run's audit trains its labels' probes together. Probes train where `probe_device` says (by
default a CUDA GPU when the process sees one, else the CPU; on a GPU each step replays a CUDA graph); the trained
classifiers come back on the CPU.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator, Sequence, TypedDict

import numpy as np
import torch
from torch.optim.adam import adam

from veil.audit.vocabulary import PROBE_DEVICES
from veil.errors import ConfigError, DataError
from veil.methods.cuda_graph import on_side_stream
from veil.methods.nets import mlp

if TYPE_CHECKING:  # typing.Unpack is Python 3.11+; torch already depends on typing_extensions
    from typing_extensions import Unpack

__all__ = [
    "MIN_SCALE",
    "Classifier",
    "GraphedSteps",
    "ProbeOptions",
    "StackedMLP",
    "Standardizer",
    "probe_device",
    "seeded_torch",
    "sklearn_proba",
    "torch_threads",
    "train_classifier",
    "train_classifiers_stacked",
    "train_predict_stacked",
]

#: columns whose standard deviation is at most this are left unscaled (only centred) by `Standardizer`
MIN_SCALE = 1e-8

#: at most this many stacked parameters (all members together) train at once, more in chunks: a chunk's
#: parameters, gradients and Adam moments then stay in cache (fewer members per chunk pay more per-step overhead)
STACK_PARAMS = 1 << 20
#: on a GPU the cache argument does not hold and each step's cost is mostly kernel launches: one chunk, up to this
#: many parameters (with gradients and Adam's moments, 1 GiB of float32)
GPU_STACK_PARAMS = 1 << 26
#: stacked prediction runs in blocks of rows whose widest activations hold about this many floats (64 MiB)
PREDICT_FLOATS = 1 << 24


def probe_device(name: str = "auto") -> torch.device:
    """The device probes train on for `name` (one of `PROBE_DEVICES`). "cuda" with no CUDA device visible warns
    and trains on the CPU, as a run's `--gpu` does; "auto" is the GPU only when one is visible (a Ray trial given no
    GPU sees none)."""
    if name not in PROBE_DEVICES:
        raise ConfigError("device", name, " | ".join(PROBE_DEVICES), where="audit")
    if name == "cpu":
        return torch.device("cpu")
    if torch.cuda.is_available():
        return torch.device("cuda", torch.cuda.current_device())
    if name == "cuda":
        import warnings

        warnings.warn("audit.device: cuda, but no CUDA device is visible; the probes train on the CPU", stacklevel=2)
    return torch.device("cpu")


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


class ProbeOptions(TypedDict, total=False):
    """`train_classifier`'s optional keywords: `train_classifiers_stacked` documents each and its default."""

    weight_decay: float
    standardize: bool
    drop_last: bool
    num_threads: int | None
    device: str


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
    **options: Unpack[ProbeOptions],
) -> Classifier:
    """A fresh ReLU MLP ``z.shape[1] -> hidden... -> n_classes`` trained on (z, y) by softmax cross-entropy.

    Seeded by `seed` (initialisation and minibatch order; torch's global RNG is left untouched), Adam
    (`lr`, `weight_decay`) for `epochs` passes over shuffled minibatches of ``min(batch_size, rows)``
    rows; `y` holds class codes 0..n_classes-1. `options` (`ProbeOptions`) are `train_classifiers_stacked`'s:
    weight decay, z-scoring, the incomplete last batch, torch threads, the device. The classifier comes back on
    the CPU.

    The network, its initialisation, the minibatch order and the update are what the plain loop computes (build
    `mlp` right after ``torch.manual_seed(seed)``, one ``torch.randperm`` per epoch from a generator seeded with
    `seed`, ``F.cross_entropy``, fused Adam); the training runs on `StackedMLP`, which equals that loop up to
    floating-point order (tests/audit/test_stacked_probes.py) at about 1.5x its speed."""
    return train_classifiers_stacked(
        [z], [y], n_classes, hidden=hidden, epochs=epochs, lr=lr, batch_size=batch_size, seed=seed, **options
    )[0]


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


class StackedMLP:
    """P ReLU MLPs of one shape (`mlp`) trained together: layer i as a weight (P, in, out) (nn.Linear's, transposed)
    and a bias (P, 1, out), one batched matmul per layer, the backward pass written out and torch's fused Adam.

    Softmax cross-entropy's gradient is ``(softmax - onehot) / rows``, ReLU's passes where the output is positive,
    and each matmul's is the matching transposed product, written straight into preallocated gradient buffers: no
    autograd graph and no module calls, so a small probe's step spends its time in its matmuls rather than in
    autograd's bookkeeping (benchmarks/README.md, `audit`). The update is `torch.optim.adam.adam` with ``fused=True``, the kernel
    `torch.optim.Adam(fused=True)` runs. Members that still step at step t are a prefix (sorted by decreasing step
    count): every buffer's ``[:active]`` slice is contiguous, and one step count per tensor serves them all."""

    def __init__(
        self, nets: Sequence[torch.nn.Module], lr: float, weight_decay: float, device: torch.device | None = None
    ) -> None:
        layers = [[m for m in net.modules() if isinstance(m, torch.nn.Linear)] for net in nets]
        dev = device or torch.device("cpu")
        with torch.no_grad():
            self.weights = [
                torch.stack([ls[i].weight.T for ls in layers]).to(dev).contiguous() for i in range(len(layers[0]))
            ]
            self.biases = [
                torch.stack([ls[i].bias for ls in layers]).unsqueeze(1).to(dev) for i in range(len(layers[0]))
            ]
        self.lr, self.weight_decay = lr, weight_decay
        self.params = [t for pair in zip(self.weights, self.biases) for t in pair]
        self.grads = [torch.empty_like(p) for p in self.params]
        self.moments = ([torch.zeros_like(p) for p in self.params], [torch.zeros_like(p) for p in self.params])
        # the fused kernel's float step counts, on the parameters' device (its CUDA form requires it)
        self.steps = [torch.zeros((), device=dev) for _ in self.params]
        self._views: dict[int, tuple[list[torch.Tensor], ...]] = {}

    def _prefix(self, active: int) -> tuple[list[torch.Tensor], ...]:
        """Every buffer's first `active` members (cached: `active` changes only when a member finishes)."""
        if active not in self._views:
            lists = (self.params, self.grads, *self.moments)
            self._views[active] = tuple([t[:active] for t in ts] for ts in lists)
        return self._views[active]

    @torch.no_grad()
    def step(self, x: torch.Tensor, y: torch.Tensor, weight: torch.Tensor | float) -> None:
        """One Adam step of the first ``len(x)`` members on their minibatches x (active, b, d) with class codes y
        (active * b,); `weight` scales each row's cross-entropy gradient (1/b, or (active, b, 1) when rows are
        padded: 1/valid rows for a real row, 0 for padding), so each member's gradient is its own mean loss's."""
        active, b = x.shape[0], x.shape[1]
        params, grads, exp_avg, exp_avg_sq = self._prefix(active)
        weights, biases = params[0::2], params[1::2]
        outs = [x]
        for i, (w, bias) in enumerate(zip(weights, biases)):
            h = torch.baddbmm(bias, outs[-1], w)
            outs.append(h.relu_() if i < len(weights) - 1 else h)
        # softmax written out, in place on the logits: torch.softmax over a last axis of a few classes is slower
        # on CPU than these whole-tensor operations
        g = outs.pop()
        g = g.sub_(g.amax(-1, keepdim=True)).exp_()
        g.div_(g.sum(-1, keepdim=True)).mul_(weight)
        rows = g.view(active * b, -1)
        minus = (
            weight.reshape(-1, 1).neg()
            if isinstance(weight, torch.Tensor)
            else torch.full((len(y), 1), -weight, device=y.device)
        )
        rows.scatter_add_(1, y.view(-1, 1), minus)  # - onehot, with the same weight
        for i in range(len(weights) - 1, -1, -1):
            torch.bmm(outs[i].transpose(1, 2), g, out=grads[2 * i])
            torch.sum(g, 1, keepdim=True, out=grads[2 * i + 1])
            if i:  # z itself needs no gradient
                g = torch.ops.aten.threshold_backward(torch.bmm(g, weights[i].transpose(1, 2)), outs[i], 0)
        adam(
            params,
            grads,
            exp_avg,
            exp_avg_sq,
            [],
            self.steps,
            fused=True,
            amsgrad=False,
            beta1=0.9,
            beta2=0.999,
            lr=self.lr,
            weight_decay=self.weight_decay,
            eps=1e-8,
            maximize=False,
        )

    def state(self) -> list[torch.Tensor]:
        """Every tensor a step updates besides the gradients: parameters, Adam's moments and step counts."""
        return [*self.params, *self.moments[0], *self.moments[1], *self.steps]

    @torch.no_grad()
    def predict_proba(self, zs: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Class probabilities (float32) of member j on zs[j], for the first len(zs) members: each member's rows
        padded to the longest, in blocks of rows that keep the widest layer's activations near `PREDICT_FLOATS`."""
        m, d = len(zs), self.weights[0].shape[1]
        longest = max((len(z) for z in zs), default=0)
        widest = max(w.shape[2] for w in self.weights)
        block = max(1, PREDICT_FLOATS // max(1, m * widest))
        dev = self.weights[0].device
        padded = torch.zeros(m, longest, d)
        for j, z in enumerate(zs):
            padded[j, : len(z)] = _tensor(z)
        parts = []
        for lo in range(0, longest, block):
            h = padded[:, lo : lo + block].to(dev)
            for i, (w, bias) in enumerate(zip(self.weights, self.biases)):
                h = torch.baddbmm(bias[:m], h, w[:m])
                h = h.relu_() if i < len(self.weights) - 1 else h
            parts.append(torch.softmax(h, dim=2).cpu())
        proba = torch.cat(parts, dim=1) if parts else torch.zeros(m, 0, self.weights[-1].shape[2])
        return [proba[j, : len(z)].numpy() for j, z in enumerate(zs)]

    @torch.no_grad()
    def load_into(self, member: int, net: torch.nn.Module) -> None:
        """Copy member `member`'s trained parameters into `net` (an `mlp` of the same shape)."""
        for i, layer in enumerate(m for m in net.modules() if isinstance(m, torch.nn.Linear)):
            layer.weight.copy_(self.weights[i][member].T)
            layer.bias.copy_(self.biases[i][member, 0])


class GraphedSteps:
    """`StackedMLP.step` replayed from CUDA graphs: on a GPU a probe's step is ~40 small kernels, and launching them
    one by one from Python costs more than running them. Each step gathers its minibatch into static buffers and
    replays the graph captured for its active member count (at most `MAX_GRAPHS` counts; others run eagerly). The
    replayed kernels are the eager step's, so the results are too."""

    MAX_GRAPHS = 4

    def __init__(self, stack: StackedMLP, members: int, b: int, d: int, padded: bool) -> None:
        dev = stack.weights[0].device
        self.stack, self.b, self.d = stack, b, d
        self.x = torch.empty(members * b, d, device=dev)
        self.y = torch.empty(members * b, dtype=torch.long, device=dev)
        self.w = torch.empty(members, b, 1, device=dev) if padded else None
        self.graphs: dict[int, torch.cuda.CUDAGraph] = {}
        self.limit = self.MAX_GRAPHS

    def _args(self, active: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | float]:
        n = active * self.b
        return (
            self.x[:n].view(active, self.b, self.d),
            self.y[:n],
            self.w[:active] if self.w is not None else 1 / self.b,
        )

    def _capture(self, active: int) -> torch.cuda.CUDAGraph:
        # one eager step on a side stream first (cuBLAS and the allocator initialise outside the capture), undone
        # so that the captured step is the first
        saved = [t.clone() for t in self.stack.state()]
        on_side_stream(lambda: self.stack.step(*self._args(active)))
        for t, v in zip(self.stack.state(), saved):
            t.copy_(v)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            self.stack.step(*self._args(active))
        self.graphs[active] = graph
        return graph

    def step(
        self, active: int, z: torch.Tensor, y: torch.Tensor, rows: torch.Tensor, weight: torch.Tensor | float
    ) -> None:
        """One step of the first `active` members on rows `rows` of the table (z, y), `weight` as `StackedMLP.step`."""
        n = active * self.b
        torch.index_select(z, 0, rows, out=self.x[:n])
        torch.index_select(y, 0, rows, out=self.y[:n])
        if self.w is not None and isinstance(weight, torch.Tensor):
            self.w[:active].copy_(weight)
        graph = self.graphs.get(active)
        if graph is None and len(self.graphs) < self.limit:
            try:
                graph = self._capture(active)
            except RuntimeError as e:  # a capture this torch or driver refuses: the eager step is the same step
                import warnings

                warnings.warn(f"probe training: CUDA graph capture failed ({e}); stepping eagerly", stacklevel=2)
                self.limit = 0
        if graph is None:
            self.stack.step(*self._args(active))
        else:
            graph.replay()


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
    device: str = "cpu",
) -> list[Classifier]:
    """Member i is `train_classifier(zs[i], ys[i], n_classes, ...)` with the same settings, all trained as one
    stacked model; `seed` is one seed for every member or one per member.

    Same initialisation (each member's net built right after seeding with its seed), same minibatch order
    (the permutations a solo probe on that many rows draws) and the same Adam update; only floating-point
    order differs. Members may have different row counts (padded; a member with fewer minibatches stops
    stepping when it has none left) but must share the column count.

    `weight_decay`: Adam's. `standardize` z-scores each member's columns with statistics of its own z (in z's dtype)
    and applies the same map to whatever the returned classifier predicts on. `drop_last` skips the incomplete last
    batch of each pass (the fresh-probe audit's protocol); otherwise it is a smaller step. `num_threads`: torch
    intra-op threads while training (restored afterwards; None leaves torch's setting alone). `device`: where they
    train (`probe_device`). Returns ordinary Classifiers, on the CPU."""
    seeds = _member_seeds(zs, ys, seed)
    nets: dict[int, torch.nn.Module] = {}
    scalers = [Standardizer.fit(z) if standardize else None for z in zs]
    trained = _trained_stacks(
        zs,
        ys,
        n_classes,
        scalers,
        hidden,
        epochs,
        lr,
        batch_size,
        seeds,
        weight_decay=weight_decay,
        drop_last=drop_last,
        num_threads=num_threads,
        device=device,
    )
    for stack, members in trained:
        for j, i in enumerate(members):
            nets[i] = mlp(int(np.shape(zs[i])[1]), [int(h) for h in hidden], n_classes)  # gets trained weights
            stack.load_into(j, nets[i])
    return [Classifier(nets[i].eval(), n_classes, scalers[i]) for i in range(len(zs))]


def train_predict_stacked(
    zs: Sequence[np.ndarray],
    ys: Sequence[np.ndarray],
    z_tests: Sequence[np.ndarray],
    n_classes: int,
    *,
    hidden: Sequence[int],
    epochs: int,
    lr: float,
    batch_size: int,
    seed: int | Sequence[int],
    num_threads: int | None = None,
    device: str = "cpu",
) -> list[np.ndarray]:
    """`[train_classifiers_stacked(zs, ys, ...)[i].predict_proba(z_tests[i]) ...]` (float32, up to floating-point
    order), predicted by the trained stacks themselves: a federation's per-node audit scores ten thousand probes,
    and building a module for each costs more than their training."""
    if len(z_tests) != len(zs):
        raise DataError(f"train_predict_stacked: {len(zs)} training representations but {len(z_tests)} test ones")
    seeds = _member_seeds(zs, ys, seed)
    out: dict[int, np.ndarray] = {}
    scalers = [None] * len(zs)
    trained = _trained_stacks(
        zs, ys, n_classes, scalers, hidden, epochs, lr, batch_size, seeds, num_threads=num_threads, device=device
    )
    for stack, members in trained:  # the generator holds num_threads while the caller predicts too
        out.update(zip(members, stack.predict_proba([z_tests[i] for i in members])))
    return [out[i] for i in range(len(zs))]


def _member_seeds(zs: Sequence[np.ndarray], ys: Sequence[np.ndarray], seed: int | Sequence[int]) -> list[int]:
    """One seed per member, after checking the members a stack can train: labels for each, one column count, rows."""
    count = len(zs)
    if len(ys) != count:
        raise DataError(f"train_classifiers_stacked: {count} representations (zs) but {len(ys)} label arrays (ys)")
    seeds = [int(seed)] * count if isinstance(seed, (int, np.integer)) else [int(s) for s in seed]
    if len(seeds) != count:
        raise ConfigError("seed", f"{len(seeds)} seeds", f"one seed, or one per member ({count})")
    widths = {int(np.shape(z)[1]) for z in zs}
    if len(widths) > 1:
        raise DataError(f"train_classifiers_stacked: every member needs the same column count; got {sorted(widths)}")
    empty = [i for i, z in enumerate(zs) if len(z) == 0]
    if empty:
        raise DataError(f"train_classifiers_stacked: members {empty[:5]} have no training rows")
    return seeds


def _trained_stacks(
    zs: Sequence[np.ndarray],
    ys: Sequence[np.ndarray],
    n_classes: int,
    scalers: Sequence[Standardizer | None],
    hidden: Sequence[int],
    epochs: int,
    lr: float,
    batch_size: int,
    seeds: Sequence[int],
    *,
    weight_decay: float = 0.0,
    drop_last: bool = True,
    num_threads: int | None = None,
    device: str = "cpu",
) -> Iterator[tuple[StackedMLP, list[int]]]:
    """Train the members (`train_classifiers_stacked`; `seeds` one per member, `_member_seeds`) a chunk of them at a
    time; yields each trained chunk's stack with the member indices it holds, in stack order."""
    count = len(zs)
    if count == 0:
        return
    d = int(np.shape(zs[0])[1])
    dev = probe_device(device)
    sizes = [len(z) for z in zs]
    with torch.random.fork_rng(devices=[]), torch_threads(num_threads):
        inits: dict[int, torch.nn.Module] = {}  # one initialisation per distinct seed (a federation's nodes share one)
        for s in dict.fromkeys(seeds):
            torch.default_generator.manual_seed(s)  # the CPU generator nets initialise from, as torch.manual_seed(s)
            inits[s] = mlp(d, [int(h) for h in hidden], n_classes)
        plans = {
            key: _batch_plan(key[0], key[1], epochs, batch_size, drop_last) for key in dict.fromkeys(zip(sizes, seeds))
        }
        order = sorted(range(count), key=lambda i: -len(plans[sizes[i], seeds[i]]))
        per_member = sum(p.numel() for p in inits[seeds[0]].parameters())
        chunk = max(1, (GPU_STACK_PARAMS if dev.type == "cuda" else STACK_PARAMS) // per_member)
        for lo in range(0, count, chunk):
            members = order[lo : lo + chunk]
            stack = StackedMLP([inits[seeds[i]] for i in members], lr, weight_decay, dev)
            _train_members(stack, members, zs, ys, scalers, [plans[sizes[i], seeds[i]] for i in members])
            yield stack, members


def _train_members(
    stack: StackedMLP,
    members: Sequence[int],
    zs: Sequence[np.ndarray],
    ys: Sequence[np.ndarray],
    scalers: Sequence[Standardizer | None],
    plans: Sequence[torch.Tensor],
) -> None:
    """Train `stack` (the members' nets, in order of decreasing step count) on each member's rows, member j taking
    the minibatches of plans[j] (steps, rows; -1 pads): rows go into one (members x most rows) table, and each
    step gathers every still-active member's minibatch from it at once."""
    n_max = max(len(zs[i]) for i in members)
    d = int(np.shape(zs[members[0]])[1])
    z = torch.zeros(len(members) * n_max, d)
    y = torch.zeros(len(members) * n_max, dtype=torch.long)
    t_max, b_max = max(len(p) for p in plans), max(p.shape[1] for p in plans)
    index = torch.zeros((t_max, len(members), b_max), dtype=torch.long)  # rows of the table, step-major
    padded = any(bool((p < 0).any()) for p in plans) or len({p.shape[1] for p in plans}) > 1
    valid = torch.zeros((t_max, len(members), b_max), dtype=torch.bool) if padded else None
    for j, (i, plan) in enumerate(zip(members, plans)):
        zi, scaler = zs[i], scalers[i]
        z[j * n_max : j * n_max + len(zi)] = _tensor(scaler(zi) if scaler is not None else zi)
        y[j * n_max : j * n_max + len(zi)] = torch.as_tensor(ys[i], dtype=torch.long)
        index[: len(plan), j, : plan.shape[1]] = plan.clamp(min=0) + j * n_max
        if valid is not None:
            valid[: len(plan), j, : plan.shape[1]] = plan >= 0
    dev = stack.weights[0].device
    z, y, index = z.to(dev), y.to(dev), index.to(dev)
    valid = valid.to(dev) if valid is not None else None
    steps = [len(p) for p in plans]
    active = len(members)
    graphed = GraphedSteps(stack, active, b_max, d, valid is not None) if dev.type == "cuda" else None
    for t in range(t_max):
        while steps[active - 1] <= t:
            active -= 1
        rows = index[t, :active].reshape(-1)
        weight: torch.Tensor | float = 1.0 / b_max
        if valid is not None:
            w = valid[t, :active].to(torch.float32)
            weight = (w / w.sum(1, keepdim=True)).unsqueeze(2)
        if graphed is not None:
            graphed.step(active, z, y, rows, weight)
        else:
            stack.step(z.index_select(0, rows).view(active, b_max, d), y.index_select(0, rows), weight)


def sklearn_proba(model: Any, z: np.ndarray, n_classes: int) -> np.ndarray:
    """Class probabilities (rows x n_classes) of a fitted scikit-learn classifier trained on class codes;
    classes absent from its training labels get probability 0."""
    proba = np.zeros((len(z), n_classes))
    proba[:, model.classes_] = model.predict_proba(z)
    return proba
