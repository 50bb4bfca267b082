"""Methods by kebab-case name (the Opacus-style registry): the top of veil.methods. It imports every built-in
method (each registers itself in `veil.methods.table` on import), so the table `METHODS` holds them all once this
module is loaded. Validating a method's parameters needs only its card (`veil.methods.cards`, torch-free)."""

from __future__ import annotations

from typing import Any, Mapping

from veil.datasets.dataset import TaskSpec

from veil.methods import adjustable_ae, baselines, eigan, gpp, ldp_frl, linear_arl  # noqa: F401  isort: skip
from veil.methods import d_eigan, d_gpp, ldp_fedavg  # noqa: F401  isort: skip  (federated)
from veil.methods.cards import method_config
from veil.methods.method import Method, MethodConfig
from veil.methods.table import METHODS


def get_method(name: str) -> type[Method]:
    """The method class registered as `name` (plugins included), or an error listing the valid names."""
    return METHODS.lookup(name)


def create_method(name: str, values: Mapping[str, Any] | MethodConfig | None, task: TaskSpec) -> Method:
    """Build method `name` for `task` from raw parameter values, or from a config `method_config` already built
    (used as is: a run validates its parameters once, wherever the method is then built)."""
    cls = get_method(name)
    config = values if isinstance(values, cls.Config) else method_config(name, values)  # type: ignore[arg-type]
    return cls(config, task)
