"""Costs paid when needed or out of the way: packages that import their public names on first use (PEP 562), so
that importing one light submodule (a sweep spec's parser, a leakage target) does not load torch through the
package's `__init__`; and `in_background`, a slow step started now on a thread of its own and waited for later."""

from __future__ import annotations

import importlib
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Callable, Mapping, TypeVar

T = TypeVar("T")


def in_background(fn: Callable[..., T], *args: Any, name: str) -> Future[T]:
    """`fn(*args)` on a thread of its own (named `name`), started now; `.result()` waits for it and raises its
    error. For a step the caller can overlap with another (a store's schema check or a sweep's data while Ray
    starts)."""
    pool = ThreadPoolExecutor(1, thread_name_prefix=name)
    try:
        return pool.submit(fn, *args)
    finally:
        pool.shutdown(wait=False)


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
