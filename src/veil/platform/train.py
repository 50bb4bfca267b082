"""Where a method's training loop runs: inline in this process, or as a Ray Train TorchTrainer job.

Both executors run the same `Method.fit`; they differ only in the TrainContext (device, rank,
gradient sync, where epoch rows go). Rule for the default (`executor: auto`): ray-train whenever a
GPU or more than one worker is asked for, inline otherwise (a TorchTrainer spends ~15 s starting)."""
from __future__ import annotations

import json
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

import torch

from veil.datasets.base import Dataset
from veil.methods import Method, TrainContext, create_method

EXECUTORS = ("auto", "inline", "ray-train")
EpochHook = Callable[[int, dict[str, float]], None]


@dataclass
class TrainOutcome:
    """A trained method plus its per-epoch loss rows and where it ran."""

    method: Method
    history: list[dict[str, float]]
    executor: str
    device: str
    seconds: float


def choose_executor(executor: str, num_workers: int, use_gpu: bool) -> str:
    """Resolve 'auto': ray-train when a GPU or several workers are asked for, else inline."""
    if executor == "auto":
        return "ray-train" if (use_gpu or num_workers > 1) else "inline"
    return executor


def train_inline(method_name: str, params: Mapping[str, Any], ds: Dataset, on_epoch: EpochHook | None,
                 use_gpu: bool = False) -> TrainOutcome:
    """Train in this process (CPU, or the first CUDA device when asked for and present)."""
    device = "cuda" if use_gpu and torch.cuda.is_available() else "cpu"
    t0 = time.time()
    method = create_method(method_name, params, ds.task())
    history = method.fit(ds.train, TrainContext(device, on_epoch=on_epoch))
    return TrainOutcome(method.to("cpu"), history, "inline", device, time.time() - t0)


def _ray_train_loop(cfg: dict[str, Any]) -> None:
    """Runs on every Ray Train worker: same fit, gradients all-reduced, rank 0 checkpoints the result."""
    import ray.train
    import ray.train.torch

    from veil.tracking.mlflow_run import TrackedRun

    tctx = ray.train.get_context()
    rank, world = tctx.get_world_rank(), tctx.get_world_size()
    device = ray.train.torch.get_device()
    ds: Dataset = cfg["dataset"]
    tracker = TrackedRun(cfg["tracking_uri"], cfg["run_id"]) if rank == 0 and cfg.get("run_id") else None

    def report(epoch: int, row: dict[str, float]) -> None:
        if rank == 0:
            text = " ".join(f"{k}={v:.4f}" for k, v in row.items())
            print(f"[veil] epoch {epoch + 1}/{cfg['params'].get('epochs', '?')} {text}", flush=True)
            if tracker:
                tracker.log_metrics(row, step=epoch)
        ray.train.report({"epoch": epoch, **row})  # every worker reports (Train v2 synchronises on it)

    method = create_method(cfg["method"], cfg["params"], ds.task())
    history = method.fit(ds.train, TrainContext(device, rank, world, on_epoch=report))
    if rank == 0:
        with tempfile.TemporaryDirectory() as d:
            torch.save(method.to("cpu").state(), Path(d) / "state.pt")
            (Path(d) / "history.json").write_text(json.dumps({"history": history, "device": str(device)}))
            ray.train.report({"done": 1}, checkpoint=ray.train.Checkpoint.from_directory(d))
    else:
        ray.train.report({"done": 1})


def ensure_ray(address: str | None = None) -> None:
    """Connect to `address` (e.g. 'auto' on a cluster's head node) or start a local Ray."""
    import ray

    if ray.is_initialized():
        return
    kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": True, "configure_logging": False}
    ray.init(address=address, **kwargs)


def cluster_gpus() -> float:
    import ray

    return float(ray.cluster_resources().get("GPU", 0))


def train_ray(method_name: str, params: Mapping[str, Any], ds: Dataset, *, num_workers: int, use_gpu: bool,
              storage: Path, tracking_uri: str | None, run_id: str | None, address: str | None) -> TrainOutcome:
    """Train under a Ray Train TorchTrainer (data-parallel over `num_workers`), then load rank 0's checkpoint."""
    from ray.train import RunConfig, ScalingConfig
    from ray.train.torch import TorchTrainer

    ensure_ray(address)
    if use_gpu and cluster_gpus() < num_workers:
        print(f"[veil] warning: use_gpu asked for {num_workers} GPU worker(s) but the cluster has "
              f"{cluster_gpus():g} GPU(s); training on CPU", file=sys.stderr)
        use_gpu = False
    t0 = time.time()
    trainer = TorchTrainer(
        _ray_train_loop,
        train_loop_config={"method": method_name, "params": dict(params), "dataset": ds,
                           "tracking_uri": tracking_uri, "run_id": run_id},
        scaling_config=ScalingConfig(num_workers=num_workers, use_gpu=use_gpu),
        run_config=RunConfig(storage_path=str(storage.resolve()), name=f"train-{run_id or int(t0)}"),
    )
    result = trainer.fit()
    if result.error:
        raise result.error
    if result.checkpoint is None:
        raise RuntimeError("Ray Train finished without a checkpoint from rank 0")
    with result.checkpoint.as_directory() as d:
        state = torch.load(Path(d) / "state.pt", weights_only=True)
        meta = json.loads((Path(d) / "history.json").read_text())
    method = create_method(method_name, params, ds.task())
    method.load_state(state)
    return TrainOutcome(method, meta["history"], "ray-train", meta["device"], time.time() - t0)
