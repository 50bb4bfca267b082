"""In process, a node host that dies (tests/support/veil_test_hooks.py: fail_nodes) is rebuilt (as Ray restarts an actor) and its node rejoins
from the global state; the same fault on Ray, with a real process death, is in tests/chaos/test_kill_node_host.py."""

from __future__ import annotations

from veil_test_hooks import fault_env

from veil.datasets import load_dataset
from veil.methods import create_method
from veil.methods.configs.fed_options import FederationOptions
from veil.methods.federated.simulation import run_in_process


def test_in_process_host_is_rebuilt_after_a_fault(monkeypatch):
    for k, v in fault_env("2@2").items():
        monkeypatch.setenv(k, v)
    ds = load_dataset("gaussian-quadrant", {"n": 300})
    m = create_method("d-eigan", {"K": 3, "epochs": 3, "d_z": 2}, ds.task())
    out = run_in_process(m, ds.train, options=FederationOptions(nodes_per_host=1))
    assert [len(r.failures) for r in out.records] == [0, 1, 0]
    assert out.records[1].failures[0].node == 2 and out.records[1].failures[0].kind == "died"
    assert out.records[2].joined == [2] and out.records[2].completed == [0, 1, 2]
    assert out.restarts == 1
