"""Where the audit's probes train (`audit.device`): the choice is validated up front, "auto" takes a visible CUDA GPU,
and on a GPU the engine trains the plain loop's probes (checked on a lent GPU machine: benchmarks/gpu.py runs the
CUDA tests below; CI's machines have no GPU, so there they are skipped)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from reference_probe import reference_audit, reference_classifier

from veil.audit import AuditConfig, audit
from veil.audit.probes import audit_many
from veil.audit.train import probe_device, train_classifier
from veil.config import build
from veil.datasets.dataset import Split
from veil.errors import ConfigError

CUDA = torch.cuda.is_available()
needs_cuda = pytest.mark.skipif(not CUDA, reason="needs a CUDA GPU (run on a lent GPU machine: benchmarks/gpu.py)")


def data(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    u, s = rng.integers(0, 3, n), rng.integers(0, 2, n)
    z = rng.standard_normal((n, 6)) + 1.5 * np.eye(3, 6)[u] + np.eye(2, 6, 3)[s] * (u[:, None] > 0)
    return z.astype(np.float32), u, s


def test_an_unknown_device_is_refused_naming_the_field_and_the_choices() -> None:
    with pytest.raises(ConfigError, match=r"audit: invalid value for 'device': 'gpu' \(allowed: auto \| cpu \| cuda\)"):
        build(AuditConfig, {"device": "gpu"}, where="audit")
    with pytest.raises(ConfigError, match=r"'device'.*allowed: auto \| cpu \| cuda"):
        probe_device("tpu")


def test_cpu_is_the_cpu_and_auto_is_a_gpu_only_when_one_is_visible() -> None:
    assert probe_device("cpu") == torch.device("cpu")
    assert probe_device("auto").type == ("cuda" if CUDA else "cpu")
    assert AuditConfig().device == "auto" and AuditConfig().probe_settings()["device"] == "auto"


@pytest.mark.skipif(CUDA, reason="checks the fallback where no GPU is visible")
def test_cuda_without_a_gpu_warns_and_trains_on_the_cpu() -> None:
    with pytest.warns(UserWarning, match="audit.device: cuda, but no CUDA device is visible"):
        assert probe_device("cuda") == torch.device("cpu")
    z, u, _ = data(200, 0)
    kw = {"hidden": (16,), "epochs": 2, "lr": 1e-2, "batch_size": 32, "seed": 4}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        on_cuda = train_classifier(z, u, 3, device="cuda", **kw).predict_proba(z)
    np.testing.assert_array_equal(on_cuda, train_classifier(z, u, 3, **kw).predict_proba(z))


@needs_cuda
def test_a_probe_on_the_gpu_equals_the_plain_loop_on_the_cpu() -> None:
    """The audit's own probe (256-128, lr 1e-3, batch 128): every parameter within 1e-4 of the CPU plain loop's after
    15 Adam steps (the same initialisation and minibatch order: both come from CPU generators), probabilities within
    1e-4; the classifier comes back on the CPU."""
    z, u, _ = data(640, 5)
    kw = {"hidden": (256, 128), "epochs": 3, "lr": 1e-3, "batch_size": 128, "seed": 11, "standardize": True}
    got = train_classifier(z, u, 3, device="cuda", **kw)
    want = reference_classifier(z, u, 3, **kw)
    for (name, a), b in zip(got.net.state_dict().items(), want.net.state_dict().values()):
        assert a.device.type == "cpu" and float((a - b).abs().max()) < 1e-4, name
    np.testing.assert_allclose(got.predict_proba(z), want.predict_proba(z), atol=1e-4)


@needs_cuda
def test_an_audit_and_a_population_on_the_gpu_score_as_on_the_cpu() -> None:
    """Every label's AUC and gap within 1e-3 of the CPU plain loop's, seeds 0-2, for one audit and for each of three
    members of `audit_many` (differently sized members: padded steps on the device)."""
    classes = {"u": 3, "s": 2}
    members = [data(n, i) for i, n in enumerate((600, 450, 300))]
    z_te, u_te, s_te = data(400, 9)
    te = Split(z_te, {"u": u_te}, {"s": s_te})
    trains = [Split(z, {"u": u}, {"s": s}) for z, u, s in members]
    for seed in (0, 1, 2):
        cfg = AuditConfig(epochs=5, seed=seed, device="cuda")
        on_cpu = [reference_audit(z, tr, z_te, te, classes, cfg).metrics() for (z, _, _), tr in zip(members, trains)]
        solo = audit(members[0][0], trains[0], z_te, te, classes, cfg).metrics()
        many = audit_many([z for z, _, _ in members], trains, [z_te] * 3, [te] * 3, classes, cfg)
        for got, want in [(solo, on_cpu[0])] + [(m.metrics(), w) for m, w in zip(many, on_cpu)]:
            for key in ("utility_auc/u", "adversary_auc/s", "privacy_gap/s"):
                assert abs(got[key] - want[key]) < 1e-3, (seed, key, got[key], want[key])
