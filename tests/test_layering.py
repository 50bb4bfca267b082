"""The package's shape (DESIGN.md): no import cycles anywhere, and the lower layers (methods, audit, datasets)
import nothing above them and none of Ray, MLflow or Optuna; proven both on the import graph (every import
statement, function-local ones included) and by really importing and using them with those three blocked."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from import_graph import cycles, graph, package_graph

LOWER = ("veil.methods", "veil.audit", "veil.datasets")
UPPER = (
    "veil.platform",
    "veil.pipeline.execute",
    "veil.pipeline.runspec",
    "veil.certify.calibrate",
    "veil.apply_encoder",
    "veil.sweeps",
    "veil.tracking",
    "veil.cli",
    "veil.nightly_suite",
)
BLOCKED = ("ray", "mlflow", "optuna")


def test_no_import_cycles():
    edges, _ = graph()
    assert cycles(edges) == []


def test_no_import_cycles_between_packages():
    """methods <-> methods.federated, datasets <-> its loaders, platform <-> its federation runtime were such
    knots: the shared seed streams now live in veil.randomness, the loaders and the runtime in their parent
    package, and the conformance check (which audits) in veil.audit."""
    edges, _ = graph()
    assert cycles(package_graph(edges)) == []


def test_sweep_trials_import_nothing_of_the_driver():
    """The sweep's process boundary: veil.sweeps.trial runs in Ray workers and imports neither the driver nor the
    driver's progress monitor (the driver imports it, not the other way round)."""
    edges, _ = graph()
    assert edges["veil.sweeps.trial"].isdisjoint({"veil.sweeps.driver", "veil.sweeps.monitor"})
    assert "veil.sweeps.trial" in edges["veil.sweeps.driver"]


def test_cycle_detector_sees_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_lower_layers_import_nothing_above_them():
    edges, third = graph()
    bad = [(m, t) for m in edges if m.startswith(LOWER) for t in edges[m] if t.startswith(UPPER)]
    bad += [(m, t) for m in third if m.startswith(LOWER) for t in third[m] if t in BLOCKED]
    assert bad == []


def test_lower_layers_work_with_ray_mlflow_optuna_blocked():
    """Import every module of methods/, audit/ and datasets/ and train, release and audit a method, in a fresh
    interpreter where importing ray, mlflow or optuna raises."""
    code = textwrap.dedent(f"""
        import importlib, pkgutil, sys
        BLOCKED = {BLOCKED!r}

        class Block:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in BLOCKED:
                    raise ImportError(f"{{name}} is blocked in this test")
                return None

        sys.meta_path.insert(0, Block())
        import veil.audit, veil.datasets, veil.methods
        for pkg in (veil.methods, veil.audit, veil.datasets):
            for info in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + "."):
                importlib.import_module(info.name)
        from veil.audit.probes import AuditConfig
        from veil.audit.step import audit_release
        from veil.datasets.catalog import load_dataset
        from veil.methods.builtin import create_method
        ds = load_dataset("gaussian-nodes", {{"n": 200}})
        for name in ("gpp", "d-eigan"):
            m = create_method(name, {{"epochs": 1}}, ds.task())
            m.fit(ds.train)
            out = audit_release(m, ds, AuditConfig(epochs=1, hidden=(8,)))
            assert out.z_train.shape[0] == len(ds.train), name
        loaded = sorted(n for n in sys.modules if n.split(".")[0] in BLOCKED)
        assert not loaded, loaded
        print("ok")
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stderr[-3000:]


def test_packages_export_their_public_api():
    import importlib

    for pkg in (
        "veil.methods",
        "veil.methods.federated",
        "veil.audit",
        "veil.datasets",
        "veil.platform",
        "veil.sweeps",
        "veil.tracking",
    ):
        mod = importlib.import_module(pkg)
        exported = getattr(mod, "__all__", [])
        assert exported, pkg
        assert all(hasattr(mod, name) for name in exported), pkg


def test_platform_is_transport_only():
    """platform/ moves runs to where they train (executors, the federation's Ray runtimes, joining Ray): what a
    run is audited with and which tracking stores a cluster accepts are decided above it (run.py, tracking/)."""
    edges, _ = graph()
    decided_elsewhere = ("veil.audit", "veil.certify", "veil.pipeline.execute", "veil.sweeps")
    above = [(m, t) for m in edges if m.startswith("veil.platform") for t in edges[m]]
    bad = [(m, t) for m, t in above if any(t == d or t.startswith(d + ".") for d in decided_elsewhere)]
    assert bad == []


def test_certify_sits_between_the_audit_and_the_pipeline():
    """certify/ (targets, calibration, certificates) reads methods, audits and data and is read by the run
    pipeline: it imports nothing of the pipeline, the sweeps, tracking, the platform, Ray, MLflow or Optuna."""
    edges, third = graph()
    above = (
        "veil.platform",
        "veil.pipeline.execute",
        "veil.sweeps",
        "veil.tracking",
        "veil.cli",
        "veil.nightly_suite",
        "veil.apply_encoder",
    )
    bad = [(m, t) for m in edges if m.startswith("veil.certify") for t in edges[m] if t.startswith(above)]
    assert bad == [] and not [m for m in edges if m.startswith("veil.certify") and third[m] & set(BLOCKED)]
