"""Federation on Ray actors (Flower's split): a `FederatedMethod` strategy per method, long-lived `Node`s
inside node hosts, a `Coordinator` running the rounds, and runtimes that place them in this process
(`in-process`), one actor per node (`ray-actors`) or many nodes per actor as a vectorised ensemble
(`virtual`). Only `runtime` imports Ray, and only when a Ray runtime is used."""
from veil.platform.fed.core import (ClientUpdate, Failure, FederatedMethod, FederationError, Node, NodeData,
                                    Objective, ResourceError)

__all__ = ["ClientUpdate", "Failure", "FederatedMethod", "FederationError", "Node", "NodeData", "Objective",
           "ResourceError"]
