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
global state. A 0-CPU `HostOwner` actor started by the driver owns the node host actors (they outlive a
coordinator's death); the driver keeps the
coordinator's checkpoint of the last completed round (returned with each round, so it lives in the
driver's memory); the coordinator actor restarts up to `max_restarts` times too, the driver restores it
from that checkpoint and asks again for the call under way (a node asked again for a round it already
answered replays its answer), and records a `CoordinatorFailure` for that round. Runtimes are registered by name in `RUNTIMES`. A `tap` runs where the coordinator runs (in
its actor on Ray: it must pickle, and what it records stays in that process unless it writes it out)."""

from __future__ import annotations

import copy
import math
import os
import time
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from veil.datasets.dataset import TaskSpec
from veil.errors import UnknownNameError
from veil.methods.configs.fed_options import FederationOptions
from veil.methods.federated.coordinator import Coordinator, RoundRecord, Tap
from veil.methods.federated.core import (
    CoordinatorFailure,
    FederatedRoles,
    FederationError,
    NodeData,
    ResourceError,
)
from veil.methods.federated.host import NodeHost
from veil.methods.federated.simulation import (
    Coordinated,
    Federation,
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
    in_trial: bool = False
    """The actors run in the bundles Tune reserved for the sweep trial (`trial_bundles`), not a group of their own."""

    def to_params(self) -> dict[str, Any]:
        return {
            "hosts": self.hosts,
            "cpus_per_actor": self.cpus_per_actor,
            "cpu_budget": self.budget,
            "memory_needed_mb": self.memory_needed_mb,
            "placement": "trial" if self.in_trial else "own",
        }


# A sweep trial's own process (bundle 0 of its placement group) only drives the federation.
TRIAL_DRIVER_CPUS = 0.1


def trial_bundles(hosts: int, budget: float) -> list[dict[str, float]]:
    """The placement group of a federated sweep trial with `budget` CPUs: the trial's driver, the coordinator and
    `hosts` node host actors, all inside what Tune reserves for the trial (so concurrent trials never compete for
    the same free CPUs, and a trial that cannot fit waits in Tune's queue instead of hanging half-started)."""
    per = math.floor((budget - TRIAL_DRIVER_CPUS) / (hosts + 1) * 1e4) / 1e4
    if per < MIN_CPUS_PER_ACTOR:
        raise ResourceError(
            f"a federated trial of {budget:g} CPUs leaves {per:.4f} CPU to each of its {hosts} node host actors + 1 "
            f"coordinator (minimum {MIN_CPUS_PER_ACTOR}); raise resources.cpus or use fewer federation.hosts"
        )
    return [{"CPU": TRIAL_DRIVER_CPUS}, *[{"CPU": per}] * (hosts + 1)]


def trial_placement() -> Any:
    """The placement group of the sweep trial this process runs in, when it was sized by `trial_bundles`."""
    from ray.util import get_current_placement_group

    pg = get_current_placement_group()
    specs = pg.bundle_specs if pg is not None else []
    if len(specs) >= 3 and specs[0].get("CPU") == TRIAL_DRIVER_CPUS:
        return pg
    return None


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
    first_bundle: int = 0
    """The coordinator's bundle in `pg`; host h runs in bundle first_bundle + 1 + h."""


class CoordinatorRestarted(RuntimeError):
    """The coordinator actor was restarted by Ray and has not been restored from its checkpoint yet."""


CHECKPOINTED = ("start", "run_round")
"""Coordinator calls after which the driver takes a new checkpoint."""


class CoordinatorService(Coordinated):
    """The coordinator's actor-side state: its `Coordinator` over a `RayPool` of the host actors the driver
    started. Rebuilt by Ray after its process died, it refuses every call until `restore` is given the
    driver's checkpoint."""

    def __init__(self, layout: HostLayout, hosts: list[Any], *, seed: int, tap: Tap | None = None) -> None:
        import ray

        from veil.methods.builtin import create_method

        method = create_method(layout.method_name, layout.config, layout.task)  # the validated config, not rebuilt
        assert isinstance(method, FederatedRoles), f"{layout.method_name} is not a federated method"
        self.method = method
        self.pool = RayPool(layout, hosts)
        self.coordinator = Coordinator(self.method, self.pool, seed=seed, tap=tap)
        with warnings.catch_warnings():  # Ray 2.60 warns about its own use of a deprecated accessor here
            warnings.simplefilter("ignore")
            self.restored = not ray.get_runtime_context().was_current_actor_reconstructed

    def call(self, name: str, *args: Any) -> tuple[Any, dict[str, Any] | None]:
        """Run one of the round calls; after `start` and `run_round` also return the new checkpoint."""
        if not self.restored:
            raise CoordinatorRestarted("the coordinator was restarted and awaits its checkpoint")
        out = getattr(self, name)(*args)
        return out, (self.checkpoint() if name in CHECKPOINTED else None)

    def checkpoint(self) -> dict[str, Any]:
        return {"coordinator": self.coordinator.checkpoint(), "host_deaths": self.pool.restarts()}

    def restore(self, ckpt: dict[str, Any] | None) -> None:
        """Go on from the driver's checkpoint (None: the coordinator died before `start` completed)."""
        if ckpt is not None:
            ckpt = copy.deepcopy(ckpt)  # arrays from the object store are read-only; the live state must not be
            self.coordinator.restore(ckpt["coordinator"])
            self.pool._deaths = int(ckpt["host_deaths"])
        self.restored = True

    def info(self) -> dict[str, Any]:
        return {"pid": os.getpid(), "restored": self.restored}

    def host_info(self) -> list[Any]:
        return self.pool.info()


class HostOwner:
    """A 0-CPU actor that starts and owns the federation's actors, the node hosts and then the coordinator (so the
    hosts outlive a coordinator's death); Ray's start-up notes about restartable actors built from object-store
    arguments go to this worker's log, not the driver's console."""

    def start(self, layout: HostLayout, name: str, seed: int, tap: Tap | None, restarts: int) -> tuple[list[Any], Any]:
        import ray
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        self.hosts = start_hosts(layout)
        svc: Any = ray.remote(CoordinatorService)
        # started beside the hosts, not after them: each actor's process spends seconds importing torch
        self.coord = svc.options(
            name=name,
            num_cpus=layout.cpus_per_actor,
            max_restarts=restarts,
            max_task_retries=0,
            scheduling_strategy=PlacementGroupSchedulingStrategy(
                layout.pg, placement_group_bundle_index=layout.first_bundle
            ),
        ).remote(layout, self.hosts, seed=seed, tap=tap)
        ray.get([a.info.remote() for a in self.hosts])  # all constructed (and their Node models built)
        return self.hosts, self.coord


def start_hosts(layout: HostLayout) -> list[Any]:
    """The node host actors (one per block of nodes, each in its own bundle of the placement group), started by
    their owner so they outlive the coordinator; returns their handles at once, before they are built."""
    import ray
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    from veil.methods.builtin import get_method

    actor_cls: Any = ray.remote(NodeHost)
    threads = max(1, int(layout.cpus_per_actor))
    actors = []
    for h, ref in enumerate(layout.shard_refs):
        opts = {
            "num_cpus": layout.cpus_per_actor,
            "max_restarts": layout.max_restarts,
            "max_task_retries": 0,
            "scheduling_strategy": PlacementGroupSchedulingStrategy(
                layout.pg, placement_group_bundle_index=layout.first_bundle + 1 + h
            ),
        }
        actors.append(
            actor_cls.options(**opts).remote(
                get_method(layout.method_name),
                layout.config,
                layout.task,
                ref,
                host_id=h,
                own_process=True,
                threads=threads,
            )
        )
    return actors


def stop_actors(actors: Sequence[Any]) -> None:
    """Kill the actors for good (no restart), ignoring those already gone."""
    import ray

    for a in actors:
        try:
            ray.kill(a, no_restart=True)
        except Exception:  # noqa: BLE001
            pass


class RayPool(PoolBase):
    """The node host actors (one per block of nodes), as the coordinator calls them."""

    def __init__(self, layout: HostLayout, actors: list[Any]) -> None:
        self.node_ids = [k for block in layout.node_blocks for k in block]
        self.sizes = {int(k): int(v) for k, v in layout.sizes.items()}
        self.host_of = {k: h for h, block in enumerate(layout.node_blocks) for k in block}
        self.actors = list(actors)
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
                else:  # join / finalize / release are idempotent: wait for the restart and ask again
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
        stop_actors(self.actors)
        self.actors = []


@dataclass
class OwnerStart:
    """A federation's placement group and its `HostOwner` actor, asked for before the federation starts: the
    owner's process takes seconds to start (it imports torch), which it can spend while the driver opens the run's
    tracking store. The federation that starts from them removes them; `release` removes them if none does."""

    pg: Any
    owner: Any
    first: int
    """The coordinator's (and the owner's) bundle in `pg`."""
    in_trial: bool
    """`pg` is the sweep trial's, which Tune removes when the trial ends."""
    taken: bool = False
    """A federation took them, or they were released: nothing more to do here."""

    def release(self) -> None:
        """Stop the owner and remove the group, unless a federation took them (idempotent)."""
        if self.taken:
            return
        self.taken = True
        from ray.util.placement_group import remove_placement_group

        stop_actors([self.owner])
        if not self.in_trial:
            try:
                remove_placement_group(self.pg)
            except Exception:  # noqa: BLE001 - Ray may be shut down already
                pass


def start_owner(plan: ResourcePlan, hosts: int) -> OwnerStart:
    """Ask Ray for the federation's placement group (the sweep trial's, in a trial) and the `HostOwner` in the
    coordinator's bundle, without waiting for either."""
    import ray
    from ray.util.placement_group import placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    in_trial = trial_placement() if plan.in_trial else None
    first = 0 if in_trial is None else 1  # a trial's bundle 0 is its own process's (`trial_bundles`)
    if in_trial is not None:
        pg = in_trial
    else:
        bundles = [{"CPU": plan.cpus_per_actor}] * (hosts + 1)
        pg = placement_group(bundles, strategy="PACK", name=f"veil-fed-{int(time.time() * 1000)}")
    owner: Any = ray.remote(HostOwner)
    handle = owner.options(
        num_cpus=0,
        max_restarts=0,
        scheduling_strategy=PlacementGroupSchedulingStrategy(pg, placement_group_bundle_index=first),
    ).remote()
    return OwnerStart(pg, handle, first, in_trial is not None)


def prestart(plan: FederationPlan) -> Callable[[], None]:
    """Start the owner of `plan`'s federation now (`start_owner`), for `_start_on_ray` to take; returns the
    function that releases it when the federation never starts (a no-op after it did)."""
    started = start_owner(plan.resources, len(plan.node_blocks))
    plan.started = started
    return started.release


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
        seed: int,
        ready_timeout_s: float,
        tap: Tap | None = None,
        started: OwnerStart | None = None,
    ) -> None:
        import ray
        from ray.util.placement_group import remove_placement_group

        self.plan = plan
        if started is None or started.taken:  # nothing warmed, or a plan started a second time
            started = start_owner(plan, len(node_blocks))
        started.taken = True  # from here on this federation removes them (shutdown, or a failed start below)
        self.pg, self.owner, first = started.pg, started.owner, started.first
        # The trial's group belongs to Tune, which removes it when the trial ends.
        self._remove = remove_placement_group if not plan.in_trial else (lambda pg: None)
        try:
            ray.get(self.pg.ready(), timeout=ready_timeout_s)
        except Exception as e:
            stop_actors([self.owner])
            self._remove(self.pg)
            raise ResourceError(
                f"placement group of {len(node_blocks) + 1} bundles x {plan.cpus_per_actor:g} CPU was not "
                f"ready within {ready_timeout_s:g} s ({type(e).__name__}); the cluster has "
                f"{ray.available_resources().get('CPU', 0):g} CPUs available"
            ) from None
        by_id = {d.node: d for d in shards}
        # The driver owns the shard objects (and, through HostOwner, the hosts): a restarted host or coordinator finds them.
        self.shard_refs = [ray.put([by_id[k] for k in block]) for block in node_blocks]
        layout = HostLayout(
            method_name,
            config,
            task,
            self.shard_refs,
            node_blocks,
            {d.node: len(d.train) for d in shards},
            self.pg,
            plan.cpus_per_actor,
            max_restarts,
            first,
        )
        self.hosts: list[Any] = []
        self.max_restarts = max_restarts
        self.name = f"veil-coordinator-{self.pg.id.hex()[:12]}"
        self.coordinator_failures = 0
        self._ckpt: dict[str, Any] | None = None
        self._pending: list[CoordinatorFailure] = []
        self._last: RoundRecord | None = None
        try:
            self.hosts, self.coord = ray.get(self.owner.start.remote(layout, self.name, seed, tap, max_restarts))
        except BaseException:
            stop_actors([*self.hosts, self.owner])
            self._remove(self.pg)
            raise

    def _call(self, name: str, rnd: int, *args: Any) -> Any:
        """`name` on the coordinator; if its process died (during this call or before it), wait for Ray's
        restart, restore it from the last checkpoint, record the failure against round `rnd`, ask again."""
        import ray

        while True:
            try:
                out, ckpt = ray.get(self.coord.call.remote(name, *args))
            except CoordinatorRestarted as e:
                self._recover(rnd, e)
                continue
            except ray.exceptions.RayActorError as e:
                self._recover(rnd, e)
                continue
            if ckpt is not None:
                self._ckpt = ckpt
            return out

    def _recover(self, rnd: int, error: BaseException, timeout: float = 120.0) -> None:
        import ray

        self.coordinator_failures += 1
        if self.coordinator_failures > self.max_restarts:
            raise FederationError(
                f"the coordinator died {self.coordinator_failures} times (max_restarts {self.max_restarts}) "
                f"in round {rnd}: {type(error).__name__}: {str(error)[:300]}"
            ) from None
        deadline = time.time() + timeout
        while True:  # calls queue while Ray restarts the actor; one sent before Ray saw the death fails
            try:
                info = ray.get(self.coord.info.remote(), timeout=max(1.0, deadline - time.time()))
                break
            except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError) as e:
                if time.time() > deadline:
                    raise FederationError(
                        f"the coordinator died in round {rnd} and was not back within {timeout:g} s "
                        f"({type(e).__name__}: {str(e)[:300]})"
                    ) from None
                time.sleep(0.2)
        last = self._ckpt["coordinator"]["round"] if self._ckpt else 0
        self._pending.append(
            CoordinatorFailure(rnd, "died", f"restarted from the checkpoint of round {last}: {type(error).__name__}")
        )
        if not info["restored"]:
            try:
                ray.get(self.coord.restore.remote(self._ckpt))
            except ray.exceptions.RayActorError:  # died again: the next call finds out and recovers once more
                pass

    def _flush(self, rec: RoundRecord | None) -> None:
        """Attach the coordinator failures seen so far to `rec` (the round under way, else the last one)."""
        if rec is not None and self._pending:
            rec.coordinator_failures.extend(self._pending)
            self._pending = []

    def start(self) -> dict[int, int]:
        return self._call("start", 0)

    def run_round(self, rnd: int) -> RoundRecord:
        rec = self._call("run_round", rnd, rnd)
        self._flush(rec)
        self._last = rec
        return rec

    def finish(self) -> dict[int, int]:
        out = self._call("finish", self._round())
        self._flush(self._last)
        return out

    def snapshot(self) -> Any:
        out = self._call("snapshot", self._round())
        self._flush(self._last)
        return out

    def release(self, requests: Mapping[int, Any]) -> tuple[dict[int, Any], dict[int, int], dict[int, int]]:
        """The nodes' release of their own rows, received by the coordinator actor and handed to the driver (a
        node asked again after a coordinator restart replays the release it already sent)."""
        out = self._call("release", self._round(), requests)
        self._flush(self._last)
        return out

    def restarts(self) -> int:
        return self._call("restarts", self._round())

    def _round(self) -> int:
        return self._last.round if self._last is not None else 0

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
        stop_actors([*self.hosts, self.owner])
        if self.plan.in_trial:
            return
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
    cannot fit, before anything starts); `start` builds the running federation; `warm` (None: nothing to warm)
    starts its slow parts early and returns what releases them (`prestart`)."""

    name: str
    place: Callable[[FederationPlan, str | None], None]
    start: Callable[[FederationPlan, Tap | None], Federation]
    description: str
    warm: Callable[[FederationPlan], Callable[[], None]] | None = None


def _place_in_process(plan: FederationPlan, address: str | None) -> None:
    per = plan.options.nodes_per_host or len(plan.shards)
    plan.node_blocks = split_hosts(list(range(len(plan.shards))), math.ceil(len(plan.shards) / per))


def _place_on_ray(per_node: bool) -> Callable[[FederationPlan, str | None], None]:
    def place(plan: FederationPlan, address: str | None) -> None:
        ensure_ray(address)
        k, opts = len(plan.shards), plan.options
        pg = trial_placement()
        if pg is not None:  # a sweep trial: the bundles Tune reserved for it (`trial_bundles`)
            specs = pg.bundle_specs
            hosts = min(len(specs) - 2, k)
            plan.node_blocks = split_hosts(list(range(k)), hosts)
            budget = sum(b.get("CPU", 0.0) for b in specs)
            plan.resources = ResourcePlan(hosts, float(specs[1]["CPU"]), budget, 0, 0, in_trial=True)
            return
        avail = available_resources()
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
        seed=plan.seed,
        ready_timeout_s=opts.ready_timeout_s,
        tap=tap,
        started=plan.started,
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
        Runtime("ray-actors", _place_on_ray(per_node=True), _start_on_ray, "one Ray actor per node", prestart),
        Runtime(
            "virtual",
            _place_on_ray(per_node=False),
            _start_on_ray,
            "a few Ray actors, each running many nodes as one vectorised ensemble",
            prestart,
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
