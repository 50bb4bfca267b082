"""Tabular real datasets: UCI Adult (two variants), ProPublica COMPAS, Titanic, and a user-supplied
MIMIC-Extract table. Column names, types and category lists come from the cards (datasets/*.yaml)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from veil.config import param
from veil.datasets.card_files import load_card
from veil.datasets.dataset import Dataset, assemble
from veil.datasets.files import read_table, table_to_dataset
from veil.datasets.loading import drop_constant_onehots, onehot, random_split, raw_file, register_real
from veil.errors import ConfigError, DataError

# ------------------------------------------------------------------------------------------------ Adult

ADULT_NUMERIC = ("age", "fnlwgt", "education-num", "capital-gain", "capital-loss", "hours-per-week")


def read_adult(path, columns: list[str]) -> pd.DataFrame:
    """One headerless UCI Adult file (adult.data or adult.test) as a frame; '?' is missing, the test file's
    first line ('|1x3 Cross validator') is skipped and the labels' trailing '.' removed."""
    try:
        frame = pd.read_csv(
            path,
            header=None,
            names=columns,
            skipinitialspace=True,
            na_values="?",
            comment="|",
            skip_blank_lines=True,
            dtype=str,
            keep_default_na=False,
        )
    except Exception as e:
        raise DataError(f"{path}: cannot read as UCI Adult ({type(e).__name__}: {e})") from None
    frame = frame.replace({"?": np.nan, "": np.nan})
    if frame[columns[-1]].isna().any():
        row = int(np.flatnonzero(frame[columns[-1]].isna())[0])
        raise DataError(f"{path}: row {row} has {frame.iloc[row].notna().sum()} fields, expected {len(columns)}")
    frame[columns[-1]] = frame[columns[-1]].str.rstrip(".")
    return frame


def adult_frames(card_name: str = "adult") -> tuple[pd.DataFrame, pd.DataFrame]:
    card = load_card("adult")
    cols = card.column_names
    tr = read_adult(raw_file(card_name, "adult.data"), cols)
    te = read_adult(raw_file(card_name, "adult.test"), cols)
    return tr, te


def adult_features(
    frame: pd.DataFrame, drop: set[str], where: str, missing: str | None = None
) -> tuple[np.ndarray, list[str], list[int], list[int]]:
    """One-hot of the card's categorical columns (its fixed category lists, plus `missing` as a category
    when given), numbers as floats; columns in `drop` are left out. Returns (x, names, numeric column
    indices, one-hot column indices)."""
    card = load_card("adult")
    blocks, names, numeric, hot = [], [], [], []
    width = 0
    for col in card.columns:
        c = col["name"]
        if c in drop or c == "income":
            continue
        if col["type"] in ("numeric", "integer"):
            try:
                v = pd.to_numeric(frame[c], errors="raise").to_numpy(dtype=np.float32)
            except (ValueError, TypeError):
                raise DataError(f"{where}: column '{c}' is not numeric") from None
            blocks.append(v[:, None])
            names.append(c)
            numeric.append(width)
            width += 1
        else:
            cats = list(col["values"]) + ([missing] if missing is not None else [])
            block, bnames = onehot(frame[c], cats, c, where)
            blocks.append(block)
            names += bnames
            hot += list(range(width, width + block.shape[1]))
            width += block.shape[1]
    return np.hstack(blocks), names, numeric, hot


@dataclass(frozen=True)
class AdultParams:
    """UCI Adult: income >50K as utility; sex (and optionally race, relationship) sensitive."""

    sensitive: tuple[str, ...] = param(
        ("sex",), "sensitive labels; the others stay features", choices=("sex", "race", "relationship")
    )
    split: str = param(
        "standard",
        "standard = adult.data train / adult.test test; random = pooled, seeded",
        choices=("standard", "random"),
    )
    test_fraction: float = param(0.25, "held-out fraction when split=random", gt=0, lt=1)
    drop_missing: bool = param(
        True, "drop rows with a missing ('?') value (45,222 rows remain); else '?' is a category"
    )
    seed: int = param(0, "seed of the random split", ge=0)


@register_real(
    "adult",
    AdultParams,
    "UCI Adult census: utility income >50K, sensitive sex (+ race, relationship); one-hot + standardised",
)
def adult(p: AdultParams) -> Dataset:
    tr, te = adult_frames()
    frame = pd.concat([tr, te], ignore_index=True)
    n_tr = len(tr)
    if p.drop_missing:
        keep = frame.notna().all(axis=1).to_numpy()
    else:
        keep = np.ones(len(frame), dtype=bool)
        frame = frame.fillna("?")
    is_train = np.arange(len(frame)) < n_tr
    frame, is_train = frame[keep].reset_index(drop=True), is_train[keep]
    x, names, _, hot = adult_features(
        frame, set(p.sensitive), "dataset 'adult'", missing=None if p.drop_missing else "?"
    )
    x, names = drop_constant_onehots(x, names, hot)
    numeric = [names.index(c) for c in ADULT_NUMERIC]
    if p.split == "standard":
        train_idx, test_idx = np.flatnonzero(is_train), np.flatnonzero(~is_train)
    else:
        train_idx, test_idx = random_split(len(frame), p.test_fraction, p.seed)
    return assemble(
        "adult",
        x,
        {"income": frame["income"].to_numpy()},
        {s: frame[s].to_numpy() for s in p.sensitive},
        train_idx,
        test_idx,
        feature_names=names,
        standardize=numeric,
    )


@dataclass(frozen=True)
class Adult102Params:
    """The adjustable-privacy autoencoder paper's Adult: 102 one-hot features, income and gender removed."""

    test_fraction: float = param(0.2, "held-out fraction (the paper's 80/20 split)", gt=0, lt=1)
    seed: int = param(0, "seed of the split", ge=0)


@register_real(
    "adult-onehot102",
    Adult102Params,
    "Adult as in the adjustable-privacy AE paper: 45,222 complete rows, 102 one-hot features, 80/20 split",
)
def adult_onehot102(p: Adult102Params) -> Dataset:
    tr, te = adult_frames("adult-onehot102")
    frame = pd.concat([tr, te], ignore_index=True).dropna().reset_index(drop=True)
    x, names, numeric, hot = adult_features(frame, {"sex"}, "dataset 'adult-onehot102'")
    x, names = drop_constant_onehots(x, names, hot)  # categories absent after dropping '?' rows (Never-worked)
    numeric = [names.index(c) for c in ADULT_NUMERIC]
    train_idx, test_idx = random_split(len(frame), p.test_fraction, p.seed)
    return assemble(
        "adult-onehot102",
        x,
        {"income": frame["income"].to_numpy()},
        {"sex": frame["sex"].to_numpy()},
        train_idx,
        test_idx,
        feature_names=names,
        standardize=numeric,
    )


# ----------------------------------------------------------------------------------------------- COMPAS

COMPAS_FEATURES = (
    "sex",
    "age",
    "age_cat",
    "juv_fel_count",
    "juv_misd_count",
    "juv_other_count",
    "priors_count",
    "c_charge_degree",
)


def read_compas(path) -> pd.DataFrame:
    """compas-scores-two-years.csv (53 columns; pandas renames the repeated decile_score/priors_count)."""
    try:
        frame = pd.read_csv(path, keep_default_na=False, na_values=[""])
    except Exception as e:
        raise DataError(f"{path}: cannot read as CSV ({type(e).__name__}: {e})") from None
    need = (
        "days_b_screening_arrest",
        "is_recid",
        "c_charge_degree",
        "score_text",
        "race",
        "two_year_recid",
    ) + COMPAS_FEATURES
    missing = [c for c in need if c not in frame.columns]
    if missing:
        raise DataError(f"{path}: column '{missing[0]}' is missing (COMPAS needs {', '.join(need)})")
    return frame


def propublica_filter(frame: pd.DataFrame) -> pd.DataFrame:
    """ProPublica's filter: screening within 30 days of arrest, a known recidivism outcome, no ordinary
    traffic offence, a COMPAS score present (7,214 -> 6,172 rows)."""
    d = pd.to_numeric(frame["days_b_screening_arrest"], errors="coerce")
    keep = (
        (d <= 30)
        & (d >= -30)
        & (pd.to_numeric(frame["is_recid"], errors="coerce") != -1)
        & (frame["c_charge_degree"].astype(str) != "O")
        & (frame["score_text"].astype(str) != "N/A")
        & frame["score_text"].notna()
    )
    return frame[keep.to_numpy()].reset_index(drop=True)


def bin_priors(priors: np.ndarray, edges: tuple[int, ...]) -> np.ndarray:
    """Bin prior counts by upper edges: (0, 3) -> '0', '1-3', '>3'."""
    out = np.empty(len(priors), dtype=object)
    lo = 0
    for e in edges:
        sel = (priors >= lo) & (priors <= e)
        out[sel] = f"{lo}-{e}" if e > lo else f"{e}"
        lo = e + 1
    out[priors > edges[-1]] = f">{edges[-1]}"
    return out


@dataclass(frozen=True)
class CompasParams:
    """ProPublica COMPAS two-year recidivism: utility two_year_recid, sensitive race (+ priors, sex)."""

    sensitive: tuple[str, ...] = param(
        ("race",), "sensitive labels; the others stay features", choices=("race", "priors", "sex")
    )
    race: str = param(
        "aa-vs-caucasian",
        "race label: African-American vs Caucasian (other races dropped, 5,278 rows) "
        "or African-American vs everyone else (6,172 rows)",
        choices=("aa-vs-caucasian", "aa-vs-rest"),
    )
    priors_bins: tuple[int, ...] = param(
        (0, 3), "upper edges of the prior-count bins of the 'priors' label: (0, 3) -> 0 | 1-3 | >3", ge=0
    )
    test_fraction: float = param(0.3, "held-out fraction (70/30 as in the LDP-FRL paper's 4,320/1,852)", gt=0, lt=1)
    seed: int = param(0, "seed of the split", ge=0)

    def __post_init__(self) -> None:
        bins = list(self.priors_bins)
        integers = all(isinstance(b, int) and not isinstance(b, bool) and b >= 0 for b in bins)
        if not bins or not integers or bins != sorted(set(bins)):
            allowed = "a non-empty, strictly increasing list of integers >= 0 (upper bin edges), e.g. [0, 3]"
            raise ConfigError("priors_bins", bins, allowed, "dataset 'compas'")


@register_real(
    "compas",
    CompasParams,
    "ProPublica COMPAS: utility two_year_recid, sensitive race (African-American vs Caucasian), priors optional",
)
def compas(p: CompasParams) -> Dataset:
    path = raw_file("compas", "compas-scores-two-years.csv")
    frame = propublica_filter(read_compas(path))
    if p.race == "aa-vs-caucasian":
        frame = frame[frame["race"].isin(["African-American", "Caucasian"])].reset_index(drop=True)
        race = frame["race"].to_numpy(dtype=object)
    else:
        race = np.where(frame["race"] == "African-American", "African-American", "Other").astype(object)
    priors = pd.to_numeric(frame["priors_count"]).to_numpy()
    labels = {"race": race, "priors": bin_priors(priors, p.priors_bins), "sex": frame["sex"].to_numpy(dtype=object)}
    drop = {"priors_count" if s == "priors" else s for s in p.sensitive}
    card = load_card("compas")
    blocks, names, numeric, width = [], [], [], 0
    for c in COMPAS_FEATURES:
        if c in drop:
            continue
        spec = card.column(c)
        if spec["type"] in ("numeric", "integer"):
            blocks.append(pd.to_numeric(frame[c]).to_numpy(dtype=np.float32)[:, None])
            names.append(c)
            numeric.append(width)
            width += 1
        else:
            block, bn = onehot(frame[c], spec["values"], c, f"{path}")
            blocks.append(block)
            names += bn
            width += block.shape[1]
    train_idx, test_idx = random_split(len(frame), p.test_fraction, p.seed)
    return assemble(
        "compas",
        np.hstack(blocks),
        {"two_year_recid": frame["two_year_recid"].to_numpy()},
        {s: labels[s] for s in p.sensitive},
        train_idx,
        test_idx,
        feature_names=names,
        standardize=numeric,
    )


# ---------------------------------------------------------------------------------------------- Titanic


@dataclass(frozen=True)
class TitanicParams:
    """Titanic passengers (vcdExtra::Titanicp, 1,309 rows): survival utility; sex and class sensitive."""

    sensitive: tuple[str, ...] = param(
        ("sex", "pclass"), "sensitive labels; a label not chosen stays a feature", choices=("sex", "pclass")
    )
    test_fraction: float = param(0.25, "held-out fraction", gt=0, lt=1)
    seed: int = param(0, "seed of the split", ge=0)


@register_real(
    "titanic",
    TitanicParams,
    "Titanic passengers (1,309): utility survived, sensitive sex and passenger class (EIGAN App. D.3)",
)
def titanic(p: TitanicParams) -> Dataset:
    path = raw_file("titanic", "Titanicp.csv")
    try:
        frame = pd.read_csv(path)
    except Exception as e:
        raise DataError(f"{path}: cannot read as CSV ({type(e).__name__}: {e})") from None
    need = ("pclass", "survived", "sex", "age", "sibsp", "parch")
    missing = [c for c in need if c not in frame.columns]
    if missing:
        raise DataError(f"{path}: column '{missing[0]}' is missing (Titanicp has {', '.join(need)})")
    card = load_card("titanic")
    train_idx, test_idx = random_split(len(frame), p.test_fraction, p.seed)
    age = pd.to_numeric(frame["age"], errors="coerce").to_numpy(dtype=np.float64)
    missing_age = np.isnan(age)
    fill = np.nanmedian(age[train_idx]) if np.any(~missing_age[train_idx]) else 0.0
    age = np.where(missing_age, fill, age)
    blocks = [
        age[:, None],
        missing_age[:, None].astype(np.float64),
        pd.to_numeric(frame["sibsp"]).to_numpy(dtype=np.float64)[:, None],
        pd.to_numeric(frame["parch"]).to_numpy(dtype=np.float64)[:, None],
    ]
    names = ["age", "age_missing", "sibsp", "parch"]
    for c in ("sex", "pclass"):
        if c not in p.sensitive:
            block, bn = onehot(frame[c].astype(str), card.column(c)["values"], c, str(path))
            blocks.append(block)
            names += bn
    return assemble(
        "titanic",
        np.hstack(blocks).astype(np.float32),
        {"survived": frame["survived"].astype(str).to_numpy()},
        {s: frame[s].astype(str).to_numpy() for s in p.sensitive},
        train_idx,
        test_idx,
        feature_names=names,
        standardize=[0, 2, 3],
    )


# ---------------------------------------------------------------------------------------- MIMIC-Extract


def race_group(values: pd.Series) -> np.ndarray:
    """MIMIC ethnicity strings -> white | black | other (EIGAN's 3-class race)."""
    up = values.astype(str).str.upper()
    return np.where(up.str.startswith("WHITE"), "white", np.where(up.str.startswith("BLACK"), "black", "other")).astype(
        object
    )


@dataclass(frozen=True)
class MimicParams:
    """A MIMIC-III table the user extracted (MIMIC-Extract or similar): survival utility; gender, race sensitive."""

    sensitive: tuple[str, ...] = param(
        ("gender", "race"), "sensitive labels; one not chosen stays a feature", choices=("gender", "race")
    )
    race_groups: str = param(
        "white-black-other",
        "bin race into white/black/other (EIGAN's 3 classes) or keep it as given",
        choices=("white-black-other", "as-is"),
    )
    test_fraction: float = param(0.25, "held-out fraction", gt=0, lt=1)
    seed: int = param(0, "seed of the split", ge=0)
    max_categories: int = param(100, "most distinct values a text feature column may have", ge=2)


@register_real(
    "mimic-extract",
    MimicParams,
    "user-supplied MIMIC-III patient table (credentialed access): utility survival, sensitive gender and race",
)
def mimic_extract(p: MimicParams) -> Dataset:
    path = raw_file("mimic-extract", "mimic.csv")
    frame = read_table(path)
    if "race" not in frame.columns and "ethnicity" in frame.columns:
        frame = frame.rename(columns={"ethnicity": "race"})
    for c in ("survival", "gender", "race"):
        if c not in frame.columns:
            raise DataError(
                f"{path}: column '{c}' is missing (see datasets/mimic-extract.yaml for the expected schema)"
            )
    if frame["race"].notna().all() and p.race_groups == "white-black-other":
        frame["race"] = race_group(frame["race"])
    extra = tuple(c for c in ("subject_id", "hadm_id", "icustay_id") if c in frame.columns)
    return table_to_dataset(
        frame,
        source=str(path),
        name="mimic-extract",
        utility=("survival",),
        sensitive=p.sensitive,
        extra=extra,
        test_fraction=p.test_fraction,
        seed=p.seed,
        max_categories=p.max_categories,
    )
