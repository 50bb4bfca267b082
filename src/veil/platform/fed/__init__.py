"""Ray transports of a federation: node hosts and the coordinator as Ray actors (one actor per node, or
many virtual nodes per actor), placed in one placement group sized to fit. The federation's logic (the
`FederatedMethod` interface, nodes, hosts, coordinator, in-process simulation) lives in
`veil.methods.federated`."""

from veil.platform.fed.runtime import (
    RUNTIME_NAMES,
    RUNTIMES,
    RayFederation,
    ResourcePlan,
    Runtime,
    get_runtime,
    plan_resources,
)

__all__ = ["RUNTIME_NAMES", "RUNTIMES", "RayFederation", "ResourcePlan", "Runtime", "get_runtime", "plan_resources"]
