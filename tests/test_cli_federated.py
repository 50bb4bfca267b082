"""`veil run` for a federated method from the command line, on a real local Ray (default runtime:
virtual nodes in node-host actors), with a Dirichlet partition, a per-round progress bar and the
per-node audit table, all logged to MLflow."""

from __future__ import annotations

import json

import pytest
from mlflow.tracking import MlflowClient

from veil.cli import main


@pytest.mark.ray
def test_veil_run_d_eigan_federated(ray_local, in_tmp, capsys):
    argv = [
        "run",
        "--method",
        "d-eigan",
        "--dataset",
        "gaussian-nodes",
        "--set",
        "K=10",
        "--set",
        "phi=0.8",
        "--set",
        "delta=2",
        "--partition",
        "dirichlet:0.3",
        "--set",
        "epochs=4",
        "--set",
        "n=1200",
        "--set",
        "audit.epochs=3",
        "--set",
        "fed.audit_every=1",
        "--set",
        "alpha=0.3",  # the knob set: the release is certified, not calibrated
        "--json",
    ]
    assert main(argv) == 0
    captured = capsys.readouterr()
    out = json.loads(captured.out.strip().splitlines()[-1])
    err = captured.err
    assert "round 2 nodes 10/10 up" in err and "advAUC" in err  # the progress bar's live figures
    assert "per node (each node's own test rows and objective)" in err and "| 9 |" in err
    p, m = out["params"], out["metrics"]
    assert p["executor"] == "federated:virtual" and p["method.phi"] == 0.8 and p["method.delta"] == 2
    assert p["federation.partition"] == "dirichlet:0.3" and p["federation.hosts"] == 2
    assert m["rounds"] == 2 and m["failures_total"] == 0 and len(out["per_node"]) == 10
    knob = out["certificate"]["knob"]
    assert {k: knob[k] for k in ("field", "value", "set_by")} == {"field": "alpha", "value": 0.3, "set_by": "run"}
    if not out["certificate"]["met"]:  # 300 test rows: calibrating alpha for the default target is refused, and said
        assert "cannot be certified" in knob["calibration_refused"] and "let Veil calibrate" not in err
    assert out["certificate"]["met"] == (m["certificate/met"] == 1.0)
    client = MlflowClient(tracking_uri=f"sqlite:///{in_tmp / 'mlflow.db'}")
    rid = out["run_id"]
    assert client.get_run(rid).info.status == "FINISHED"
    ups = client.get_metric_history(rid, "bytes_up")
    assert sorted(x.step for x in ups) == [1, 2] and m["bytes_up_total"] == sum(x.value for x in ups)
    assert len(client.get_metric_history(rid, "live/adversary_auc")) == 2
    arts = {a.path for a in client.list_artifacts(rid, "audit")} | {
        a.path for a in client.list_artifacts(rid, "federation")
    }
    assert {"audit/per_node.csv", "audit/per_node.json", "federation/rounds.json", "federation/failures.json"} <= arts
    assert "federation/round_nodes.parquet" in arts
    csv_path = client.download_artifacts(rid, "audit/per_node.csv", str(in_tmp))
    lines = open(csv_path).read().strip().splitlines()
    assert lines[0].startswith("node,train_rows,test_rows") and len(lines) == 11
