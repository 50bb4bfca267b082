"""docs/sweeps.md's settings table is generated from the SweepSpec fields and must be current."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from veil.sweeps.docs import BEGIN, END, render_settings, updated
from veil.sweeps.spec import SPEC_KEYS, Resources, SweepSpec

DOC = Path(__file__).parents[2] / "docs" / "sweeps.md"


def test_the_settings_table_is_current():
    text = DOC.read_text()
    assert text.count(BEGIN) == 1 and text.count(END) == 1
    assert updated(text) == text, "regenerate: python -m veil.sweeps.docs"


def test_every_setting_is_a_spec_key_with_a_doc():
    table = render_settings()
    settings = [f for f in dataclasses.fields(SweepSpec) if f.metadata]
    assert settings and all(f.name in SPEC_KEYS and f.metadata["doc"] for f in settings)
    for f in settings:
        assert f"| `{f.name}` |" in table
    for f in dataclasses.fields(Resources):
        assert f"| `resources.{f.name}` |" in table
    assert "| `trials` | `20` | an integer from 1 to 10000" in table
