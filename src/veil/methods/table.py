"""The method table: `METHODS` (method classes by kebab-case name) and the `register_method` decorator.

The bottom of the method registry, torch-free: method modules (and plugins) register here, `veil.methods.builtin`
imports every built-in method so that the table is full once it is loaded, and `veil.methods.cards` reads the
plugins' classes from here without importing a built-in method's torch code."""

from __future__ import annotations

from typing import TYPE_CHECKING

from veil.registry import Registry

if TYPE_CHECKING:
    from veil.methods.method import Method

METHODS: Registry[type[Method]] = Registry("method")
"""Every registered method class by name (full once `veil.methods.builtin` is loaded; plugins add theirs)."""


def register_method(cls: type[Method]) -> type[Method]:
    """Class decorator adding `cls` to the registry under `cls.name`."""
    METHODS.add(cls.name, cls)
    return cls
