"""A CLI that answers at once (issue 26): asking for help, and reading a sweep spec's keys, load neither torch, Ray
nor MLflow, each checked in a fresh interpreter (another test's imports cannot hide one). The method and dataset
registries still load torch: a method's Config lives beside its torch code, so `veil methods` and `veil sweep
--check`, which validate names against them, do (recorded in benchmarks/README.md)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "ray", "mlflow")


def heavy_after(code: str) -> list[str]:
    """Which of torch, Ray and MLflow a fresh interpreter has imported after running `code`."""
    probe = (
        textwrap.dedent(code) + f"\nimport json, sys\nprint(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))\n"
    )
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("argv", [["--help"], ["sweep", "--help"], ["run", "--help"], ["datasets", "--help"]])
def test_help_loads_no_torch_ray_or_mlflow(argv):
    code = f"""
        import contextlib, io
        from veil.cli import main
        with contextlib.redirect_stdout(io.StringIO()):
            try:
                main({argv!r})
            except SystemExit as e:
                assert e.code == 0, e.code
    """
    assert heavy_after(code) == []


def test_reading_a_sweep_spec_loads_no_torch_ray_or_mlflow():
    code = """
        from veil.sweeps.spec import load_sweep
        spec = load_sweep("sweeps/quickstart.yaml", check_names=False)
        assert spec.method == "gpp" and spec.trials > 0
    """
    assert heavy_after(code) == []


def test_the_metric_vocabulary_loads_no_torch_ray_numpy_or_mlflow():
    code = """
        from veil.sweeps.metrics import MetricContext, check_metric, is_gap_metric
        assert is_gap_metric("privacy_gap/s")
        assert check_metric("utility_auc", "objectives[0].metric", "here", MetricContext("gpp")) == "utility_auc"
        import sys
        assert "numpy" not in sys.modules
    """
    assert heavy_after(code) == []
