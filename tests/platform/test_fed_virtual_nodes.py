"""Virtual nodes: many nodes hosted as one vectorised ensemble (stack_module_state + vmap, one optimizer
over the stacked tensors, per-copy losses summed) give the same result as one node per host, at equal
seeds, within floating-point tolerance: in this process for every federated method, and on Ray for
one actor per node versus one actor hosting every node."""

from __future__ import annotations

import numpy as np
import pytest

from veil.datasets import load_dataset
from veil.methods import create_method
from veil.methods.configs.fed_options import FederationOptions
from veil.methods.federated.simulation import run_in_process
from veil.platform.federation import plan_on, run_planned

ATOL = 1e-5

CASES = {
    # unequal shards (Dirichlet), sparse exchange, masked mean, two objectives dealt over the nodes
    "d-eigan": {
        "K": 4,
        "phi": 0.5,
        "delta": 2,
        "aggregation": "masked-mean",
        "epochs": 4,
        "node_sensitive": ["adversary_1", "adversary_2"],
    },
    "ldp-fedavg": {"K": 5, "epochs": 3, "eps": 4.0},
    "d-gpp": {"K": 3, "epochs": 2, "beta": [1.0, 2.0, 0.5], "encoder_hidden": [32, 16], "lr": 1e-3},
}


@pytest.fixture(scope="module")
def ds():
    return load_dataset("gaussian-octant", {"n": 400})


@pytest.mark.parametrize("name", sorted(CASES))
def test_one_ensemble_matches_one_host_per_node(ds, name):
    results = []
    for per_host in (1, 0):  # 1: every node its own host (P = 1); 0: all nodes in one vectorised host
        # release_seed: d-gpp's uploads and every method's release draw the same noise in both runs
        m = create_method(name, {"d_z": 3, "batch_size": 32, "seed": 0, "release_seed": 0, **CASES[name]}, ds.task())
        out = run_in_process(
            m,
            ds.train,
            dataset=ds,
            partition_scheme="dirichlet:1.0",
            options=FederationOptions(nodes_per_host=per_host),
        )
        results.append((released_test(m, ds), out))
    (z1, o1), (z2, o2) = results
    np.testing.assert_allclose(z1, z2, atol=ATOL)
    assert [r.bytes_up for r in o1.records] == [r.bytes_up for r in o2.records]
    assert o1.release_up == o2.release_up
    for r1, r2 in zip(o1.records, o2.records):
        for key, v in r1.metrics.items():
            assert r2.metrics[key] == pytest.approx(v, abs=1e-4)
    # and the ensemble really trained: the release (d-gpp: the aggregator's psi) moved away from the untrained model
    fresh = create_method(name, {"d_z": 3, "batch_size": 32, "seed": 0, **CASES[name]}, ds.task())
    if fresh.private_encoders():  # the encoders stay on the clients: nothing to encode with here
        assert max((fresh.state()[k] - v).abs().max().item() for k, v in m.state().items()) > 1e-3
    else:
        assert np.abs(fresh.encode(ds.test.x) - z1).max() > 1e-3


def released_test(m, ds) -> np.ndarray:
    """z of the test rows: the clients' own release (d-gpp) or the global model's."""
    return m.released.z("test") if m.private_encoders() else m.encode(ds.test.x)


@pytest.mark.ray
def test_virtual_actor_matches_one_actor_per_node(ray_local, ds):
    zs = {}
    for runtime, opts in (("ray-actors", {}), ("virtual", {"hosts": 1}), ("in-process", {})):
        m = create_method(
            "d-eigan", {"K": 2, "phi": 0.8, "delta": 1, "epochs": 3, "d_z": 3, "seed": 1, "release_seed": 1}, ds.task()
        )
        prep = plan_on(runtime, m, "d-eigan", ds.train, dataset=ds, options=FederationOptions(**opts), seed=1)
        assert len(prep.node_blocks) == (2 if runtime == "ray-actors" else 1)
        out = run_planned(prep)
        assert [len(r.completed) for r in out.records] == [2, 2, 2]
        zs[runtime] = (m.encode(ds.test.x), out.totals()["bytes_up_total"])
    for runtime in ("virtual", "in-process"):
        np.testing.assert_allclose(zs[runtime][0], zs["ray-actors"][0], atol=ATOL)
        assert zs[runtime][1] == zs["ray-actors"][1]


def _group_states() -> dict[str, str]:
    from ray.util.placement_group import placement_group_table

    return {pg_id: row["state"] for pg_id, row in placement_group_table().items()}


@pytest.mark.ray
def test_warmed_owner_is_taken_by_the_federation_or_released(ray_local, ds):
    """`Runtime.warm` starts the federation's placement group and owner before training; a federation that
    starts takes them (no second group), and a run that never trains gets its CPUs back from the release."""
    from veil.platform.federation import get_runtime, wait_removed

    def planned():
        m = create_method("d-eigan", {"K": 2, "epochs": 1, "d_z": 3, "seed": 0}, ds.task())
        return plan_on("virtual", m, "d-eigan", ds.train, dataset=ds, options=FederationOptions(hosts=1), seed=0)

    before = set(_group_states())
    unused = planned()
    release = get_runtime("virtual").warm(unused)
    assert unused.started.owner is not None
    release()
    wait_removed(unused.started.pg)
    assert _group_states()[unused.started.pg.id.hex()] == "REMOVED"
    release()  # idempotent

    used = planned()
    release = get_runtime("virtual").warm(used)
    out = run_planned(used)
    assert [len(r.completed) for r in out.records] == [2]
    release()  # a no-op: the federation took the group and removed it at its end
    new = set(_group_states()) - before
    assert new == {unused.started.pg.id.hex(), used.started.pg.id.hex()}  # one group per federation, none more
    assert all(_group_states()[g] == "REMOVED" for g in new)
