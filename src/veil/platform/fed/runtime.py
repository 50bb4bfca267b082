"""Where a federation's processes live.

- `in-process`: node hosts are objects in this process (`LocalPool`); a host holds `nodes_per_host`
  nodes as one vectorised ensemble (default: all K in one). A host that hits a fault is rebuilt
  from its constructor arguments, as Ray would restart an actor.
- `ray-actors`: one node host actor per node.
- `virtual`: `hosts` node host actors, each holding ceil(K / hosts) nodes as one vectorised ensemble.
In both Ray runtimes the coordinator runs in its own actor, and every actor is placed in one
placement group sized to fit: each bundle asks min(cpus_per_host, budget / (hosts + 1)) CPUs, the
budget being the CPUs the cluster has available (or `cpus` when given). A request the cluster
cannot satisfy (more CPUs than available, bundles below 0.05 CPU, more memory than the cluster
has for (hosts + 1) actors of `actor_memory_mb`, or a placement group not ready within
`ready_timeout_s`) is refused with a `ResourceError` before any actor starts, so nothing is left
PENDING. Node host actors restart up to `max_restarts` times; a restarted host rejoins from the
global state."""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from veil.datasets.base import TaskSpec
from veil.platform.fed.core import Failure, InjectedFault, NodeData, ResourceError
from veil.platform.fed.host import NodeHost

RUNTIMES = ("auto", "in-process", "ray-actors", "virtual")
MIN_CPUS_PER_ACTOR = 0.05  # 40 actors on 2 CPUs at most: beyond that, host nodes virtually


def split_hosts(node_ids: Sequence[int], hosts: int) -> list[list[int]]:
    """Contiguous, near-equal blocks of nodes, one per host."""
    hosts = max(1, min(hosts, len(node_ids)))
    per = math.ceil(len(node_ids) / hosts)
    return [list(node_ids[i:i + per]) for i in range(0, len(node_ids), per)]


class _PoolBase:
    """Fan a call out to the hosts that hold the addressed nodes; per node, a result or a Failure."""

    node_ids: list[int]
    sizes: dict[int, int]
    host_of: dict[int, int]

    def _invoke(self, calls: list[tuple[int, str, tuple]]) -> list[tuple[int, Any]]:
        raise NotImplementedError

    def _failure_kind(self, error: BaseException) -> str:
        return "error"

    def _fanout(self, rnd: int, method: str, by_node: Mapping[int, Any], pass_dict: bool = True) -> dict[int, Any]:
        by_host: dict[int, dict[int, Any]] = {}
        for k, v in by_node.items():
            by_host.setdefault(self.host_of[k], {})[k] = v
        calls = []
        for h, sub in by_host.items():
            arg = sub if pass_dict else list(sub)
            calls.append((h, method, (rnd, arg) if method == "run_round" else (arg,)))
        out: dict[int, Any] = {}
        for h, res in self._invoke(calls):
            if isinstance(res, BaseException):
                kind = self._failure_kind(res)
                msg = f"{type(res).__name__}: {res}"
                for k in by_host[h]:
                    out[k] = Failure(k, rnd, kind, msg, h)
            else:
                out.update(res)
        return out

    def join(self, rnd: int, blobs: Mapping[int, bytes]) -> dict[int, Any]:
        return self._fanout(rnd, "join", blobs)

    def run_round(self, rnd: int, blobs: Mapping[int, bytes]) -> dict[int, Any]:
        return self._fanout(rnd, "run_round", blobs)

    def finalize(self, rnd: int, blobs: Mapping[int, bytes]) -> dict[int, Any]:
        return self._fanout(rnd, "finalize", blobs)

    def export(self, rnd: int, node_ids: Sequence[int]) -> dict[int, Any]:
        return self._fanout(rnd, "export", {k: None for k in node_ids}, pass_dict=False)


class LocalPool(_PoolBase):
    """Node hosts as objects in this process."""

    def __init__(self, method_name: str, method_values: Mapping[str, Any], task: TaskSpec, shards: Sequence[NodeData],
                 *, nodes_per_host: int = 0, faults: Mapping[int, int] | None = None, max_restarts: int = 3) -> None:
        ids = [d.node for d in shards]
        per = nodes_per_host or len(ids)
        blocks = split_hosts(ids, math.ceil(len(ids) / per))
        by_id = {d.node: d for d in shards}
        self.node_ids = ids
        self.sizes = {d.node: len(d.train) for d in shards}
        self.host_of = {k: h for h, block in enumerate(blocks) for k in block}
        self._args = [(method_name, dict(method_values), task, [by_id[k] for k in block]) for block in blocks]
        self._faults = dict(faults or {})
        self.max_restarts = max_restarts
        self._restarts = [0] * len(blocks)
        self._dead: set[int] = set()
        self.hosts: list[NodeHost | None] = [self._make(h) for h in range(len(blocks))]

    def _make(self, h: int) -> NodeHost:
        return NodeHost(*self._args[h], host_id=h, faults=self._faults, hard_faults=False)

    def _invoke(self, calls):
        out = []
        for h, method, args in calls:
            if h in self._dead:
                out.append((h, _Dead(f"node host {h} is dead (restarted {self._restarts[h]} times)")))
                continue
            try:
                out.append((h, getattr(self.hosts[h], method)(*args)))
            except InjectedFault as e:  # the host "died": rebuild it as Ray would restart the actor
                out.append((h, _Died(str(e))))
                if self._restarts[h] < self.max_restarts:
                    self._restarts[h] += 1
                    self.hosts[h] = self._make(h)
                else:
                    self._dead.add(h)
                    self.hosts[h] = None
            except Exception as e:  # noqa: BLE001  an update that raised: the node rejoins next time
                out.append((h, e))
        return out

    def _failure_kind(self, error: BaseException) -> str:
        return "dead" if isinstance(error, _Dead) else "died" if isinstance(error, _Died) else "error"

    def restarts(self) -> int:
        return sum(self._restarts)

    def shutdown(self) -> None:
        self.hosts = []


class _Died(RuntimeError):
    pass


class _Dead(RuntimeError):
    pass


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
        return {"hosts": self.hosts, "cpus_per_actor": self.cpus_per_actor, "cpu_budget": self.budget,
                "memory_needed_mb": self.memory_needed_mb}


def plan_resources(hosts: int, *, cpus_per_host: float, cpus: float, actor_memory_mb: int,
                   available: Mapping[str, float]) -> ResourcePlan:
    """Size the actors to fit `available` (ray.available_resources()) or refuse with the numbers."""
    have_cpu = float(available.get("CPU", 0.0))
    have_mem = int(float(available.get("memory", 0.0)) / 2**20)
    if cpus > 0 and cpus > have_cpu + 1e-9:
        raise ResourceError(f"the federation asks for {cpus:g} CPUs but the cluster has {have_cpu:g} available; "
                            f"lower federation.cpus (0 = use what is available)")
    budget = cpus if cpus > 0 else have_cpu
    actors = hosts + 1
    per = math.floor(min(cpus_per_host, budget / actors) * 1e4) / 1e4
    if per < MIN_CPUS_PER_ACTOR:
        raise ResourceError(f"{hosts} node host actors + 1 coordinator on {budget:g} CPUs leaves {budget / actors:.4f} "
                            f"CPU per actor (minimum {MIN_CPUS_PER_ACTOR}); use runtime 'virtual' with fewer hosts")
    need = actors * actor_memory_mb
    if actor_memory_mb and have_mem and need > have_mem:
        raise ResourceError(f"{hosts} node host actors + 1 coordinator need about {need} MB "
                            f"({actor_memory_mb} MB each) but the cluster has {have_mem} MB available; use runtime "
                            f"'virtual' (several nodes per actor) or fewer nodes")
    return ResourcePlan(hosts, per, budget, need, have_mem)


class _Coordinated:
    """A coordinator driving a pool of node hosts: the round calls every runtime exposes."""

    coordinator: Any
    pool: Any

    def start(self) -> dict[int, int]:
        self.coordinator.start()
        return dict(self.coordinator.join_bytes)

    def run_round(self, rnd: int):
        return self.coordinator.run_round(rnd)

    def finish(self) -> dict[int, int]:
        return self.coordinator.finish()

    def snapshot(self):
        return self.coordinator.snapshot()

    def restarts(self) -> int:
        return self.pool.restarts()

    def shutdown(self) -> None:
        self.pool.shutdown()


class CoordinatorService(_Coordinated):
    """The coordinator's actor-side state: its `Coordinator`, and a `RayPool` of host actors it created
    in the placement group's bundles 1..hosts."""

    def __init__(self, method_name: str, method_values: Mapping[str, Any], task: TaskSpec,
                 shard_refs: list[Any], node_blocks: list[list[int]], sizes: Mapping[int, int], *, pg: Any,
                 cpus_per_actor: float, max_restarts: int, faults: Mapping[int, int] | None, seed: int) -> None:
        from veil.methods.registry import create_method
        from veil.platform.fed.coordinator import Coordinator

        self.method = create_method(method_name, dict(method_values), task)
        self.pool = RayPool(method_name, method_values, task, shard_refs, node_blocks, sizes, pg=pg,
                            cpus_per_actor=cpus_per_actor, max_restarts=max_restarts, faults=faults)
        self.coordinator = Coordinator(self.method, self.pool, seed=seed)

    def host_info(self) -> list[Any]:
        return self.pool.info()


class RayPool(_PoolBase):
    """Node host actors (one per block of nodes), each in its own bundle of the placement group."""

    def __init__(self, method_name: str, method_values: Mapping[str, Any], task: TaskSpec, shard_refs: list[Any],
                 node_blocks: list[list[int]], sizes: Mapping[int, int], *, pg: Any, cpus_per_actor: float,
                 max_restarts: int, faults: Mapping[int, int] | None) -> None:
        import ray
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        self.node_ids = [k for block in node_blocks for k in block]
        self.sizes = {int(k): int(v) for k, v in sizes.items()}
        self.host_of = {k: h for h, block in enumerate(node_blocks) for k in block}
        actor_cls = ray.remote(NodeHost)
        threads = max(1, int(cpus_per_actor))
        self.actors = []
        for h, ref in enumerate(shard_refs):
            opts = {"num_cpus": cpus_per_actor, "max_restarts": max_restarts, "max_task_retries": 0,
                    "scheduling_strategy": PlacementGroupSchedulingStrategy(pg, placement_group_bundle_index=h + 1)}
            self.actors.append(actor_cls.options(**opts).remote(method_name, dict(method_values), task, ref, host_id=h,
                                                                faults=faults, hard_faults=True, threads=threads))
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

    def __init__(self, method_name: str, method_values: Mapping[str, Any], task: TaskSpec, shards: Sequence[NodeData],
                 node_blocks: list[list[int]], plan: ResourcePlan, *, max_restarts: int, faults: Mapping[int, int] | None,
                 seed: int, ready_timeout_s: float) -> None:
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
            raise ResourceError(f"placement group of {len(bundles)} bundles x {plan.cpus_per_actor:g} CPU was not "
                                f"ready within {ready_timeout_s:g} s ({type(e).__name__}); the cluster has "
                                f"{ray.available_resources().get('CPU', 0):g} CPUs available") from None
        by_id = {d.node: d for d in shards}
        # The driver owns the shard objects, so a restarted host actor can rebuild from them.
        self.shard_refs = [ray.put([by_id[k] for k in block]) for block in node_blocks]
        svc = ray.remote(CoordinatorService)
        self.coord = svc.options(num_cpus=plan.cpus_per_actor, max_restarts=0, scheduling_strategy=
                                 PlacementGroupSchedulingStrategy(self.pg, placement_group_bundle_index=0)).remote(
            method_name, dict(method_values), task, self.shard_refs, node_blocks, {d.node: len(d.train) for d in shards},
            pg=self.pg, cpus_per_actor=plan.cpus_per_actor, max_restarts=max_restarts, faults=faults, seed=seed)

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
        if not any(k.startswith("CPU_group_") and pg.id.hex() in k for k in avail) and \
                avail.get("CPU", 0.0) + 1e-6 >= min(total, ray.cluster_resources().get("CPU", 0.0)):
            return
        time.sleep(0.1)


class LocalFederation(_Coordinated):
    """Driver-side handle of an in-process federation (same interface as `RayFederation`)."""

    def __init__(self, method: Any, method_name: str, method_values: Mapping[str, Any], task: TaskSpec,
                 shards: Sequence[NodeData], *, nodes_per_host: int, max_restarts: int, faults: Mapping[int, int] | None,
                 seed: int, tap: Callable[..., None] | None = None) -> None:
        from veil.platform.fed.coordinator import Coordinator

        self.pool = LocalPool(method_name, method_values, task, shards, nodes_per_host=nodes_per_host, faults=faults,
                              max_restarts=max_restarts)
        self.coordinator = Coordinator(method, self.pool, seed=seed, tap=tap)
