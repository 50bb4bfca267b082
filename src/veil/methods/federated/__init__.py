"""The federation interface the federated methods implement (Flower's split): a `FederatedMethod` strategy
per method with its client and server roles, long-lived `Node`s inside `NodeHost`s, the `Coordinator`'s
round loop, aggregation rules by name, the vectorised stacks (`torch.func`) that run many nodes as one
ensemble, and the in-process simulation. Nothing here imports Ray, MLflow, Optuna or anything above
`veil.methods`; the Ray transports of the same host / coordinator live in `veil.platform.federation`."""

from veil.methods.configs.fed_options import FederationOptions
from veil.methods.federated.aggregation import AGGREGATION_RULES, aggregate, get_rule, register_rule
from veil.methods.federated.coordinator import Coordinator, Pool, RoundRecord
from veil.methods.federated.core import (
    ClientUpdate,
    EncodersStayHome,
    Failure,
    FederatedRoles,
    FederationError,
    InjectedFault,
    Node,
    NodeData,
    NodeObjective,
    Release,
    ResourceError,
    derive_seed,
)
from veil.methods.federated.fed_method import FederatedMethod
from veil.methods.federated.host import NodeHost
from veil.methods.federated.simulation import (
    FederationOutcome,
    FederationPlan,
    LocalFederation,
    LocalPool,
    plan_federation,
    run_federation,
    run_in_process,
)

__all__ = [
    "AGGREGATION_RULES",
    "ClientUpdate",
    "Coordinator",
    "EncodersStayHome",
    "Failure",
    "FederatedMethod",
    "FederatedRoles",
    "FederationError",
    "FederationOptions",
    "FederationOutcome",
    "FederationPlan",
    "InjectedFault",
    "LocalFederation",
    "LocalPool",
    "Node",
    "NodeData",
    "NodeHost",
    "NodeObjective",
    "Pool",
    "Release",
    "ResourceError",
    "RoundRecord",
    "aggregate",
    "derive_seed",
    "get_rule",
    "plan_federation",
    "register_rule",
    "run_federation",
    "run_in_process",
]
