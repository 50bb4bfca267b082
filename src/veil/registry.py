"""One registry type for everything Veil looks up by name (methods, datasets, executors, aggregation rules, MI
estimators, probe families, sweep samplers, population forms): a name registered twice is an error, and a lookup
loads the installed plugins first (`veil.plugins`) and refuses an unknown name with the valid ones and a
did-you-mean. Standard library only: every layer's registry is one of these."""

from __future__ import annotations

from typing import Callable, TypeVar

from veil.errors import UnknownNameError
from veil.plugins import load_plugins

T = TypeVar("T")
F = TypeVar("F")


class Registry(dict[str, T]):
    """Entries of one kind by name. A dict, so reading it is plain Python; `add` and `decorator` register,
    `lookup` and `names` read with plugins loaded."""

    def __init__(self, kind: str, *, plugins: bool = True) -> None:
        super().__init__()
        self.kind = kind
        """What an entry is, as error messages name it ('method', 'dataset', ...)."""
        self.plugins = plugins
        """Whether lookups load plugins first (False for kinds no plugin group provides)."""

    def add(self, name: str, entry: T) -> T:
        """Register `entry` under `name`; a name already taken is a ValueError (two modules claiming it)."""
        if name in self:
            raise ValueError(f"{self.kind} {name!r} registered twice")
        self[name] = entry
        return entry

    def decorator(self, name: str, entry: Callable[[F], T]) -> Callable[[F], F]:
        """A decorator registering `entry(obj)` under `name` and returning `obj` unchanged."""

        def register(obj: F) -> F:
            self.add(name, entry(obj))
            return obj

        return register

    def lookup(self, name: str, where: str | None = None) -> T:
        """The entry registered as `name` (plugins included), or UnknownNameError listing the valid names."""
        if self.plugins:
            load_plugins()
        if name not in self:
            raise UnknownNameError(self.kind, str(name), list(self), where)
        return self[name]

    def names(self) -> tuple[str, ...]:
        """Every registered name (plugins included), in registration order."""
        if self.plugins:
            load_plugins()
        return tuple(self)
