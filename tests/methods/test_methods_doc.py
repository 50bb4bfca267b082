"""docs/methods.md is generated from the registry and must be current."""

from pathlib import Path

from veil.methods.docs import render_markdown


def test_methods_doc_is_current():
    doc = Path(__file__).parents[2] / "docs" / "methods.md"
    assert doc.read_text() == render_markdown(), "regenerate: python -m veil.methods.docs > docs/methods.md"
