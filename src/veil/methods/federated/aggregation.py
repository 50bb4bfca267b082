"""Server aggregation rules by name. A rule folds the round's uploads into the next global vector:
`rule(size, previous, updates) -> vector`, each update being (indices, values, N_k) with float64 accumulation.
Dense uploads pass every index. Unknown names are refused listing the registered ones."""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from veil.registry import Registry

Update = tuple[np.ndarray, np.ndarray, int]
Rule = Callable[[int, np.ndarray, Sequence[Update]], np.ndarray]

AGGREGATION_RULES: Registry[Rule] = Registry("aggregation")


def register_rule(name: str) -> Callable[[Rule], Rule]:
    """Decorator adding an aggregation rule under `name`."""
    return AGGREGATION_RULES.decorator(name, lambda rule: rule)


def get_rule(name: str) -> Rule:
    """The rule registered as `name` (plugins included), or an error listing the valid names."""
    return AGGREGATION_RULES.lookup(name)


def aggregate(name: str, size: int, previous: np.ndarray, updates: Sequence[Update]) -> np.ndarray:
    """Apply rule `name`; with no update the previous vector is kept."""
    rule = get_rule(name)
    if not updates:
        return previous.copy()
    return rule(size, previous, updates)


@register_rule("paper")
def weighted_sum(size: int, previous: np.ndarray, updates: Sequence[Update]) -> np.ndarray:
    """D-EIGAN's rule: sum_k (N_k / N) * theta~_k, theta~_k zero off its indices, N = the senders' total.
    With phi < 1 unsent entries count as 0, which shrinks the global vector towards zero."""
    total = float(sum(n for _, _, n in updates))
    acc = np.zeros(size, dtype=np.float64)
    for idx, vals, n in updates:
        acc[idx] += (n / total) * vals.astype(np.float64)
    return acc.astype(np.float32)


@register_rule("masked-mean")
def masked_mean(size: int, previous: np.ndarray, updates: Sequence[Update]) -> np.ndarray:
    """Per entry, sum_{k sent q} N_k theta_k(q) / sum_{k sent q} N_k; unsent entries keep `previous`."""
    num = np.zeros(size, dtype=np.float64)
    den = np.zeros(size, dtype=np.float64)
    for idx, vals, n in updates:
        num[idx] += n * vals.astype(np.float64)
        den[idx] += n
    out = previous.astype(np.float64).copy()
    sent = den > 0
    out[sent] = num[sent] / den[sent]
    return out.astype(np.float32)


@register_rule("mean")
def mean(size: int, previous: np.ndarray, updates: Sequence[Update]) -> np.ndarray:
    """FedAvg with equal weights (LDP-FedAvg): (1/K) sum_k omega_k over the nodes that delivered."""
    acc = np.zeros(size, dtype=np.float64)
    for idx, vals, _ in updates:
        acc[idx] += vals.astype(np.float64)
    return (acc / len(updates)).astype(np.float32)
