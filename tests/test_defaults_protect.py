"""A user who runs a privacy method with no options gets privacy.

Every privacy method, centralized and federated, runs through the real pipeline (`veil.run.execute`, the
default fresh-probe audit, an MLflow store in a temporary directory) with its DEFAULT settings on the
synthetic task of its paper, over seeds 0, 1 and 2. Every seed must pass (none dropped): the fresh
adversary's privacy gap |AUC - 0.5| <= 0.1 while the utility AUC stays >= 0.85. The no-privacy autoencoder
on the same tasks is the reference: it leaks (gap >= 0.3), so the tasks are ones where hiding takes work.
Every seed's figures are printed (`pytest -s tests/test_defaults_protect.py` shows them) and are in the
assertion message when one fails; docs/methods.md quotes them.

The tasks are `veil.methods.tasks.PAPER_TASKS`: EIGAN's quadrant Gaussians (App. C, Fig. 10) for eigan;
its per-node Gaussians (Fig. 7), dealt to the nodes by their 'node' column, for d-eigan; GPP's correlated
Gaussians (Sec. VI-F) at rho = 0 for gpp and d-gpp. LDP-FRL and the adjustable-privacy AE have no synthetic
task in their papers (Adult, COMPAS); they run on the same correlated Gaussians, the closest honest
substitute available offline. rho > 0 ties
s to u, so no release that keeps u can hide s: `test_gpp_at_rho_half_leaks_only_what_u_carries` states
GPP's own expectation there."""

from __future__ import annotations

from typing import Any

import pytest

from veil.methods.tasks import PAPER_TASKS, PaperTask
from veil.run import RunSpec, execute

SEEDS = (0, 1, 2)
MAX_GAP, MIN_UTILITY = 0.1, 0.85
REFERENCE_LEAK = 0.3
U_CARRIES = 0.25  # the gap of the best s-from-u scorer when corr(u, s) = 0.5: AUC 0.75


QUADRANT, NODES, INDEPENDENT = (PAPER_TASKS[m] for m in ("eigan", "d-eigan", "gpp"))


def run_defaults(method: str, task: PaperTask, seed: int, params: dict[str, Any] | None = None) -> dict[str, float]:
    """One run of `method` with only `params` set (none: every default), audited by the pipeline. The release
    noise is pinned by `release_seed` = seed so the test is deterministic; its distribution is the default's."""
    spec = RunSpec(
        method=method,
        params={"release_seed": seed, **(params or {})},
        seed=seed,
        executor="inline",
        **task.run_fields(method),
    )
    return execute(spec).metrics


def over_seeds(method: str, task: PaperTask, params: dict[str, Any] | None = None) -> list[tuple[float, float]]:
    """(utility AUC, privacy gap) at every seed, printed."""
    rows = []
    for seed in SEEDS:
        m = run_defaults(method, task, seed, params)
        rows.append((round(m["utility_auc"], 3), round(m["privacy_gap"], 3)))
    print(f"\n{method} on {task.dataset} {task.dataset_params or ''} {params or 'defaults'}: (utility AUC, gap) {rows}")
    return rows


@pytest.mark.parametrize("method", list(PAPER_TASKS))
def test_defaults_hide_the_sensitive_label(in_tmp, method: str) -> None:
    rows = over_seeds(method, PAPER_TASKS[method])
    assert all(gap <= MAX_GAP for _, gap in rows), rows
    assert all(utility >= MIN_UTILITY for utility, _ in rows), rows


@pytest.mark.parametrize("task", [QUADRANT, INDEPENDENT, PaperTask("gaussian-nodes")], ids=lambda t: t.dataset)
def test_the_no_privacy_autoencoder_leaks_on_the_same_tasks(in_tmp, task: PaperTask) -> None:
    rows = over_seeds("autoencoder", task)
    assert all(gap >= REFERENCE_LEAK for _, gap in rows), rows


def test_gpp_at_rho_half_leaks_only_what_u_carries(in_tmp) -> None:
    """With corr(u, s) = 0.5 the Bayes-optimal s-from-u scorer has AUC 0.75, so a release that keeps u has
    gap >= 0.25 whatever the method; GPP's defaults add at most MAX_GAP beyond it and keep u (measured
    0.289, 0.312, 0.292)."""
    rows = over_seeds("gpp", PaperTask("gaussian-correlated", {"rho": 0.5}))
    assert all(gap <= U_CARRIES + MAX_GAP for _, gap in rows), rows
    assert all(utility >= MIN_UTILITY for utility, _ in rows), rows
