"""Trade-off metrics for a sweep: Pareto front, exact hypervolume, convex-hull AUC.

METHODS.md ("What every run reports"): for a sweep, report the Pareto front (utility up,
leakage down), its hypervolume against a fixed reference point, and the convex-hull AUC of the
trade-off curve (seed 003, Sec. 4.2.7). Pure numpy; no optuna / ray / mlflow.
"""

from __future__ import annotations

from typing import Any, Hashable, Mapping, Sequence, TypeVar

import numpy as np

from veil.errors import ConfigError
from veil.sweeps.metrics import AUC_ORIGINS, DIRECTIONS  # the sweep vocabulary, read there without numpy

__all__ = ["DIRECTIONS", "AUC_ORIGINS", "pareto_front", "extend_front", "hypervolume", "convex_hull_auc"]

K = TypeVar("K", bound=Hashable)
_CHUNK_ELEMS = 4_000_000  # bound on the n x n x m comparison block held in memory at once


# ----------------------------------------------------------------------------------------------
# validation


def _signs(directions: Sequence[str], m: int | None) -> np.ndarray:
    if isinstance(directions, str) or not isinstance(directions, Sequence):
        raise ConfigError("directions", directions, "a sequence with one of 'max' | 'min' per objective")
    bad = [d for d in directions if d not in DIRECTIONS]
    if bad:
        raise ConfigError("directions", bad[0], " | ".join(DIRECTIONS))
    if len(directions) == 0:
        raise ConfigError("directions", list(directions), "at least one objective")
    if m is not None and len(directions) != m:
        raise ConfigError("directions", list(directions), f"one direction per objective column ({m})")
    # minimisation space: multiply "max" columns by -1
    return np.array([-1.0 if DIRECTIONS[d] == "max" else 1.0 for d in directions])


def _as_points(points: Any, directions: Sequence[str]) -> np.ndarray:
    """Validated (n, m) float array converted to minimisation (max columns negated)."""
    try:
        p = np.asarray(points, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ConfigError("points", type(points).__name__, "a numeric (n_points, n_objectives) array") from exc
    if p.ndim != 2:
        raise ConfigError("points", f"array of shape {p.shape}", "a 2-D (n_points, n_objectives) array")
    if p.shape[1] == 0:
        raise ConfigError("points", f"array of shape {p.shape}", "at least one objective column")
    signs = _signs(directions, p.shape[1])
    if np.isnan(p).any():
        raise ConfigError("points", "array containing NaN", "finite numbers (drop failed trials first)")
    if not np.all(np.isfinite(p)):
        raise ConfigError("points", "array containing inf", "finite numbers")
    return p * signs


def _nondominated_min(p: np.ndarray) -> np.ndarray:
    """Mask of rows of p (minimisation) that no other row dominates; O(n^2 m), vectorised in chunks.

    q dominates p iff q <= p in every objective and q < p in at least one, so equal rows never
    dominate each other and are all kept."""
    n, m = p.shape
    mask = np.ones(n, dtype=bool)
    if n <= 1:
        return mask
    step = max(1, _CHUNK_ELEMS // max(1, n * m))
    for i0 in range(0, n, step):
        # (1, n, m) possible dominators against (c, 1, m) candidates
        mask[i0 : i0 + step] = ~np.any(_dominates(p[None, :, :], p[i0 : i0 + step, None, :]), axis=1)
    return mask


def _dominates(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a dominates b (minimisation), over the last axis with numpy broadcasting: a <= b in every objective and
    a < b in at least one."""
    return np.all(a <= b, axis=-1) & np.any(a < b, axis=-1)


# ----------------------------------------------------------------------------------------------
# Pareto front


def pareto_front(points: Any, directions: Sequence[str]) -> np.ndarray:
    """Boolean mask of the non-dominated rows of ``points`` (n_points x n_objectives).

    ``directions[j]`` is "max" or "min" (also "maximize" / "minimize") for column j. Row a
    dominates row b when a is at least as good as b in every objective and strictly better in at
    least one. Ties: rows equal on all objectives do not dominate each other, so duplicates of a
    front point are ALL kept (each is non-dominated). Works for any number of objectives
    (O(n^2 m) vectorised comparisons). Raises ConfigError for a non-2-D array, a direction count
    that does not match the columns, an unknown direction, or NaN / inf values.
    """
    return _nondominated_min(_as_points(points, directions))


def extend_front(
    front: Mapping[K, Sequence[float]], key: K, point: Sequence[float], directions: Sequence[str]
) -> set[K]:
    """The keys of the front once `point` (under `key`) joins the points `front` (a front already: no point of it
    dominates another). O(|front| m) where recomputing is O(n^2 m): a point that a front point dominates changes
    nothing (whatever it would beat, the front point beats too); else it joins and the points it dominates leave."""
    if not front:
        return {key}
    keys = list(front)
    p = _as_points([*(front[k] for k in keys), point], directions)
    new, old = p[-1], p[:-1]
    if np.any(_dominates(old, new)):
        return set(keys)
    beaten = _dominates(new, old)
    return {k for k, out in zip(keys, beaten) if not out} | {key}


# ----------------------------------------------------------------------------------------------
# hypervolume


def _hv_2d(p: np.ndarray, ref: np.ndarray) -> float:
    """Sweep along objective 0; correct even with dominated rows (running minimum of objective 1)."""
    order = np.lexsort((p[:, 1], p[:, 0]))
    x, y = p[order, 0], np.minimum.accumulate(p[order, 1])
    widths = np.diff(np.append(x, ref[0]))
    return float(np.sum(widths * (ref[1] - y)))


def _hv(p: np.ndarray, ref: np.ndarray) -> float:
    """Exact hypervolume (minimisation) of rows all strictly below ``ref``.

    1-D: a length; 2-D: a sweep; m >= 3: HSO slicing -- sort by the last objective and add, for
    each slab between consecutive values, slab depth x the (m-1)-D hypervolume of the rows that
    have entered by then (non-dominated ones only)."""
    m = p.shape[1]
    if p.shape[0] == 0:
        return 0.0
    if m == 1:
        return float(ref[0] - p[:, 0].min())
    if m == 2:
        return _hv_2d(p, ref)
    p = p[np.argsort(p[:, -1], kind="stable")]
    last = np.append(p[:, -1], ref[-1])
    total = 0.0
    for i in range(p.shape[0]):
        depth = last[i + 1] - last[i]
        if depth <= 0.0:
            continue
        sub = p[: i + 1, :-1]
        sub = sub[_nondominated_min(sub)]
        total += depth * _hv(sub, ref[:-1])
    return float(total)


def hypervolume(points: Any, directions: Sequence[str], reference: Any) -> float:
    """Exact hypervolume dominated by ``points`` and bounded by ``reference``.

    Everything is converted to minimisation ("max" columns negated, the reference too). Only
    points strictly better than the reference in EVERY objective contribute (others add
    nothing, they are dropped, not an error); duplicates and dominated points do not change the
    value. 2 objectives: exact sweep, O(n log n). 3+ objectives: exact HSO slicing recursion
    (fine for the tens-to-hundreds of points a sweep produces). 1 objective: the length from the
    best point to the reference. An empty set (or none better than the reference) gives 0.0.
    """
    p = _as_points(points, directions)
    signs = _signs(directions, p.shape[1])
    try:
        r = np.asarray(reference, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ConfigError("reference", reference, "a numeric point with one value per objective") from exc
    if r.shape != (p.shape[1],):
        raise ConfigError("reference", reference, f"a point with one value per objective ({p.shape[1]})")
    if not np.all(np.isfinite(r)):
        raise ConfigError("reference", reference, "finite numbers")
    r = r * signs
    p = p[np.all(p < r, axis=1)]
    if p.shape[0] == 0:
        return 0.0
    p = np.unique(p, axis=0)
    p = p[_nondominated_min(p)]
    return _hv(p, r)


# ----------------------------------------------------------------------------------------------
# convex-hull AUC (seed 003)


def _cross(o: np.ndarray, a: np.ndarray, b: np.ndarray) -> float:
    return float((a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0]))


def _upper_hull(xy: np.ndarray) -> np.ndarray:
    """Upper convex hull (Andrew's monotone chain) from the lowest-leftmost to the highest-rightmost point."""
    pts = xy[np.lexsort((xy[:, 1], xy[:, 0]))]
    hull: list[np.ndarray] = []
    for q in pts[::-1]:  # right to left, keeping left turns => upper chain
        while len(hull) >= 2 and _cross(hull[-2], hull[-1], q) <= 0.0:
            hull.pop()
        hull.append(q)
    return np.array(hull[::-1])


def convex_hull_auc(
    utility: Any,
    leakage: Any,
    origin: str = "zero",
    *,
    close_at_one: bool = True,
) -> float:
    """Convex-hull area under the utility-privacy trade-off curve (seed 003, Sec. 4.2.7, Table 3).

    Seed 003 plots information leakage (the adversary's accuracy) on the horizontal axis and
    utility (the utility provider's accuracy) on the vertical axis, ideal point (0.5, 1); it
    "consider[s] the convex hull of the curve and then calculate[s] AUC", with the origin at
    (0, 0) as in its reference [24] while noting that (0.5, 0.5) -- chance level on both binary
    tasks -- is the logical origin. It does not spell out the integration range; Veil's exact
    reading (``o`` = 0 for ``origin="zero"``, 0.5 for ``"half"``):

    1. Points are ``(x, y) = (leakage_i, utility_i)``, both in [0, 1] (accuracies or AUCs);
       coordinates below ``o`` are clipped up to ``o`` (no better / no worse than chance).
    2. The origin ``(o, o)`` is added as a curve point (release nothing: chance on both axes).
       With ``close_at_one`` (default) the point ``(1, max_i y_i)`` is also added: any utility
       reached at some leakage is also reached at every larger leakage, so the curve is
       extended flat to leakage 1. With ``close_at_one=False`` the area stops at the largest
       observed leakage (the literal "area under the plotted curve").
    3. AUC = area between the upper convex hull h(x) of these points and the horizontal line
       ``y = o``, over ``x`` from ``o`` to the right end (1, or the largest observed leakage):
       ``integral_o^end (h(x) - o) dx``; equivalently the area of the convex hull of the points
       together with ``(end, o)``. No normalisation.

    Leakage must be an adversary score with chance at 0.5 (AUC or binary accuracy). A sweep whose
    leakage objective is a privacy gap |AUC - 0.5| passes 0.5 + gap
    (``veil.sweeps.results.chull_leakage``), so an inverted adversary (AUC 0.2) counts as leakage 0.8
    instead of being clipped to chance; on its own, this function cannot tell the two apart.

    With ``close_at_one`` the value only grows when a point moves left (less leakage) or up
    (more utility), so larger is better. Examples: the ideal single point (0.5, 1) gives 0.75
    with origin "zero" and 0.25 with "half". Raises ConfigError for empty / mismatched inputs,
    NaN, values outside [0, 1], or an unknown origin.
    """
    if origin not in AUC_ORIGINS:
        raise ConfigError("origin", origin, " | ".join(AUC_ORIGINS))
    o = AUC_ORIGINS[origin]
    u = np.asarray(utility, dtype=np.float64).reshape(-1) if np.ndim(utility) <= 1 else None
    lk = np.asarray(leakage, dtype=np.float64).reshape(-1) if np.ndim(leakage) <= 1 else None
    if u is None or lk is None:
        raise ConfigError("utility" if u is None else "leakage", "a multi-dimensional array", "a 1-D sequence")
    if u.size == 0:
        raise ConfigError("utility", "empty", "at least one trade-off point")
    if u.shape != lk.shape:
        raise ConfigError("leakage", f"{lk.size} values", f"one per utility value ({u.size})")
    for name, v in (("utility", u), ("leakage", lk)):
        if np.isnan(v).any():
            raise ConfigError(name, "values containing NaN", "numbers in [0, 1] (drop failed trials first)")
        if np.any(v < 0.0) or np.any(v > 1.0):
            raise ConfigError(name, f"values in [{v.min()}, {v.max()}]", "numbers in [0, 1]")
    x, y = np.maximum(lk, o), np.maximum(u, o)
    end = 1.0 if close_at_one else float(x.max())
    pts = [np.column_stack([x, y]), np.array([[o, o]])]
    if close_at_one:
        pts.append(np.array([[1.0, float(y.max())]]))
    hull = _upper_hull(np.vstack(pts))
    hx, hy = hull[:, 0], hull[:, 1] - o
    area = float(np.sum(np.diff(hx) * (hy[1:] + hy[:-1]) / 2.0))
    assert hx[0] == o and hx[-1] == end  # the chain spans [o, end]
    return area
