"""A CLI that answers at once (issue 26): asking for help, listing the methods, checking a sweep spec and reading
a sweep spec's keys load neither torch, Ray nor MLflow (help not even numpy or pandas), each checked in a fresh
interpreter (another test's imports cannot hide one). The checks read each method's torch-free card
(`veil.methods.cards`) and the audit's settings (`veil.audit.settings`), never a method's code (timings in
benchmarks/README.md)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "ray", "mlflow")


def heavy_after(code: str, heavy: tuple[str, ...] = HEAVY) -> list[str]:
    """Which of `heavy` (torch, Ray and MLflow) a fresh interpreter has imported after running `code`."""
    probe = (
        textwrap.dedent(code) + f"\nimport json, sys\nprint(json.dumps([m for m in {heavy!r} if m in sys.modules]))\n"
    )
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("argv", [["--help"], ["sweep", "--help"], ["run", "--help"], ["datasets", "--help"]])
def test_help_loads_no_torch_ray_mlflow_pandas_or_numpy(argv):
    """Help reads no data either: pandas and numpy alone doubled `veil --help`'s time."""
    code = f"""
        import contextlib, io
        from veil.cli import main
        with contextlib.redirect_stdout(io.StringIO()):
            try:
                main({argv!r})
            except SystemExit as e:
                assert e.code == 0, e.code
    """
    assert heavy_after(code, (*HEAVY, "pandas", "numpy")) == []


@pytest.mark.parametrize(
    "argv",
    [
        ["methods"],
        ["methods", "eigan"],
        ["sweep", "sweeps/quickstart.yaml", "--check"],
        ["sweep", "sweeps/gpp_dz.yaml", "--check"],  # --check loads the data: one that needs no fetch
        ["run", "-m", "gpp", "-d", "gaussian-correlated", "--target", "privacy_gap=0.11", "--check"],
        [
            "run",
            "-m",
            "dp-input",
            "-d",
            "gaussian-correlated",
            "-s",
            "audit.suite=[logistic]",
            "--target",
            "none",
            "--check",
        ],
    ],
)
def test_listing_methods_and_checking_a_spec_load_no_torch_ray_or_mlflow(argv):
    code = f"""
        import contextlib, io
        from veil.cli import main
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            assert main({argv!r}) in (0, None)
        assert out.getvalue().strip(), "nothing was printed"
    """
    assert heavy_after(code) == []


def test_validating_a_run_spec_loads_no_torch_ray_or_mlflow():
    code = """
        from veil.pipeline.runspec import RunSpec
        from veil.pipeline.validation import validate
        v = validate(RunSpec(method="dp-input", dataset="gaussian-correlated", params={"d_z": 4}, target={"eps": 1e5}))
        assert v.executor == "inline" and v.method_config.d_z == 4 and v.target.get("eps").limit == 1e5
    """
    assert heavy_after(code) == []


def test_reading_a_sweep_spec_loads_no_torch_ray_or_mlflow():
    code = """
        from veil.sweeps.sweepspec import load_sweep
        spec = load_sweep("sweeps/quickstart.yaml", check_names=False)
        assert spec.method == "gpp" and spec.trials > 0
    """
    assert heavy_after(code) == []


def test_the_sweep_driver_and_starting_ray_load_no_torch():
    """The sweep's driver only schedules: torch loads in the trial workers, never in the process that starts Ray
    (each `veil sweep` would pay its import and its memory)."""
    code = """
        import veil.platform.cluster, veil.sweeps.driver
        assert callable(veil.sweeps.driver.run_sweep) and callable(veil.platform.cluster.ensure_ray)
    """
    assert "torch" not in heavy_after(code)


def test_the_metric_vocabulary_loads_no_torch_ray_numpy_or_mlflow():
    code = """
        from veil.sweeps.metrics import MetricContext, check_metric, is_gap_metric
        assert is_gap_metric("privacy_gap/s")
        assert check_metric("utility_auc", "objectives[0].metric", "here", MetricContext("gpp")) == "utility_auc"
        import sys
        assert "numpy" not in sys.modules
    """
    assert heavy_after(code) == []
