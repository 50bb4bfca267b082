"""Distributed GPP's protocol: sensitive labels never leave a client. Every message that crosses the
transport is captured at the coordinator's tap (the serialized bytes, as sent) and inspected, in federations
trained at the default learning rate: the sensitive label's name appears nowhere, uploads hold exactly
{z, u} with the utility labels' names, and no array equals or contains any window of a client's sensitive
column. With the noise pinned, changing one client's s changes what it sends only through its own z (its
encoder trains against its adversary, which learns from s: that is the method) and never any u, row count or
another client's bytes; that client's own losses, logged node-locally, do change. (Every message against the
threat model's table, encoders and byte totals: test_fed_wire.py.)"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import torch
from mlflow.tracking import MlflowClient
from wire_support import contains_window

from veil.datasets import make_dataset
from veil.datasets.dataset import Dataset, Split
from veil.datasets.partition import partition
from veil.methods import create_method
from veil.methods.configs.fed_options import FederationOptions
from veil.methods.federated.core import EncodersStayHome, iter_arrays, loads
from veil.methods.federated.simulation import LocalFederation, plan_federation, run_federation, run_in_process
from veil.pipeline.execute import RunSpec, execute, load_method
from veil.platform.executors import NODE_LOCAL_NOTE
from veil.platform.federation import plan_on, run_planned


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
        {"K": k, "epochs": 2, "batch_size": 16, "d_z": 3, "encoder_hidden": [16, 8], "head_hidden": [8], "seed": 0},
        ds.task(),
    )  # the default learning rate: normal training
    seen: list[tuple[str, int, int, str, bytes]] = []
    out = run_in_process(m, ds.train, dataset=ds, options=FederationOptions(), tap=lambda *msg: seen.append(msg))
    assert len(out.records) == 2 * int(np.ceil(150 / 16)) and all(len(r.completed) == k for r in out.records)

    plan_parts = partition(ds.train, "iid", k, 0)  # the same partition run_in_process used
    s_cols = [ds.train.sensitive["secret_s"][p] for p in plan_parts] + [ds.test.sensitive["secret_s"]]
    kinds = {(d, kind) for d, _, _, kind, _ in seen}
    assert kinds == {("up", "update"), ("down", "round"), ("down", "join"), ("down", "finalize")} | {
        ("down", "release"),
        ("up", "release"),
    }
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
        if direction == "up" and kind == "release":  # z of the client's own rows, with their ids
            assert msg.keys() == {"kind", "train", "test"} and all(
                msg[s].keys() == {"rows", "z"} for s in ("train", "test")
            )
    # and the utility labels that do travel are the client's own u for the rows it sampled
    ups = [loads(b) for d, _, node, kind, b in seen if d == "up" and kind == "update"]
    assert sum(len(up["payload"]["u"]["digit_u"]) for up in ups) == sum(len(up["payload"]["z"]) for up in ups)


# The method's default learning rate (normal training), small networks; the noise of what clients send pinned
# by release_seed, so two runs can be compared byte for byte.
PINNED = {
    "K": 3,
    "epochs": 1,
    "batch_size": 16,
    "d_z": 3,
    "encoder_hidden": [16, 8],
    "head_hidden": [8],
    "seed": 0,
    "release_seed": 0,
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
    ds: Dataset, train: Split, options: FederationOptions, k: int = 3, **params: Any
) -> tuple[dict[tuple[int, int], bytes], Any]:
    m = create_method("d-gpp", {**PINNED, "K": k, **params}, ds.task())
    seen: list[tuple[str, int, int, str, bytes]] = []
    out = run_in_process(m, train, options=options, tap=lambda *msg: seen.append(msg))
    return uploads(seen), out


def test_s_reaches_the_wire_only_through_the_clients_own_z():
    """With real learning rates s does shape what a client sends: its encoder takes steps against its adversary,
    which learns from s, so its z moves with s (that is the method: z is trained to hide s), and no test can show
    uploads independent of s under training. What is true, and checked here with client 1's s changed on every
    one of its rows and the noise pinned: (1) every u and every row count, in every round, are byte-identical
    (the rows a client samples and their u do not depend on s); (2) round 1 is byte-identical for every client
    (no encoder step has seen s yet); (3) in round 2 clients 0 and 2 send exactly the same bytes and client 1's
    z, and only its z, differs: s reaches the wire as client 1's own z after its own encoder step, never in
    another field and never through another client in the same round; (4) client 1's own adversary loss,
    logged node-locally and never sent, changed with its s, while client 0's did not."""
    ds = secret_dataset()
    node1 = partition(ds.train, "iid", 3, 0)[1]
    ups, out = run_tapped(ds, ds.train, FederationOptions())
    ups2, out2 = run_tapped(ds, with_other_secret(ds.train, node1), FederationOptions())
    assert len(ups) == 3 * 10 and ups.keys() == ups2.keys()  # 10 rounds (150 rows / 16) x 3 clients
    for key in ups:
        a, b = loads(ups[key]), loads(ups2[key])
        assert a["num_examples"] == b["num_examples"] and a.keys() == b.keys() == {"num_examples", "kind", "payload"}
        np.testing.assert_array_equal(a["payload"]["u"]["digit_u"], b["payload"]["u"]["digit_u"])
    assert all(ups[(1, k)] == ups2[(1, k)] for k in range(3))
    assert ups[(2, 0)] == ups2[(2, 0)] and ups[(2, 2)] == ups2[(2, 2)]
    z, z2 = loads(ups[(2, 1)])["payload"]["z"], loads(ups2[(2, 1)])["payload"]["z"]
    assert np.abs(z - z2).max() > 0  # client 1's own z carries what its encoder learned against its s
    assert out.records[0].node_local == {}  # round 1 has no Phase 3 yet, so no loss to log
    assert out.records[1].metrics == {} and set(out.records[1].node_local) == {0, 1, 2}
    r, r2 = out.records[1], out2.records[1]
    assert abs(r.node_local[1]["loss/adversary"] - r2.node_local[1]["loss/adversary"]) > 1e-3
    assert r.node_local[0] == r2.node_local[0]
    row = r.row()
    mean_adv = np.mean([r.node_local[k]["loss/adversary"] for k in range(3)])
    assert row["node_local/loss/adversary"] == pytest.approx(mean_adv, rel=1e-12)
    assert not any(k.startswith("loss/") for k in row)


def test_node_metrics_off_logs_nothing_and_sends_the_same_bytes():
    ds = secret_dataset()
    ups, out = run_tapped(ds, ds.train, FederationOptions())
    off_ups, off = run_tapped(ds, ds.train, FederationOptions(), node_metrics=False)
    assert off_ups == ups  # a client's own log never feeds back into what it sends
    assert all(r.node_local == {} for r in off.records)
    assert not any(k.startswith("node_local/") for row in off.history for k in row)
    assert {"node_local/loss/adversary", "node_local/loss/kl"} <= set(out.history[1])


def file_tap(folder: str):
    """A tap that writes every upload and release to `folder` (it runs inside the coordinator actor on Ray)."""

    def tap(direction: str, rnd: int, node: int, kind: str, blob: bytes) -> None:
        if direction == "up":
            (Path(folder) / f"{kind}-{rnd}-{node}.bin").write_bytes(blob)

    return tap


@pytest.mark.ray
def test_ray_runtimes_send_and_release_what_in_process_does(ray_local, tmp_path):
    """On Ray (one actor per node, and one virtual actor hosting both nodes) the coordinator actor receives the
    same uploads and the same final release, byte for byte, as in process, and counts the same bytes; the
    release reaches the driver's audit with the same z. Three rounds (with the release after them) suffice."""
    ds = secret_dataset()
    for runtime, per_host, opts in (("ray-actors", 1, {}), ("virtual", 0, {"hosts": 1})):
        m0 = create_method("d-gpp", {**PINNED, "K": 2}, ds.task())
        local = plan_federation(m0, "d-gpp", ds.train, dataset=ds, options=FederationOptions(nodes_per_host=per_host))
        local.rounds = 3
        seen: list[tuple[str, int, int, str, bytes]] = []
        want = run_federation(local, LocalFederation(local, tap=lambda *msg, into=seen: into.append(msg)))
        folder = tmp_path / runtime
        folder.mkdir()
        m = create_method("d-gpp", {**PINNED, "K": 2}, ds.task())
        plan = plan_on(runtime, m, "d-gpp", ds.train, dataset=ds, options=FederationOptions(**opts), seed=0)
        plan.rounds = 3
        out = run_planned(plan, tap=file_tap(str(folder)))
        assert [len(r.completed) for r in out.records] == [2, 2, 2]
        got = {f.stem: f.read_bytes() for f in folder.glob("*.bin")}
        expected = {f"{kind}-{rnd}-{node}": b for d, rnd, node, kind, b in seen if d == "up"}
        assert sorted(got) == sorted(expected) and {k.split("-")[0] for k in got} == {"update", "release"}
        assert all(got[key] == expected[key] for key in got), runtime
        assert out.totals()["bytes_up_total"] == want.totals()["bytes_up_total"] == sum(map(len, got.values()))
        for split in ("train", "test"):
            np.testing.assert_array_equal(m.released.z(split), m0.released.z(split))
        assert set(out.records[1].node_local) == {0, 1}  # the side channel works across processes


def test_node_local_metrics_reach_mlflow_marked_as_such(in_tmp):
    """A `veil run` of D-GPP: the clients' own losses are logged as node_local/*, the logged model holds the
    aggregator's psi and no encoder (a model rebuilt from it cannot encode), and the release bytes are counted."""
    params = {**PINNED, "K": 2, "epochs": 1, "batch_size": 64}
    spec = RunSpec(
        method="d-gpp",
        dataset="gaussian-correlated",
        params=params,
        dataset_params={"n": 300},
        audit={"epochs": 2, "hidden": [8]},
        runtime="in-process",
        federation={"per_node_audit": False},
        target="none",  # the messages, not the certificate: no calibration
    )
    result = execute(spec)
    client = MlflowClient(tracking_uri=result.tracking_uri)
    run = client.get_run(result.run_id)
    assert run.data.tags["veil.node_local"] == NODE_LOCAL_NOTE
    assert not any(k.startswith("loss/") for k in run.data.metrics)  # nothing a client shared
    rounds = json.loads(open(client.download_artifacts(result.run_id, "federation/rounds.json", str(in_tmp))).read())
    table = pd.read_parquet(client.download_artifacts(result.run_id, "federation/round_nodes.parquet", str(in_tmp)))
    by_round = {r: t.set_index("node") for r, t in table.groupby("round")}
    assert len(rounds) == 2 and by_round[1]["node_local/loss/adversary"].isna().all()  # 112 rows / 64: no Phase 3
    logged = {m.step: m.value for m in client.get_metric_history(result.run_id, "node_local/loss/adversary")}
    per_node = by_round[2].loc[[0, 1], "node_local/loss/adversary"].tolist()
    assert logged == {2: pytest.approx(np.mean(per_node), abs=1e-9)}
    # the release: counted in the totals and recorded on the last round, by each client
    last = by_round[2]["release_up"]
    release = int(last.sum())
    arrays = (4 * 3 + 8) * 300  # every row's z (d_z 3, float32) and id (int64), train and test
    assert (last > 0).tolist() == [True, True] and arrays < release <= arrays + 2 * 600
    assert run.data.metrics["bytes_release_up"] == release
    assert run.data.metrics["bytes_up_total"] == release + int(table["bytes_up"].sum())
    # the logged model is what the aggregator has: psi, no encoder
    state = torch.load(client.download_artifacts(result.run_id, "model/state.pt", str(in_tmp)), weights_only=True)
    assert state and all(k.startswith("utility.") for k in state)
    rebuilt = load_method(
        client.download_artifacts(result.run_id, "model/state.pt", str(in_tmp)), "d-gpp", params, ds_task(300)
    )
    with pytest.raises(EncodersStayHome):
        rebuilt.encode(np.zeros((2, 10), np.float32))


def ds_task(n: int):
    from veil.datasets import load_dataset

    return load_dataset("gaussian-correlated", {"n": n}).task()
