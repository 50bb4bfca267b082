"""Shared helpers of the benchmark suite (benchmarks/suite.py) and of scale.py and gpu.py: what machine a row was
measured on and under what load, the matmul FLOP limit a training step's layers can reach and the FLOPs of one Veil
step, and the wall time and peak RSS of a command's whole process tree."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Iterable

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

Row = dict[str, Any]


# -- machine, load and the hardware limit ---------------------------------------------------------------------
def machine() -> dict[str, Any]:
    """What the row was measured on."""
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU"
    return {
        "cpus": os.cpu_count(),
        "arch": platform.machine(),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "gpu": gpu,
    }


def load() -> float:
    """1-minute load average (the machine is shared: read every row with it)."""
    return round(os.getloadavg()[0], 2)


def linear_shapes(modules: Iterable[torch.nn.Module]) -> list[tuple[int, int]]:
    """(in, out) of every Linear layer of `modules`."""
    return [(m.in_features, m.out_features) for mod in modules for m in mod.modules() if isinstance(m, torch.nn.Linear)]


def matmul_gflops(shapes: list[tuple[int, int]], batch: int, seconds: float = 1.0, device: str = "cpu") -> float:
    """Best float32 torch.matmul GFLOP/s over the forward and both backward products of layers `shapes` at
    `batch` rows, with the threads training uses: the limit a training step of these layers can reach. On a GPU
    a repetition is 50 passes between two syncs, so the clock measures the kernels rather than one sync's latency."""
    g = torch.Generator(device=device).manual_seed(0)
    products = []
    for d_in, d_out in shapes:
        x, w, y = (
            torch.randn(a, b, generator=g, device=device) for a, b in ((batch, d_in), (d_in, d_out), (batch, d_out))
        )
        products += [(x, w), (y, w.T), (x.T, y)]  # forward, grad of the input, grad of the weight
    passes = 1 if device == "cpu" else 50
    flops = passes * sum(2 * a.shape[0] * a.shape[1] * b.shape[1] for a, b in products)
    best, reps, t_end = float("inf"), 0, time.perf_counter() + seconds
    while time.perf_counter() < t_end or reps < 20:  # at least 20: a starved repetition must not be the best
        reps += 1
        if device != "cpu":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(passes):
            for a, b in products:
                torch.matmul(a, b)
        if device != "cpu":
            torch.cuda.synchronize()
        best = min(best, time.perf_counter() - t0)
    return flops / best / 1e9


def step_flops_per_row(method: Any, split: Any) -> float:
    """Matmul FLOPs of one Veil training step per row of its minibatch, counted by torch's FlopCounterMode
    (forward 2*in*out per Linear and row; backward twice that where weights train)."""
    import copy

    from torch.utils.flop_counter import FlopCounterMode

    from veil.methods.method import BatchSampler, TrainContext

    m = copy.deepcopy(method)
    if hasattr(m, "scaler"):
        m.scaler.fit(np.asarray(split.x, dtype=np.float64))
    sampler = BatchSampler(split, m.config.batch_size, torch.device("cpu"), 0)
    batch = next(sampler.epoch())
    with FlopCounterMode(display=False) as counter:
        m.train_step(batch, sampler, TrainContext())
    return counter.get_total_flops() / sampler.batch_size


# -- processes: wall time and peak RSS of a whole process tree --------------------------------------------------
def timed(cmd: list[str], cwd: str | None = None, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run `cmd`; wall seconds, the peak summed RSS of its process tree (Ray's raylet and workers included) and the
    peak RSS of the command's own process (the driver)."""
    import psutil

    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peak, own = [0], [0]

    def sample() -> None:
        root = psutil.Process(proc.pid)
        while proc.poll() is None:
            try:
                mine = root.memory_info().rss
                total = mine + sum(p.memory_info().rss for p in root.children(recursive=True))
            except psutil.Error:
                mine = total = 0
            peak[0], own[0] = max(peak[0], total), max(own[0], mine)
            time.sleep(0.2)

    t0 = time.perf_counter()
    watcher = threading.Thread(target=sample, daemon=True)
    watcher.start()
    stdout, stderr = proc.communicate()
    wall = time.perf_counter() - t0
    watcher.join()
    return {
        "rc": proc.returncode,
        "wall_s": round(wall, 2),
        "peak_rss_mb": round(peak[0] / 2**20, 1),
        "driver_peak_rss_mb": round(own[0] / 2**20, 1),
        "stdout": stdout,
        "stderr": stderr,
    }


def veil_cli() -> str:
    return str(Path(sys.executable).with_name("veil"))


def clean_env() -> dict[str, str]:
    """This environment without a tracking server or Ray cluster of the caller's (each command gets its own)."""
    return {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "RAY_ADDRESS")}
