"""Distributed GPP's protocol: sensitive labels never leave a client. Every message that crosses the
transport is captured at the coordinator's tap (the serialized bytes, as sent) and inspected: the
sensitive label's name appears nowhere, uploads hold exactly {z, u} with the utility labels' names, and
no array equals or contains any window of a client's sensitive column. Nothing a client computes from s
travels either: with the networks frozen, changing one client's s leaves every upload byte-identical (in
process and on Ray actors), while that client's own losses, logged node-locally, do change."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from mlflow.tracking import MlflowClient

from veil.datasets import make_dataset
from veil.datasets.base import Dataset, Split
from veil.datasets.partition import partition
from veil.methods import create_method
from veil.methods.federated.core import iter_arrays, loads
from veil.methods.federated.simulation import FederationOptions, run_in_process
from veil.platform.executors import NODE_LOCAL_NOTE
from veil.platform.fed.runtime import plan_on, run_planned
from veil.run import RunSpec, execute


def contains_window(haystack: np.ndarray, needle: np.ndarray) -> bool:
    """Whether `needle` occurs as a contiguous run anywhere in the flattened `haystack` (as numbers)."""
    h = np.asarray(haystack, dtype=np.float64).ravel()
    n = np.asarray(needle, dtype=np.float64).ravel()
    if len(n) == 0 or len(h) < len(n):
        return False
    win = np.lib.stride_tricks.sliding_window_view(h, len(n))
    return bool(np.any(np.all(win == n, axis=1)))


def secret_dataset() -> Dataset:
    rng = np.random.default_rng(0)
    n = 600
    u = rng.integers(0, 2, n)
    secret = rng.integers(0, 5, n)  # 5 classes, independent of u: any copy would stand out
    x = rng.normal(size=(n, 6)) + np.stack([u, u, secret, secret, np.zeros(n), np.zeros(n)], 1)
    return make_dataset("secret-test", x, {"digit_u": u}, {"secret_s": secret}, test_fraction=0.25, seed=0)


def test_no_message_carries_the_sensitive_label():
    ds = secret_dataset()
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
        if direction == "up" and kind == "update":  # (z, u), the row count and the message kind; no losses
            assert msg.keys() == {"num_examples", "kind", "payload"} and msg["kind"] == "representations"
            assert set(msg["payload"]) == {"z", "u"} and set(msg["payload"]["u"]) == {"digit_u"}
            assert msg["payload"]["z"].dtype == np.float32 and msg["payload"]["u"]["digit_u"].dtype == np.int32
            assert msg["num_examples"] == len(msg["payload"]["z"]) == len(msg["payload"]["u"]["digit_u"])
            assert set(np.unique(msg["payload"]["u"]["digit_u"])) <= {0, 1}
    # and the utility labels that do travel are the client's own u for the rows it sampled
    ups = [loads(b) for d, _, node, kind, b in seen if d == "up" and kind == "update"]
    assert sum(len(up["payload"]["u"]["digit_u"]) for up in ups) == sum(len(up["payload"]["z"]) for up in ups)


# With lr = 1e-30 every Adam step is below half an ulp of every float32 weight, so no network changes and
# each upload is a function of x, u and the client's own random streams. What a client computes from s (its
# adversary's loss) still differs when s does: if any of it reached an upload, the bytes would differ.
FROZEN = {
    "K": 3,
    "epochs": 1,
    "batch_size": 16,
    "d_z": 3,
    "encoder_hidden": [16, 8],
    "head_hidden": [8],
    "k": 2,
    "lr": 1e-30,
    "beta": [1.0],
    "lambda_kl": [0.01],
    "privacy_loss": "neg-ce",
    "release": "sample",
    "seed": 0,
    "release_seed": 0,  # an uploaded z is a release: pinned, so two runs can be compared byte for byte
    "node_metrics": True,
}


def with_other_secret(train: Split, rows: np.ndarray) -> Split:
    """`train` with node rows `rows` given another sensitive class (x and u unchanged)."""
    s = train.sensitive["secret_s"].copy()
    s[rows] = (s[rows] + 1) % 5
    return Split(train.x, train.utility, {"secret_s": s})


def uploads(seen: list[tuple[str, int, int, str, bytes]]) -> dict[tuple[int, int], bytes]:
    return {(rnd, node): blob for d, rnd, node, kind, blob in seen if d == "up" and kind == "update"}


def run_tapped(
    ds: Dataset, train: Split, options: FederationOptions, k: int = 3
) -> tuple[dict[tuple[int, int], bytes], Any]:
    m = create_method("d-gpp", {**FROZEN, "K": k}, ds.task())
    seen: list[tuple[str, int, int, str, bytes]] = []
    out = run_in_process(m, train, options=options, tap=lambda *msg: seen.append(msg))
    return uploads(seen), out


def test_uploads_are_byte_identical_when_a_clients_s_changes():
    ds = secret_dataset()
    node1 = partition(ds.train, "iid", 3, 0)[1]
    ups, out = run_tapped(ds, ds.train, FederationOptions())
    ups2, out2 = run_tapped(ds, with_other_secret(ds.train, node1), FederationOptions())
    assert len(ups) == 3 * 10 and ups.keys() == ups2.keys()  # 10 rounds (150 rows / 16) x 3 clients
    assert all(ups[key] == ups2[key] for key in ups), [key for key in ups if ups[key] != ups2[key]]
    # node 1's own adversary loss did change with its s (measured: 1.78 -> 1.61 in round 2), so the
    # uploads above would differ if it travelled; it reaches the log only as a node-local metric
    adv = [
        (r.node_local[1]["loss/adversary"], r2.node_local[1]["loss/adversary"])
        for r, r2 in zip(out.records[1:], out2.records[1:])
    ]
    assert all(abs(a - b) > 1e-3 for a, b in adv), adv
    assert all(r.node_local[0] == r2.node_local[0] for r, r2 in zip(out.records[1:], out2.records[1:]))
    assert out.records[0].node_local == {}  # round 1 has no Phase 3 yet, so no loss to log
    assert out.records[1].metrics == {} and set(out.records[1].node_local) == {0, 1, 2}
    row = out.records[1].row()
    mean_adv = np.mean([out.records[1].node_local[k]["loss/adversary"] for k in range(3)])
    assert row["node_local/loss/adversary"] == pytest.approx(mean_adv, rel=1e-12)
    assert not any(k.startswith("loss/") for k in row)


def test_node_metrics_off_logs_nothing_and_sends_the_same_bytes():
    ds = secret_dataset()
    ups, out = run_tapped(ds, ds.train, FederationOptions())
    m = create_method("d-gpp", {**FROZEN, "node_metrics": False}, ds.task())
    seen: list[tuple[str, int, int, str, bytes]] = []
    off = run_in_process(m, ds.train, tap=lambda *msg: seen.append(msg))
    assert uploads(seen) == ups
    assert all(r.node_local == {} for r in off.records)
    assert not any(k.startswith("node_local/") for row in off.history for k in row)
    assert {"node_local/loss/adversary", "node_local/loss/kl"} <= set(out.history[1])


def file_tap(folder: str):
    """A tap that writes every upload to `folder` (it runs inside the coordinator actor on Ray)."""

    def tap(direction: str, rnd: int, node: int, kind: str, blob: bytes) -> None:
        if direction == "up" and kind == "update":
            (Path(folder) / f"{rnd}-{node}.bin").write_bytes(blob)

    return tap


@pytest.mark.ray
def test_ray_actor_uploads_match_in_process_whatever_s(ray_local, tmp_path):
    ds = secret_dataset()
    node1 = partition(ds.train, "iid", 2, 0)[1]
    ups, _ = run_tapped(ds, ds.train, FederationOptions(nodes_per_host=1), k=2)  # one host per node, as on Ray
    m = create_method("d-gpp", {**FROZEN, "K": 2}, ds.task())
    plan = plan_on("ray-actors", m, "d-gpp", with_other_secret(ds.train, node1), options=FederationOptions(), seed=0)
    plan.rounds = 3  # the first three rounds are enough: the uploads after the first Phase 3 included
    out = run_planned(plan, tap=file_tap(str(tmp_path)))
    assert [len(r.completed) for r in out.records] == [2, 2, 2]
    got = {tuple(int(p) for p in f.stem.split("-")): f.read_bytes() for f in tmp_path.glob("*.bin")}
    assert sorted(got) == [(r, k) for r in (1, 2, 3) for k in range(2)]
    assert all(got[key] == ups[key] for key in got)
    assert set(out.records[1].node_local) == {0, 1}  # the side channel works across processes


def test_node_local_metrics_reach_mlflow_marked_as_such(in_tmp):
    params = {**FROZEN, "lr": 1e-3, "K": 2, "epochs": 1, "batch_size": 64}
    spec = RunSpec(
        method="d-gpp",
        dataset="gaussian-correlated",
        params=params,
        dataset_params={"n": 300},
        audit={"epochs": 2, "hidden": [8]},
        runtime="in-process",
        federation={"per_node_audit": False},
    )
    result = execute(spec)
    client = MlflowClient(tracking_uri=result.tracking_uri)
    run = client.get_run(result.run_id)
    assert run.data.tags["veil.node_local"] == NODE_LOCAL_NOTE
    assert not any(k.startswith("loss/") for k in run.data.metrics)  # nothing a client shared
    rounds = json.loads(open(client.download_artifacts(result.run_id, "federation/rounds.json", str(in_tmp))).read())
    assert len(rounds) == 2 and rounds[0]["node_local"] == {}  # 112 rows per client / 64; no Phase 3 in round 1
    logged = {m.step: m.value for m in client.get_metric_history(result.run_id, "node_local/loss/adversary")}
    per_node = [rounds[1]["node_local"][k]["loss/adversary"] for k in ("0", "1")]
    assert logged == {2: pytest.approx(np.mean(per_node), abs=1e-9)}
