"""Bad input to a federated run is refused with a clear message before any actor starts (and before an
MLflow run is created)."""

from __future__ import annotations

import pytest

from veil.cli import main

#: these runs are refused for their federation options: no target, so no target's resolution check comes first
NO_TARGET = ["--target", "none"]
BASE = [
    "run",
    "--method",
    "d-eigan",
    "--dataset",
    "gaussian-octant",
    "--set",
    "n=200",
    "--quiet",
    "--runtime",
    "in-process",
    *NO_TARGET,
]


@pytest.mark.parametrize(
    "extra,needle",
    [
        (["--set", "phi=0"], "'phi': 0.0 (allowed: float > 0 and <= 1)"),
        (["--set", "phi=1.5"], "'phi': 1.5 (allowed: float > 0 and <= 1)"),
        (["--set", "delta=0"], "'delta': 0 (allowed: int >= 1 and <= 10000)"),
        (["--set", "K=0"], "'K': 0 (allowed: int >= 1)"),
        (["--set", "K=500"], "'K': 500 (allowed: at most the 150 training rows"),
        (["--set", "K=20", "--partition", "dirichlet:0.01"], "received no rows"),
        (["--set", "node_sensitive=[adversary_1, nope]"], "unknown: ['nope']"),
        (["--set", "node_utility=[ally+adversary_1]", "--set", "node_sensitive=[adversary_1]"], "disjoint"),
        (["--partition", "zipf:2"], "unknown partition scheme 'zipf'"),
        (["--set", "fed.hostz=2"], "unknown fed parameter 'hostz'"),
    ],
)
def test_refused_before_anything_starts(in_tmp, capsys, extra, needle):
    assert main(BASE + extra) == 2
    assert needle in capsys.readouterr().err
    assert not (in_tmp / "mlflow.db").exists()


def test_per_client_lists_must_match_k(in_tmp, capsys):
    assert (
        main(
            [
                "run",
                "--method",
                "d-gpp",
                "--dataset",
                "gaussian-octant",
                "--set",
                "K=3",
                "--set",
                "beta=[1, 2]",
                "--runtime",
                "in-process",
                "--quiet",
            ]
        )
        == 2
    )
    assert "'beta': [1.0, 2.0] (allowed: one value, or K=3 values (one per client))" in capsys.readouterr().err


@pytest.mark.parametrize("scheme", ["dirichlet:0.3", "iid"])  # iid too: the default is not silently accepted
def test_partition_is_for_federated_methods_only(in_tmp, capsys, scheme):
    assert main(["run", "--method", "eigan", "--dataset", "gaussian-octant", "--partition", scheme]) == 2
    err = capsys.readouterr().err
    assert f"invalid value for '--partition': '{scheme}'" in err and "method 'eigan' is centralized" in err
    assert not (in_tmp / "mlflow.db").exists()


@pytest.mark.ray
@pytest.mark.parametrize(
    "extra,needle",
    [
        (["--set", "fed.cpus=8"], "asks for 8 CPUs but the cluster has 2 available"),
        (["--runtime", "ray-actors", "--set", "K=30", "--set", "fed.actor_memory_mb=1000"], "need about 31000 MB"),
        (["--runtime", "ray-actors", "--set", "K=100", "--set", "fed.cpus=1"], "CPU per actor (minimum 0.05)"),
    ],
)
def test_unsatisfiable_resources_are_refused(ray_local, in_tmp, capsys, extra, needle):
    before = ray_local.available_resources().get("CPU")
    on_ray = [*BASE[:5], "--set", "n=400", "--quiet", *NO_TARGET]  # BASE on the default runtime: Ray actors
    assert main([*on_ray, *extra]) == 2
    assert needle in capsys.readouterr().err
    assert not (in_tmp / "mlflow.db").exists()
    assert ray_local.available_resources().get("CPU") == before  # no placement group, no actor


def test_a_partition_by_a_sensitive_label_is_warned(in_tmp, capsys):
    """silo:<sensitive label> leaves every node one class of it: the run goes on, and the console (before
    training) and the audit report (recorded in MLflow) say that training cannot hide that label."""
    args = ["run", "--method", "d-gpp", "--dataset", "gaussian-octant", "--set", "n=200", "--set", "K=2"]
    args += ["--set", "epochs=1", "--partition", "silo:adversary_1", "--runtime", "in-process", "--target", "none"]
    assert main(args) == 0
    out = capsys.readouterr()
    needle = "sensitive label 'adversary_1' takes one value on every node (partition silo:adversary_1)"
    assert f"[veil] warning: {needle}" in out.err
    assert f"> **WARNING**: {needle}" in out.out
    assert "adversary_2' takes one value" not in out.err + out.out  # adversary_2 varies inside both nodes
