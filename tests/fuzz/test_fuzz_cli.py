"""The CLI on fuzzed inputs, as a user runs it (a subprocess): `veil run --check` and `veil sweep --check` on run
files, sweep specs and data files that fuzzing found hard, end in exit 0 or exit 2 with one 'error:' line and
no traceback. Three cases only: each subprocess pays Veil's import time (the in-process fuzz tests cover
the hundreds of examples)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytestmark = pytest.mark.timeout(120)

REPO = Path(__file__).resolve().parents[2]


def write_cases(d: Path) -> list[tuple[list[str], str]]:
    """(argv after `veil`, text the error must contain) for each case, with its files written under d."""
    (d / "binary.yaml").write_bytes(b"method: gpp\n\xff\xfe\x00dataset: x\n")
    (d / "sweep.yaml").write_text(
        (REPO / "sweeps" / "quickstart.yaml").read_text().replace("sampler: tpe", "sampler: tpe\nchull_origin: []")
    )
    frame = pd.DataFrame({"名前 ": np.arange(60) % 2, "🙂": np.arange(60) % 3, "a": np.linspace(0, 1, 60)})
    frame.loc[41, "a"] = np.inf
    frame.to_csv(d / "odd.csv", index=False)
    (d / "odd.yaml").write_text("method: gpp\ndataset: odd.csv\ndataset_params: {utility: '名前 ', sensitive: 🙂}\n")
    return [
        (["run", "binary.yaml", "--check"], "'run file': 'binary.yaml' (allowed: UTF-8 text"),
        (["sweep", "sweep.yaml", "--check"], "invalid value for 'chull_origin': []"),
        (["run", "odd.yaml", "--check"], "odd.csv: feature column 'a' has the non-finite value inf at data row 42,"),
    ]


def test_cli_exits_2_without_a_traceback(tmp_path):
    cases = write_cases(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "VEIL_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("MLFLOW_TRACKING_URI", None)
    procs = [  # started together: the imports overlap
        subprocess.Popen(
            [sys.executable, "-m", "veil.cli", *argv],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for argv, _ in cases
    ]
    for (argv, needle), proc in zip(cases, procs):
        out, err = proc.communicate(timeout=100)
        assert proc.returncode == 2, (argv, out, err)
        assert "Traceback" not in err and needle in err, (argv, err)
        assert [line for line in err.splitlines() if line.startswith("error: ")], err
    assert not list((tmp_path / "cache").rglob("*.tmp")) and not (tmp_path / "mlflow.db").exists()
