"""Leakage targets: parsed from run files, sweep specs and flags; every bad bound refused naming it."""

from __future__ import annotations

import pytest

from veil.certify.target import DEFAULT_TARGET, Bound, Target, default_target, parse_target, target_from_flags
from veil.errors import ConfigError


def test_a_mapping_of_bounds_and_none() -> None:
    t = parse_target({"privacy_gap": 0.05, "adversary_auc_max": "0.55", "mi/variational/gender": 0.02})
    assert t is not None and [b.metric for b in t.bounds] == [
        "privacy_gap",
        "adversary_auc_max",
        "mi/variational/gender",
    ]
    assert t.get("adversary_auc_max") == Bound("adversary_auc_max", 0.55)
    assert parse_target(None) is None
    assert parse_target("none") == Target(()) and not parse_target("NONE")
    assert default_target() == Target((Bound("excess_gap", DEFAULT_TARGET["excess_gap"]),), True)
    assert default_target().text() == "excess_gap <= 0.05 (the default target)"


@pytest.mark.parametrize(
    ("value", "field", "allowed"),
    [
        ({"privacy_gap": 0}, "target.privacy_gap", "> 0 and <= 0.5"),
        ({"privacy_gap": 0.7}, "target.privacy_gap", "> 0 and <= 0.5"),
        ({"privacy_gap": "abc"}, "target.privacy_gap", "> 0 and <= 0.5"),
        ({"privacy_gap": True}, "target.privacy_gap", "> 0 and <= 0.5"),
        ({"adversary_auc_max": 0.4}, "target.adversary_auc_max", "> 0.5 and <= 1"),
        ({"eps": -1}, "target.eps", "> 0"),
        ({"eps": float("inf")}, "target.eps", "> 0"),
        ({"privacy_gapp": 0.05}, "target", "excess_gap | privacy_gap | adversary_auc_max | eps"),
        ({"mi/nosuch/gender": 0.1}, "target.mi/nosuch/gender", "variational"),
        ({"mi/ksg": 0.1}, "target", "mi/<estimator>/<sensitive label>"),
        ("strict", "target", "or 'none'"),
        (0.05, "target", "a mapping of bounds"),
    ],
)
def test_bad_bounds_are_refused_by_name(value, field, allowed) -> None:
    with pytest.raises(ConfigError) as e:
        parse_target(value, where="run.yaml")
    assert e.value.field == field and allowed in e.value.allowed and e.value.where == "run.yaml"


def test_flags() -> None:
    assert target_from_flags([]) is None
    assert target_from_flags(["none"]) == Target(())
    t = target_from_flags(["privacy_gap=0.1", "eps=4"])
    assert t is not None and t.to_dict() == {"privacy_gap": 0.1, "eps": 4.0}
    with pytest.raises(ConfigError, match="'--target'.*METRIC=BOUND"):
        target_from_flags(["privacy_gap"])
    assert t.params() == {"target.privacy_gap": 0.1, "target.eps": 4.0, "target.source": "run"}
    assert Target(()).params() == {"target": "none"}
