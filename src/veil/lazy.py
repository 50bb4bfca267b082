"""Costs paid when needed: packages that import their public names on first use (PEP 562), so that importing one
light submodule (a sweep spec's parser, a leakage target) does not load torch through the package's
`__init__`. Such a package names its exports twice, in a literal `__all__` and in the map given here: type checkers
read a py.typed package's re-exports only from a literal `__all__` (or `import X as X`), never from a computed one."""

from __future__ import annotations

import importlib
from typing import Any, Callable, Mapping


def lazy_exports(package: str, submodules: Mapping[str, str | None]) -> Callable[[str], Any]:
    """The module `__getattr__` of `package`: each name of `submodules` (name -> the submodule defining it; None:
    the name is a submodule itself) is imported from `package.<submodule>` when first asked for; any other name is
    an AttributeError."""

    def __getattr__(name: str) -> Any:
        if name not in submodules:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        where = submodules[name]
        if where is None:
            return importlib.import_module(f"{package}.{name}")
        return getattr(importlib.import_module(f"{package}.{where}"), name)

    return __getattr__
