"""Distributed GPP's protocol: sensitive labels never leave a client. Every message that crosses the
transport is captured at the coordinator's tap (the serialized bytes, as sent) and inspected: the
sensitive label's name appears nowhere, uploads hold exactly {z, u} with the utility labels' names, and
no array equals or contains any window of a client's sensitive column."""

from __future__ import annotations

import numpy as np

from veil.datasets import make_dataset
from veil.datasets.partition import partition
from veil.methods import create_method
from veil.methods.federated.core import iter_arrays, loads
from veil.methods.federated.simulation import FederationOptions, run_in_process


def contains_window(haystack: np.ndarray, needle: np.ndarray) -> bool:
    """Whether `needle` occurs as a contiguous run anywhere in the flattened `haystack` (as numbers)."""
    h = np.asarray(haystack, dtype=np.float64).ravel()
    n = np.asarray(needle, dtype=np.float64).ravel()
    if len(n) == 0 or len(h) < len(n):
        return False
    win = np.lib.stride_tricks.sliding_window_view(h, len(n))
    return bool(np.any(np.all(win == n, axis=1)))


def test_no_message_carries_the_sensitive_label():
    rng = np.random.default_rng(0)
    n = 600
    u = rng.integers(0, 2, n)
    secret = rng.integers(0, 5, n)  # 5 classes, independent of u: any copy would stand out
    x = rng.normal(size=(n, 6)) + np.stack([u, u, secret, secret, np.zeros(n), np.zeros(n)], 1)
    ds = make_dataset("secret-test", x, {"digit_u": u}, {"secret_s": secret}, test_fraction=0.25, seed=0)
    k = 3
    m = create_method(
        "d-gpp",
        {
            "K": k,
            "epochs": 2,
            "batch_size": 16,
            "d_z": 3,
            "encoder_hidden": [16, 8],
            "head_hidden": [8],
            "seed": 0,
            "lr": 1e-3,
        },
        ds.task(),
    )
    seen: list[tuple[str, int, int, str, bytes]] = []
    out = run_in_process(m, ds.train, options=FederationOptions(), tap=lambda *msg: seen.append(msg))
    assert len(out.records) == 2 * int(np.ceil(150 / 16)) and all(len(r.completed) == k for r in out.records)

    parts = partition(ds.train, "iid", k, 0)  # the same partition run_in_process used
    s_cols = [ds.train.sensitive["secret_s"][p] for p in parts]
    kinds = {(d, kind) for d, _, _, kind, _ in seen}
    assert {("up", "update"), ("down", "round"), ("down", "join"), ("down", "finalize"), ("up", "export")} <= kinds
    for direction, _rnd, _node, kind, blob in seen:
        assert b"secret" not in blob, (direction, kind)
        msg = loads(blob)
        for path, arr in iter_arrays(msg):
            assert "secret" not in path and "sensitive" not in path
            if arr is None:
                continue
            for s in s_cols:
                assert not (arr.size == s.size and np.array_equal(arr.ravel(), s)), (direction, kind, path)
                assert not contains_window(arr, s[:12]), (direction, kind, path)
        if direction == "up" and kind == "update":
            assert set(msg) == {"num_examples", "kind", "payload", "metrics"}
            assert set(msg["payload"]) == {"z", "u"} and set(msg["payload"]["u"]) == {"digit_u"}
            assert msg["payload"]["z"].dtype == np.float32 and msg["payload"]["u"]["digit_u"].dtype == np.int32
            assert set(np.unique(msg["payload"]["u"]["digit_u"])) <= {0, 1}
            assert all(k.startswith("loss/") for k in msg["metrics"])
    # and the utility labels that do travel are the client's own u for the rows it sampled
    ups = [loads(b) for d, _, node, kind, b in seen if d == "up" and kind == "update"]
    assert sum(len(up["payload"]["u"]["digit_u"]) for up in ups) == sum(len(up["payload"]["z"]) for up in ups)
