"""`preset: paper` restores every method's paper setting in one switch; the default preset is Veil's.

The defaults' privacy is measured in tests/test_defaults_protect.py; here: what each preset builds, that
the user's own values win over a preset, that every stated departure is recorded at the defaults and none
under the paper preset, and that a bad preset is refused naming the field and the allowed values."""

from __future__ import annotations

from typing import Any

import pytest

from veil.errors import ConfigError
from veil.methods import METHODS, method_config

# The faithful settings the methods had as defaults before the protective ones (what `preset: paper` must
# give back), plus the letter where the paper writes a plain gradient step.
PAPER: dict[str, dict[str, Any]] = {
    "eigan": {"privacy_loss": "neg-ce", "optimizer": "sgd", "alpha": 0.5, "d_z": 8, "head_hidden": (32,)},
    "gpp": {"privacy_loss": "neg-ce", "lambda_kl": 0.01, "k": 2, "lr": 1e-4, "encoder_hidden": (512, 256)},
    "d-gpp": {"privacy_loss": "neg-ce", "lambda_kl": (0.01,), "k": 2, "lr": 1e-4},
    "ldp-frl": {"optimizer": "sgd", "bound": "tanh", "d_z": 2, "eps": 4.0, "epochs": 20, "lr": 1e-3},
    "adjustable-ae": {"lam": -3000.0, "noise": 60.0, "lr": 1e-3, "apply_g": True},
}
PAPER["d-eigan"] = {**PAPER["eigan"], "aggregation": "paper"}
PAPER["ldp-fedavg"] = {**PAPER["ldp-frl"], "K": 20, "local_epochs": 1}


@pytest.mark.parametrize("name", sorted(PAPER))
def test_paper_preset_restores_the_papers_setting(name: str) -> None:
    config = method_config(name, {"preset": "paper"})
    assert {k: getattr(config, k) for k in PAPER[name]} == PAPER[name]
    assert config.preset == "paper"


@pytest.mark.parametrize("name", sorted(METHODS))
def test_the_users_values_win_over_the_preset(name: str) -> None:
    config = method_config(name, {"preset": "paper", "epochs": 3, "seed": 5})
    assert (config.epochs, config.seed) == (3, 5)


@pytest.mark.parametrize("name", sorted(METHODS))
def test_stated_departures_are_recorded_at_the_defaults_and_gone_under_the_paper_preset(name: str) -> None:
    cls = METHODS[name]
    defaults, paper = method_config(name, {}), method_config(name, {"preset": "paper"})
    recorded = cls.recorded_deviations(defaults)
    for key, p in cls.paper_values.items():
        assert getattr(paper, key) == p.value, key
        if p.stated and getattr(defaults, key) != p.value:
            assert key in recorded, (key, recorded)
        if p.stated:
            assert key not in cls.recorded_deviations(paper), key


def test_every_privacy_method_differs_from_its_paper_only_where_it_says_why() -> None:
    for name in ("eigan", "d-eigan", "gpp", "d-gpp", "ldp-frl", "ldp-fedavg"):
        cls = METHODS[name]
        assert cls.paper_values and all(p.why for p in cls.paper_values.values()), name
        defaults, paper = method_config(name, {}), method_config(name, {"preset": "paper"})
        changed = {k for k in vars(defaults) if getattr(defaults, k) != getattr(paper, k)} - {"preset"}
        assert changed == set(cls.paper_values) - {
            k for k, p in cls.paper_values.items() if getattr(defaults, k) == p.value
        }


def test_a_bad_preset_is_refused_naming_the_field_and_the_choices() -> None:
    with pytest.raises(ConfigError) as e:
        method_config("eigan", {"preset": "strict"})
    assert "preset" in str(e.value) and "default | paper" in str(e.value)
