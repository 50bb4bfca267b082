"""PRL methods and baselines behind one interface, registered by kebab-case name.

Layout, bottom to top: `configs` (each method's config dataclass and card, torch-free) and `cards` (cards by name,
torch-free); `table` (METHODS, register_method); `method` (the Method interface), nets and the method modules
(torch), which register on import; `builtin` (get_method, create_method), which imports every built-in method.

The names below are imported from their submodule when first asked for (PEP 562), so that importing a light
submodule (a method's card, to validate a spec) does not load torch: `from veil.methods import METHODS` loads
`builtin`, and with it every built-in method, as importing this package did."""

from __future__ import annotations

from typing import TYPE_CHECKING

from veil.lazy import lazy_exports

if TYPE_CHECKING:
    from veil.methods.builtin import create_method, get_method, method_config
    from veil.methods.method import Batch, BatchSampler, Method, MethodConfig, TrainContext
    from veil.methods.table import METHODS, register_method

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

# METHODS through `builtin`, whose import registers every built-in method; register_method from the table
__getattr__ = lazy_exports(
    __name__,
    {
        n: "table" if n == "register_method" else "method" if n[0].isupper() and n != "METHODS" else "builtin"
        for n in __all__
    },
)
