"""The suite's CLI start-up benchmark: wall and CPU time of `veil` commands as fresh processes, against issue
26's bounds."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from bench_common import ROOT, Row, clean_env, veil_cli

# -- start-up of the CLI ---------------------------------------------------------------------------------------------
CLI_COMMANDS: dict[str, tuple[list[str], float | None]] = {
    "veil --help": (["--help"], 0.5),
    "veil methods": (["methods"], None),
    "veil sweep sweeps/quickstart.yaml --check": (["sweep", "sweeps/quickstart.yaml", "--check"], 1.5),
}
"""Each command's arguments and issue 26's bound on its wall time (None: timed, no target)."""
CLI_REPEATS = 5  # fresh processes per command in the full form (3 in --quick), after one warm-up
EXIT_ARGS = "run -m gpp -d gaussian-correlated -p n=3000 --set beta=1 --set epochs=2 --target none --quiet".split()
"""A short `veil run`: it loads torch, MLflow, pandas and scikit-learn, all of which the process's exit tears down."""
MAIN_AS_BEFORE = "import sys; from veil.cli import main; sys.exit(main())"
"""The same command through `main` alone, as the script ran it before `entry` froze the heap at exit."""


def fresh_process(cmd: list[str], cwd: Path, label: str) -> tuple[float, float]:
    """Wall and CPU seconds (the child's user + system time) of `cmd` as a fresh process, rounded to ms; raises
    naming `label` when it fails. Not through `timed`: its memory sampler polls every 0.2 s, as long as a
    start-up it would time."""
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(cmd, cwd=cwd, env=clean_env(), capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(f"{label} failed ({done.returncode}): {done.stderr[-500:]}")
    return round(wall, 3), round(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, 3)


def run_cli(quick: bool) -> Row:
    """Start-up of the CLI as a user meets it: every command of CLI_COMMANDS as a fresh process from the repository
    root, the commands taking turns, wall and CPU seconds of each (`fresh_process`); medians."""
    walls: dict[str, list[float]] = {name: [] for name in CLI_COMMANDS}
    cpus: dict[str, list[float]] = {name: [] for name in CLI_COMMANDS}
    for i in range(1 + (3 if quick else CLI_REPEATS)):
        for name, (args, _) in CLI_COMMANDS.items():
            wall, cpu = fresh_process([veil_cli(), *args], ROOT, name)
            if i:  # the first round warms the page cache and Python's bytecode cache
                walls[name].append(wall)
                cpus[name].append(cpu)
    return {
        "exit": run_exit(quick),
        "commands": {
            name: {
                "wall_s": float(np.median(walls[name])),
                "cpu_s": float(np.median(cpus[name])),
                "walls": walls[name],
                "target_s": bound,
            }
            for name, (_, bound) in CLI_COMMANDS.items()
        },
    }


def run_exit(quick: bool) -> dict[str, object]:
    """EXIT_ARGS through the `veil` script against MAIN_AS_BEFORE, the two taking turns, each side in a directory
    of its own (its own ./mlflow.db), after one warm-up each: wall seconds, medians and the median ratio of pairs."""
    import tempfile

    sides = {"script": [veil_cli()], "main": [sys.executable, "-c", MAIN_AS_BEFORE]}
    walls: dict[str, list[float]] = {name: [] for name in sides}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(1 + (3 if quick else CLI_REPEATS)):
            for name, cmd in sides.items():
                where = Path(tmp) / name
                where.mkdir(exist_ok=True)
                wall, _ = fresh_process([*cmd, *EXIT_ARGS], where, f"veil {' '.join(EXIT_ARGS)} ({name})")
                if i:
                    walls[name].append(wall)
    ratios = [a / b for a, b in zip(walls["script"], walls["main"])]
    return {
        "command": "veil " + " ".join(EXIT_ARGS),
        "script_s": float(np.median(walls["script"])),
        "main_s": float(np.median(walls["main"])),
        "ratio": round(float(np.median(ratios)), 3),
        "walls": walls,
    }
