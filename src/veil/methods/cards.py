"""Methods by name without their torch code: each built-in method's card (`veil.methods.configs`: its config,
presets, paper values, privacy knob, description, whether it federates) looked up by kebab-case name, and its
parameters validated. `veil methods`, the sweep spec's checks and a run spec's key routing read these, so they load
neither torch, Ray nor MLflow.

A plugin method (entry-point group `veil.methods`) has no torch-free card: the plugins are imported on every
lookup, as for any registry (`veil.plugins`), and a plugin's Method class, registered in `veil.methods.table`, is
its own card (every Method inherits `MethodCard`). A plugin's imports, Veil's method registry among them, are
then loaded as the plugin's module asks."""

from __future__ import annotations

from typing import Any, Mapping

from veil.config import build
from veil.errors import UnknownNameError
from veil.methods.configs.adjustable_ae_card import AdjustableAECard
from veil.methods.configs.baselines_card import (
    AutoencoderCard,
    DPInputCard,
    NoisyEncoderCard,
    PCACard,
    RandomProjectionCard,
)
from veil.methods.configs.d_eigan_card import DEIGANCard
from veil.methods.configs.d_gpp_card import DGPPCard
from veil.methods.configs.eigan_card import EIGANCard
from veil.methods.configs.gpp_card import GPPCard
from veil.methods.configs.ldp_fedavg_card import LDPFedAvgCard
from veil.methods.configs.ldp_frl_card import LDPFRLCard
from veil.methods.configs.linear_arl_card import LinearARLCard
from veil.methods.configs.method_card import MethodCard, MethodConfig
from veil.methods.table import METHODS
from veil.plugins import load_plugins

BUILT_IN: tuple[type[MethodCard], ...] = (
    AdjustableAECard,
    AutoencoderCard,
    NoisyEncoderCard,
    PCACard,
    RandomProjectionCard,
    DPInputCard,
    EIGANCard,
    GPPCard,
    LDPFRLCard,
    LinearARLCard,
    DEIGANCard,
    DGPPCard,
    LDPFedAvgCard,
)
"""Every built-in method's card, in the order `veil.methods.builtin` registers the methods."""

CARDS: dict[str, type[MethodCard]] = {card.name: card for card in BUILT_IN}
"""The built-in cards by method name."""


def method_names() -> tuple[str, ...]:
    """Every method's name (plugins included): the built-in ones, then the plugins' in registration order."""
    load_plugins()
    return (*CARDS, *(name for name in METHODS if name not in CARDS))


def method_card(name: str, where: str | None = None) -> type[MethodCard]:
    """The card of method `name` (a plugin's: its Method class), or UnknownNameError listing the valid names."""
    load_plugins()
    if name in CARDS:
        return CARDS[name]
    if name in METHODS:
        return METHODS[name]
    raise UnknownNameError("method", str(name), list(method_names()), where)


def method_config(name: str, values: Mapping[str, Any] | None = None) -> MethodConfig:
    """Validated config for method `name`: its preset's values (`preset`, default 'default') under the user's
    own; unknown keys and out-of-range values raise, naming the field."""
    card = method_card(name)
    values = dict(values or {})
    preset = values.get("preset", "default")
    if isinstance(preset, str):  # anything else is refused by `build`, naming the field
        values = {**card.preset_values(preset), **values}
    return build(card.Config, values, where=f"method '{name}'")


def is_federated(name: str) -> bool:
    """Whether method `name` trains by federation (its card says `federated = True`)."""
    return bool(getattr(method_card(name), "federated", False))


def knob_text(card: type[MethodCard]) -> str:
    """'beta, searched over [0.001, 30] on a log scale (lower hides more)', or that the method has none."""
    k = card.privacy_knob
    if k is None:
        return "none (a baseline: its release is certified only when a run gives a target)"
    return f"`{k.field}`, searched over [{k.low:g}, {k.high:g}] on a {k.scale} scale ({k.private_end}er hides more)"
