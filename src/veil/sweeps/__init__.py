"""Sweeps: YAML specs validated up front, Ray Tune trials suggested by Optuna samplers (by registry), Pareto
fronts, hypervolume and reports read back from MLflow. `run_sweep` / `resume_sweep` load Ray Tune on first use,
so reading specs and results stays cheap."""

from typing import Any

from veil.sweeps.pareto import convex_hull_auc, hypervolume, pareto_front
from veil.sweeps.results import SweepResults, analyze, collect, format_report
from veil.sweeps.samplers import SAMPLERS, get_sampler
from veil.sweeps.spec import SweepSpec, load_sweep, sweep_from_mapping

_RUNNER = ("run_sweep", "resume_sweep", "run_trial", "SweepOutcome")

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
    *_RUNNER,
]


def __getattr__(name: str) -> Any:  # PEP 562: the Tune-backed runner is imported when first asked for
    if name in _RUNNER:
        from veil.sweeps import runner

        return getattr(runner, name)
    raise AttributeError(f"module 'veil.sweeps' has no attribute {name!r}")
