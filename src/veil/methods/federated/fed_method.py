"""`FederatedMethod`: the mixin a registered `Method` takes to train by federation (its roles are in
`core.FederatedRoles`). `fit(train)` runs the whole federation in this process on an IID partition, which is
what the conformance test and quick experiments use; `veil run` goes through the federated executor."""

from __future__ import annotations

from typing import Any

from veil.datasets.dataset import Split
from veil.methods.federated.core import FederatedRoles
from veil.methods.federated.simulation import run_in_process


class FederatedMethod(FederatedRoles):
    """A federated method: subclasses set `federated = True` (inherited), implement the client and server roles,
    and keep `encode` working through `assemble`."""

    def fit(self, train: Split, ctx: Any = None) -> list[dict[str, float]]:
        """Run the whole federation in this process on an IID partition of `train`; one row per round."""
        return run_in_process(self, train).history
