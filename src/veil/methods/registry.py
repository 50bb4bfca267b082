"""Methods by kebab-case name (the Opacus-style registry)."""

from __future__ import annotations

from typing import Any, Mapping

from veil.config import build
from veil.datasets.base import TaskSpec
from veil.methods.base import Method, MethodConfig
from veil.registry import Registry

METHODS: Registry[type[Method]] = Registry("method")


def register_method(cls: type[Method]) -> type[Method]:
    """Class decorator adding `cls` to the registry under `cls.name`."""
    METHODS.add(cls.name, cls)
    return cls


def get_method(name: str) -> type[Method]:
    """The method class registered as `name` (plugins included), or an error listing the valid names."""
    return METHODS.lookup(name)


def method_config(name: str, values: Mapping[str, Any] | None = None) -> MethodConfig:
    """Validated config for method `name`: its preset's values (`preset`, default 'default') under the user's
    own; unknown keys and out-of-range values raise, naming the field."""
    cls = get_method(name)
    values = dict(values or {})
    preset = values.get("preset", "default")
    if isinstance(preset, str):  # anything else is refused by `build`, naming the field
        values = {**cls.preset_values(preset), **values}
    return build(cls.Config, values, where=f"method '{name}'")


def create_method(name: str, values: Mapping[str, Any] | MethodConfig | None, task: TaskSpec) -> Method:
    """Build method `name` for `task` from raw parameter values, or from a config `method_config` already built
    (used as is: a run validates its parameters once, wherever the method is then built)."""
    cls = get_method(name)
    config = values if isinstance(values, cls.Config) else method_config(name, values)  # type: ignore[arg-type]
    return cls(config, task)


def is_federated(name: str) -> bool:
    """Whether method `name` trains by federation (its class says `federated = True`)."""
    return bool(getattr(get_method(name), "federated", False))
