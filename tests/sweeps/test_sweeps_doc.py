"""docs/sweeps.md's settings table is generated from the SweepSpec fields and must be current."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from sweeps_doc import BEGIN, END, render_settings, updated

from veil.sweeps.model import SPEC_KEYS
from veil.sweeps.spec_keys import Resources
from veil.sweeps.sweepspec import SweepSpec

DOC = Path(__file__).parents[2] / "docs" / "sweeps.md"


def test_the_settings_table_is_current():
    text = DOC.read_text()
    assert text.count(BEGIN) == 1 and text.count(END) == 1
    assert updated(text) == text, "regenerate: make docs"


def test_every_setting_is_a_spec_key_with_a_doc():
    table = render_settings()
    settings = [f for f in dataclasses.fields(SweepSpec) if f.metadata]
    assert settings and all(f.name in SPEC_KEYS and f.metadata["doc"] for f in settings)
    for f in settings:
        assert f"| `{f.name}` |" in table
    for f in dataclasses.fields(Resources):
        assert f"| `resources.{f.name}` |" in table
    assert "| `trials` | `20` | an integer from 1 to 10000" in table


def test_every_structured_key_has_a_row_saying_what_its_errors_say():
    """The space types, objective and constraint parts and nsga2/tpe options: each field a row, its allowed values
    the words `build(strict=True)` refuses a bad value with."""
    from sweeps_doc import KEYS_BEGIN, KEYS_END, render_keys

    from veil.sweeps.objectives import Constraint, Objective
    from veil.sweeps.samplers import NSGA2Options, TPEOptions
    from veil.sweeps.space import SPACE_TYPES

    text = DOC.read_text()
    assert text.count(KEYS_BEGIN) == 1 and text.count(KEYS_END) == 1
    table = render_keys()
    for cls in (*SPACE_TYPES.values(), Objective, Constraint, NSGA2Options, TPEOptions):
        for f in dataclasses.fields(cls):
            assert f"| `{f.name}` |" in table and f.metadata["doc"], (cls, f.name)
    assert "| `space.NAME`, `type: log / log-float / loguniform` | `low` | required | a number > 0 |" in table
    assert "| `objectives[i]` | `direction` | required | max / min |" in table
    assert "| `sampler_options` (nsga2) | `population_size` | none | an integer >= 2 |" in table
