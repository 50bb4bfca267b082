"""The per-node table `veil run` prints: a figure that cannot exist reads n/a, and a line under the table says
why for each node (issue 28: D-EIGAN showed an unexplained `nan` utility AUC for nodes holding one class)."""

from __future__ import annotations

from veil.audit.nodes import PER_NODE_COLUMNS, per_node_markdown

NAN = float("nan")


def row(node: int, train: int, test: int, acc: float, auc: float) -> dict:
    out = dict.fromkeys(PER_NODE_COLUMNS, NAN)
    out.update(node=node, train_rows=train, test_rows=test, utility="u", sensitive="s")
    out.update(utility_acc=acc, utility_auc=auc, adversary_acc=acc, adversary_auc=0.55)
    return out


def test_missing_figures_read_na_with_their_cause():
    rows = [row(0, 40, 10, 0.9, 0.95), row(1, 30, 8, 1.0, NAN), row(2, 1, 0, NAN, NAN), row(3, 20, 5, NAN, NAN)]
    rows[2]["adversary_auc"] = rows[3]["adversary_auc"] = NAN
    text = per_node_markdown(rows)
    assert "nan" not in text
    assert "| 1 | 30/8 | s | 1.000 | n/a | 1.000 | 0.550 |" in text
    lines = text.splitlines()
    assert lines[-3:] == [
        "n/a: node 2: fewer than 2 train or test rows, too few to audit",
        "n/a: node 3: released nothing (its rows are not in the release)",
        "n/a: node 1: its test rows hold one class of the label, and ROC-AUC needs both (accuracy is still given)",
    ]
    assert per_node_markdown(rows[:1]).splitlines()[-1] == "| 0 | 40/10 | s | 0.900 | 0.950 | 0.900 | 0.550 |"
