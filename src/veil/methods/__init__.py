"""PRL methods and baselines behind one interface, registered by kebab-case name."""

from veil.methods.base import Batch, BatchSampler, Method, MethodConfig, TrainContext
from veil.methods.registry import METHODS, create_method, get_method, method_config, register_method

# Importing the method modules registers them.
from veil.methods import adjustable_ae, baselines, eigan, gpp, ldp_frl, linear_arl  # noqa: E402,F401  isort: skip
from veil.methods import d_eigan, d_gpp, ldp_fedavg  # noqa: E402,F401  isort: skip  (federated)

__all__ = [
    "Batch",
    "BatchSampler",
    "Method",
    "MethodConfig",
    "TrainContext",
    "METHODS",
    "create_method",
    "get_method",
    "method_config",
    "register_method",
]
