"""HAPT (Smartphone-Based Recognition of Human Activities and Postural Transitions, UCI 341) in its
published layout: Train/X_train.txt (561 space-separated features per line), Train/y_train.txt (activity
id 1..12), Train/subject_id_train.txt (subject 1..30), and the same for Test/. The older UCI HAR layout
(train/subject_train.txt, activities 1..6) is accepted by `fetch --from` too (the card's aliases)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from veil.config import param
from veil.datasets.dataset import Dataset, assemble
from veil.datasets.loading import random_split, raw_file, register_real
from veil.errors import DataError

N_FEATURES = 561
ACTIVITIES = {
    1: "WALKING",
    2: "WALKING_UPSTAIRS",
    3: "WALKING_DOWNSTAIRS",
    4: "SITTING",
    5: "STANDING",
    6: "LAYING",
    7: "STAND_TO_SIT",
    8: "SIT_TO_STAND",
    9: "SIT_TO_LIE",
    10: "LIE_TO_SIT",
    11: "STAND_TO_LIE",
    12: "LIE_TO_STAND",
}


def read_matrix(path: Path, width: int | None) -> np.ndarray:
    try:
        frame = pd.read_csv(path, sep=r"\s+", header=None, dtype=np.float64, engine="c")
    except Exception as e:
        raise DataError(f"{path}: cannot read as whitespace-separated numbers ({type(e).__name__}: {e})") from None
    arr = frame.to_numpy()
    if width is not None and arr.shape[1] != width:
        raise DataError(f"{path}: {arr.shape[1]} values per line, expected {width}")
    if np.isnan(arr).any():
        row = int(np.argwhere(np.isnan(arr))[0][0])
        raise DataError(f"{path}: line {row + 1} is short or holds a non-number")
    return arr


def read_side(side: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    x = read_matrix(raw_file("hapt", f"X_{side}.txt"), N_FEATURES)
    y = read_matrix(raw_file("hapt", f"y_{side}.txt"), 1)[:, 0].astype(np.int64)
    subj = read_matrix(raw_file("hapt", f"subject_id_{side}.txt"), 1)[:, 0].astype(np.int64)
    if not len(x) == len(y) == len(subj):
        raise DataError(
            f"dataset 'hapt': {side} files disagree: {len(x)} feature rows, {len(y)} labels, {len(subj)} subjects"
        )
    bad = sorted(set(y.tolist()) - set(ACTIVITIES))
    if bad:
        raise DataError(f"dataset 'hapt': y_{side}.txt holds activity id {bad[0]}, not in 1..12")
    return x, y, subj


@dataclass(frozen=True)
class HaptParams:
    """Smartphone activity recognition: utility activity, sensitive subject identity (30 people)."""

    activities: str = param(
        "basic",
        "basic = the 6 activities (GPP's 6 classes); all = also the 6 postural transitions",
        choices=("basic", "all"),
    )
    split: str = param(
        "random",
        "random = seeded over all rows (every subject on both sides, so identity leakage is "
        "measurable); standard = the published Train/Test files (disjoint subjects)",
        choices=("random", "standard"),
    )
    test_fraction: float = param(0.3, "held-out fraction when split=random", gt=0, lt=1)
    seed: int = param(0, "seed of the random split", ge=0)


@register_real(
    "hapt",
    HaptParams,
    "UCI HAPT smartphone sensors, 561 features: utility activity, sensitive subject id (GPP Sec. VI)",
)
def hapt(p: HaptParams) -> Dataset:
    xa, ya, sa = read_side("train")
    xb, yb, sb = read_side("test")
    x, y, subj = np.vstack([xa, xb]), np.concatenate([ya, yb]), np.concatenate([sa, sb])
    is_train = np.arange(len(x)) < len(xa)
    if p.activities == "basic":
        keep = y <= 6
        x, y, subj, is_train = x[keep], y[keep], subj[keep], is_train[keep]
    if p.split == "standard":
        tr, te = np.flatnonzero(is_train), np.flatnonzero(~is_train)
    else:
        tr, te = random_split(len(x), p.test_fraction, p.seed)
    return assemble(
        "hapt", x, {"activity": y}, {"subject": subj}, tr, te, feature_names=[f"f{i}" for i in range(N_FEATURES)]
    )
