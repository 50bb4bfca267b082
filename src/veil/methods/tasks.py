"""The synthetic task of each privacy method's paper (where s is independent of u).

`studies/defaults_protect.py` measures each method's knob defaults, uncalibrated, and `preset: paper` on these
tasks, and on correlated data, and writes docs/defaults.md."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping


@dataclass(frozen=True)
class PaperTask:
    """A dataset (and, for a federation, how its rows are dealt to the nodes) and why it is the method's."""

    dataset: str
    dataset_params: Mapping[str, Any] = field(default_factory=dict)
    partition: str = "iid"
    source: str = ""

    def run_fields(self, method: str) -> dict[str, Any]:
        """The RunSpec fields that put `method` on this task (a federation's nodes in-process, dealt by
        `partition`)."""
        from veil.methods.cards import is_federated

        fields: dict[str, Any] = {"dataset": self.dataset, "dataset_params": dict(self.dataset_params)}
        if is_federated(method):
            fields.update(partition=self.partition, runtime="in-process")
        return fields


QUADRANT = PaperTask("gaussian-quadrant", source="EIGAN App. C, Fig. 10")
NODES = PaperTask("gaussian-nodes", partition="silo:node", source="EIGAN Sec. 3.2, Fig. 7 (node k has variance 0.1k)")
INDEPENDENT = PaperTask("gaussian-correlated", {"rho": 0.0}, source="GPP Sec. VI-F at rho = 0")
SUBSTITUTE = PaperTask(
    "gaussian-correlated",
    {"rho": 0.0},
    source="GPP Sec. VI-F at rho = 0: the paper's tasks (Adult, COMPAS) have no synthetic counterpart",
)

#: every privacy method (the baselines are references, not subjects)
PAPER_TASKS: dict[str, PaperTask] = {
    "eigan": QUADRANT,
    "d-eigan": NODES,
    "gpp": INDEPENDENT,
    "d-gpp": INDEPENDENT,
    "ldp-frl": SUBSTITUTE,
    "ldp-fedavg": SUBSTITUTE,
    "adjustable-ae": SUBSTITUTE,
}
