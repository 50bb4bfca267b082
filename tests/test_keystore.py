"""The release key store (`veil.keystore`) and the keyed noise source (`veil.randomness.ReleaseKey`): where a run's
key lives and with which permissions, what a damaged key file says, how the ledger accounts eps across keys, and
the noise's own properties (deterministic in the row's content, independent of batch and order, the stated
distributions)."""

from __future__ import annotations

import stat
from pathlib import Path

import numpy as np
import pytest
import torch

from veil.keystore import KEY_ENV, KeyStoreError, key_dir, load_key, record_release, save_key
from veil.randomness import MissingKey, MissingReleaseKey, ReleaseKey, gaussian_like


def test_the_key_dir_is_env_else_beside_a_local_store_else_cwd(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    store = tmp_path / "stores"
    store.mkdir()
    assert key_dir(f"sqlite:///{store / 'mlflow.db'}") == store / ".veil" / "keys"
    assert key_dir(f"file://{store}") == store / ".veil" / "keys"
    assert key_dir("http://127.0.0.1:5000") == tmp_path.resolve() / ".veil" / "keys"
    monkeypatch.setenv("VEIL_KEY_BASE", str(store))  # a Ray worker: the driver's directory, not its own
    assert key_dir("http://127.0.0.1:5000") == store / ".veil" / "keys"
    monkeypatch.setenv(KEY_ENV, str(tmp_path / "k"))
    assert key_dir(f"sqlite:///{store / 'mlflow.db'}") == tmp_path / "k"


def test_a_saved_key_is_owner_only_and_loads_back(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv(KEY_ENV, str(tmp_path / "keys"))
    key = ReleaseKey.new()
    path = save_key(key, "abc123")
    assert path == tmp_path / "keys" / "abc123.key"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert load_key(path) == key and key.secret.hex() not in repr(key)
    path.write_text("not a key\n")
    with pytest.raises(KeyStoreError, match="is not a release key"):
        load_key(path)
    with pytest.raises(KeyStoreError, match="cannot read the release key"):
        load_key(tmp_path / "nowhere.key")


def test_the_ledger_spends_eps_once_per_key(tmp_path: Path) -> None:
    """The same source released again under one key spends no more eps; under a second key, its eps again;
    another source starts from nothing; a key whose release is not eps-LDP leaves eps_spent unknown."""
    a, b = ReleaseKey.new(), ReleaseKey.new()
    assert record_release(tmp_path, "src1", a, 2.0) == {"keys": 1, "eps_spent": 2.0}
    assert record_release(tmp_path, "src1", a, 2.0) == {"keys": 1, "eps_spent": 2.0}
    assert record_release(tmp_path, "src1", b, 2.0) == {"keys": 2, "eps_spent": 4.0}
    assert record_release(tmp_path, "src2", b, 1.0) == {"keys": 1, "eps_spent": 1.0}
    assert record_release(tmp_path, "src2", a, None) == {"keys": 2, "eps_spent": None}
    assert stat.S_IMODE((tmp_path / "ledger.json").stat().st_mode) == 0o600
    assert a.secret.hex() not in (tmp_path / "ledger.json").read_text()


def test_a_damaged_ledger_is_refused_never_reset(tmp_path: Path) -> None:
    """Starting the ledger again would count too few keys (and too little eps) for every file it held."""
    a = ReleaseKey.new()
    record_release(tmp_path, "src1", a, 2.0)
    (tmp_path / "ledger.json").write_text('{"truncated')
    with pytest.raises(KeyStoreError, match=r"ledger\.json cannot be read .* move it aside"):
        record_release(tmp_path, "src1", ReleaseKey.new(), 2.0)
    assert (tmp_path / "ledger.json").read_text() == '{"truncated'  # left as it was, for the user to restore


def _record_many(directory: str, source: str, count: int) -> None:
    for _ in range(count):
        record_release(Path(directory), source, ReleaseKey.new(), 1.0)


def test_concurrent_releases_keep_every_ledger_entry(tmp_path: Path) -> None:
    """Two processes recording 25 keys each on one source: 50 keys (the read-modify-write is locked)."""
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_record_many, args=(str(tmp_path), "src", 25)) for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0, 0]
    assert record_release(tmp_path, "src", ReleaseKey.from_seed(0), 1.0) == {"keys": 51, "eps_spent": 51.0}


def test_an_existing_key_dir_keeps_its_mode(tmp_path: Path, monkeypatch) -> None:
    """A directory the user chose (say group-shared) is not made owner-only; the key file in it is 0600."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o2770)
    monkeypatch.setenv(KEY_ENV, str(shared))
    path = save_key(ReleaseKey.new(), "r1")
    record_release(shared, "src", ReleaseKey.new(), None)
    assert stat.S_IMODE(shared.stat().st_mode) == 0o2770 and stat.S_IMODE(path.stat().st_mode) == 0o600


def test_a_release_stamp_never_carries_a_store_password() -> None:
    from veil.apply_encoder import redacted

    assert (
        redacted("postgresql://veil:s3cret@db.internal:5432/mlflow") == "postgresql://veil:***@db.internal:5432/mlflow"
    )
    assert redacted("http://127.0.0.1:5000") == "http://127.0.0.1:5000"
    assert redacted("sqlite:////tmp/x/mlflow.db") == "sqlite:////tmp/x/mlflow.db"


def test_keyed_noise_depends_on_the_row_only() -> None:
    """The same rows give the same noise in any batch and order; a row's noise changes with its content and the
    key; -0.0 and 0.0 are one row; two draws of one release differ."""
    x = np.random.default_rng(0).normal(size=(64, 5)).astype(np.float32)
    key = ReleaseKey.from_seed(3)
    like = torch.zeros(64, 4)
    full = gaussian_like(like, key.rows(x))
    parts = torch.cat([gaussian_like(like[i : i + 10], key.rows(x[i : i + 10])) for i in range(0, 64, 10)])
    assert torch.equal(full, parts)
    perm = np.random.default_rng(1).permutation(64)
    assert torch.equal(gaussian_like(like, key.rows(x[perm])), full[perm])
    y = x.copy()
    y[0, 0] = np.nextafter(y[0, 0], np.float32(np.inf))
    changed = gaussian_like(like, key.rows(y))
    assert torch.equal(changed[1:], full[1:]) and not torch.equal(changed[0], full[0])
    assert not torch.equal(gaussian_like(like, ReleaseKey.from_seed(4).rows(x)), full)
    zeros, negzeros = np.zeros((1, 5), np.float32), -np.zeros((1, 5), np.float32)
    assert torch.equal(gaussian_like(like[:1], key.rows(zeros)), gaussian_like(like[:1], key.rows(negzeros)))
    noise = key.rows(x)
    assert not torch.equal(noise.normal(like), noise.normal(like))


def test_keyed_noise_has_its_stated_distribution() -> None:
    """200,000 rows x 4: the normal draws have mean 0 within 0.005 and std 1 within 0.005, the exponential ones
    mean 1 and std 1 within 0.01, all over 5 standard errors (seeded key: exact run to run)."""
    x = np.arange(200_000, dtype=np.float32).reshape(-1, 1)
    noise = ReleaseKey.from_seed(0).rows(x)
    g = noise.normal(torch.zeros(200_000, 4, dtype=torch.float64)).numpy()
    e = noise.exponential(torch.zeros(200_000, 4, dtype=torch.float64)).numpy()
    assert abs(g.mean()) < 0.005 and abs(g.std() - 1) < 0.005
    assert abs(e.mean() - 1) < 0.01 and abs(e.std() - 1) < 0.01 and e.min() > 0
    assert abs(np.corrcoef(g[:, 0], g[:, 1])[0, 1]) < 0.012


def test_a_missing_key_fails_at_its_first_draw_only() -> None:
    missing = MissingKey("no key at /x: pass --key")
    rows = missing.rows(np.zeros((2, 3), np.float32))
    with pytest.raises(MissingReleaseKey, match="pass --key"):
        gaussian_like(torch.zeros(2, 3), rows)


def test_a_run_keeps_its_key_unless_a_release_seed_stands_for_it(tmp_path: Path, monkeypatch) -> None:
    """`veil run` keeps the key its release was drawn under; with a release_seed the key is the seed's (nothing to
    keep: `veil release` derives it again), and a D-GPP run's keys stay on its clients."""
    from veil.datasets import load_dataset
    from veil.methods import create_method
    from veil.pipeline.execute import keep_release_key

    monkeypatch.setenv(KEY_ENV, str(tmp_path / "keys"))
    task = load_dataset("gaussian-correlated", {"n": 40, "seed": 0}, use_cache=False).task()
    m = create_method("gpp", {"release": "sample", "epochs": 0}, task)
    path = keep_release_key(m, "run1", "sqlite:///unused.db")
    assert path is not None and load_key(path) == m.release_key
    seeded = create_method("gpp", {"release": "sample", "epochs": 0, "release_seed": 1}, task)
    assert keep_release_key(seeded, "run2", "sqlite:///unused.db") is None
    assert seeded.release_source() == ReleaseKey.from_seed(1) != seeded.release_key
    dgpp = create_method("d-gpp", {"K": 2, "epochs": 0}, task)
    assert keep_release_key(dgpp, "run3", "sqlite:///unused.db") is None
    assert sorted(p.name for p in (tmp_path / "keys").iterdir()) == ["run1.key"]
