"""Sweep specs, Tune/Optuna execution, Pareto fronts and hypervolume."""
