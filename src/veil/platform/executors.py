"""Executors: where a validated run's training happens. Each is registered by name and turns what a run trains
(`Training`, built by the pipeline from its validated run) and its loaded data into a `Job` (every refusal happens there, before the run is tracked), whose `run` trains
and hands back a `TrainOutcome`.

- `inline`: `Method.fit` in this process (CPU, or the first CUDA device when asked for and present).
- `ray-train`: the same `fit` under a Ray Train `TorchTrainer`, data-parallel over `num_workers`.
- `federated`: the federation's rounds over node hosts in process, one Ray actor per node, or virtual
  nodes (`veil.platform.federation.RUNTIMES`).
`auto` resolves to ray-train whenever a GPU or more than one worker is asked for, inline otherwise (a
TorchTrainer spends ~15 s starting); federated methods always use `federated`. A GPU asked for where no
CUDA device exists (and every federated run, whose nodes train on CPU) prints a warning on the console and
trains on CPU; the device every run trained on is its MLflow tag `veil.device` ('cpu', 'cuda:0')."""

from __future__ import annotations

import functools
import json
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Protocol

import torch

from veil.console import logger, warn
from veil.datasets.dataset import Dataset
from veil.methods.builtin import create_method
from veil.methods.federated.core import FederatedRoles
from veil.methods.federated.simulation import FederationOutcome, FederationPlan
from veil.methods.method import TrainContext
from veil.registry import Registry

if TYPE_CHECKING:
    from veil.methods.configs.fed_options import FederationOptions

EpochHook = Callable[[int, dict[str, float]], None]
NODE_LOCAL_NOTE = "node_local/* metrics are each node's own log, computed on the node: they never crossed the wire"


@dataclass(frozen=True)
class Training:
    """What an executor needs of a run: the method, its validated config, and where and how it trains."""

    method: str
    """The method's registered name."""
    config: Any
    """The method's validated config (it travels to workers as it is)."""
    seed: int = 0
    """The run's seed (a federation's partition and placement derive from it)."""
    use_gpu: bool = False
    """Whether a GPU was asked for (trained on CPU, with a warning, where none is found)."""
    num_workers: int = 1
    """Ray Train's data-parallel workers."""
    address: str | None = None
    """The Ray cluster to join (None: a local Ray where one is needed)."""
    runtime: str | None = None
    """A federation's runtime by registered name."""
    partition: str | None = None
    """A federation's partition scheme."""
    federation: FederationOptions | None = None
    """A federation's built options."""


@dataclass
class TrainOutcome:
    """A trained method plus its per-epoch (or per-round) rows and where it ran."""

    method: Any
    """The trained `Method` (a federated one for the federated executor)."""
    history: list[dict[str, float]]
    executor: str
    device: str
    seconds: float
    federation: FederationOutcome | None = None


@dataclass
class Job:
    """A run checked and ready to train: the params and tags the executor adds, and the training itself."""

    executor: str
    train: Callable[[EpochHook | None, Any, Any], TrainOutcome]
    """train(on_epoch, tracker, live_audit) -> TrainOutcome; `tracker` lets remote workers log to the same MLflow
    run; `live_audit` (None: none) audits a federation between rounds, handed in by the pipeline, which owns the
    audit (this layer only transports)."""
    params: dict[str, Any] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)
    federation: FederationPlan | None = None
    device: str | None = None
    """The training device when known before training ('cpu', 'cuda:0'); None: known after (Ray Train workers)."""
    warm: Callable[[], Callable[[], None]] | None = None
    """Starts what `train` would wait seconds for (a federation's actor processes) and returns what releases it
    if `train` never runs; `track` calls it before it opens the tracking store, so the two overlap."""


class Executor(Protocol):
    def __call__(self, run: Training, ds: Dataset, storage: Path) -> Job: ...


EXECUTORS: Registry[Executor] = Registry("executor", plugins=False)


def register_executor(name: str) -> Callable[[Executor], Executor]:
    """Decorator adding an executor under `name`."""
    return EXECUTORS.decorator(name, lambda fn: fn)


def get_executor(name: str) -> Executor:
    """The executor registered as `name`, or an error listing the valid names."""
    return EXECUTORS.lookup(name)


def local_device(use_gpu: bool) -> str:
    """'cuda:0' when a GPU is asked for and this process sees a CUDA device, else 'cpu' (with a warning when a
    GPU was asked for)."""
    if not use_gpu:
        return "cpu"
    if torch.cuda.is_available():
        return "cuda:0"
    warn("--gpu / use_gpu: no CUDA device found (torch.cuda.is_available() is False); training runs on CPU")
    return "cpu"


# ---------------------------------------------------------------------------------------------------
# inline
# ---------------------------------------------------------------------------------------------------
@register_executor("inline")
def inline(run: Training, ds: Dataset, storage: Path) -> Job:
    device = local_device(run.use_gpu)

    def train(on_epoch: EpochHook | None, tracker: Any, live_audit: Any = None) -> TrainOutcome:
        t0 = time.time()
        method = create_method(run.method, run.config, ds.task())
        history = method.fit(ds.train, TrainContext(device, on_epoch=on_epoch))
        return TrainOutcome(method.to("cpu"), history, "inline", device, time.time() - t0)

    return Job("inline", train, device=device)


# ---------------------------------------------------------------------------------------------------
# ray-train
# ---------------------------------------------------------------------------------------------------
def _ray_train_loop(cfg: dict[str, Any]) -> None:
    """Runs on every Ray Train worker: same fit, gradients all-reduced, rank 0 checkpoints the result."""
    import ray.train
    import ray.train.torch

    from veil.tracking.mlflow_run import TrackedRun

    tctx = ray.train.get_context()
    rank, world = tctx.get_world_rank(), tctx.get_world_size()
    device = ray.train.torch.get_device()
    ds: Dataset = cfg["dataset"]
    config = cfg["config"]
    tracker = TrackedRun(cfg["tracking_uri"], cfg["run_id"]) if rank == 0 and cfg.get("run_id") else None

    def report(epoch: int, row: dict[str, float]) -> None:
        if rank == 0:
            text = " ".join(f"{k}={v:.4f}" for k, v in row.items())
            logger().info(f"epoch {epoch + 1}/{config.epochs} {text}")  # the worker's log (the driver's with --verbose)
            if tracker:
                tracker.log_metrics(row, step=epoch)
        ray.train.report({"epoch": epoch, **row})  # every worker reports (Train v2 synchronises on it)

    method = create_method(cfg["method"], config, ds.task())  # the validated config travels as is
    history = method.fit(ds.train, TrainContext(device, rank, world, on_epoch=report))
    if rank == 0:
        with tempfile.TemporaryDirectory() as d:
            torch.save(method.to("cpu").state(), Path(d) / "state.pt")
            (Path(d) / "history.json").write_text(json.dumps({"history": history, "device": str(device)}))
            ray.train.report({"done": 1}, checkpoint=ray.train.Checkpoint.from_directory(d))
    else:
        ray.train.report({"done": 1})


@register_executor("ray-train")
def ray_train(run: Training, ds: Dataset, storage: Path) -> Job:
    def train(on_epoch: EpochHook | None, tracker: Any, live_audit: Any = None) -> TrainOutcome:
        from ray.train import RunConfig, ScalingConfig
        from ray.train.torch import TorchTrainer

        from veil.platform.cluster import cluster_resources, ensure_ray

        ensure_ray(run.address)
        use_gpu = run.use_gpu
        gpus = cluster_resources().get("GPU", 0.0)
        if use_gpu and gpus < run.num_workers:
            warn(
                f"--gpu / use_gpu: no CUDA device found for every worker ({run.num_workers} worker(s), the Ray "
                f"cluster has {gpus:g} GPU(s)); training runs on CPU"
            )
            use_gpu = False
        t0 = time.time()
        run_id = getattr(tracker, "run_id", None)
        trainer = TorchTrainer(
            _ray_train_loop,
            train_loop_config={
                "method": run.method,
                "config": run.config,
                "dataset": ds,
                "tracking_uri": getattr(tracker, "tracking_uri", None),
                "run_id": run_id,
            },
            scaling_config=ScalingConfig(num_workers=run.num_workers, use_gpu=use_gpu),
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
        method = create_method(run.method, run.config, ds.task())
        method.load_state(state)
        return TrainOutcome(method, meta["history"], "ray-train", meta["device"], time.time() - t0)

    return Job("ray-train", train)


# ---------------------------------------------------------------------------------------------------
# federated
# ---------------------------------------------------------------------------------------------------
@register_executor("federated")
def federated(run: Training, ds: Dataset, storage: Path) -> Job:
    """Partition and place the federation (refusing what cannot run), then run its rounds."""
    from veil.platform.federation import get_runtime, plan_on, run_planned

    if run.use_gpu:
        warn("--gpu / use_gpu: federated nodes do not use CUDA; training runs on CPU")
    method = create_method(run.method, run.config, ds.task())
    plan = plan_on(
        run.runtime or "auto",
        method,
        run.method,
        ds.train,
        dataset=ds,
        partition_scheme=run.partition or "iid",
        options=run.federation,
        seed=run.seed,
        address=run.address,
    )
    for w in plan.warnings:  # also in the audit report; said here too, before a long run starts
        warn(w)
    label = f"federated:{plan.runtime}"

    def train(on_epoch: EpochHook | None, tracker: Any, live_audit: Any = None) -> TrainOutcome:
        outcome = run_planned(plan, on_round=on_epoch, live_audit=live_audit)
        return TrainOutcome(outcome.method, outcome.history, label, "cpu", outcome.seconds, federation=outcome)

    tags = {"veil.federated": "true", "veil.runtime": plan.runtime}
    if isinstance(method, FederatedRoles) and method.logs_node_metrics():
        tags["veil.node_local"] = NODE_LOCAL_NOTE
    runtime = get_runtime(plan.runtime)
    warm = functools.partial(runtime.warm, plan) if runtime.warm is not None else None
    return Job(
        label, train, params={"executor": label, **plan.params()}, tags=tags, federation=plan, device="cpu", warm=warm
    )
