"""The benchmark suite's quick GPP benchmark writes a row whose figures agree with each other, and the
README's Targets block is made from the results file by tools/bench_targets_block.py (which imports nothing from
benchmarks/)."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]


def load_suite() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_suite", ROOT / "benchmarks" / "suite.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def bench(name: str) -> ModuleType:
    """A sibling module of suite.py (importable once `load_suite` put benchmarks/ on the path)."""
    load_suite()
    return importlib.import_module(name)


def tool(name: str) -> ModuleType:
    """A generator under tools/ (on the tests' path: pyproject's pythonpath)."""
    return importlib.import_module(name)


@pytest.fixture(scope="module")
def gpp_row(tmp_path_factory: pytest.TempPathFactory) -> tuple[ModuleType, Path, dict]:
    suite = load_suite()
    results = tmp_path_factory.mktemp("bench") / "suite.jsonl"
    assert suite.main(["--quick", "--only", "gpp", "--results", str(results)]) == 0
    rows = [json.loads(line) for line in results.read_text().splitlines()]
    assert len(rows) == 1
    return suite, results, rows[0]


def test_quick_gpp_row_is_consistent(gpp_row: tuple[ModuleType, Path, dict]) -> None:
    suite, _, row = gpp_row
    assert row["benchmark"] == "gpp" and row["quick"] is True
    suite, results, row = gpp_row
    assert row["command"] == f"python benchmarks/suite.py --quick --only gpp --results {results}"
    assert set(row["machine"]) == {"cpus", "arch", "torch", "threads", "gpu"}
    assert row["load_avg"] >= 0 and row["params"]["batch_size"] == 64
    veil, base = row["samples_per_s"], row["baseline_samples_per_s"]
    assert veil > 0 and base > 0
    # the ratio is Veil's samples/s over the paper-style loop's, as recorded (both rounded to 0.1)
    assert row["ratio"] == pytest.approx(veil / base, abs=2e-3)
    # % of limit = samples/s x FLOPs per sample / limit
    assert row["pct_of_limit"] == pytest.approx(
        100 * veil * row["flops_per_sample"] / (row["limit_gflops"] * 1e9), abs=0.1
    )
    # GPP's defaults: encoder 102-512-256-(mu, logvar 8), heads 8-128-2, k = 2, privacy term 'uniform'
    enc, head = 2 * (102 * 512 + 512 * 256 + 2 * 256 * 8), 2 * (8 * 128 + 128 * 2)
    phase1 = 2 * (enc + 2 * (3 * head - 2 * 8 * 128))  # no-grad encoder; heads train, z needs no gradient
    phase2 = (3 * enc - 2 * 102 * 512) + 3 * head + head + 3 * head  # x needs none; utility, logged CE(s), uniform
    assert row["flops_per_sample"] == phase1 + phase2
    assert sum(row["profile"].values()) == pytest.approx(1.0, abs=0.01)


def test_readme_block_is_made_from_the_results_file(gpp_row: tuple[ModuleType, Path, dict], tmp_path: Path) -> None:
    _, results, row = gpp_row
    targets = tool("bench_targets_block")
    readme = tmp_path / "README.md"
    shutil.copy(ROOT / "benchmarks" / "README.md", readme)
    targets.rewrite_readme(results, readme)
    text = readme.read_text()
    block = text[text.index(targets.BEGIN) : text.index(targets.END)]
    assert (
        f"| gpp (batch 64) | {row['samples_per_s']:.0f} | {row['baseline_samples_per_s']:.0f} | {row['ratio']:.2f}x |"
        in block
    )
    original = (ROOT / "benchmarks" / "README.md").read_text()
    assert text.split(targets.END)[1] == original.split(targets.END)[1]  # what follows the block is kept as written
    # benchmarks/gpu.py's recorded row adds the GPU's side of the targets; without one the table has none
    gpu = json.loads(targets.GPU_RESULTS.read_text())
    adult = gpu["audit"]["adult"]
    assert f"{adult['plain_gpu_s']:.3f} -> {adult['veil_gpu_s']:.3f} s = {adult['ratio_vs_plain_gpu']:.2f}x" in block
    assert "| the centralized EIGAN target on a GPU" in block
    targets.rewrite_readme(results, readme, gpu=tmp_path / "no-gpu.json")
    text = readme.read_text()
    assert "on a GPU (`benchmarks/gpu.py`" not in text[text.index(targets.BEGIN) : text.index(targets.END)]


def test_readme_targets_block_is_current() -> None:
    """The committed Targets block is what tools/bench_targets_block.py makes of the recorded results, and the
    names and bound it repeats of benchmarks/bench_training.py are that module's."""
    block, training = tool("bench_targets_block"), bench("bench_training")
    assert block.main(["--check"]) == 0, "rerun python tools/bench_targets_block.py"
    assert block.CENTRALIZED == tuple(training.CENTRALIZED) and block.K1000_TARGET_S == training.K1000_TARGET_S
    assert block.RESULTS == load_suite().RESULTS and block.README == ROOT / "benchmarks" / "README.md"


def test_gpu_script_dry_run_on_the_cpu(tmp_path: Path) -> None:
    """benchmarks/gpu.py (run for real on a lent GPU machine) in its CPU dry run: the audit engine and the plain loop
    score alike, a population's members land near their separate runs, and Adult, not fetched here, is skipped with
    the reason."""
    import subprocess

    out = tmp_path / "gpu.json"
    only = ["audit", "population", "population-adult"]
    cmd = [sys.executable, "benchmarks/gpu.py", "--device", "cpu", "--quick", "--only", *only]
    env = {**__import__("os").environ, "VEIL_CACHE_DIR": str(tmp_path / "cache")}
    p = subprocess.run([*cmd, "--out", str(out)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    row = json.loads(out.read_text())
    q = row["audit"]["quickstart"]
    assert q["max_difference_vs_plain"] <= 0.005 and q["max_difference_vs_cpu"] == 0.0  # the same device here
    assert set(q["metrics"]["veil_gpu"]) == {"0", "1"} and row["audit"]["command"].endswith("--quick --only audit")
    assert row["audit"]["adult"]["skipped"].startswith("Adult was not fetched under")
    assert row["population-adult"]["skipped"].startswith("Adult was not fetched under")
    pop = row["population"]
    assert pop["members"] == 16 and pop["cpu_threads"] == 1 and max(pop["max_member_difference"].values()) < 0.1
    assert "tests" not in row and "eigan" not in row


def test_population_sizes_interval_is_the_student_t_interval_of_the_pair_differences() -> None:
    """The six seed pairs recorded on 2026-11-26: mean -0.0004, t(5) 97.5% quantile 2.5706, sd 0.00518."""
    sweeps = bench("bench_sweeps")
    diffs = [0.0007, 0.0025, -0.002, 0.0046, 0.0015, -0.0097]
    low, high = sweeps.mean_interval(diffs)
    assert low == pytest.approx(-0.0057, abs=1e-4) and high == pytest.approx(0.0049, abs=1e-4)
    assert sweeps.mean_interval([0.1, 0.3], level=0.5) == pytest.approx([0.1, 0.3], abs=1e-4)  # t(1) 75%: 1.0
    assert sweeps.mean_interval([0.01]) is None


def test_cli_startup_row_times_fresh_processes_and_renders_its_target(tmp_path: Path) -> None:
    """The quick `cli` benchmark runs each command as a fresh process (3 timed after a warm-up); the targets row
    says met exactly when every bounded command's median is within its bound (no timing is asserted here)."""
    suite, cli, targets = load_suite(), bench("bench_cli"), tool("bench_targets_block")
    results = tmp_path / "suite.jsonl"
    assert suite.main(["--quick", "--only", "cli", "--results", str(results)]) == 0
    row = json.loads(results.read_text().splitlines()[-1])
    assert set(row["commands"]) == set(cli.CLI_COMMANDS)
    for name, m in row["commands"].items():
        assert len(m["walls"]) == 3 and m["wall_s"] == sorted(m["walls"])[1]
        assert 0 < m["cpu_s"] and m["target_s"] == cli.CLI_COMMANDS[name][1]
    (line,) = [x for x in targets.new_targets({"cli": row}) if "`veil --help` <= 0.5 s" in x]
    met = all(m["wall_s"] <= m["target_s"] for m in row["commands"].values() if m["target_s"] is not None)
    assert f"| {'yes' if met else 'no'} |" in line
    slow = {**row, "commands": {**row["commands"], "veil --help": {**row["commands"]["veil --help"], "wall_s": 0.9}}}
    (line,) = [x for x in targets.new_targets({"cli": slow}) if "`veil --help` <= 0.5 s" in x]
    assert "| no | what each command imports" in line and "`veil --help` 0.90 s" in line


def test_scale_windows_split_a_worker_slot_into_its_parts() -> None:
    """benchmarks/scale.py's per-trial figures on a synthetic sweep: trials start every 0.5 s on 2 workers (a slot
    of 1.0 s per trial), each run takes 0.3 s inside a 0.35 s trial and the sampler asks in 0.01 s, so the rest
    (Tune's scheduling) is 0.64 s; the first trial, which warms its worker, is left out of every window."""
    import pandas as pd

    spec = importlib.util.spec_from_file_location("bench_scale", ROOT / "benchmarks" / "scale.py")
    assert spec and spec.loader
    scale = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(scale)
    n = 32
    start = pd.Timestamp("2026-11-28", tz="UTC")
    trials = pd.DataFrame(
        {
            "trial": range(1, n + 1),
            "started": [start + pd.Timedelta(seconds=0.5 * i + (3.0 if i else 0.0)) for i in range(n)],
            "seconds": [0.35] * n,
            "total_seconds": [0.3] * n,
        }
    )
    windows = scale.window_overheads(trials, [0.01] * n, concurrency=2)
    assert [w["trial"] for w in windows] == [11, 21, 31]
    for w in windows:
        assert w["slot_s"] == pytest.approx(1.0, abs=1e-6) and w["run_s"] == pytest.approx(0.3)
        assert w["pre_s"] == pytest.approx(0.05) and w["ask_s"] == pytest.approx(0.01)
        assert w["scheduling_s"] == pytest.approx(0.64, abs=1e-4) and w["overhead_s"] == pytest.approx(0.7, abs=1e-4)
