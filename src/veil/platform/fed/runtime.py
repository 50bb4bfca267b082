"""Ray transports of a federation (the in-process one is `veil.methods.federated.simulation`).

- `in-process`: node hosts are objects in this process; a host holds `nodes_per_host` nodes as one
  vectorised ensemble (default: all K in one). A host that hits a fault is rebuilt, as Ray would restart it.
- `ray-actors`: one node host actor per node.
- `virtual`: `hosts` node host actors, each holding ceil(K / hosts) nodes as one vectorised ensemble.
In both Ray runtimes the coordinator runs in its own actor, and every actor is placed in one
placement group sized to fit: each bundle asks min(cpus_per_host, budget / (hosts + 1)) CPUs, the
budget being the CPUs the cluster has available (or `cpus` when given). A request the cluster
cannot satisfy (more CPUs than available, bundles below 0.05 CPU, more memory than the cluster
has for (hosts + 1) actors of `actor_memory_mb`, or a placement group not ready within
`ready_timeout_s`) is refused with a `ResourceError` before any actor starts, so nothing is left
PENDING. Node host actors restart up to `max_restarts` times; a restarted host rejoins from the
global state. Runtimes are registered by name in `RUNTIMES`. A `tap` runs where the coordinator runs (in
its actor on Ray: it must pickle, and what it records stays in that process unless it writes it out)."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from veil.datasets.base import TaskSpec
from veil.errors import UnknownNameError
from veil.methods.federated.coordinator import Coordinator, Tap
from veil.methods.federated.core import FederatedRoles, NodeData, ResourceError
from veil.methods.federated.host import NodeHost
from veil.methods.federated.simulation import (
    Coordinated,
    Federation,
    FederationOptions,
    FederationOutcome,
    FederationPlan,
    LiveAudit,
    LocalFederation,
    PoolBase,
    RoundHook,
    plan_federation,
    run_federation,
    split_hosts,
)
from veil.platform.cluster import available_resources, ensure_ray

MIN_CPUS_PER_ACTOR = 0.05  # 40 actors on 2 CPUs at most: beyond that, host nodes virtually


# ---------------------------------------------------------------------------------------------------
# Ray
# ---------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ResourcePlan:
    """How many host actors, and what each actor (and the coordinator) asks for."""

    hosts: int
    cpus_per_actor: float
    budget: float
    memory_needed_mb: int
    memory_available_mb: int

    def to_params(self) -> dict[str, Any]:
        return {
            "hosts": self.hosts,
            "cpus_per_actor": self.cpus_per_actor,
            "cpu_budget": self.budget,
            "memory_needed_mb": self.memory_needed_mb,
        }


def plan_resources(
    hosts: int, *, cpus_per_host: float, cpus: float, actor_memory_mb: int, available: Mapping[str, float]
) -> ResourcePlan:
    """Size the actors to fit `available` (ray.available_resources()) or refuse with the numbers."""
    have_cpu = float(available.get("CPU", 0.0))
    have_mem = int(float(available.get("memory", 0.0)) / 2**20)
    if cpus > 0 and cpus > have_cpu + 1e-9:
        raise ResourceError(
            f"the federation asks for {cpus:g} CPUs but the cluster has {have_cpu:g} available; "
            f"lower federation.cpus (0 = use what is available)"
        )
    budget = cpus if cpus > 0 else have_cpu
    actors = hosts + 1
    per = math.floor(min(cpus_per_host, budget / actors) * 1e4) / 1e4
    if per < MIN_CPUS_PER_ACTOR:
        raise ResourceError(
            f"{hosts} node host actors + 1 coordinator on {budget:g} CPUs leaves {budget / actors:.4f} "
            f"CPU per actor (minimum {MIN_CPUS_PER_ACTOR}); use runtime 'virtual' with fewer hosts"
        )
    need = actors * actor_memory_mb
    if actor_memory_mb and have_mem and need > have_mem:
        raise ResourceError(
            f"{hosts} node host actors + 1 coordinator need about {need} MB "
            f"({actor_memory_mb} MB each) but the cluster has {have_mem} MB available; use runtime "
            f"'virtual' (several nodes per actor) or fewer nodes"
        )
    return ResourcePlan(hosts, per, budget, need, have_mem)


@dataclass(frozen=True)
class HostLayout:
    """What the node host actors are built from: the method and its validated config, the nodes' shards (object
    refs, one per host) and sizes, and where in the placement group each host runs."""

    method_name: str
    config: Any
    task: TaskSpec
    shard_refs: list[Any]
    node_blocks: list[list[int]]
    sizes: Mapping[int, int]
    pg: Any
    cpus_per_actor: float
    max_restarts: int
    faults: Mapping[int, int] | None


class CoordinatorService(Coordinated):
    """The coordinator's actor-side state: its `Coordinator`, and a `RayPool` of host actors it created
    in the placement group's bundles 1..hosts."""

    def __init__(self, layout: HostLayout, *, seed: int, tap: Tap | None = None) -> None:
        from veil.methods.registry import create_method

        method = create_method(layout.method_name, layout.config, layout.task)  # the validated config, not rebuilt
        assert isinstance(method, FederatedRoles), f"{layout.method_name} is not a federated method"
        self.method = method
        self.pool = RayPool(layout)
        self.coordinator = Coordinator(self.method, self.pool, seed=seed, tap=tap)

    def host_info(self) -> list[Any]:
        return self.pool.info()


class RayPool(PoolBase):
    """Node host actors (one per block of nodes), each in its own bundle of the placement group."""

    def __init__(self, layout: HostLayout) -> None:
        import ray
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        self.node_ids = [k for block in layout.node_blocks for k in block]
        self.sizes = {int(k): int(v) for k, v in layout.sizes.items()}
        self.host_of = {k: h for h, block in enumerate(layout.node_blocks) for k in block}
        actor_cls: Any = ray.remote(NodeHost)
        threads = max(1, int(layout.cpus_per_actor))
        self.actors: list[Any] = []
        for h, ref in enumerate(layout.shard_refs):
            opts = {
                "num_cpus": layout.cpus_per_actor,
                "max_restarts": layout.max_restarts,
                "max_task_retries": 0,
                "scheduling_strategy": PlacementGroupSchedulingStrategy(layout.pg, placement_group_bundle_index=h + 1),
            }
            self.actors.append(
                actor_cls.options(**opts).remote(
                    layout.method_name,
                    layout.config,
                    layout.task,
                    ref,
                    host_id=h,
                    faults=layout.faults,
                    hard_faults=True,
                    threads=threads,
                )
            )
        ray.get([a.info.remote() for a in self.actors])  # all constructed (and their Node models built)
        self._pids = {h: None for h in range(len(self.actors))}
        self._deaths = 0

    def _invoke(self, calls):
        import ray

        refs = [(h, method, args, getattr(self.actors[h], method).remote(*args)) for h, method, args in calls]
        out = []
        for h, method, args, ref in refs:
            try:
                out.append((h, ray.get(ref)))
            except ray.exceptions.ActorUnavailableError as e:
                if method == "run_round":  # died mid-round: a failure of this round; Ray restarts the actor
                    self._deaths += 1
                    out.append((h, e))
                else:  # join / finalize / export are idempotent: wait for the restart and ask again
                    out.append((h, self._retry(h, method, args, e)))
            except ray.exceptions.RayActorError as e:
                out.append((h, e))
            except ray.exceptions.RayTaskError as e:
                out.append((h, e))
        return out

    def _retry(self, h: int, method: str, args: tuple, error: BaseException, timeout: float = 120.0) -> Any:
        import ray

        deadline = time.time() + timeout
        while time.time() < deadline:
            time.sleep(0.5)
            try:
                return ray.get(getattr(self.actors[h], method).remote(*args))
            except ray.exceptions.ActorUnavailableError as e:
                error = e
            except (ray.exceptions.RayActorError, ray.exceptions.RayTaskError) as e:
                return e
        return error

    def _failure_kind(self, error: BaseException) -> str:
        import ray

        if isinstance(error, ray.exceptions.ActorDiedError):
            return "dead"
        if isinstance(error, ray.exceptions.RayActorError):
            return "died"
        return "error"

    def restarts(self) -> int:
        return self._deaths

    def info(self) -> list[Any]:
        import ray

        out = []
        for h, a in enumerate(self.actors):
            try:
                out.append(ray.get(a.info.remote(), timeout=60))
            except Exception as e:  # noqa: BLE001
                out.append({"host": h, "error": f"{type(e).__name__}: {e}"})
        return out

    def shutdown(self) -> None:
        import ray

        for a in self.actors:
            try:
                ray.kill(a, no_restart=True)
            except Exception:  # noqa: BLE001
                pass
        self.actors = []


class RayFederation:
    """Driver-side handle of a federation on Ray: placement group, coordinator actor, node host actors."""

    def __init__(
        self,
        method_name: str,
        config: Any,
        task: TaskSpec,
        shards: Sequence[NodeData],
        node_blocks: list[list[int]],
        plan: ResourcePlan,
        *,
        max_restarts: int,
        faults: Mapping[int, int] | None,
        seed: int,
        ready_timeout_s: float,
        tap: Tap | None = None,
    ) -> None:
        import ray
        from ray.util.placement_group import placement_group, remove_placement_group
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        self._remove = remove_placement_group
        self.plan = plan
        bundles = [{"CPU": plan.cpus_per_actor}] * (len(node_blocks) + 1)
        self.pg = placement_group(bundles, strategy="PACK", name=f"veil-fed-{int(time.time() * 1000)}")
        try:
            ray.get(self.pg.ready(), timeout=ready_timeout_s)
        except Exception as e:
            remove_placement_group(self.pg)
            raise ResourceError(
                f"placement group of {len(bundles)} bundles x {plan.cpus_per_actor:g} CPU was not "
                f"ready within {ready_timeout_s:g} s ({type(e).__name__}); the cluster has "
                f"{ray.available_resources().get('CPU', 0):g} CPUs available"
            ) from None
        by_id = {d.node: d for d in shards}
        # The driver owns the shard objects, so a restarted host actor can rebuild from them.
        self.shard_refs = [ray.put([by_id[k] for k in block]) for block in node_blocks]
        svc: Any = ray.remote(CoordinatorService)
        self.coord = svc.options(
            num_cpus=plan.cpus_per_actor,
            max_restarts=0,
            scheduling_strategy=PlacementGroupSchedulingStrategy(self.pg, placement_group_bundle_index=0),
        ).remote(
            HostLayout(
                method_name,
                config,
                task,
                self.shard_refs,
                node_blocks,
                {d.node: len(d.train) for d in shards},
                self.pg,
                plan.cpus_per_actor,
                max_restarts,
                faults,
            ),
            seed=seed,
            tap=tap,
        )

    def _get(self, ref):
        import ray

        return ray.get(ref)

    def start(self) -> dict[int, int]:
        return self._get(self.coord.start.remote())

    def run_round(self, rnd: int):
        return self._get(self.coord.run_round.remote(rnd))

    def finish(self) -> dict[int, int]:
        return self._get(self.coord.finish.remote())

    def snapshot(self):
        return self._get(self.coord.snapshot.remote())

    def restarts(self) -> int:
        return self._get(self.coord.restarts.remote())

    def shutdown(self) -> None:
        import ray

        try:
            ray.get(self.coord.shutdown.remote(), timeout=30)
        except Exception:  # noqa: BLE001
            pass
        try:
            ray.kill(self.coord, no_restart=True)
        except Exception:  # noqa: BLE001
            pass
        try:
            self._remove(self.pg)
            wait_removed(self.pg)
        except Exception:  # noqa: BLE001
            pass


def wait_removed(pg: Any, timeout: float = 15.0) -> None:
    """Block until the placement group is gone and its CPUs show up as available again (the resource view
    lags removal by up to a second; a next federation sized on stale numbers would be refused)."""
    import ray
    from ray.util.placement_group import placement_group_table

    deadline = time.time() + timeout
    total = sum(b.get("CPU", 0.0) for b in pg.bundle_specs)
    while time.time() < deadline:
        if placement_group_table(pg).get("state") == "REMOVED":
            break
        time.sleep(0.05)
    while time.time() < deadline:
        avail = ray.available_resources()
        if not any(k.startswith("CPU_group_") and pg.id.hex() in k for k in avail) and avail.get(
            "CPU", 0.0
        ) + 1e-6 >= min(total, ray.cluster_resources().get("CPU", 0.0)):
            return
        time.sleep(0.1)


# ---------------------------------------------------------------------------------------------------
# Runtimes by name
# ---------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Runtime:
    """Where a federation's hosts live: `place` lays the nodes on hosts and sizes the resources (refusing what
    cannot fit, before anything starts); `start` builds the running federation."""

    name: str
    place: Callable[[FederationPlan, str | None], None]
    start: Callable[[FederationPlan, Tap | None], Federation]
    description: str


def _place_in_process(plan: FederationPlan, address: str | None) -> None:
    per = plan.options.nodes_per_host or len(plan.shards)
    plan.node_blocks = split_hosts(list(range(len(plan.shards))), math.ceil(len(plan.shards) / per))


def _place_on_ray(per_node: bool) -> Callable[[FederationPlan, str | None], None]:
    def place(plan: FederationPlan, address: str | None) -> None:
        ensure_ray(address)
        avail = available_resources()
        k, opts = len(plan.shards), plan.options
        hosts = k if per_node else (opts.hosts or max(1, min(k, int(avail.get("CPU", 1.0)) or 1)))
        plan.node_blocks = split_hosts(list(range(k)), min(hosts, k))
        plan.resources = plan_resources(
            len(plan.node_blocks),
            cpus_per_host=opts.cpus_per_host,
            cpus=opts.cpus,
            actor_memory_mb=opts.actor_memory_mb,
            available=avail,
        )

    return place


def _start_on_ray(plan: FederationPlan, tap: Tap | None) -> Federation:
    m, opts = plan.method, plan.options
    return RayFederation(
        plan.method_name,
        m.config,
        m.task,
        plan.shards,
        plan.node_blocks,
        plan.resources,
        max_restarts=opts.max_restarts,
        faults=plan.faults,
        seed=plan.seed,
        ready_timeout_s=opts.ready_timeout_s,
        tap=tap,
    )


RUNTIMES: dict[str, Runtime] = {
    r.name: r
    for r in (
        Runtime(
            "in-process",
            _place_in_process,
            lambda plan, tap: LocalFederation(plan, tap=tap),
            "every node host is an object in this process",
        ),
        Runtime("ray-actors", _place_on_ray(per_node=True), _start_on_ray, "one Ray actor per node"),
        Runtime(
            "virtual",
            _place_on_ray(per_node=False),
            _start_on_ray,
            "a few Ray actors, each running many nodes as one vectorised ensemble",
        ),
    )
}
RUNTIME_ALIASES = {"auto": "virtual"}
RUNTIME_NAMES = ("auto", *RUNTIMES)


def get_runtime(name: str) -> Runtime:
    """The runtime registered as `name` ('auto' = virtual), or an error listing the valid names."""
    name = RUNTIME_ALIASES.get(name, name)
    if name not in RUNTIMES:
        raise UnknownNameError("runtime", name, list(RUNTIME_NAMES))
    return RUNTIMES[name]


def plan_on(
    runtime: str,
    method: Any,
    method_name: str,
    train: Any,
    *,
    dataset: Any = None,
    partition_scheme: str = "iid",
    options: FederationOptions | None = None,
    seed: int = 0,
    address: str | None = None,
) -> FederationPlan:
    """Check and partition a federation, then lay it out on `runtime` (sizing Ray resources, refusing what
    cannot fit). Starts nothing."""
    rt = get_runtime(runtime)
    plan = plan_federation(
        method, method_name, train, dataset=dataset, partition_scheme=partition_scheme, options=options, seed=seed
    )
    plan.runtime = rt.name
    rt.place(plan, address)
    return plan


def run_planned(
    plan: FederationPlan,
    *,
    on_round: RoundHook | None = None,
    live_audit: LiveAudit | None = None,
    tap: Tap | None = None,
) -> FederationOutcome:
    """Start the planned federation on its runtime and run every round."""
    return run_federation(plan, get_runtime(plan.runtime).start(plan, tap), on_round=on_round, live_audit=live_audit)
