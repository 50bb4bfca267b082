"""What the vectorised federated methods (d-eigan, d-gpp, ldp-fedavg) do alike on top of
`veil.methods.federated.ensemble`: build seeded per-node stacks, find a node's copy in its host's
ensemble, take and put back the copies of the nodes in a round, run a stack as a network with one
(or two) outputs, and the per-copy losses every one of them sums over its heads.

Losses are produced lazily, head by head, and summed left to right (`nets.loss_sum`), so the autograd
graph and every value are exactly those of the generator expressions they replace."""

from __future__ import annotations

from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

import torch
from torch import nn

from veil.methods.federated.core import Node, derive_seed
from veil.methods.federated.ensemble import Stack, copy_ce, copy_uniform_ce, seeded_copies
from veil.methods.nets import loss_sum

#: a stack of networks, or one module applied to every copy's rows at once (P, b, d)
Net = Callable[[torch.Tensor], torch.Tensor | tuple[torch.Tensor, ...]]


# -- building and bookkeeping -------------------------------------------------------------------------
def seeded_stack(factory: Callable[[], nn.Module], seed: int, nodes: Sequence[Node], *role: int) -> Stack:
    """One copy of `factory()` per node, node n's initialised from `derive_seed(seed, n.id, *role)`."""
    return seeded_copies(factory, [derive_seed(seed, n.id, *role) for n in nodes])


def assign_slots(nodes: Sequence[Node], key: Any = 0) -> None:
    """Give `nodes` the copies 0, 1, ... of the host's ensemble `key`."""
    for i, n in enumerate(nodes):
        n.slot = (key, i)


def slot(node: Node) -> tuple[Any, int]:
    """(ensemble key, copy index) of `node`, as `init_nodes` set it."""
    if node.slot is None:
        raise RuntimeError(f"{node!r} has no copy in its host's ensemble (init_nodes has not run for it)")
    return node.slot


def members(nodes: Iterable[Node]) -> torch.Tensor:
    """The copy indices of `nodes` (all in one ensemble), for `Stack.take` / `Stack.put`."""
    return torch.tensor([slot(n)[1] for n in nodes])


def whole(stack: Stack, rows: torch.Tensor) -> bool:
    """Whether `rows` are all of `stack`'s copies in order, so a round can train the stack itself instead of a
    `take`n copy it would `put` back (the same values, without copying every parameter and moment twice)."""
    return len(rows) == stack.copies and bool((rows == torch.arange(stack.copies)).all())


def stack_tensors(stacks: Iterable[Stack]) -> list[torch.Tensor]:
    """Every stacked parameter of `stacks`, in order (what a `StackedOptimizer` steps)."""
    return [p for s in stacks for p in s.tensors()]


def take_all(stacks: Iterable[Stack], rows: torch.Tensor) -> list[Stack]:
    """The copies `rows` of every stack, as fresh stacks to train this round."""
    return [s.take(rows) for s in stacks]


def put_all(stacks: Iterable[Stack], subs: Iterable[Stack], rows: torch.Tensor) -> None:
    """Write the trained copies `subs` back into `stacks` at `rows`."""
    for full, sub in zip(stacks, subs):
        full.put(rows, sub)


def node_means(sums: torch.Tensor, steps: torch.Tensor) -> list[list[float]]:
    """Each copy's summed per-step losses divided by its number of steps (at least 1)."""
    return (sums / steps.clamp(min=1).unsqueeze(1).to(sums.dtype)).tolist()


# -- running stacks --------------------------------------------------------------------------------
def single(net: Net, x: torch.Tensor) -> torch.Tensor:
    """`net(x)` for a network with one output."""
    out = net(x)
    if not isinstance(out, torch.Tensor):
        raise TypeError(f"expected a network with one output, got {type(out).__name__}")
    return out


def pair(net: Net, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """`net(x)` for a network with two outputs (a Gaussian encoder's mu and log-variance)."""
    out = net(x)
    if not (isinstance(out, tuple) and len(out) == 2):
        raise TypeError(f"expected a network with two outputs, got {type(out).__name__}")
    return out[0], out[1]


def copy_ces(
    heads: Iterable[Net], labels: Iterable[str], z: torch.Tensor, y: Mapping[str, torch.Tensor], w: torch.Tensor
) -> Iterator[torch.Tensor]:
    """Each head's per-copy cross-entropy (P,) on its own label, head by head."""
    for head, lab in zip(heads, labels):
        yield copy_ce(single(head, z), y[lab], w)


def privacy_term(
    kind: str, advs: Iterable[Net], z: torch.Tensor, w: torch.Tensor, ces: Iterable[torch.Tensor]
) -> torch.Tensor:
    """The encoder's per-copy term against its adversaries: minus the sum of their cross-entropies `ces`
    ('neg-ce'), or the sum of their CEs against uniform on `z` ('uniform'); as `ClassifierBank.privacy_term`."""
    if kind == "uniform":
        return loss_sum(copy_uniform_ce(single(a, z), w) for a in advs)
    return -loss_sum(ces)
