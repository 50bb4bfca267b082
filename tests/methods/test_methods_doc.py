"""docs/methods.md is generated from the registry (tools/methods_doc.py) and must be current."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[2]


def test_methods_doc_is_current():
    from methods_doc import DOC, render_markdown

    assert DOC == ROOT / "docs" / "methods.md"
    assert DOC.read_text() == render_markdown(), "regenerate: make docs"


def test_the_generator_checks_from_any_directory(tmp_path):
    """`python tools/methods_doc.py --check` is what `make docs-check` runs; it reads the checkout's docs wherever it
    is started from, and writes nothing."""
    before = (ROOT / "docs" / "methods.md").stat().st_mtime_ns
    proc = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "methods_doc.py"), "--check"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    assert (ROOT / "docs" / "methods.md").stat().st_mtime_ns == before and not list(tmp_path.iterdir())
