"""Typed, validated, frozen configs: one `param(...)` per field carries its default, its one-line doc
and its allowed range, so validation, CLI help and MLflow params all come from one place."""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from typing import Any, Callable, Literal, Mapping, TypeVar, get_args, get_origin

from veil.errors import ConfigError, UnknownNameError

T = TypeVar("T")

REQUIRED: Any = dataclasses.MISSING
"""`param(REQUIRED, doc)`: a field with no default, that a mapping `build` reads must give."""

MAX_EPOCHS = 10_000
"""The most passes over the data any run, probe or federation accepts (a typo such as 1000000000000 is refused
up front instead of training for a lifetime; docs/methods.md lists it as each epochs field's upper bound)."""


def param(
    default: Any,
    doc: str,
    *,
    ge: float | None = None,
    gt: float | None = None,
    le: float | None = None,
    lt: float | None = None,
    choices: tuple[Any, ...] | Callable[[], tuple[Any, ...]] | None = None,
    allow_inf: bool = False,
) -> Any:
    """A dataclass field with a one-line doc and an allowed range (checked by `check_ranges`). Floats must be
    finite unless `allow_inf` says that inf has a meaning for this field (LDP's eps = inf: no noise). `choices`
    may be a function returning them, read at validation: a registry that plugins extend (probe families)."""
    meta = {"doc": doc, "ge": ge, "gt": gt, "le": le, "lt": lt, "choices": choices, "allow_inf": allow_inf}
    if default is REQUIRED:
        return dataclasses.field(metadata=meta)
    if isinstance(default, (list, dict, set)):
        raise TypeError("use a tuple for sequence defaults so configs stay frozen and hashable")
    return dataclasses.field(default=default, metadata=meta)


def choices_of(meta: Mapping[str, Any]) -> tuple[Any, ...] | None:
    """A field's allowed values (None: any in its range), the current ones when `param` was given a function."""
    choices = meta.get("choices")
    return choices() if callable(choices) else choices


def allowed_text(meta: Mapping[str, Any], typ: Any = None, *, plain: bool = False) -> str:
    """Human-readable description of what a field accepts: 'float >= 0', or with `plain` (what a YAML document's
    strict `build` says) 'a number >= 0'."""
    choices = choices_of(meta)
    if choices:
        return " | ".join(str(c) for c in choices)
    lo = f"> {meta['gt']}" if meta.get("gt") is not None else f">= {meta['ge']}" if meta.get("ge") is not None else ""
    hi = f"< {meta['lt']}" if meta.get("lt") is not None else f"<= {meta['le']}" if meta.get("le") is not None else ""
    rng = " and ".join(p for p in (lo, hi) if p)
    tname = (noun(typ, none=False) if plain else type_name(typ)) if typ is not None else ""
    return f"{tname} {rng}".strip() or "any value"


_NOUNS = {int: "an integer", float: "a number", str: "a string", bool: "true | false"}


def noun(typ: Any, *, none: bool = True) -> str:
    """'an integer', 'a number', 'a string', 'a list of numbers', 'a number or none': a type as errors say it
    (`none=False` leaves 'or none' out, for a range's text)."""
    origin = get_origin(typ)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in get_args(typ) if a is not type(None)]
        tail = " or none" if none and len(args) < len(get_args(typ)) else ""
        return " or ".join(noun(a) for a in args) + tail
    if origin is tuple:
        inner = get_args(typ)[0]
        return "a list of values" if inner is Any else f"a list of {noun(inner).partition(' ')[2]}s"
    return _NOUNS.get(typ, type_name(typ))


def type_name(typ: Any) -> str:
    origin = get_origin(typ)
    if origin is Literal:
        return " | ".join(repr(a) for a in get_args(typ))
    if origin in (typing.Union, types.UnionType):
        return " | ".join(type_name(a) for a in get_args(typ))
    if origin is tuple:
        return f"tuple[{type_name(get_args(typ)[0])}, ...]"
    return getattr(typ, "__name__", str(typ))


def _coerce(value: Any, typ: Any, name: str, where: str | None, strict: bool = False) -> Any:
    """Convert `value` (possibly a CLI string) to `typ`, or raise ConfigError naming the field. `strict`: the value
    comes from a YAML or JSON document, typed already: no text is read as a number, flag, list or none."""
    origin = get_origin(typ)
    if strict and isinstance(value, str) and (typ in (int, float, bool, type(None)) or origin is tuple):
        raise ConfigError(name, value, noun(typ), where)
    if typ is type(None):
        if value is None or (isinstance(value, str) and value.lower() in ("none", "null", "")):
            return None
        raise ConfigError(name, value, "none", where)
    if origin in (typing.Union, types.UnionType):
        inner: list[str] = []  # why an option failed on a part of the value (an element of a list), said too
        for arg in sorted(get_args(typ), key=lambda a: a is type(None) or a is str):
            try:
                return _coerce(value, arg, name, where, strict)
            except ConfigError as e:
                if e.value is not value and e.value != value:
                    inner.append(f"as {type_name(arg)}: element {e.value!r} is not {e.allowed}")
        said = noun(typ) if strict else type_name(typ)
        raise ConfigError(name, value, said + (f" ({'; '.join(inner)})" if inner else ""), where)
    if origin is Literal:
        opts = get_args(typ)
        if value in opts:
            return value
        raise ConfigError(name, value, " | ".join(str(o) for o in opts), where)
    if origin is tuple:
        inner = get_args(typ)[0]
        if isinstance(value, str):
            value = [
                v
                for v in value.replace("(", "").replace(")", "").replace("[", "").replace("]", "").split(",")
                if v.strip()
            ]
        if isinstance(value, (int, float)) and not isinstance(value, bool) and not strict:
            value = [value]
        if not isinstance(value, (list, tuple)):
            raise ConfigError(name, value, noun(typ) if strict else f"a list of {type_name(inner)}", where)
        return tuple(_coerce(v, inner, name, where, strict) for v in value)
    if typ is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "yes", "1", "false", "no", "0"):
            return value.lower() in ("true", "yes", "1")
        raise ConfigError(name, value, "true | false", where)
    if typ is int:
        if isinstance(value, bool):
            raise ConfigError(name, value, "an integer", where)
        if isinstance(value, int):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str):
            try:
                return int(value)
            except ValueError:
                pass
        raise ConfigError(name, value, "an integer", where)
    if typ is float:
        if isinstance(value, bool):
            raise ConfigError(name, value, "a number", where)
        if isinstance(value, (int, float)):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                pass
        raise ConfigError(name, value, "a number", where)
    if typ is str:
        if isinstance(value, str):
            return value
        raise ConfigError(name, value, "a string", where)
    return value


def hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def check_ranges(obj: Any, where: str | None = None, *, plain: bool = False) -> None:
    """Check every field of a `param`-built dataclass against its allowed range (`plain`: say what is allowed as
    `allowed_text(plain=True)` does)."""
    th = hints(type(obj))
    for f in dataclasses.fields(obj):
        v = getattr(obj, f.name)
        m = f.metadata
        if not m or v is None:
            continue
        values = v if isinstance(v, tuple) else (v,)
        choices = choices_of(m)
        if isinstance(v, tuple) and not v and choices is not None:  # a list of choices: an empty one selects nothing
            raise ConfigError(f.name, list(v), "one or more of " + allowed_text(m, plain=plain), where)
        for x in values:
            allowed = allowed_text(m, th.get(f.name), plain=plain)
            if choices is not None and x not in choices:
                raise ConfigError(f.name, v, allowed, where)
            if not isinstance(x, (int, float)) or isinstance(x, bool):
                continue
            if isinstance(x, float) and not math.isfinite(x) and (math.isnan(x) or not m.get("allow_inf")):
                refused = (
                    "nan is refused"
                    if m.get("allow_inf")
                    else "inf and nan are refused"
                    if plain
                    else "a finite number: inf and nan are refused"
                )
                raise ConfigError(f.name, v, f"{allowed}; {refused}", where)
            bad = (
                (m.get("ge") is not None and x < m["ge"])
                or (m.get("gt") is not None and x <= m["gt"])
                or (m.get("le") is not None and x > m["le"])
                or (m.get("lt") is not None and x >= m["lt"])
            )
            if bad:
                raise ConfigError(f.name, v, allowed, where)


def build(
    cls: type[T],
    values: Mapping[str, Any] | None = None,
    where: str | None = None,
    *,
    strict: bool = False,
    path: str = "",
    kind: str = "parameter",
) -> T:
    """Build and validate config `cls` from a mapping; unknown keys and bad values raise, naming the field.

    `strict`: the mapping is part of a YAML/JSON document (a sweep spec): values must have their type already,
    errors say what is allowed in words ('a number > 0'), a `param(REQUIRED, ...)` field left out is refused, and
    the class's own `check()` (rules between fields: low below high) runs last. `path` ('space.beta') prefixes
    every field an error names; `kind` names an unknown key ('unknown search-space key ...')."""
    values = dict(values or {})
    th = hints(cls)
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    names = [f.name for f in fields]
    meta = {f.name: f.metadata for f in fields}
    for key in values:
        if key not in names:
            raise UnknownNameError(kind, key, names, f"{where}: key '{path}'" if path and where else where)
    try:
        for f in fields:
            if f.name not in values and f.default is REQUIRED and f.default_factory is REQUIRED:
                raise ConfigError(f.name, None, f"{allowed_text(f.metadata, th[f.name], plain=True)} (required)", where)
        kwargs = {k: _coerce_field(v, th[k], meta[k], k, where, strict) for k, v in values.items()}
        obj = cls(**kwargs)
        check_ranges(obj, where, plain=strict)
        check = getattr(obj, "check", None)
        if strict and callable(check):
            check()
    except ConfigError as e:
        given = values.get(e.field, e)
        value = given if strict and given == e.value else e.value  # the value as written: 0, not 0.0
        if not path and value is e.value:
            raise
        raise ConfigError(f"{path}.{e.field}" if path else e.field, value, e.allowed, where) from None
    return obj


def _coerce_field(value: Any, typ: Any, meta: Mapping[str, Any], name: str, where: str | None, strict: bool) -> Any:
    """`_coerce` for field `name`; strictly, a value of the wrong type is refused saying what the field allows
    ('a number > 0', not just 'a number')."""
    try:
        return _coerce(value, typ, name, where, strict)
    except ConfigError as e:
        if strict and e.value is value:
            raise ConfigError(name, value, allowed_text(meta, typ, plain=True), where) from None
        raise


def build_tagged(
    variants: Mapping[str, type[T]],
    values: Mapping[str, Any],
    where: str | None = None,
    *,
    path: str,
    kind: str,
    tag: str = "type",
    aliases: Mapping[str, str] | None = None,
    default: str | None = None,
) -> tuple[str, T]:
    """Build one of several configs, the one whose name the mapping's `tag` key gives (`{type: log, low: 0.1,
    high: 10}` -> ('log', LogRange(0.1, 10))), strictly as `build(strict=True)` does; `aliases` maps other spellings
    to a name, `default` is the name when the tag is left out. A key another variant knows but this one does not
    is refused naming the variant's own keys; the tag itself when it names no variant, listing them."""
    values = dict(values)
    name = values.pop(tag, default)
    name = (aliases or {}).get(name, name) if isinstance(name, str) else name
    if not isinstance(name, str) or name not in variants:
        raise ConfigError(f"{path}.{tag}", name, " | ".join(variants), where)
    cls = variants[name]
    own = [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
    others = {f.name for v in variants.values() for f in dataclasses.fields(v)}  # type: ignore[arg-type]
    for key in values:
        if key not in own and key in others:
            keys = ", ".join([tag, *own])
            raise ConfigError(f"{path}.{key}", values[key], f"no {key} for {tag} {name} (its keys: {keys})", where)
    if any(key not in own for key in values):
        bad = next(key for key in values if key not in own)
        raise UnknownNameError(kind, bad, [tag, *own], f"{where}: key '{path}'" if where else f"key '{path}'")
    return name, build(cls, values, where, strict=True, path=path, kind=kind)


def field_table(cls: type) -> list[dict[str, str]]:
    """Name, type, default, allowed values and doc of every field, for `veil methods` / `veil datasets`."""
    th = hints(cls)
    rows = []
    for f in dataclasses.fields(cls):
        rows.append(
            {
                "name": f.name,
                "type": type_name(th[f.name]),
                "default": repr(f.default),
                "allowed": allowed_text(f.metadata, th[f.name]) if f.metadata else "",
                "doc": f.metadata.get("doc", ""),
            }
        )
    return rows


def as_params(obj: Any, prefix: str = "") -> dict[str, Any]:
    """A config's fields as a flat dict of JSON-friendly values (tuples become lists)."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(obj):
        v = getattr(obj, f.name)
        out[prefix + f.name] = list(v) if isinstance(v, tuple) else v
    return out
