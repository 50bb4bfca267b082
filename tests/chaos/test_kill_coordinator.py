"""The coordinator actor is killed mid-run (SIGKILL to its process, between rounds 2 and 3): Ray restarts it,
the driver restores it from its checkpoint of round 2, the run finishes, the failure is recorded (the
`failures` metric of round 3, `coordinator_restarts`, a role 'coordinator' entry in
`federation/failures.json`), and the result equals an undisturbed run's: the node hosts outlive the
coordinator and keep their state, and the coordinator's server state comes back whole."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import signal

import numpy as np
import pandas as pd
import pytest
import torch
from mlflow.tracking import MlflowClient

from polling import wait_for
from veil.cli.run import print_summary
from veil.pipeline.execute import RunSpec, execute

pytestmark = [pytest.mark.ray, pytest.mark.chaos, pytest.mark.slow]

SPEC = RunSpec(
    method="d-eigan",
    dataset="gaussian-quadrant",
    params={"preset": "paper", "optimizer": "adam", "aggregation": "masked-mean", "K": 3, "epochs": 4, "d_z": 2},
    dataset_params={"n": 600},
    audit={"epochs": 10, "lr": 0.01, "hidden": [32]},
    runtime="ray-actors",
    federation={"max_restarts": 2},
)


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] == "Z"
    except (OSError, IndexError):
        return True


def kill_coordinator() -> int:
    """SIGKILL the running federation's coordinator actor process; return once it is gone."""
    import ray

    (entry,) = [a for a in ray.util.list_named_actors(all_namespaces=True) if a["name"].startswith("veil-coordinator")]
    handle = ray.get_actor(entry["name"], namespace=entry["namespace"])
    pid = int(ray.get(handle.info.remote(), timeout=30)["pid"])
    os.kill(pid, signal.SIGKILL)
    wait_for(f"coordinator process {pid} gone after SIGKILL", lambda: _gone(pid), 30, every=0.05)
    return pid


def test_killed_coordinator_restarts_from_its_checkpoint(ray_local, in_tmp):
    killed: list[int] = []

    def on_round(i: int, row: dict[str, float]) -> None:
        if i == 1:  # round 2 is done and checkpointed
            killed.append(kill_coordinator())

    result = execute(SPEC, on_epoch=on_round)
    assert killed
    client = MlflowClient(tracking_uri=result.tracking_uri)
    assert client.get_run(result.run_id).info.status == "FINISHED"
    failures = {m.step: m.value for m in client.get_metric_history(result.run_id, "failures")}
    assert failures == {1: 0.0, 2: 0.0, 3: 1.0, 4: 0.0}  # the round under way when the coordinator came back
    recorded = json.loads(
        open(client.download_artifacts(result.run_id, "federation/failures.json", str(in_tmp))).read()
    )
    assert [(f["role"], f["round"], f["kind"], f["node"]) for f in recorded] == [("coordinator", 3, "died", None)]
    assert result.metrics["coordinator_restarts"] == 1 and result.metrics["failures_total"] == 1
    assert result.metrics["restarts"] == 0 and result.metrics["rounds"] == 4
    console = io.StringIO()
    print_summary(result, "federated", console)  # the console counts what the metrics count (issue 28)
    assert "failures 1  restarts 0 node host(s), 1 coordinator" in console.getvalue()
    rounds = json.loads(open(client.download_artifacts(result.run_id, "federation/rounds.json", str(in_tmp))).read())
    nodes = pd.read_parquet(client.download_artifacts(result.run_id, "federation/round_nodes.parquet", str(in_tmp)))
    assert all(r["completed"] == 3 and r["joined"] == [] for r in rounds)  # no node lost its state
    assert nodes["completed"].all() and sorted(nodes.groupby("round")["node"].apply(list).tolist()) == [[0, 1, 2]] * 4

    # Undisturbed, in process (one host per node, as on Ray: the runtimes agree exactly at equal seeds):
    # every round's losses and the audit's figures agree to float rounding.
    calm = execute(dataclasses.replace(SPEC, runtime="in-process", federation={"nodes_per_host": 1}))
    assert calm.metrics["failures_total"] == 0 and calm.metrics["coordinator_restarts"] == 0
    for key in ("utility_auc", "utility_acc", "adversary_auc", "adversary_acc"):
        assert result.metrics[key] == pytest.approx(calm.metrics[key], abs=1e-6), key
    for got, want in zip(result.history, calm.history):
        for key in ("loss/encoder", "loss/ally", "loss/adversary", "bytes_up", "bytes_down"):
            assert got[key] == pytest.approx(want[key], rel=1e-6), (got["round"], key)


def exit_once_in_round(marker: str, rnd: int):
    """A tap (it runs inside the coordinator actor) that ends the coordinator's process the first time an update
    of round `rnd` arrives, i.e. after the nodes trained that round and before it was aggregated."""

    def tap(direction: str, r: int, node: int, kind: str, blob: bytes) -> None:
        if direction == "up" and kind == "update" and r == rnd and not os.path.exists(marker):
            open(marker, "w").close()
            os._exit(9)

    return tap


def test_coordinator_dying_mid_round_replays_the_round_exactly(ray_local, tmp_path):
    """The coordinator dies inside round 2 with the nodes' uploads in hand: restored from round 1's checkpoint
    (D-GPP's server keeps an optimizer: it is part of the checkpoint) it asks round 2 again, the nodes replay
    the answers they already computed instead of training twice, and the result equals an undisturbed run's
    exactly (same bytes on the wire, the same psi, the same release of every client's own rows)."""
    from veil.datasets import load_dataset
    from veil.methods import create_method
    from veil.methods.configs.fed_options import FederationOptions
    from veil.methods.federated.simulation import run_in_process
    from veil.platform.federation import plan_on, run_planned

    ds = load_dataset("gaussian-octant", {"n": 300})
    cfg = {"K": 3, "epochs": 2, "d_z": 3, "batch_size": 64, "encoder_hidden": [16], "seed": 0, "release_seed": 0}
    m = create_method("d-gpp", cfg, ds.task())
    plan = plan_on("ray-actors", m, "d-gpp", ds.train, options=FederationOptions(max_restarts=1), seed=0)
    assert plan.rounds >= 3
    marker = tmp_path / "coordinator-exited"
    out = run_planned(plan, tap=exit_once_in_round(str(marker), 2))
    assert marker.exists()
    assert [[f.to_dict()["role"] for f in r.coordinator_failures] for r in out.records[:3]] == [[], ["coordinator"], []]
    assert out.totals()["coordinator_restarts"] == 1 and all(not r.failures for r in out.records)

    calm_m = create_method("d-gpp", cfg, ds.task())
    calm = run_in_process(calm_m, ds.train, options=FederationOptions(nodes_per_host=1))
    assert [r.bytes_up for r in out.records] == [r.bytes_up for r in calm.records]
    assert [r.bytes_down for r in out.records] == [r.bytes_down for r in calm.records]
    for (name, got), want in zip(m.state().items(), calm_m.state().values()):
        assert torch.equal(got, want), name
    # the clients' encoders stayed home; what they released of their own rows is the undisturbed run's
    assert m.released is not None and calm_m.released is not None
    np.testing.assert_array_equal(m.released.z("train"), calm_m.released.z("train"))
    assert out.release_up == calm.release_up
