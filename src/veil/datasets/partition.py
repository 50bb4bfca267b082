"""Split a dataset's rows over federated nodes.

    parts = partition(ds.train, "dirichlet", nodes=10, seed=0, alpha=0.3)
    scheme, kw = parse_scheme("dirichlet:0.3")          # -> ("dirichlet", {"alpha": 0.3})

Schemes (every row goes to exactly one node; the same seed gives the same partition):
- ``iid``: a seeded shuffle cut into near-equal parts.
- ``dirichlet`` (``alpha``, ``label``): label skew; for each class, node shares drawn from Dir(alpha).
  Smaller alpha, more skew. ``label`` defaults to the first utility label.
- ``silo`` (``column``): natural silos, one per distinct value of a column (an extra column such as
  gaussian-nodes' ``node``, or a label such as HAPT's ``subject``). With more silos than nodes, whole silos
  are dealt to nodes (largest first, to the emptiest node).
- ``variance``: EIGAN's per-node data (Sec. 3.2): node k gets exactly the rows that gaussian-nodes generated
  for node k (column ``node``), so node k has variance 0.1*(k+1). ``nodes`` must equal that count.
- ``quantity`` (``alpha``): quantity skew; IID rows, node sizes drawn from Dir(alpha).
A node left with no rows is a DataError naming the node.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from veil.datasets.dataset import Split
from veil.errors import ConfigError, DataError, UnknownNameError

SCHEMES = ("iid", "dirichlet", "silo", "variance", "quantity")
_FIRST_ARG = {"dirichlet": "alpha", "quantity": "alpha", "silo": "column", "variance": "column"}
_ALLOWED = {
    "iid": (),
    "dirichlet": ("alpha", "label"),
    "silo": ("column",),
    "variance": ("column",),
    "quantity": ("alpha",),
}


def parse_scheme(text: str) -> tuple[str, dict[str, Any]]:
    """'iid' | 'dirichlet:0.3' | 'dirichlet:alpha=0.3,label=digit' | 'silo:node' | 'quantity:0.5' -> (scheme, kwargs)."""
    text = str(text).strip()
    scheme, _, rest = text.partition(":")
    scheme = scheme.strip().lower()
    if scheme not in SCHEMES:
        raise UnknownNameError("partition scheme", scheme, list(SCHEMES))
    kw: dict[str, Any] = {}
    for i, item in enumerate(p.strip() for p in rest.split(",") if p.strip()):
        key, eq, val = item.partition("=")
        if not eq:
            if i > 0 or scheme not in _FIRST_ARG:
                raise ConfigError("partition", text, scheme_syntax(scheme))
            key, val = _FIRST_ARG[scheme], item
        key = key.strip()
        if key not in _ALLOWED[scheme]:
            raise UnknownNameError("partition option", key, list(_ALLOWED[scheme]), where=f"scheme {scheme!r}")
        if key == "alpha":
            try:
                kw[key] = float(val)
            except ValueError:
                kw[key] = math.nan
            if not kw[key] > 0:  # NaN too
                raise ConfigError("partition", text, scheme_syntax(scheme))
        else:
            kw[key] = val.strip()
    return scheme, kw


def scheme_syntax(scheme: str) -> str:
    """How a scheme is written, for errors: 'dirichlet:ALPHA with ALPHA a number > 0 (e.g. dirichlet:0.3), ...'."""
    first = _FIRST_ARG.get(scheme)
    if first is None:
        return f"{scheme} (it takes no options)"
    if first == "alpha":
        text = f"{scheme}:ALPHA with ALPHA a number > 0 (e.g. {scheme}:0.3)"
    else:
        text = f"{scheme}:COLUMN with COLUMN a column name (e.g. {scheme}:node)"
    if len(_ALLOWED[scheme]) > 1:
        text += ", or " + scheme + ":" + ",".join(f"{k}={k.upper()}" for k in _ALLOWED[scheme])
    return text


def column(split: Split, name: str) -> np.ndarray:
    """A per-row column of the split by name: extra first, then sensitive, then utility labels."""
    for group in (split.extra, split.sensitive, split.utility):
        if name in group:
            return np.asarray(group[name])
    valid = list(split.extra) + list(split.sensitive) + list(split.utility)
    raise UnknownNameError("column", name, valid, where="partition")


def partition(split: Split, scheme: str, nodes: int, seed: int, **kw: Any) -> list[np.ndarray]:
    """Row indices of `split` for each of `nodes` nodes (sorted; together exactly 0..n-1 once each)."""
    if ":" in scheme:
        scheme, parsed = parse_scheme(scheme)
        kw = {**parsed, **kw}
    scheme = scheme.lower()
    if scheme not in SCHEMES:
        raise UnknownNameError("partition scheme", scheme, list(SCHEMES))
    for k in kw:
        if k not in _ALLOWED[scheme]:
            raise UnknownNameError("partition option", k, list(_ALLOWED[scheme]), where=f"scheme {scheme!r}")
    if not isinstance(nodes, (int, np.integer)) or isinstance(nodes, bool) or nodes < 1:
        raise ConfigError("nodes", nodes, "an integer >= 1")
    n = len(split)
    if nodes > n:
        raise DataError(f"cannot give {nodes} nodes at least one row each from {n} rows")
    rng = np.random.default_rng(seed)
    parts = _SCHEME_FNS[scheme](split, nodes, rng, **kw)
    parts = [np.sort(np.asarray(p, dtype=np.int64)) for p in parts]
    for i, p in enumerate(parts):
        if len(p) == 0:
            hint = {
                "dirichlet": "; raise alpha or lower the number of nodes",
                "quantity": "; raise alpha or lower the number of nodes",
            }.get(scheme, "")
            raise DataError(f"partition {scheme!r}: node {i} received no rows (of {n}, {nodes} nodes){hint}")
    return parts


def _alpha(kw: dict[str, Any], default: float = 0.5) -> float:
    a = kw.get("alpha", default)
    try:
        a = float(a)
    except (TypeError, ValueError):
        raise ConfigError("alpha", a, "a number > 0") from None
    if not np.isfinite(a) or a <= 0:
        raise ConfigError("alpha", a, "a number > 0")
    return a


def _iid(split: Split, nodes: int, rng: np.random.Generator) -> list[np.ndarray]:
    return list(np.array_split(rng.permutation(len(split)), nodes))


def _dirichlet(split: Split, nodes: int, rng: np.random.Generator, **kw: Any) -> list[np.ndarray]:
    alpha = _alpha(kw)
    label = kw.get("label") or next(iter(split.utility))
    y = column(split, label)
    out: list[list[np.ndarray]] = [[] for _ in range(nodes)]
    for c in np.unique(y):
        idx = rng.permutation(np.flatnonzero(y == c))
        share = rng.dirichlet(np.full(nodes, alpha))
        cuts = (np.cumsum(share)[:-1] * len(idx)).round().astype(int)
        for k, piece in enumerate(np.split(idx, cuts)):
            out[k].append(piece)
    return [np.concatenate(p) if p else np.empty(0, np.int64) for p in out]


def _quantity(split: Split, nodes: int, rng: np.random.Generator, **kw: Any) -> list[np.ndarray]:
    alpha = _alpha(kw)
    perm = rng.permutation(len(split))
    share = rng.dirichlet(np.full(nodes, alpha))
    cuts = (np.cumsum(share)[:-1] * len(perm)).round().astype(int)
    return list(np.split(perm, cuts))


def _silo(split: Split, nodes: int, rng: np.random.Generator, **kw: Any) -> list[np.ndarray]:
    name = kw.get("column") or ("node" if "node" in split.extra else None)
    if name is None:
        raise ConfigError(
            "column",
            None,
            f"the column whose values are the silos (one of {list(split.extra) + list(split.labels())})",
            where="partition 'silo'",
        )
    col = column(split, name)
    values, codes = np.unique(col, return_inverse=True)
    silos = [np.flatnonzero(codes == i) for i in range(len(values))]
    if len(silos) < nodes:
        raise DataError(
            f"partition 'silo': column '{name}' has {len(silos)} silos for {nodes} nodes; "
            f"node {len(silos)} would receive no rows"
        )
    if len(silos) == nodes:
        return silos
    order = sorted(range(len(silos)), key=lambda i: (-len(silos[i]), rng.random()))
    out: list[list[np.ndarray]] = [[] for _ in range(nodes)]
    load = np.zeros(nodes, dtype=np.int64)
    for i in order:
        k = int(np.argmin(load))
        out[k].append(silos[i])
        load[k] += len(silos[i])
    return [np.concatenate(p) for p in out]


def _variance(split: Split, nodes: int, rng: np.random.Generator, **kw: Any) -> list[np.ndarray]:
    name = kw.get("column", "node")
    if name not in split.extra:
        raise DataError(
            f"partition 'variance' needs the per-row column '{name}' of gaussian-nodes "
            f"(this split has extra columns {sorted(split.extra)})"
        )
    col = np.asarray(split.extra[name]).astype(np.int64)
    have = int(col.max()) + 1 if len(col) else 0
    if have != nodes:
        raise DataError(
            f"partition 'variance': the data was generated for {have} nodes (column '{name}'), "
            f"asked for {nodes}; build gaussian-nodes with nodes={nodes}"
        )
    return [np.flatnonzero(col == k) for k in range(nodes)]


_SCHEME_FNS: dict[str, Callable[..., list[np.ndarray]]] = {
    "iid": _iid,
    "dirichlet": _dirichlet,
    "silo": _silo,
    "variance": _variance,
    "quantity": _quantity,
}


def describe(split: Split, parts: list[np.ndarray], labels: list[str] | None = None) -> list[dict[str, Any]]:
    """Per node: its row count and the class histogram of each label (for `veil datasets partition`)."""
    labels = labels if labels is not None else list(split.utility) + list(split.sensitive)
    rows = []
    for k, idx in enumerate(parts):
        row: dict[str, Any] = {"node": k, "rows": int(len(idx))}
        for lab in labels:
            y = column(split, lab)[idx]
            vals, counts = np.unique(y, return_counts=True)
            row[lab] = {v.item() if hasattr(v, "item") else v: int(c) for v, c in zip(vals, counts)}
        rows.append(row)
    return rows


def skew(split: Split, parts: list[np.ndarray], label: str) -> float:
    """Mean total-variation distance between each node's class distribution of `label` and the global one
    (0 = every node looks like the whole; near 1 = each node sees other classes)."""
    y = column(split, label)
    classes = np.unique(y)
    glob = np.array([(y == c).mean() for c in classes])
    tv = []
    for idx in parts:
        local = np.array([(y[idx] == c).mean() for c in classes])
        tv.append(0.5 * np.abs(local - glob).sum())
    return float(np.mean(tv))


def constant_on_every_node(split: Split, parts: list[np.ndarray]) -> list[str]:
    """Sensitive labels that vary over the split but take one value on every node (e.g. partition silo:race with
    race sensitive): no node's adversary sees two of their classes, so federated training cannot hide them."""
    return [
        name
        for name, y in split.sensitive.items()
        if len(np.unique(y)) > 1 and all(len(np.unique(y[p])) <= 1 for p in parts)
    ]
