"""The federation's options (`--set fed.NAME=VALUE`, a spec's `federation:`), torch-free: the runtime that reads
them is `veil.methods.federated.simulation`."""

from __future__ import annotations

from dataclasses import dataclass

from veil.config import MAX_EPOCHS, param


@dataclass(frozen=True)
class FederationOptions:
    """How a federated run is placed, watched and stress-tested (`--set fed.NAME=VALUE`)."""

    audit_every: int = param(
        0, "run a quick audit of the current release every N rounds (live/* metrics, progress bar); 0 = none", ge=0
    )
    live_probe_epochs: int = param(5, "probe epochs of the quick live audit", ge=1, le=MAX_EPOCHS)
    live_rows: int = param(2000, "at most this many train and test rows in a live audit", ge=10)
    per_node_audit: bool = param(True, "audit the final release on each node's own train/test rows too")
    wire_rounds: int = param(
        3,
        "certify what the coordinator received in this many sampled rounds (the first, the last, evenly spaced "
        "between; the certificate's wire section, runs with a target only); 0 = none",
        ge=0,
    )
    node_probe_hidden: tuple[int, ...] = param(
        (32,),
        "hidden widths of each per-node audit probe ([] = logistic regression); a node holds a few dozen rows, too "
        "few for the global audit's probe (see docs/federation.md, 'The per-node audit')",
        ge=1,
    )
    node_probe_epochs: int = param(100, "training epochs of each per-node audit probe", ge=1, le=MAX_EPOCHS)
    nodes_per_host: int = param(0, "in-process runtime: nodes per vectorised host (0 = all nodes in one)", ge=0)
    hosts: int = param(0, "virtual runtime: node host actors (0 = min(K, available CPUs))", ge=0)
    cpus_per_host: float = param(1.0, "most CPUs one actor asks for (shrunk to fit the budget)", gt=0)
    cpus: float = param(0.0, "CPU budget of the federation (0 = what the cluster has available; more is refused)", ge=0)
    actor_memory_mb: int = param(
        450, "expected memory of one actor (a torch process), to refuse runs that cannot fit", ge=0
    )
    max_restarts: int = param(
        3, "restarts of a node host, and of the coordinator (Ray runtimes), after its process dies", ge=0
    )
    ready_timeout_s: float = param(
        60.0, "seconds the placement group may take to be placed before the run is refused", gt=0
    )
