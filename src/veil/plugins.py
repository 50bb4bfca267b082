"""Plugins: methods, datasets, federated aggregation rules, mutual-information estimators, sweep samplers and audit
probe families from packages outside Veil, found through entry points (docs/extending.md walks through
`examples/plugin/`).

A package names modules in Veil's entry-point groups (its pyproject.toml):

    [project.entry-points."veil.methods"]
    mean-nulling = "veil_plugin_example.method"

Importing such a module registers what it defines with Veil's own decorators (`register_method`,
`register_dataset`, `register_rule`, `register_estimator`, `register_sampler`, `register_probe`). Veil imports every
module of these groups once per process, the first time it looks a name up in a registry: the driver and every Ray worker alike, so a plugin
installed in the environment of each node is known wherever a trial runs, without a line of Veil changed.
Standard library only: every layer's registry may ask for it."""

from __future__ import annotations

import importlib
import os
from importlib.metadata import entry_points
from typing import Any, Mapping

from veil.errors import ConfigError, VeilError

GROUPS: dict[str, str] = {
    "veil.methods": "methods (veil.methods.register_method)",
    "veil.datasets": "datasets (veil.datasets.register_dataset)",
    "veil.aggregation": "federated aggregation rules (veil.methods.federated.aggregation.register_rule)",
    "veil.estimators": "mutual-information estimators (veil.audit.mi.register_estimator)",
    "veil.samplers": "sweep samplers (veil.sweeps.samplers.register_sampler)",
    "veil.probes": "audit probe families: the certificate's and capacity sweep's adversaries "
    "(veil.audit.families.register_probe)",
}
"""Entry-point group -> what its modules register."""

AUTOLOAD_OFF = "VEIL_DISABLE_PLUGIN_AUTOLOAD"
"""Environment variable: set to anything but '' or '0', no plugin is imported and Veil knows its own names only
(as pytest's PYTEST_DISABLE_PLUGIN_AUTOLOAD): a run independent of what else is installed, or Veil without a
broken plugin. Ray workers get it from the driver: `ensure_ray` passes it in their runtime environment."""

_loaded: list[str] | None = None


class PluginError(VeilError, ImportError):
    """An installed plugin's module failed to import."""


def load_plugins() -> list[str]:
    """Import every plugin module once per process ('group:name' of each, in order; none while `AUTOLOAD_OFF` is
    set); a module that fails to import is an error naming the plugin, its module and the package that declares it."""
    global _loaded
    if _loaded is not None:
        return _loaded
    _loaded = []  # set first: a plugin's own imports may look a name up again
    if os.environ.get(AUTOLOAD_OFF, "") not in ("", "0"):
        return _loaded
    for group in GROUPS:
        for ep in sorted(entry_points(group=group), key=lambda e: e.name):
            try:
                ep.load()
            except Exception as e:  # noqa: BLE001 (any import failure is the plugin's, said with its name)
                dist = getattr(ep.dist, "name", "?")
                raise PluginError(
                    f"plugin {ep.name!r} ({ep.value}, group {group}, package {dist}) failed to import: "
                    f"{type(e).__name__}: {e}"
                ) from e
            _loaded.append(f"{group}:{ep.name}")
    return _loaded


def instrumentation(env: str, context: Mapping[str, Any]) -> Any:
    """The callback of the instrumentation hook named by the environment variable `env` ('package.module:factory':
    `factory(context)` returns a callback or None), or None while `env` is unset. A profiler or a test harness plugs
    in here in every process of a run (Ray workers started by the driver inherit its environment) without code of
    its own in Veil. A name that does not load is a ConfigError on `env`."""
    target = os.environ.get(env)
    if not target:
        return None
    module, _, attr = target.partition(":")
    try:
        factory = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError, ValueError) as e:
        raise ConfigError(env, target, f"'package.module:factory' importable here ({e})") from None
    return factory(context)
