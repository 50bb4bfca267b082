"""Each method's card (`veil.methods.configs`, torch-free) is what its Method class says it is: the class inherits it,
so name, config, knob, paper values and deviations cannot drift apart; the names, the order and the facts the card
states on its own (federated, eps-LDP release) match the classes; the audit's torch-free vocabulary matches its
registries; and a method with no card (a plugin's) is looked up through its class."""

from __future__ import annotations

import pytest

from veil.audit.families import PROBE_FAMILIES
from veil.audit.mi import MI_ESTIMATORS
from veil.audit.settings import mi_choices, suite_choices
from veil.audit.vocabulary import MI_SUMMARIES, PROBE_FAMILY_NAMES
from veil.errors import UnknownNameError
from veil.methods import METHODS
from veil.methods.baselines import PCA
from veil.methods.cards import CARDS, is_federated, method_card, method_config, method_names
from veil.methods.configs.baselines_card import PCAConfig
from veil.methods.method import Method
from veil.methods.table import register_method


@pytest.mark.parametrize("name", sorted(METHODS))
def test_every_method_class_inherits_its_card(name):
    cls, card = METHODS[name], CARDS[name]
    assert issubclass(cls, card) and cls.name == card.name == name and cls.Config is card.Config
    assert cls.privacy_knob == card.privacy_knob and dict(cls.paper_values) == dict(card.paper_values)
    assert card.federated == bool(getattr(cls, "federated", False)) == is_federated(name)
    assert card.eps_ldp == (cls.ldp_release is not Method.ldp_release), (
        "the card's eps_ldp must say what the class does"
    )
    assert card.releases_input_format == cls.releases_input_format


def test_the_cards_list_every_built_in_method():
    assert set(method_names()) == set(CARDS) == set(METHODS)


def test_the_audit_vocabulary_matches_its_registries():
    assert MI_SUMMARIES == {e.name: e.summary for e in MI_ESTIMATORS.values()}
    assert PROBE_FAMILY_NAMES == tuple(PROBE_FAMILIES)
    assert mi_choices() == ("none", *MI_ESTIMATORS) and suite_choices() == tuple(PROBE_FAMILIES)


def test_an_unknown_method_is_refused_with_the_valid_names():
    with pytest.raises(UnknownNameError) as e:
        method_card("gppp")
    assert e.value.valid == sorted(METHODS) and "did you mean 'gpp'" in str(e.value)


def test_a_method_without_a_card_is_looked_up_through_its_class():
    """A plugin's method has no torch-free card: its Method class, registered in the table, is its card."""

    @register_method
    class Nulling(PCA):
        name = "test-nulling"
        Config = PCAConfig
        description = "a method without a card"

    try:
        assert method_card("test-nulling") is Nulling and method_names()[-1] == "test-nulling"
        assert method_config("test-nulling", {"d_z": 3}).d_z == 3 and not is_federated("test-nulling")
        assert Nulling.eps_ldp is False
    finally:
        METHODS.pop("test-nulling")
