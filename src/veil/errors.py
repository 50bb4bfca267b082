"""Errors Veil raises for bad input: each names the field, the value and what is allowed."""

from __future__ import annotations

import difflib
from typing import Any


class VeilError(Exception):
    """Base class for every error Veil raises on purpose."""


class ConfigError(VeilError, ValueError):
    """A configuration field holds a value that is not allowed."""

    def __init__(self, field: str, value: Any, allowed: str, where: str | None = None) -> None:
        self.field, self.value, self.allowed, self.where = field, value, allowed, where
        prefix = f"{where}: " if where else ""
        super().__init__(f"{prefix}invalid value for '{field}': {value!r} (allowed: {allowed})")


class UncertifiableTarget(ConfigError):
    """A target the test split is too small to certify (a ConfigError on `target.<metric>`), worded for a target the
    user may never have typed: the default one."""

    def __init__(self, field: str, value: Any, allowed: str, default: bool, rows: int) -> None:
        super().__init__(field, value, allowed)
        bound = f"{field.removeprefix('target.')} <= {value:g}"
        what = f"the default target ({bound})" if default else f"the target {bound}"
        self.args = (f"{what} cannot be certified on {rows} test rows: {allowed}",)

    def __str__(self) -> str:
        return self.args[0]


class UnknownNameError(VeilError, KeyError):
    """A name (method, dataset, parameter, metric) is not registered."""

    def __init__(self, kind: str, name: str, valid: list[str] | tuple[str, ...], where: str | None = None) -> None:
        self.kind, self.name, self.valid, self.where = kind, name, sorted(set(valid)), where
        prefix = f"{where}: " if where else ""
        close = difflib.get_close_matches(str(name), self.valid, n=3, cutoff=0.6)
        hint = f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""
        super().__init__(f"{prefix}unknown {kind} {name!r}{hint}; valid {kind}s: {', '.join(self.valid) or '(none)'}")

    def __str__(self) -> str:  # KeyError quotes its message otherwise
        return self.args[0]


class DataError(VeilError, ValueError):
    """A dataset, file or partition does not match its declared schema."""


class TrackingUnavailable(VeilError):
    """The MLflow tracking store cannot be reached or written (checked before any compute starts)."""
