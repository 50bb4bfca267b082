"""D-EIGAN's config and card (the method: `veil.methods.d_eigan`), on top of EIGAN's."""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

from veil.config import MAX_EPOCHS, param
from veil.methods.configs.deviations import fraction_deviation
from veil.methods.configs.eigan_card import EIGAN_PAPER_VALUES, EIGANCard, EIGANConfig
from veil.methods.configs.method_card import MethodConfig, PaperValue

AGGREGATIONS = ("masked-mean", "paper")  # the sparse rules of veil.methods.federated.aggregation


@dataclass(frozen=True)
class DEIGANConfig(EIGANConfig):
    """EIGAN's fields plus the federation: nodes, sync period, sparsification, aggregation, objectives."""

    epochs: int = param(60, "local passes over each node's data (rounds = ceil(epochs / delta))", ge=0, le=MAX_EPOCHS)
    K: int = param(4, "number of nodes", ge=1)
    delta: int = param(1, "local epochs between synchronisations (rounds = ceil(epochs / delta))", ge=1, le=MAX_EPOCHS)
    phi: float = param(1.0, "fraction of encoder entries uploaded by each node and downloaded each round", gt=0, le=1)
    aggregation: str = param(
        "masked-mean",
        "server rule: 'masked-mean' (each entry averaged over the nodes that sent it) or 'paper' "
        "(sum_k N_k/N * sparse theta_k, unsent entries count as 0: with phi < 1 it shrinks the encoder towards 0)",
        choices=AGGREGATIONS,
    )
    fraction: float = param(1.0, "fraction of nodes sampled (seeded) to take part in each round", gt=0, le=1)
    node_utility: tuple[str, ...] = param(
        (),
        "per-node ally labels ('a' or 'a+b'), dealt to nodes in contiguous "
        "blocks; empty = the dataset's utility labels not hidden by the node",
    )
    node_sensitive: tuple[str, ...] = param(
        (),
        "per-node adversary labels ('a' or 'a+b'), dealt to nodes in "
        "contiguous blocks; empty = the dataset's sensitive labels",
    )


class DEIGANCard(EIGANCard):
    name = "d-eigan"
    Config = DEIGANConfig
    federated = True
    description = (
        "EIGAN over K nodes: delta local epochs, phi-sparse encoder upload/download, N_k/N weighting "
        "('paper') or masked mean, per-node allies/adversaries; releases the global encoder"
    )
    paper = "EIGAN paper (seed 000), Alg. 1 (D-EIGAN)"
    paper_values = {
        **EIGAN_PAPER_VALUES,
        "aggregation": PaperValue(
            "paper",
            "the paper's rule counts unsent entries as 0, so with phi < 1 it releases an encoder shrunk towards "
            "zero that no node trained (the rules agree at phi = 1; recorded as a deviation where phi < 1)",
            stated=False,
        ),
        "epochs": PaperValue(
            20,
            "non-IID nodes averaged every epoch need more rounds to agree on one encoder that hides s (at 20, one "
            "seed in three ended with an encoder that neither served the ally nor hid s)",
            stated=False,
        ),
    }

    @classmethod
    def deviations(cls, config: MethodConfig) -> dict[str, str]:
        c = cast(DEIGANConfig, config)
        out = EIGANCard.deviations(c)
        if c.phi < 1:
            out["wire"] = (
                "sparse messages: phi*|theta| float32 values plus a seed regenerating the index set "
                "(the paper sends the dense vector with zeros; the aggregate is the same)"
            )
        if c.aggregation == "masked-mean" and c.phi < 1:  # with phi = 1 every entry is sent: the rules agree
            out["aggregation"] = (
                "each entry averaged over the nodes that sent it (the paper counts unsent entries as 0)"
            )
        return {**out, **fraction_deviation(c.fraction, "nodes", "the paper uses every node")}
