"""The suite's CLI start-up benchmark: wall and CPU time of `veil` commands as fresh processes, against issue
26's bounds."""

from __future__ import annotations

import subprocess
import time

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


def run_cli(quick: bool) -> Row:
    """Start-up of the CLI as a user meets it: every command of CLI_COMMANDS as a fresh process from the repository
    root, the commands taking turns, wall and CPU seconds (the process's user + system time) of each; medians.
    Not through `timed`: its memory sampler polls every 0.2 s, as long as the commands it would time."""
    import resource

    walls: dict[str, list[float]] = {name: [] for name in CLI_COMMANDS}
    cpus: dict[str, list[float]] = {name: [] for name in CLI_COMMANDS}
    for i in range(1 + (3 if quick else CLI_REPEATS)):
        for name, (args, _) in CLI_COMMANDS.items():
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.perf_counter()
            done = subprocess.run([veil_cli(), *args], cwd=ROOT, env=clean_env(), capture_output=True, text=True)
            wall = time.perf_counter() - t0
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            if done.returncode != 0:
                raise RuntimeError(f"{name} failed ({done.returncode}): {done.stderr[-500:]}")
            if i:  # the first round warms the page cache and Python's bytecode cache
                walls[name].append(round(wall, 3))
                cpus[name].append(round(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, 3))
    return {
        "commands": {
            name: {
                "wall_s": float(np.median(walls[name])),
                "cpu_s": float(np.median(cpus[name])),
                "walls": walls[name],
                "target_s": bound,
            }
            for name, (_, bound) in CLI_COMMANDS.items()
        }
    }
