"""Sweeps: YAML specs validated up front, Ray Tune trials suggested by Optuna samplers (by registry), Pareto
fronts, hypervolume and reports read back from MLflow. Every name below is imported from its submodule when
first asked for (PEP 562): `run_sweep` / `resume_sweep` load Ray Tune and the results numpy and pandas, while
`veil.sweeps.sweepspec` and `veil.sweeps.metrics` (the metric vocabulary), which the CLI's parser reads, stay cheap
to import."""

from __future__ import annotations

from typing import TYPE_CHECKING

from veil.lazy import lazy_exports

if TYPE_CHECKING:
    from veil.sweeps.driver import SweepOutcome, resume_sweep, run_sweep
    from veil.sweeps.pareto import convex_hull_auc, hypervolume, pareto_front
    from veil.sweeps.results import SweepResults, analyze, collect, format_report
    from veil.sweeps.samplers import SAMPLERS, get_sampler
    from veil.sweeps.sweepspec import SweepSpec, load_sweep, sweep_from_mapping
    from veil.sweeps.trial import run_trial

__all__ = [
    "SAMPLERS",
    "SweepResults",
    "SweepSpec",
    "analyze",
    "collect",
    "convex_hull_auc",
    "format_report",
    "get_sampler",
    "hypervolume",
    "load_sweep",
    "pareto_front",
    "sweep_from_mapping",
    "run_sweep",
    "resume_sweep",
    "run_trial",
    "SweepOutcome",
]

_SUBMODULE = {
    "convex_hull_auc": "pareto",
    "hypervolume": "pareto",
    "pareto_front": "pareto",
    "SweepResults": "results",
    "analyze": "results",
    "collect": "results",
    "format_report": "results",
    "run_sweep": "driver",
    "resume_sweep": "driver",
    "run_trial": "trial",
    "SweepOutcome": "driver",
    "SAMPLERS": "samplers",
    "get_sampler": "samplers",
    "SweepSpec": "sweepspec",
    "load_sweep": "sweepspec",
    "sweep_from_mapping": "sweepspec",
}
"""Each name of `__all__` -> the submodule that defines it."""

__getattr__ = lazy_exports(__name__, _SUBMODULE)
