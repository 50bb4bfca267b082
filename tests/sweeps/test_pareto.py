"""Pareto front, hypervolume and convex-hull AUC against brute force, Optuna and hand computation."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.spatial import ConvexHull

from veil.errors import ConfigError
from veil.sweeps.pareto import convex_hull_auc, extend_front, hypervolume, pareto_front

# Exact algorithms compared with each other: only float round-off separates them.
EXACT_REL_TOL = 1e-9
# Monte Carlo check: the estimate's standard error is V_box * sqrt(p (1 - p) / N); allow 5 s.e.
MC_SAMPLES = 200_000
MC_SIGMAS = 5.0


# --- brute-force references -------------------------------------------------------------------


def brute_front(points: np.ndarray, directions: list[str]) -> np.ndarray:
    """O(n^2) loop: keep a point unless some other point is >= in all and > in one (after sign flip)."""
    sign = np.array([1.0 if d in ("max", "maximize") else -1.0 for d in directions])
    p = points * sign  # maximisation space here
    keep = np.ones(len(p), dtype=bool)
    for i in range(len(p)):
        for j in range(len(p)):
            if j != i and np.all(p[j] >= p[i]) and np.any(p[j] > p[i]):
                keep[i] = False
                break
    return keep


def grid_hypervolume_min(points: np.ndarray, ref: np.ndarray) -> int:
    """Exact HV for integer points (minimisation) by counting dominated unit cells."""
    ranges = [range(int(lo), int(hi)) for lo, hi in zip(points.min(axis=0), ref)]
    count = 0
    for cell in itertools.product(*ranges):  # cell [c, c+1)^m is dominated iff some p <= c
        if np.any(np.all(points <= np.array(cell), axis=1)):
            count += 1
    return count


def mc_hypervolume_min(points: np.ndarray, ref: np.ndarray, rng: np.random.Generator) -> tuple[float, float]:
    lo = points.min(axis=0)
    box = float(np.prod(ref - lo))
    u = lo + rng.random((MC_SAMPLES, points.shape[1])) * (ref - lo)
    hit = np.zeros(MC_SAMPLES, dtype=bool)
    for p in points:
        hit |= np.all(u >= p, axis=1)
    frac = hit.mean()
    return box * frac, box * np.sqrt(frac * (1 - frac) / MC_SAMPLES)


def optuna_hv(points: np.ndarray, directions: list[str], ref: np.ndarray) -> float:
    optuna_hv_mod = pytest.importorskip("optuna._hypervolume")
    sign = np.array([-1.0 if d in ("max", "maximize") else 1.0 for d in directions])
    p, r = points * sign, ref * sign
    p = p[np.all(p <= r, axis=1)]  # optuna requires every point to be <= the reference
    return float(optuna_hv_mod.compute_hypervolume(p, r))


# --- pareto_front -----------------------------------------------------------------------------


@pytest.mark.parametrize("m", [1, 2, 3, 4])
def test_front_matches_brute_force(m: int) -> None:
    rng = np.random.default_rng(100 + m)
    for trial in range(6):
        n = int(rng.integers(1, 60))
        # integer values in a small range create many ties and exact duplicates
        pts = rng.integers(0, 6, (n, m)).astype(float) if trial % 2 else rng.random((n, m))
        dirs = [str(d) for d in rng.choice(["max", "min"], m)]
        np.testing.assert_array_equal(pareto_front(pts, dirs), brute_front(pts, dirs))


@pytest.mark.parametrize("m", [1, 2, 3])
def test_a_front_extended_one_point_at_a_time_is_the_front_of_all_points(m: int) -> None:
    """As a sweep's monitor keeps it: each trial's point added to the current front equals recomputing the front of
    every point so far, ties and duplicates included."""
    rng = np.random.default_rng(200 + m)
    for trial in range(6):
        n = int(rng.integers(1, 80))
        pts = rng.integers(0, 5, (n, m)).astype(float) if trial % 2 else rng.random((n, m))
        dirs = [str(d) for d in rng.choice(["max", "min"], m)]
        front: set[int] = set()
        for i in range(n):
            front = extend_front({j: pts[j] for j in front}, i, pts[i], dirs)
            assert front == set(np.flatnonzero(pareto_front(pts[: i + 1], dirs)).tolist())


def test_front_duplicates_are_all_kept_and_directions_matter() -> None:
    pts = np.array([[1.0, 1.0], [1.0, 1.0], [0.0, 2.0], [0.5, 0.5], [2.0, 0.0]])
    np.testing.assert_array_equal(pareto_front(pts, ["max", "max"]), [True, True, True, False, True])
    np.testing.assert_array_equal(pareto_front(pts, ["min", "min"]), [False, False, True, True, True])
    # utility up, leakage down: (2, 0) dominates every other point
    np.testing.assert_array_equal(pareto_front(pts, ["max", "min"]), [False, False, False, False, True])
    np.testing.assert_array_equal(pareto_front(pts, ["maximize", "minimize"]), pareto_front(pts, ["max", "min"]))


def test_front_of_front_is_itself() -> None:
    rng = np.random.default_rng(7)
    pts = rng.random((80, 3))
    dirs = ["max", "min", "min"]
    front = pts[pareto_front(pts, dirs)]
    assert pareto_front(front, dirs).all()


def test_front_edge_cases() -> None:
    assert pareto_front(np.empty((0, 2)), ["max", "min"]).shape == (0,)
    np.testing.assert_array_equal(pareto_front([[3.0, 1.0]], ["max", "min"]), [True])
    np.testing.assert_array_equal(pareto_front([[1.0], [3.0], [3.0]], ["max"]), [False, True, True])


def test_front_chunking_matches_unchunked(monkeypatch: pytest.MonkeyPatch) -> None:
    import veil.sweeps.pareto as mod

    rng = np.random.default_rng(8)
    pts = rng.integers(0, 5, (120, 3)).astype(float)
    full = pareto_front(pts, ["min"] * 3)
    monkeypatch.setattr(mod, "_CHUNK_ELEMS", 100)  # forces blocks of a few rows
    np.testing.assert_array_equal(pareto_front(pts, ["min"] * 3), full)


@pytest.mark.parametrize(
    "points, directions, field",
    [
        (np.zeros((3, 2)), ["max"], "directions"),
        (np.zeros((3, 2)), ["max", "up"], "directions"),
        (np.zeros((3, 2)), "maxmin", "directions"),
        (np.zeros(3), ["max"], "points"),
        (np.array([[0.0, np.nan]]), ["max", "min"], "points"),
        (np.array([[0.0, np.inf]]), ["max", "min"], "points"),
        ([["a", "b"]], ["max", "min"], "points"),
    ],
)
def test_front_validation(points, directions, field) -> None:
    with pytest.raises(ConfigError) as e:
        pareto_front(points, directions)
    assert e.value.field == field


# --- hypervolume ------------------------------------------------------------------------------


@pytest.mark.parametrize("m", [2, 3, 4])
def test_hypervolume_matches_optuna(m: int) -> None:
    rng = np.random.default_rng(200 + m)
    for _ in range(5):
        n = int(rng.integers(1, 40))
        pts = rng.random((n, m))
        dirs = [str(d) for d in rng.choice(["max", "min"], m)]
        ref = np.array([-0.1 if d == "max" else 1.1 for d in dirs])
        ours = hypervolume(pts, dirs, ref)
        assert ours == pytest.approx(optuna_hv(pts, dirs, ref), rel=EXACT_REL_TOL, abs=1e-12)


@pytest.mark.parametrize("m", [2, 3])
def test_hypervolume_matches_grid_count_on_integer_points(m: int) -> None:
    rng = np.random.default_rng(300 + m)
    for _ in range(5):
        pts = rng.integers(0, 7, (int(rng.integers(1, 15)), m)).astype(float)
        ref = np.full(m, 8.0)
        assert hypervolume(pts, ["min"] * m, ref) == pytest.approx(grid_hypervolume_min(pts, ref), abs=1e-9)


@pytest.mark.parametrize("m", [2, 3])
def test_hypervolume_matches_monte_carlo(m: int) -> None:
    rng = np.random.default_rng(400 + m)
    pts = rng.random((25, m))
    ref = np.full(m, 1.0)
    est, se = mc_hypervolume_min(pts, ref, rng)
    assert abs(hypervolume(pts, ["min"] * m, ref) - est) < MC_SIGMAS * se


def test_hypervolume_hand_computed() -> None:
    # utility up, leakage down; reference (utility 0.5, leakage 1.0)
    pts = [[0.9, 0.8], [0.7, 0.6]]
    # in min space: (-0.9, 0.8), (-0.7, 0.6), ref (-0.5, 1.0): 0.4*0.2 + 0.2*0.2 = 0.12
    assert hypervolume(pts, ["max", "min"], [0.5, 1.0]) == pytest.approx(0.12)
    assert hypervolume([[2.0]], ["min"], [5.0]) == pytest.approx(3.0)
    assert hypervolume([[1.0, 1.0, 1.0]], ["min"] * 3, [2.0, 3.0, 4.0]) == pytest.approx(6.0)


def test_hypervolume_properties() -> None:
    rng = np.random.default_rng(9)
    dirs = ["max", "min", "min"]
    pts = rng.random((30, 3))
    ref = np.array([0.0, 1.0, 1.0])
    base = hypervolume(pts, dirs, ref)
    # adding a dominated point, or a duplicate, changes nothing
    dominated = np.array([0.5 * pts[0, 0], *np.minimum(1.0, pts[0, 1:] + 0.01)])  # worse than pts[0]
    assert hypervolume(np.vstack([pts, dominated]), dirs, ref) == pytest.approx(base, rel=EXACT_REL_TOL)
    assert hypervolume(np.vstack([pts, pts[:5]]), dirs, ref) == pytest.approx(base, rel=EXACT_REL_TOL)
    # the front alone has the same hypervolume; row order and column order do not matter
    front = pts[pareto_front(pts, dirs)]
    assert hypervolume(front, dirs, ref) == pytest.approx(base, rel=EXACT_REL_TOL)
    assert hypervolume(pts[rng.permutation(30)], dirs, ref) == pytest.approx(base, rel=EXACT_REL_TOL)
    perm = [2, 0, 1]
    assert hypervolume(pts[:, perm], [dirs[i] for i in perm], ref[perm]) == pytest.approx(base, rel=EXACT_REL_TOL)
    # scaling an objective (and the reference) scales the volume
    assert hypervolume(pts * [1, 3, 1], dirs, ref * [1, 3, 1]) == pytest.approx(3 * base, rel=EXACT_REL_TOL)
    # adding a non-dominated point strictly increases it
    assert hypervolume(np.vstack([pts, [[1.0, 0.0, 0.0]]]), dirs, ref) > base


def test_hypervolume_ignores_points_not_strictly_better_than_reference() -> None:
    ref = [0.5, 1.0]  # utility max, leakage min
    assert hypervolume([[0.5, 0.2]], ["max", "min"], ref) == 0.0  # equal utility: nothing
    assert hypervolume([[0.9, 1.0]], ["max", "min"], ref) == 0.0  # equal leakage: nothing
    assert hypervolume([[0.4, 0.2], [0.9, 1.5]], ["max", "min"], ref) == 0.0
    assert hypervolume(np.empty((0, 2)), ["max", "min"], ref) == 0.0
    with_bad = hypervolume([[0.9, 0.5], [0.2, 0.1]], ["max", "min"], ref)
    assert with_bad == pytest.approx(hypervolume([[0.9, 0.5]], ["max", "min"], ref))


def test_hypervolume_validation() -> None:
    with pytest.raises(ConfigError) as e:
        hypervolume([[0.5, 0.5]], ["max", "min"], [1.0])
    assert e.value.field == "reference"
    with pytest.raises(ConfigError) as e:
        hypervolume([[0.5, 0.5]], ["max", "min"], [1.0, np.nan])
    assert e.value.field == "reference"
    with pytest.raises(ConfigError) as e:
        hypervolume([[0.5, np.nan]], ["max", "min"], [1.0, 1.0])
    assert e.value.field == "points"
    with pytest.raises(ConfigError) as e:
        hypervolume([[0.5, 0.5]], ["max", "sideways"], [1.0, 1.0])
    assert e.value.field == "directions"


def test_an_inverted_adversary_is_dominated_on_the_privacy_gap() -> None:
    # (utility_auc, adversary AUC): A's adversary ranks s backwards (AUC 0.2), B's is at chance (0.5)
    auc = np.array([0.2, 0.5])
    utility = np.array([0.9, 0.9])
    raw = np.column_stack([utility, auc])
    gap = np.column_stack([utility, np.abs(auc - 0.5)])  # 0.3 and 0.0
    # on the raw AUC the inverted adversary looks MORE private and hides the chance-level release
    assert pareto_front(raw, ["max", "min"]).tolist() == [True, False]
    # on the gap the chance-level release dominates it at equal utility
    assert pareto_front(gap, ["max", "min"]).tolist() == [False, True]
    # hypervolume against the worst point (utility 0.5, gap 0.5): B's box 0.4 x 0.5, A's 0.4 x 0.2 inside it
    assert hypervolume(gap, ["max", "min"], [0.5, 0.5]) == pytest.approx(0.4 * 0.5, rel=EXACT_REL_TOL)
    assert hypervolume(gap[:1], ["max", "min"], [0.5, 0.5]) == pytest.approx(0.4 * 0.2, rel=EXACT_REL_TOL)


# --- convex-hull AUC --------------------------------------------------------------------------


def test_auc_ideal_point() -> None:
    # (leakage 0.5, utility 1): hull (0,0)-(0.5,1)-(1,1) -> 0.25 + 0.5; above 0.5 from 0.5: 0.5*0.5
    assert convex_hull_auc([1.0], [0.5]) == pytest.approx(0.75)
    assert convex_hull_auc([1.0], [0.5], origin="half") == pytest.approx(0.25)
    assert convex_hull_auc([1.0], [0.5], close_at_one=False) == pytest.approx(0.25)
    assert convex_hull_auc([1.0], [0.5], origin="half", close_at_one=False) == pytest.approx(0.0)


def test_auc_hand_computed_with_dominated_point() -> None:
    utility, leakage = [0.8, 0.9, 0.7], [0.6, 0.9, 0.8]  # (0.8, 0.7) lies under the hull
    # zero: (0,0)-(0.6,0.8)-(0.9,0.9)-(1,0.9): 0.5*0.6*0.8 + 0.3*0.85 + 0.1*0.9 = 0.585
    assert convex_hull_auc(utility, leakage) == pytest.approx(0.585)
    # half: (0.5,0.5)-(0.6,0.8)-(0.9,0.9)-(1,0.9) above y=0.5: 0.1*0.15 + 0.3*0.35 + 0.1*0.4 = 0.16
    assert convex_hull_auc(utility, leakage, origin="half") == pytest.approx(0.16)
    # zero, not closed: stops at leakage 0.9: 0.24 + 0.255 = 0.495
    assert convex_hull_auc(utility, leakage, close_at_one=False) == pytest.approx(0.495)


def test_auc_hull_bridges_a_non_convex_dip() -> None:
    # A=(0.6,0.75), B=(0.7,0.78), C=(0.9,0.95): B is below chord AC, the hull skips it.
    # half: 0.1*0.25/2 + 0.3*(0.25+0.45)/2 + 0.1*0.45 = 0.0125 + 0.105 + 0.045 = 0.1625
    assert convex_hull_auc([0.75, 0.78, 0.95], [0.6, 0.7, 0.9], origin="half") == pytest.approx(0.1625)
    assert convex_hull_auc([0.75, 0.95], [0.6, 0.9], origin="half") == pytest.approx(0.1625)


def test_auc_clips_below_origin_and_is_order_free() -> None:
    # utility below chance adds nothing over the origin; leakage below 0.5 is treated as 0.5
    assert convex_hull_auc([0.4], [0.7], origin="half") == pytest.approx(0.0)
    assert convex_hull_auc([0.9], [0.3], origin="half") == pytest.approx(convex_hull_auc([0.9], [0.5], origin="half"))
    rng = np.random.default_rng(10)
    u, lk = rng.random(12), rng.random(12)
    order = rng.permutation(12)
    assert convex_hull_auc(u[order], lk[order]) == pytest.approx(convex_hull_auc(u, lk))


@pytest.mark.parametrize("origin, o", [("zero", 0.0), ("half", 0.5)])
def test_auc_matches_scipy_convex_hull_and_bounds_staircase(origin: str, o: float) -> None:
    rng = np.random.default_rng(11)
    for _ in range(10):
        n = int(rng.integers(2, 15))
        lk = o + (1 - o) * rng.random(n)
        u = o + (1 - o) * rng.random(n)
        auc = convex_hull_auc(u, lk, origin=origin)
        poly = np.vstack([np.column_stack([lk, u]), [[o, o], [1.0, u.max()], [1.0, o]]])
        assert auc == pytest.approx(ConvexHull(poly).volume, rel=EXACT_REL_TOL)
        # the hull region contains the staircase dominated region (hypervolume, ref (1, o))
        stair = hypervolume(np.column_stack([u, lk]), ["max", "min"], [o, 1.0])
        assert auc >= stair - 1e-12
        # moving a point left (less leakage) or up (more utility) never lowers the AUC
        i = int(rng.integers(n))
        better_lk, better_u = lk.copy(), u.copy()
        better_lk[i] = o + 0.5 * (lk[i] - o)
        better_u[i] = u[i] + 0.5 * (1 - u[i])
        assert convex_hull_auc(u, better_lk, origin=origin) >= auc - 1e-12
        assert convex_hull_auc(better_u, lk, origin=origin) >= auc - 1e-12


def test_auc_validation() -> None:
    with pytest.raises(ConfigError) as e:
        convex_hull_auc([0.8], [0.6], origin="one")
    assert e.value.field == "origin"
    with pytest.raises(ConfigError) as e:
        convex_hull_auc([0.8, 0.9], [0.6])
    assert e.value.field == "leakage"
    with pytest.raises(ConfigError) as e:
        convex_hull_auc([], [])
    assert e.value.field == "utility"
    with pytest.raises(ConfigError) as e:
        convex_hull_auc([np.nan], [0.6])
    assert e.value.field == "utility"
    with pytest.raises(ConfigError) as e:
        convex_hull_auc([0.8], [1.2])
    assert e.value.field == "leakage"
    with pytest.raises(ConfigError):
        convex_hull_auc([[0.8]], [[0.6]])
