"""A federation's round records: per-round figures in `to_dict` (rounds.json), per-node figures as one table
(`node_table`, round_nodes.parquet) whose sums are the rounds' own."""

from __future__ import annotations

import math

import numpy as np

from veil.methods.federated.coordinator import BYTE_FIELDS, RoundRecord, node_table


def _record(rnd: int, **per_node) -> RoundRecord:
    base = {"selected": [0, 1, 2], "completed": [0, 2], "failures": [], "joined": [], "metrics": {"loss": 0.5}}
    base.update({"bytes_up": {}, "bytes_down": {}, "payload_up": {}, **per_node})
    return RoundRecord(round=rnd, seconds=0.1, **base)


def test_the_table_holds_every_per_node_figure_and_the_record_only_counts():
    first = _record(1, bytes_up={0: 10, 2: 12}, bytes_down={0: 4, 1: 4, 2: 4}, payload_up={0: 8, 2: 9})
    second = _record(
        2,
        selected=[1, 2],
        completed=[1, 2],
        bytes_up={1: 7, 2: 7},
        bytes_down={1: 3, 2: 3},
        release_up={2: 100, 5: 50},  # node 5 released without being selected this round
        node_local={1: {"loss/adversary": 0.25}, 2: {"loss/adversary": 0.75, "loss/ally": 0.5}},
    )
    t = node_table([first, second])
    assert t["round"].tolist() == [1, 1, 1, 2, 2, 2] and t["node"].tolist() == [0, 1, 2, 1, 2, 5]
    assert t["selected"].tolist() == [True, True, True, True, True, False]
    assert t["completed"].tolist() == [True, False, True, True, True, False]
    assert t["bytes_up"].tolist() == [10, 0, 12, 7, 7, 0] and t["release_up"].tolist() == [0, 0, 0, 0, 100, 50]
    for f in BYTE_FIELDS:  # each round's total is the record's own sum
        for rec, rows in ((first, t["round"] == 1), (second, t["round"] == 2)):
            assert int(t[f][rows].sum()) == sum(getattr(rec, f).values())
    adv, ally = t["node_local/loss/adversary"], t["node_local/loss/ally"]
    assert np.isnan(adv[:3]).all() and adv[3:5].tolist() == [0.25, 0.75] and math.isnan(adv[5])
    assert np.isnan(ally[[0, 1, 2, 3, 5]]).all() and ally[4] == 0.5
    d = second.to_dict()
    assert (d["selected"], d["completed"], d["metrics"]) == (2, 2, {"loss": 0.5})
    assert not {"bytes_up", "release_up", "node_local"} & set(d)


def test_no_rounds_make_an_empty_table_with_its_columns():
    t = node_table([])
    assert list(t)[:4] == ["round", "node", "selected", "completed"] and all(len(c) == 0 for c in t.values())
