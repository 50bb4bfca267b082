"""The run's params describe a federation's nodes without cutting a long list short."""

from __future__ import annotations

from veil.methods.federated.simulation import NODE_ROWS_LISTED, node_rows_param


def test_a_small_federation_lists_each_nodes_rows() -> None:
    assert node_rows_param([30, 31, 29]) == [30, 31, 29]
    assert node_rows_param([7] * NODE_ROWS_LISTED) == [7] * NODE_ROWS_LISTED


def test_a_large_federation_is_summarised_with_its_node_count() -> None:
    rows = [30] * 9_998 + [12, 61]
    assert node_rows_param(rows) == (
        "10000 nodes: min 12, median 30, max 61 rows (each node's in federation/nodes.json)"
    )
    assert (
        node_rows_param([1, 2] * 101)
        == "202 nodes: min 1, median 1.5, max 2 rows (each node's in federation/nodes.json)"
    )
