"""Readers of raw dataset files needed both by a loader and by `veil datasets fetch`: the CelebA attribute
and partition lists and the square crop that fetch (veil.datasets.fetch) uses to build images-64.npy from the
aligned JPEGs, which the CelebA loader (veil.datasets.images) then reads. Kept apart from both so that
neither imports the other."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from veil.errors import DataError

CELEBA_IMAGES = "images-64.npy"
"""The 64x64 aligned faces as one uint8 array (N x 64 x 64 x 3), rows in list_attr_celeba.txt order."""


def read_celeba_attrs(path: Path) -> tuple[list[str], list[str], np.ndarray]:
    """list_attr_celeba.txt: a count line, a line of 40 attribute names, then `file v1 .. v40` with -1/1.
    Returns (image file names, attribute names, int8 array of 0/1)."""
    try:
        lines = Path(path).read_text().splitlines()
    except OSError as e:
        raise DataError(f"{path}: cannot read ({e.strerror})") from None
    if len(lines) < 3:
        raise DataError(f"{path}: too short for list_attr_celeba.txt")
    try:
        count = int(lines[0].strip())
    except ValueError:
        raise DataError(f"{path}: first line should be the image count, got {lines[0][:40]!r}") from None
    attrs = lines[1].split()
    rows = [ln.split() for ln in lines[2:] if ln.strip()]
    if len(rows) != count:
        raise DataError(f"{path}: header says {count} images, found {len(rows)} rows")
    bad = next((i for i, r in enumerate(rows) if len(r) != len(attrs) + 1), None)
    if bad is not None:
        raise DataError(f"{path}: row {bad} has {len(rows[bad]) - 1} values for {len(attrs)} attributes")
    vals = np.asarray([r[1:] for r in rows], dtype=np.int8)
    if not np.isin(vals, (-1, 1)).all():
        raise DataError(f"{path}: attribute values must be -1 or 1")
    return [r[0] for r in rows], attrs, (vals > 0).astype(np.int8)


def read_celeba_partition(path: Path, names: list[str]) -> np.ndarray:
    """list_eval_partition.txt: `file 0|1|2` (train / validation / test), in list_attr order."""
    part = {}
    for ln in Path(path).read_text().splitlines():
        if ln.strip():
            f, v = ln.split()
            part[f] = int(v)
    missing = [n for n in names if n not in part]
    if missing:
        raise DataError(f"{path}: no partition for {missing[0]} (and {len(missing) - 1} more)")
    return np.asarray([part[n] for n in names], dtype=np.int8)


def celeba_square(im: Any, size: int) -> np.ndarray:
    """An aligned CelebA image -> size x size x 3 uint8: the central square crop, resized (Pillow)."""
    from PIL import Image

    im = im.convert("RGB")
    w, h = im.size
    side = min(w, h)
    left, top = (w - side) // 2, (h - side) // 2
    im = im.crop((left, top, left + side, top + side)).resize((size, size), Image.Resampling.BILINEAR)
    return np.asarray(im, dtype=np.uint8)
