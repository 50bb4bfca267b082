"""Permanent release randomization: every stochastic release derives its noise from a secret release key (OS
entropy, never in the params) and each row's content, so it cannot be regenerated from a run's params, a row
released again gets the same z (averaging releases gains nothing), and distinct rows, or one row under two keys,
get independent noise; only an explicit release_seed derives the key from the params, and it is recorded as a
deviation and flagged by the audit.

Hyperparameters are passed explicitly so that changes of the methods' defaults do not move these numbers.
Tests on the keyed path with a fresh key assert with margins of at least 5 standard errors; the measurements
of the Laplace mechanism use a release_seed so their values are exact run to run (the mechanism's code path is
the same, only where the key comes from differs)."""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import numpy as np
import pytest
import torch

from veil.audit.settings import AuditConfig
from veil.audit.step import audit_release
from veil.datasets import load_dataset
from veil.methods import create_method
from veil.methods.configs.deviations import REPRODUCIBLE_RELEASE
from veil.methods.configs.fed_options import FederationOptions
from veil.methods.federated.core import NodeData, NodeObjective, dumps, loads
from veil.methods.federated.host import NodeHost
from veil.methods.federated.simulation import run_in_process
from veil.methods.gpp import GaussianEncoder
from veil.methods.method import Method
from veil.randomness import state_digest

TINY_NET = {"epochs": 1, "batch_size": 32, "seed": 4}
STOCHASTIC: dict[str, dict[str, Any]] = {
    "gpp": {"release": "sample", "d_z": 3, "encoder_hidden": (16, 16), "head_hidden": (8,), "k": 1, "lr": 1e-3},
    "noisy-encoder": {"noise": 0.5, "d_z": 3, "encoder_hidden": (16,), "lr": 1e-3},
    "ldp-frl": {"eps": 4.0, "d_z": 2, "clip": 1.0, "bound": "tanh", "encoder_hidden": (16,), "lr": 1e-3},
    "adjustable-ae": {
        "noise": 10.0,
        "lam": -5.0,
        "apply_g": True,
        "encoder_hidden": (16,),
        "code_width": 8,
        "classifier_hidden": (8,),
        "r_hidden": (8,),
        "decoder_hidden": (16,),
        "lr": 1e-3,
    },
    "ldp-fedavg": {"eps": 4.0, "K": 2, "d_z": 2, "clip": 1.0, "encoder_hidden": (16,), "lr": 1e-3},
    "dp-input": {"eps": 40.0, "clip": 3.0},
    "eigan": {"release_noise": 0.3, "d_z": 3, "encoder_hidden": (16,), "head_hidden": (8,)},
    "d-eigan": {"release_noise": 0.3, "K": 2, "d_z": 3, "encoder_hidden": (16,), "head_hidden": (8,)},
}
# d-gpp releases on its clients (their encoders stay there): tested through a node host below
D_GPP = {"release": "sample", "K": 2, "d_z": 3, "encoder_hidden": (16, 8), "head_hidden": (8,), "lr": 1e-3}
MATCH_ATOL = 1e-6  # two releases "match" on a row whose every entry is this close


@pytest.fixture(scope="module")
def ds():
    return load_dataset("gaussian-correlated", {"n": 400, "rho": 0.5, "seed": 0}, use_cache=False)


@pytest.fixture(scope="module")
def fitted(ds) -> dict[str, Method]:
    out = {}
    for name, values in STOCHASTIC.items():
        m = create_method(name, {**TINY_NET, **values}, ds.task())
        m.fit(ds.train)
        out[name] = m
    return out


def rebuilt(m: Method, **changes: Any) -> Method:
    """The method rebuilt from its recorded config (with `changes`) and its trained weights."""
    new = type(m)(dataclasses.replace(m.config, **changes), m.task)
    new.load_state(m.state())
    return new


def matching(a: np.ndarray, b: np.ndarray) -> float:
    """Fraction of rows on which two releases agree to MATCH_ATOL (whole rows: adjustable-ae's sigmoid
    decoder saturates, so single entries of unrelated releases can agree)."""
    return float(np.mean(np.all(np.abs(a - b) <= MATCH_ATOL, axis=1)))


def standard_noise(m: Method, x: np.ndarray, release: Callable[[], np.ndarray]) -> np.ndarray:
    """The noise of one release of rows `x`, divided by its scale: z minus the method's noiseless output, over
    sigma (Gaussian), noise (noisy encoder), release_noise (EIGAN, D-EIGAN) or b (Laplace). adjustable-ae adds its noise before a nonlinear
    decoder, so its standard normal draws are recorded where they are made instead."""
    name = m.name
    if name == "adjustable-ae":
        import veil.methods.adjustable_ae as aae

        draws: list[torch.Tensor] = []
        original = aae.gaussian_like

        def record(t: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
            draws.append(original(t, generator))
            return draws[-1]

        aae.gaussian_like = record  # type: ignore[assignment]
        try:
            release()
        finally:
            aae.gaussian_like = original
        return torch.cat(draws).numpy()
    z = release()
    xt = torch.as_tensor(x)
    with torch.no_grad():
        if name in ("ldp-frl", "ldp-fedavg", "dp-input"):
            return (z - m.encoder(xt).numpy()) / m.mechanism.scale
        if name == "noisy-encoder":
            return (z - m.encoder(xt).numpy()) / m.config.noise
        if name in ("eigan", "d-eigan"):
            return (z - m.encoder(xt).numpy()) / m.config.release_noise
        assert name == "gpp", name
        mu, logvar = m.encoder(xt)
        return ((z - mu.numpy()) / torch.exp(0.5 * logvar).numpy()).astype(np.float64)


@pytest.mark.parametrize("name", sorted(STOCHASTIC))
def test_the_same_rows_get_the_same_z_and_another_key_other_z(fitted, ds, name: str) -> None:
    """Permanent randomization: two releases of the test rows are identical bit for bit, and so are releases in
    other batch sizes and in reverse row order (to 1e-6: the encoder's own float32 sums change by an ulp with the
    batch's size); the same weights under another key (a rebuilt method draws its own) agree with them on no row
    (adjustable-ae included, whose f noise is scaled by nu, the mean of R's ReLU outputs, so a row with nu = 0
    would get none: measured, no such row)."""
    m = fitted[name]
    x = ds.test.x
    z = m.encode(x)
    np.testing.assert_array_equal(m.encode(x), z)
    np.testing.assert_allclose(m.encode(x, batch_size=7), z, atol=MATCH_ATOL, rtol=0)
    np.testing.assert_allclose(m.encode(x[::-1].copy())[::-1], z, atol=MATCH_ATOL, rtol=0)
    other = rebuilt(m)
    assert other.release_key != m.release_key and matching(other.encode(x), z) == 0.0


@pytest.mark.parametrize("name", sorted(STOCHASTIC))
def test_averaging_a_thousand_releases_returns_one_release(fitted, ds, name: str) -> None:
    """The attack that stripped fresh noise (the mean of N releases of the same rows tends to the noiseless
    output): the mean of 1,000 releases of 50 test rows is the first release, to float32 rounding of the mean."""
    m = fitted[name]
    x = ds.test.x[:50]
    z = m.encode(x)
    total = np.zeros(z.shape, np.float64)
    for _ in range(1000):
        total += m.encode(x)
    np.testing.assert_allclose(total / 1000, z, atol=1e-5, rtol=1e-6)


@pytest.mark.parametrize("name", sorted(STOCHASTIC))
def test_noise_is_independent_across_rows_and_keys(fitted, ds, name: str) -> None:
    """8,000 distinct rows released under two keys (the same weights): the correlation of their standardised
    noise is 0 within 0.05 (over >= 16,000 entries the standard error is <= 0.008, so 0.05 is over 6 of them), as
    is that of neighbouring rows under one key, and each release has its stated spread (std 1 for Gaussian noise,
    sqrt(2) for Laplace(1)) within 5% (over >= 16,000 entries the std's standard error is <= 0.6% for Gaussian
    and <= 1.1% for Laplace noise)."""
    m = fitted[name]
    x = np.random.default_rng(5).normal(size=(8000, ds.d_in)).astype(np.float32)
    other = rebuilt(m)
    n1 = standard_noise(m, x, lambda: m.encode(x))
    n2 = standard_noise(other, x, lambda: other.encode(x))
    want_std = np.sqrt(2.0) if name in ("ldp-frl", "ldp-fedavg", "dp-input") else 1.0
    for n in (n1, n2):
        assert n.size >= 16000 and n.std() == pytest.approx(want_std, rel=0.05)
    for a, b in ((n1, n2), (n1[:-1], n1[1:])):
        corr = float(np.corrcoef(a.ravel(), b.ravel())[0, 1])
        assert abs(corr) <= 0.05, corr


@pytest.mark.parametrize("name", sorted(STOCHASTIC))
def test_release_noise_cannot_be_regenerated_from_the_params(fitted, ds, name: str) -> None:
    """An attacker rebuilds the method from its recorded config and weights and tries every integer param
    (seed, d_z, epochs, batch_size, K, ...) offset by -8..8, plus seed + 7 (the old scheme), both as the
    global torch seed before `encode` and as a release_seed (its first three calls): no candidate
    agrees with the release on a single row (under the old seed + 7 scheme every row agreed)."""
    m = fitted[name]
    x = ds.test.x[:64]
    z = m.encode(x)
    values = dataclasses.asdict(m.config)
    ints = [v for v in values.values() if isinstance(v, int) and not isinstance(v, bool)]
    candidates = sorted({v + off for v in ints for off in range(-8, 9) if v + off >= 0} | {m.config.seed + 7})
    attacker = rebuilt(m)
    for s in candidates:
        torch.manual_seed(s)
        assert matching(z, attacker.encode(x)) == 0.0, ("torch seed", s)
        guess = rebuilt(m, release_seed=s)
        for call in range(3):
            assert matching(z, guess.encode(x)) == 0.0, ("release_seed", s, call)


def test_ldp_frl_noise_has_the_calibrated_laplace_scale(ds) -> None:
    """z - v over 20,000 rows x d_z = 3 (60,000 draws) with c = 1, eps = 4: Delta = 2*c*d_z = 6, so
    b = Delta/eps = 1.5. E|noise| = b within 2% (the standard error is 0.4%) and E[noise^2] = 2 b^2 within 5%
    (standard error 1.8%). Measured at release_seed 0: mean |noise| / b = 1.004, E[noise^2] / b^2 = 2.02."""
    m = create_method(
        "ldp-frl", {"eps": 4.0, "d_z": 3, "clip": 1.0, "bound": "tanh", "epochs": 0, "release_seed": 0}, ds.task()
    )
    b = 2 * 1.0 * 3 / 4.0
    assert m.mechanism.scale == b
    x = torch.randn(20000, ds.d_in, generator=torch.Generator().manual_seed(0)).numpy()
    with torch.no_grad():
        noise = m.encode(x) - m.encoder(torch.as_tensor(x)).numpy()
    assert np.abs(noise).mean() / b == pytest.approx(1.0, rel=0.02)
    assert (noise**2).mean() / b**2 == pytest.approx(2.0, rel=0.05)


def test_ldp_frl_release_is_eps_ldp_between_opposite_extremes(ds) -> None:
    """d_z = 1, c = 1, eps = 1 (b = 2), with the extractor set by hand so that v(x1) = +c and v(x2) = -c, the
    two extremes. 300,000 releases of each; the log-ratio of their histograms (bins of 0.5, only bins with at
    least 2,000 draws of each, standard error <= 0.032) is at most eps + 0.15 everywhere and reaches
    eps - 0.15, and beyond |z| > c, where the true ratio is exactly +-eps, the pooled tails give +-eps within
    0.03 (standard error 0.005). Measured at release_seed 0: worst bin 1.027, pooled tails 1.000 and -0.998
    (fresh noise, 3 runs: worst bin 1.03-1.05)."""
    eps, c = 1.0, 1.0
    m = create_method(
        "ldp-frl",
        {"eps": eps, "d_z": 1, "clip": c, "bound": "clip", "encoder_hidden": (2,), "epochs": 0, "release_seed": 0},
        ds.task(),
    )
    first, last = m.encoder.net[0], m.encoder.net[2]
    with torch.no_grad():
        first.weight.zero_()
        first.weight[0, 0], first.weight[1, 0] = 1.0, -1.0  # relu(x0), relu(-x0)
        first.bias.zero_()
        last.weight.copy_(torch.tensor([[10.0, -10.0]]))  # 10 * x0, clipped to [-c, c]
        last.bias.zero_()
    n = 300_000
    # distinct rows (the noise is keyed by the row): column 0 alone reaches v, the others tell the rows apart
    x1 = np.random.default_rng(1).normal(size=(n, ds.d_in)).astype(np.float32)
    x1[:, 0] = 1.0
    with torch.no_grad():
        v = m.encoder(torch.as_tensor(np.stack([x1[0], -x1[0]]))).numpy().ravel()
    np.testing.assert_array_equal(v, [c, -c])
    assert len(np.unique(x1, axis=0)) == n
    z1, z2 = m.encode(x1).ravel(), m.encode(-x1).ravel()
    edges = np.arange(-20.0, 20.0 + 1e-9, 0.5)
    h1, h2 = np.histogram(z1, edges)[0], np.histogram(z2, edges)[0]
    keep = (h1 >= 2000) & (h2 >= 2000)
    ratio = np.log(h1[keep] / h2[keep])
    assert keep.sum() >= 10 and eps - 0.15 <= np.abs(ratio).max() <= eps + 0.15, ratio
    upper = np.log((z1 > c).mean() / (z2 > c).mean())
    lower = np.log((z1 < -c).mean() / (z2 < -c).mean())
    assert upper == pytest.approx(eps, abs=0.03) and lower == pytest.approx(-eps, abs=0.03), (upper, lower)


@pytest.mark.parametrize("name", sorted(STOCHASTIC))
def test_release_seed_reproduces_releases(fitted, ds, name: str) -> None:
    """Two copies with release_seed 11 release identical z (the key is derived from the seed); another seed is
    another key, and agrees on no row."""
    a, b = rebuilt(fitted[name], release_seed=11), rebuilt(fitted[name], release_seed=11)
    first = a.encode(ds.test.x)
    np.testing.assert_array_equal(b.encode(ds.test.x), first)
    np.testing.assert_array_equal(a.encode(ds.test.x), first)
    assert matching(first, rebuilt(fitted[name], release_seed=12).encode(ds.test.x)) == 0.0
    assert a.params()["release_seed"] == 11 and a.params()["deviation.release_seed"] == REPRODUCIBLE_RELEASE
    assert fitted[name].params()["release_seed"] is None and "deviation.release_seed" not in fitted[name].params()


def test_audit_flags_a_reproducible_release(fitted, ds) -> None:
    cfg = AuditConfig(epochs=1, hidden=(8,))
    fresh = audit_release(fitted["ldp-frl"], ds, cfg)
    assert fresh.tags["veil.release_reproducible"] == "false" and fresh.report.warnings == []
    pinned = audit_release(rebuilt(fitted["ldp-frl"], release_seed=2), ds, cfg)
    assert pinned.tags["veil.release_reproducible"] == "true"
    warning = f"> **WARNING**: release_seed=2 is set: {REPRODUCIBLE_RELEASE}"
    assert pinned.report.to_markdown().splitlines()[0] == warning
    assert pinned.report.to_dict()["warnings"] == [warning.removeprefix("> **WARNING**: ")]


def uploads(ds, release_seed: int | None) -> list[np.ndarray]:
    """The sanitized z every d-gpp client uploads in a 2-round federation, as captured on the wire."""
    m = create_method("d-gpp", {**TINY_NET, **D_GPP, "release_seed": release_seed}, ds.task())
    seen: list[tuple[str, int, int, str, bytes]] = []
    run_in_process(m, ds.train, options=FederationOptions(), tap=lambda *msg: seen.append(msg))
    return [loads(blob)["payload"]["z"] for d, _, _, kind, blob in seen if d == "up" and kind == "update"]


def test_d_gpp_uploads_draw_fresh_noise_unless_release_seed(ds) -> None:
    """A client's uploaded z goes to the aggregator: at one seed, two federations upload different z (so the
    noise is not derived from the logged seed); with one release_seed they upload the same z."""
    a, b = uploads(ds, None), uploads(ds, None)
    assert len(a) == len(b) >= 2 and all(x.shape == y.shape for x, y in zip(a, b))
    assert matching(a[0], b[0]) == 0.0  # round 1: same weights and rows, different noise
    c, d = uploads(ds, 9), uploads(ds, 9)
    for x, y in zip(c, d):
        np.testing.assert_array_equal(x, y)


def client_host(ds, release_seed: int | None) -> NodeHost:
    """A node host of d-gpp client 0 holding the first 200 train rows and the test rows 0..49."""
    m = create_method("d-gpp", {**TINY_NET, **D_GPP, "release_seed": release_seed}, ds.task())
    rows = np.arange(200)
    data = NodeData(
        0,
        ds.train.take(rows),
        NodeObjective(tuple(ds.task().utility), tuple(ds.task().sensitive)),
        rows=rows,
        test_x=ds.test.x[:50],
        test_rows=np.arange(50),
    )
    return NodeHost(type(m), m.config, m.task, [data])


def client_release(host: NodeHost, request: Any = None) -> dict[str, Any]:
    return loads(host.release({0: dumps(request)})[0])


def test_d_gpp_client_releases_draw_keyed_noise(ds) -> None:
    """A client's release of its own rows is a release: two clients with the same seed and weights (each its own
    release key) release z that agrees on no row, each with standard normal noise around its encoder's mean; with
    one release_seed they release the same bytes. The key is fresh OS entropy, so the sample moments vary run to
    run: over 600 draws the std's
    standard error is 2.9% and the mean's 0.041, and the bounds (12%, 0.2) sit past 4 standard errors, where a
    correct mechanism fails less than once in 10,000 runs (the earlier 5% bound, under 2, failed about 1 in 20)."""
    a, b = client_host(ds, None), client_host(ds, None)
    za, zb = client_release(a), client_release(b)
    for split, n in (("train", 200), ("test", 50)):
        assert za[split]["z"].shape == (n, 3) and matching(za[split]["z"], zb[split]["z"]) == 0.0
    group, node = a.method.groups[0], a.nodes[0]  # type: ignore[attr-defined]
    enc = GaussianEncoder(ds.d_in, (16, 8), 3)
    enc.load_state_dict(group.enc.state_dict(node.slot[1]))
    with torch.no_grad():
        mu, logvar = enc(torch.as_tensor(ds.train.x[:200]))
    noise = (za["train"]["z"] - mu.numpy()) / torch.exp(0.5 * logvar).numpy()
    assert noise.std() == pytest.approx(1.0, rel=0.12) and abs(noise.mean()) < 0.2
    pinned = [client_host(ds, 9).release({0: dumps(None)})[0] for _ in range(2)]
    assert pinned[0] == pinned[1]


def test_d_gpp_client_replays_a_release_until_it_trains_again(ds) -> None:
    """Asked again for the same rows before it trained again (a coordinator restarted mid-release), a client sends
    the very same release, not a second draw of noise for the same rows; asked for some of those rows, it sends
    their same z (its noise is keyed by its release key, its encoder's weights and the row). After a round its
    encoder has moved, and its next release draws noise independent of the first: were it the same per row,
    an aggregator joining the two releases by row id would difference it away (the wire section's linked view).
    Over the 600 standardized draws the correlation's standard error is 0.041; the bound 0.2 sits past 4.8 of
    them (the release_seed pins the draws, so the figure is the same every run)."""
    host = client_host(ds, 9)
    first = host.release({0: dumps(None)})[0]
    assert host.release({0: dumps(None)})[0] == first
    some = client_release(host, {"train": np.arange(10), "test": np.arange(5)})
    assert some["train"]["rows"].tolist() == list(range(10)) and some["test"]["rows"].tolist() == list(range(5))
    np.testing.assert_allclose(some["train"]["z"], loads(first)["train"]["z"][:10], atol=MATCH_ATOL, rtol=0)
    x = ds.train.x[:200]
    group, node = host.method.groups[0], host.nodes[0]  # type: ignore[attr-defined]

    def standardized(z: np.ndarray) -> np.ndarray:
        enc = GaussianEncoder(ds.d_in, (16, 8), 3)
        enc.load_state_dict(group.enc.state_dict(node.slot[1]))
        with torch.no_grad():
            mu, logvar = enc(torch.as_tensor(x))
        return (z - mu.numpy()) / torch.exp(0.5 * logvar).numpy()

    before = standardized(loads(first)["train"]["z"])
    host.join({0: dumps({})})
    host.run_round(1, {0: dumps(None)})
    # round 1's encoder step arrives with round 2's downlink (psi); move the weights as a step would
    i = node.slot[1]
    group.enc.set_flat(i, group.enc.flat_all()[i] + 1e-3)
    again = standardized(loads(host.release({0: dumps(None)})[0])["train"]["z"])
    assert again.std() == pytest.approx(1.0, rel=0.12) and abs(np.corrcoef(before.ravel(), again.ravel())[0, 1]) < 0.2


def test_one_encoder_releases_a_row_as_one_z(ds) -> None:
    """The subkey is a function of the node's key and the encoder's weights: the same encoder (even rebuilt from its
    state) releases a row as the same z in any call (in another batch to MATCH_ATOL: the encoder's float32 sums
    change by an ulp with the batch's size); its weights nudged by 1e-6 draw other noise; a subkey differs
    from its key and from another label's, and is the same for the same label."""
    host = client_host(ds, 9)
    m, node = host.method, host.nodes[0]  # type: ignore[attr-defined]
    x = ds.train.x[:50]
    z = m.release_rows(node, x, node.release_key)
    np.testing.assert_array_equal(z, m.release_rows(node, x, node.release_key))
    np.testing.assert_allclose(m.release_rows(node, x[10:20], node.release_key), z[10:20], atol=MATCH_ATOL, rtol=0)
    key = node.release_key
    assert key.derive(b"a") == key.derive(b"a") != key.derive(b"b") and key.derive(b"a") != key
    state = m.groups[0].enc.state_dict(node.slot[1])
    nudged = {k: v + 1e-6 for k, v in state.items()}
    assert state_digest(state) == state_digest({k: v.clone() for k, v in state.items()}) != state_digest(nudged)
