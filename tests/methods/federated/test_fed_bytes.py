"""Communication accounting: bytes are the lengths of the serialized messages, and they match the analytic
payloads: D-EIGAN sends round(phi * |theta_E|) float32 values (sparse, index set regenerated from a seed),
distributed GPP b * (d_z + d_u) numbers (z float32, u int32) per round and, at the end, (4 d_z + 8) bytes per row
of each client's own rows (z float32, row id int64), FedAvg |omega| float32 both ways."""

from __future__ import annotations

import numpy as np
import pytest

from veil.datasets import load_dataset
from veil.datasets.partition import partition
from veil.methods import create_method
from veil.methods.federated.core import dumps, sparse_count
from veil.methods.federated.simulation import run_in_process

ENVELOPE = 600  # pickle framing, the seed, the metrics dict: a few hundred bytes at most


@pytest.fixture(scope="module")
def ds():
    return load_dataset("gaussian-octant", {"n": 400})


def n_params(module) -> int:
    return sum(p.numel() for p in module.parameters())


@pytest.mark.parametrize("phi", [1.0, 0.5, 0.1])
def test_d_eigan_bytes_match_phi_theta(ds, phi):
    m = create_method("d-eigan", {"K": 3, "phi": phi, "epochs": 3, "d_z": 3, "encoder_hidden": [32]}, ds.task())
    size = n_params(m.encoder)
    count = sparse_count(phi, size)
    out = run_in_process(m, ds.train)
    assert len(out.records) == 3
    for _j, join in out.join_bytes.items():  # the initial download is the whole theta_E
        assert 4 * size <= join <= 4 * size + ENVELOPE
    for r in out.records:
        assert set(r.bytes_up) == {0, 1, 2}
        for k, b in r.bytes_up.items():
            assert r.payload_up[k] == 4 * count  # exactly phi*|theta| float32 values
            assert 4 * count < b <= 4 * count + ENVELOPE
        for b in r.bytes_down.values():
            if r.round == 1:
                assert b == len(dumps(None))  # nothing to overwrite yet: the node has the initial theta
            else:
                assert 4 * count < b <= 4 * count + ENVELOPE
    totals = out.totals()
    assert totals["bytes_up_total"] == sum(sum(r.bytes_up.values()) for r in out.records)
    assert totals["bytes_down_total"] == (
        sum(sum(r.bytes_down.values()) for r in out.records) + sum(out.join_bytes.values())
    )


def test_d_gpp_uploads_are_b_times_dz_plus_du(ds):
    d_z, b = 4, 16
    m = create_method(
        "d-gpp",
        {"K": 3, "epochs": 1, "batch_size": b, "d_z": d_z, "encoder_hidden": [16, 8], "head_hidden": [8]},
        ds.task(),
    )
    d_u = len(ds.task().utility)
    psi = n_params(m.utility)
    out = run_in_process(m, ds.train)
    assert len(out.records) == int(np.ceil(100 / b))
    for r in out.records:
        for k, nbytes in r.bytes_up.items():
            assert r.payload_up[k] == 4 * b * (d_z + d_u)
            assert 4 * b * (d_z + d_u) < nbytes <= 4 * b * (d_z + d_u) + ENVELOPE
        for nbytes in r.bytes_down.values():  # psi of the previous round (none in the first)
            assert (nbytes == len(dumps(None))) if r.round == 1 else (4 * psi < nbytes <= 4 * psi + ENVELOPE)
    assert all(4 * psi < v <= 4 * psi + ENVELOPE for v in out.final_bytes.values())  # last broadcast
    # the end: each client releases z (float32) and the row id (int64) of each of its own rows, nothing more
    sizes = {k: len(p) for k, p in enumerate(partition(ds.train, "iid", 3, 0))}
    assert out.release_up.keys() == sizes.keys() and out.records[-1].release_up == out.release_up
    for k, nbytes in out.release_up.items():
        assert (4 * d_z + 8) * sizes[k] < nbytes <= (4 * d_z + 8) * sizes[k] + ENVELOPE
    assert all(v == len(dumps(None)) for v in out.release_down.values())  # "every row you own"
    totals = out.totals()
    assert totals["bytes_release_up"] == sum(out.release_up.values())
    assert totals["bytes_up_total"] == sum(sum(r.bytes_up.values()) for r in out.records) + sum(out.release_up.values())


def test_fedavg_moves_every_parameter(ds):
    m = create_method("ldp-fedavg", {"K": 4, "epochs": 2, "d_z": 2}, ds.task())
    omega = sum(n_params(x) for x in (m.encoder, m.utility, m.side))
    out = run_in_process(m, ds.train)
    for r in out.records:
        assert all(r.payload_up[k] == 4 * omega for k in r.bytes_up)
        assert all(4 * omega < v <= 4 * omega + ENVELOPE for v in r.bytes_up.values())
        assert all(4 * omega < v <= 4 * omega + ENVELOPE for v in r.bytes_down.values())
