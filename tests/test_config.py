"""Unit tests of the typed-config helpers (pure logic)."""

from dataclasses import dataclass

import pytest

from veil.config import build, field_table, param
from veil.errors import ConfigError, UnknownNameError


@dataclass(frozen=True)
class Demo:
    alpha: float = param(0.5, "open interval", gt=0, lt=1)
    k: int = param(2, "non-negative", ge=0)
    widths: tuple[int, ...] = param((8,), "positive widths", ge=1)
    mode: str = param("a", "a choice", choices=("a", "b"))
    flag: bool = param(False, "a flag")
    maybe: float | None = param(None, "optional", gt=0)


def test_coerces_cli_strings():
    d = build(Demo, {"alpha": "0.25", "k": "3", "widths": "16,8", "flag": "true", "maybe": "none"})
    assert (d.alpha, d.k, d.widths, d.flag, d.maybe) == (0.25, 3, (16, 8), True, None)


@pytest.mark.parametrize(
    "key,value,needle",
    [
        ("alpha", 1.0, "float > 0 and < 1"),
        ("alpha", 0, "float > 0"),
        ("k", -1, ">= 0"),
        ("k", 1.5, "integer"),
        ("widths", [0], ">= 1"),
        ("mode", "c", "a | b"),
        ("flag", "maybe", "true | false"),
        ("alpha", "nan", "float"),
    ],
)
def test_bad_values_name_field_value_and_allowed(key, value, needle):
    with pytest.raises(ConfigError) as e:
        build(Demo, {key: value}, where="demo")
    msg = str(e.value)
    assert f"'{key}'" in msg and needle in msg and msg.startswith("demo:")


def test_unknown_key_lists_valid_ones():
    with pytest.raises(UnknownNameError) as e:
        build(Demo, {"alpah": 0.3})
    assert "alpah" in str(e.value) and "alpha" in str(e.value)


def test_field_table_has_a_doc_for_every_field():
    rows = field_table(Demo)
    assert [r["name"] for r in rows] == ["alpha", "k", "widths", "mode", "flag", "maybe"]
    assert all(r["doc"] for r in rows)


@dataclass(frozen=True)
class _Widths:
    widths: tuple[int, ...] | None = param(None, "layer widths, or none")


def test_a_union_says_why_each_option_failed_on_a_part_of_the_value():
    """The reasons a union's options gave are kept (issue 27: config collected them and dropped them)."""
    assert build(_Widths, {"widths": "[4, 8]"}).widths == (4, 8)
    assert build(_Widths, {"widths": "none"}).widths is None
    with pytest.raises(ConfigError) as e:
        build(_Widths, {"widths": [4, "wide"]})
    assert e.value.allowed == "tuple[int, ...] | NoneType (as tuple[int, ...]: element 'wide' is not an integer)"
    with pytest.raises(ConfigError) as e:
        build(_Widths, {"widths": {"a": 1}})
    assert e.value.allowed == "tuple[int, ...] | NoneType"  # the whole value was wrong: nothing more to say
