"""Strategies and the one property the fuzz tests check: a call ends in a Veil error that says what is wrong,
or returns a valid object; any other exception fails the test (hypothesis shrinks it to a minimal case)."""

from __future__ import annotations

from typing import Any, Callable, TypeVar

from hypothesis import event
from hypothesis import strategies as st
from hypothesis.control import currently_in_test_context

from veil.errors import ConfigError, UnknownNameError, VeilError

T = TypeVar("T")

ODD_TEXT = ["", " ", "inf", "-inf", "nan", "NaN", "1e999", "-1", "0", "none", "null", "🙂", "名前", "a.b", "x" * 300]
"""Strings that have broken parsers before: non-finite spellings, empty, unicode, very long."""

VOCABULARY = [
    "max",
    "min",
    "log",
    "float",
    "int",
    "categorical",
    "tpe",
    "nsga2",
    "random",
    "grid",
    "inline",
    "ray-train",
    "auto",
    "iid",
    "dirichlet:0.3",
    "silo:node",
    "zero",
    "half",
    "utility_auc",
    "privacy_gap",
    "adversary_auc/s",
    "utility_auc >= 0.6",
    "in-process",
    "virtual",
    "none",
    "ksg",
    "gpp",
    "gaussian-nodes",
]
"""Words the formats know, so that edits often make a document that is almost right."""

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.integers(min_value=-3, max_value=300),
    st.floats(allow_nan=True, allow_infinity=True),
    st.floats(min_value=-2, max_value=10),
    st.sampled_from(ODD_TEXT),
    st.sampled_from(VOCABULARY),
    st.text(max_size=10),
)
"""Scalars a YAML file can hold."""

values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)
"""Any YAML value: scalars, lists and mappings, nested."""


def clean(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T | VeilError:
    """fn's result, or the VeilError it raised after checking that the message names what is wrong."""
    try:
        result = fn(*args, **kwargs)
        if currently_in_test_context():
            event(f"{fn.__name__}: valid")
        return result
    except VeilError as e:
        if currently_in_test_context():
            event(f"{fn.__name__}: {type(e).__name__}")
        text = str(e)
        assert text.strip() and "Traceback" not in text
        if isinstance(e, ConfigError):
            assert repr(e.field) in text or str(e.field) in text
        if isinstance(e, UnknownNameError):
            assert repr(e.name) in text
        return e


KeysAt = Callable[[tuple[Any, ...]], list[str]]
"""The keys a format knows at a place in a document (a path of keys and indices from the top)."""


def mutated(
    base: Any, keys: KeysAt, edits: tuple[int, int] = (1, 3), keep: tuple[str, ...] = ()
) -> st.SearchStrategy[Any]:
    """`base` (a parsed YAML document) with a few random edits anywhere in it: a value replaced, a key removed,
    a key added (mostly one the format knows at that place, `keys(path)`, so that known keys get odd values).
    Top-level keys in `keep` are left as they are (the caller varies them)."""
    import copy

    @st.composite
    def build(draw: st.DrawFn) -> Any:
        obj = copy.deepcopy(base)
        for _ in range(draw(st.integers(*edits))):
            obj = _edit(draw, obj, keys, (), keep)
        return obj

    return build()


def _edit(draw: st.DrawFn, obj: Any, keys: KeysAt, path: tuple[Any, ...], keep: tuple[str, ...] = ()) -> Any:
    action = draw(st.sampled_from(["descend"] * 5 + ["replace"] * 2 + ["delete", "add"]))
    if isinstance(obj, dict):
        if action == "add" or not obj:
            known = st.sampled_from(keys(path) or ["x"])
            obj[draw(st.one_of(known, known, known, st.text(max_size=6)))] = draw(values)
            return obj
        editable = sorted((k for k in obj if k not in keep), key=repr)
        if not editable:
            return obj
        key = draw(st.sampled_from(editable))
        if action == "delete":
            del obj[key]
        elif action == "descend" and len(path) < 5:
            obj[key] = _edit(draw, obj[key], keys, (*path, key))
        else:
            obj[key] = draw(values)
        return obj
    if isinstance(obj, list) and obj:
        i = draw(st.integers(0, len(obj) - 1))
        if action == "delete":
            del obj[i]
        elif action == "add":
            obj.append(draw(values))
        elif action == "descend" and len(path) < 5:
            obj[i] = _edit(draw, obj[i], keys, (*path, i))
        else:
            obj[i] = draw(values)
        return obj
    return draw(values)
