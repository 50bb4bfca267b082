"""Server aggregation rules by name. A rule folds the round's uploads into the next global vector:
`rule(size, previous, updates) -> vector`, each update being (indices, values, N_k) with float64 accumulation; the
indices are sorted and distinct (`index_set`'s), so an upload of `size` of them is dense: every index, in order.
Unknown names are refused listing the registered ones."""

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


def flat_indices(size: int, updates: Sequence[Update]) -> np.ndarray | None:
    """Every update's indices concatenated in order, or None when every upload is dense (every index, in order)."""
    if all(len(i) == size for i, _, _ in updates):
        return None
    return np.concatenate([np.asarray(i, dtype=np.int64) for i, _, _ in updates])


def weighted_sums(size: int, updates: Sequence[Update], weights: Sequence[float], idx: np.ndarray | None) -> np.ndarray:
    """Per entry, sum_k w_k * value_k over the updates that sent it, in float64 and in the updates' order: the
    additions of one indexed add per update, so every rule equals that loop bit for bit. Dense uploads (`idx`
    None, as with phi = 1) add whole vectors, one per update; otherwise one bincount over the concatenated
    uploads `idx` replaces ten thousand indexed adds a round (bincount adds its weights in order)."""
    if idx is None:
        num = np.zeros(size)
        for (_, v, _), w in zip(updates, weights):
            num += w * np.asarray(v, dtype=np.float64)
        return num
    vals = np.concatenate([np.asarray(v) for _, v, _ in updates]).astype(np.float64)
    per_value = np.repeat(np.asarray(weights, dtype=np.float64), [len(i) for i, _, _ in updates])
    return np.bincount(idx, per_value * vals, minlength=size)


def sender_counts(size: int, updates: Sequence[Update], idx: np.ndarray | None) -> np.ndarray:
    """Per entry, sum_k N_k over the updates that sent it (float64, in the updates' order)."""
    if idx is None:
        total = 0.0
        for _, _, n in updates:  # not sum(): from Python 3.12 it compensates rounding, which bincount does not
            total += float(n)
        return np.full(size, total)
    counts = np.repeat(np.array([float(n) for _, _, n in updates]), [len(i) for i, _, _ in updates])
    return np.bincount(idx, counts, minlength=size)


@register_rule("paper")
def weighted_sum(size: int, previous: np.ndarray, updates: Sequence[Update]) -> np.ndarray:
    """D-EIGAN's rule: sum_k (N_k / N) * theta~_k, theta~_k zero off its indices, N = the senders' total.
    With phi < 1 unsent entries count as 0, which shrinks the global vector towards zero."""
    total = float(sum(n for _, _, n in updates))
    weights = [float(n) / total for _, _, n in updates]
    return weighted_sums(size, updates, weights, flat_indices(size, updates)).astype(np.float32)


@register_rule("masked-mean")
def masked_mean(size: int, previous: np.ndarray, updates: Sequence[Update]) -> np.ndarray:
    """Per entry, sum_{k sent q} N_k theta_k(q) / sum_{k sent q} N_k; unsent entries keep `previous`."""
    idx = flat_indices(size, updates)  # concatenated once for both sums
    num = weighted_sums(size, updates, [float(n) for _, _, n in updates], idx)
    den = sender_counts(size, updates, idx)
    out = previous.astype(np.float64).copy()
    sent = den > 0
    out[sent] = num[sent] / den[sent]
    return out.astype(np.float32)


@register_rule("mean")
def mean(size: int, previous: np.ndarray, updates: Sequence[Update]) -> np.ndarray:
    """FedAvg with equal weights (LDP-FedAvg): (1/K) sum_k omega_k over the nodes that delivered."""
    num = weighted_sums(size, updates, [1.0] * len(updates), flat_indices(size, updates))
    return (num / len(updates)).astype(np.float32)
