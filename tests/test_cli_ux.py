"""What a newcomer reads on the console: `veil methods` lines up and says what each field does, errors name
the flag that was typed, and the user's own data take one label syntax everywhere."""

from __future__ import annotations

import dataclasses
import re

from veil.cli import main
from veil.config import field_table
from veil.methods.base import ClosedFormConfig, Method
from veil.methods.registry import METHODS

FIELD_ROW = re.compile(r"^    (\S+)\s+default (.+?)\s{2,}(\S)")


def test_methods_listing_lines_up_across_methods(capsys):
    assert main(["methods"]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = [m for m in map(FIELD_ROW.match, lines) if m]
    longest = max(len(f.name) for cls in METHODS.values() for f in dataclasses.fields(cls.Config))
    assert longest == len("classifier_hidden")  # adjustable-ae's; the case the misalignment was seen on
    assert len(rows) == sum(len(dataclasses.fields(cls.Config)) for cls in METHODS.values())
    assert {m.start(2) for m in rows} == {4 + longest + 2 + len("default ")}  # one default column for all
    assert len({m.start(3) for m in rows}) == 1  # and one doc column
    headers = [ln for ln in lines if not ln.startswith(" ") and "  —  " in ln]
    assert len(headers) == len(METHODS)
    gpp = next(h for h in headers if h.startswith("gpp "))
    assert gpp.endswith("[source: GPP paper (seed 001), Alg. 1, eq. 39]")
    assert not any(re.search(r"\[seeds? 00\d", h) for h in headers)  # a paper never reads like the seed field


def test_field_docs_say_what_unused_fields_are():
    docs = {name: {r["name"]: r["doc"] for r in field_table(cls.Config)} for name, cls in METHODS.items()}
    closed_form = sorted(name for name, cls in METHODS.items() if issubclass(cls.Config, ClosedFormConfig))
    assert closed_form == ["linear-arl", "pca", "random-projection"]
    assert all(METHODS[name].train_step is Method.train_step for name in closed_form)  # none has a training step
    for name in closed_form:
        assert docs[name]["epochs"].startswith("unused: the method is fitted in closed form"), name
        assert docs[name]["batch_size"].startswith("unused:"), name
    for name in ("gpp", "eigan", "autoencoder"):
        assert docs[name]["epochs"] == "passes over the training data", name
    assert docs["adjustable-ae"]["d_z"].startswith("unused: this method releases x'")
    assert "width d_in" in docs["adjustable-ae"]["d_z"] and "ignored" not in docs["adjustable-ae"]["d_z"]


def test_methods_name_aligns_its_departures(capsys):
    assert main(["methods", "eigan"]) == 0
    out = capsys.readouterr().out
    block = out.split("(why):\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert [ln.split(":")[0].strip() for ln in block] == list(METHODS["eigan"].paper_values)
    # every value starts in one column, after the longest key ('privacy_loss:')
    assert {len(ln) - len(ln[4:].split(":", 1)[1].lstrip()) for ln in block} == {4 + len("privacy_loss:") + 1}
