"""What crosses the wire, held to docs/threat-model.md ("What crosses the wire"): the table there is parsed, and
every message of real federations, trained at the methods' default learning rates, is checked against it.

The coordinator here is a recording subclass (test support: `_receive` is where every blob from a node arrives,
and the tap sees every blob sent), so the record is what the coordinator really got, byte for byte. For D-GPP,
whose clients keep their encoders, nothing a client sends may be, contain or be sized like an encoder: the
uploads are (z, u) and the end of training brings each client's release of its OWN rows (row ids and z), which
the audit measures; the byte totals of the run count every one of those bytes."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping

import numpy as np
import pytest
import torch
from veil_test_hooks import fault_env
from wire_support import contains_window

from veil.audit.nodes import audit_final, live_auditor
from veil.audit.settings import AuditConfig
from veil.datasets import load_dataset
from veil.datasets.dataset import Dataset
from veil.methods import create_method
from veil.methods.configs.fed_options import FederationOptions
from veil.methods.federated.coordinator import Coordinator
from veil.methods.federated.core import EncodersStayHome, FederationError, Node, NodeData, NodeObjective, loads
from veil.methods.federated.simulation import (
    FederationOutcome,
    FederationPlan,
    LocalFederation,
    plan_federation,
    run_federation,
)
from veil.methods.gpp import GaussianEncoder

DOC = Path(__file__).parents[3] / "docs" / "threat-model.md"
CFG = AuditConfig(epochs=2, hidden=(8,))
# Small federations at every method's DEFAULT learning rates (and other defaults), only shortened
RUNS: dict[str, dict[str, Any]] = {
    "d-gpp": {"K": 3, "epochs": 2, "seed": 0},
    "d-eigan": {"K": 3, "epochs": 2, "seed": 0},
    "ldp-fedavg": {"K": 3, "epochs": 2, "seed": 0},
}


# -- the table of docs/threat-model.md ------------------------------------------------------------------------
@dataclass(frozen=True)
class Field:
    """One `path: type` entry of the table: a leaf of the message."""

    path: str
    dtype: str  # float32 / int32 / int64 (arrays), int, float, str
    literal: str | None = None
    shape: tuple[str, ...] | None = None

    def pattern(self, names: Mapping[str, list[str]]) -> re.Pattern[str]:
        text = re.escape(self.path)
        for key, values in names.items():
            text = text.replace(re.escape(f"<{key}>"), f"(?P<{key}>{'|'.join(map(re.escape, values))})")
        return re.compile(text)

    @property
    def placeholders(self) -> list[str]:
        return re.findall(r"<(\w+)>", self.path)


TOKEN = re.compile(r'^(?P<path>[^:]+): (?:"(?P<literal>[^"]*)"|(?P<dtype>\w+)(?:\[(?P<shape>[^\]]*)\])?)$')


def wire_table() -> dict[tuple[str, str, str], list[list[Field] | None]]:
    """(method, direction, kind) -> the message's alternatives: None (the message is None) or its fields."""
    text = DOC.read_text()
    section = text[text.index("## What crosses the wire") :]
    section = section[: section.index("\n## ", 5)] if "\n## " in section[5:] else section
    table: dict[tuple[str, str, str], list[list[Field] | None]] = {}
    for line in section.splitlines():
        cells = [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        if len(cells) != 6 or cells[0] in ("method", "---"):
            continue
        method, direction, kind, _when, fields, _size = cells
        alternatives: list[list[Field] | None] = []
        for alt in re.split(r"\s+or\s+(?=`)", fields):
            tokens = re.findall(r"`([^`]*)`", alt)
            if tokens == ["None"]:
                alternatives.append(None)
                continue
            if tokens == ["{}"]:
                alternatives.append([])
                continue
            parsed = []
            for tok in tokens:
                m = TOKEN.match(tok)
                assert m, f"threat-model.md: cannot read the field {tok!r} of {method} {direction} {kind}"
                shape = tuple(d.strip() for d in m["shape"].split(",")) if m["shape"] else None
                parsed.append(Field(m["path"], "str" if m["literal"] is not None else m["dtype"], m["literal"], shape))
            alternatives.append(parsed)
        table[(method, direction, kind.strip("`"))] = alternatives
    return table


def leaves(msg: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """(path, value) of every leaf of a message; mapping keys joined with '/'."""
    if isinstance(msg, Mapping):
        for k, v in msg.items():
            yield from leaves(v, f"{path}/{k}" if path else str(k))
    else:
        yield path, msg


def type_of(value: Any) -> str:
    if isinstance(value, np.ndarray):
        return str(value.dtype)
    if isinstance(value, (bool, np.bool_)):
        return "bool"
    if isinstance(value, (int, np.integer)):
        return "int"
    if isinstance(value, (float, np.floating)):
        return "float"
    return type(value).__name__


def mismatch(alt: list[Field] | None, msg: Any, names: Mapping[str, list[str]], d_z: int) -> str | None:
    """Why `msg` is not the alternative `alt` (None: it is)."""
    if alt is None:
        return None if msg is None else "not None"
    if not isinstance(msg, Mapping):
        return f"a {type(msg).__name__}, not a mapping"
    seen: dict[Field, set[tuple[str, ...]]] = {f: set() for f in alt}
    for path, value in leaves(msg):
        hits = [(f, m) for f in alt if (m := f.pattern(names).fullmatch(path))]
        if len(hits) != 1:
            return f"leaf {path!r} matches {len(hits)} listed fields"
        f, m = hits[0]
        if type_of(value) != f.dtype:
            return f"{path}: {type_of(value)}, listed {f.dtype}"
        if f.literal is not None and value != f.literal:
            return f"{path}: {value!r}, listed {f.literal!r}"
        if f.shape is not None:
            if value.ndim != len(f.shape):
                return f"{path}: shape {value.shape}, listed [{', '.join(f.shape)}]"
            if any(d == "d_z" and n != d_z for d, n in zip(f.shape, value.shape)):
                return f"{path}: shape {value.shape}, d_z = {d_z}"
        seen[f].add(tuple(m.groupdict().values()))
    for f, got in seen.items():
        if not got:
            return f"listed field {f.path!r} missing"
        if "utility" in f.placeholders and {g[f.placeholders.index("utility")] for g in got} != set(names["utility"]):
            return f"{f.path}: not one entry per utility label"
    return None


def check_message(table, method: str, direction: str, kind: str, msg: Any, ds: Dataset, d_z: int) -> None:
    assert (method, direction, kind) in table, f"{method} {direction} {kind}: a message the threat model does not list"
    names = {"utility": list(ds.task().utility), "split": ["train", "test"]}
    why = [mismatch(alt, msg, names, d_z) for alt in table[(method, direction, kind)]]
    assert None in why, f"{method} {direction} {kind} is none of the listed forms: {why}"


# -- recording at the coordinator --------------------------------------------------------------------------
class RecordingCoordinator(Coordinator):
    """The coordinator, keeping every blob it receives from a node (`_receive`) and every blob it sends (tap)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.received: list[tuple[int, int, str, bytes]] = []
        self.sent: list[tuple[int, int, str, bytes]] = []
        super().__init__(*args, tap=self._sent, **kwargs)

    def _sent(self, direction: str, rnd: int, node: int, kind: str, blob: bytes) -> None:
        if direction == "down":
            self.sent.append((rnd, node, kind, blob))

    def _receive(self, rnd: int, k: int, blob: bytes, kind: str) -> Any:
        self.received.append((rnd, k, kind, blob))
        return super()._receive(rnd, k, blob, kind)


def recorded_run(
    name: str, ds: Dataset, params: Mapping[str, Any], *, partition: str = "iid", live: bool = False, **options: Any
) -> tuple[FederationPlan, FederationOutcome, RecordingCoordinator, list[Any]]:
    """A federation run in process with a recording coordinator; also returns the node hosts as they were at
    the end (to look inside the clients, which the coordinator cannot)."""
    m = create_method(name, dict(params), ds.task())
    plan = plan_federation(
        m, name, ds.train, dataset=ds, partition_scheme=partition, options=FederationOptions(**options), seed=0
    )
    fed = LocalFederation(plan)
    fed.coordinator = coord = RecordingCoordinator(plan.method, fed.pool, seed=plan.seed)
    hosts = fed.pool.hosts  # the pool forgets this list at shutdown; a rebuilt host replaces its entry in it
    out = run_federation(plan, fed, live_audit=live_auditor(plan, ds) if live else None)
    return plan, out, coord, hosts


def check_every_message(name: str, coord: RecordingCoordinator, out: FederationOutcome, ds: Dataset) -> None:
    """Every message up and down is one the table lists, and the run's byte totals are exactly their lengths."""
    table = wire_table()
    d_z = out.method.release_width  # type: ignore[attr-defined]
    for direction, record in (("up", coord.received), ("down", coord.sent)):
        for _rnd, _node, kind, blob in record:
            check_message(table, name, direction, kind, loads(blob), ds, d_z)
    totals = out.totals()
    assert sum(len(b) for *_, b in coord.received) == totals["bytes_up_total"]  # every byte received is counted
    assert sum(len(b) for *_, b in coord.sent) == totals["bytes_down_total"]


@pytest.fixture(scope="module")
def ds() -> Dataset:
    return load_dataset("gaussian-correlated", {"n": 600})


def test_the_table_lists_every_federated_method() -> None:
    table = wire_table()
    assert {m for m, _, _ in table} == set(RUNS)
    assert ("d-gpp", "up", "release") in table and ("d-gpp", "up", "export") not in table
    assert [k for m, d, k in table if m == "d-gpp" and d == "up"] == ["update", "release"]


@pytest.mark.parametrize("name", sorted(RUNS))
def test_every_message_is_one_the_threat_model_lists(ds: Dataset, name: str) -> None:
    _, out, coord, _ = recorded_run(name, ds, RUNS[name])
    assert len(out.records) >= 2 and all(len(r.completed) == 3 for r in out.records)
    check_every_message(name, coord, out, ds)
    kinds = {kind for *_, kind, _ in coord.received}
    assert kinds == ({"update", "release"} if name == "d-gpp" else {"update"})


def test_d_gpp_encoders_stay_home(ds: Dataset) -> None:
    """Default learning rates, 2 epochs, 3 clients: the coordinator receives (z, u) every round and each client's
    release at the end; no key named like a state, no array the size of an encoder or of one of its weight
    matrices, and no run of 16 values of any client's final encoder parameters. The aggregator's model holds
    psi alone, and it cannot encode."""
    plan, out, coord, hosts = recorded_run("d-gpp", ds, RUNS["d-gpp"])
    m = out.method
    group = hosts[0].method.groups[0]
    encoders = [group.enc.state_dict(i) for i in range(3)]
    theta = sum(t.numel() for t in encoders[0].values())
    matrices = {t.numel() for t in encoders[0].values() if t.dim() >= 2}
    needles = [t.flatten()[:16].numpy() for st in encoders for t in st.values() if t.numel() >= 16]
    forbidden = re.compile(r"enc|state|theta|weight|bias|param|psi|adversar|sensitive|secret|loss|^s$", re.I)
    rounds = {r.round for r in out.records}
    for rnd, _node, kind, blob in coord.received:
        msg = loads(blob)
        for path, value in leaves(msg):
            assert not any(forbidden.search(part) for part in path.split("/")), (kind, path)
            if isinstance(value, np.ndarray):
                assert value.size != theta and value.size not in matrices, (kind, path, value.shape)
                if value.dtype == np.float32 and value.ndim == 2:
                    assert value.shape[1] == m.config.d_z
                    for needle in needles:
                        assert not contains_window(value, needle), (kind, path)
        if kind == "update":
            assert rnd in rounds and msg["num_examples"] == len(msg["payload"]["z"]) <= m.config.batch_size
    releases = [(node, loads(b)) for rnd, node, kind, b in coord.received if kind == "release"]
    assert sorted(node for node, _ in releases) == [0, 1, 2]  # one release per client, at the end
    assert sum(len(b) for *_, kind, b in coord.received if kind == "release") == out.totals()["bytes_release_up"]
    assert out.release_up == {k: len(b) for _, k, kind, b in coord.received if kind == "release"}
    assert out.records[-1].release_up == out.release_up
    # the aggregator's model: psi alone, which cannot encode
    assert set(m.state()) == {f"utility.{k}" for k in m.utility.state_dict()}
    with pytest.raises(EncodersStayHome, match="encoders stay on their clients"):
        m.encode(ds.test.x)
    again = create_method("d-gpp", RUNS["d-gpp"], ds.task())
    again.load_state(m.state())  # a model rebuilt from the run's model/state.pt
    with pytest.raises(EncodersStayHome):
        again.encode(ds.test.x[:3])
    report, rows, z_train, z_test = audit_final(plan, ds, m, CFG)  # the audit reads the clients' release
    assert z_train.shape == (len(ds.train), m.config.d_z) and z_test.shape == (len(ds.test), m.config.d_z)
    assert len(rows) == 3 and all(np.isfinite(r["utility_auc"]) for r in rows) and not report.warnings


def test_each_client_releases_exactly_its_own_rows(ds: Dataset) -> None:
    """Unequal shards (Dirichlet): client k's release holds its own train rows and the test rows dealt to it,
    each once, and z computed by its own encoder (release 'mean': z = mu of that client's encoder); together
    they cover every row of both splits exactly once, and that union is what the audit reads."""
    params = {**RUNS["d-gpp"], "release": "mean"}
    plan, out, coord, hosts = recorded_run("d-gpp", ds, params, partition="dirichlet:1.0")
    assert plan.test_parts is not None and len({len(p) for p in plan.parts}) > 1
    group = hosts[0].method.groups[0]
    releases = {node: loads(b) for _, node, kind, b in coord.received if kind == "release"}
    assert sorted(releases) == [0, 1, 2]
    for k, msg in releases.items():
        assert set(msg) == {"kind", "train", "test"}
        for split, own, x in (("train", plan.parts[k], ds.train.x), ("test", plan.test_parts[k], ds.test.x)):
            rows, z = msg[split]["rows"], msg[split]["z"]
            np.testing.assert_array_equal(rows, np.sort(own))
            enc = GaussianEncoder(ds.d_in, (512, 256), 8)
            enc.load_state_dict(group.enc.state_dict(k))
            mu = enc(torch.as_tensor(x[rows]))[0].detach().numpy()
            np.testing.assert_allclose(z, mu, atol=1e-5)
    for split, n in (("train", len(ds.train)), ("test", len(ds.test))):
        every = np.concatenate([releases[k][split]["rows"] for k in range(3)])
        np.testing.assert_array_equal(np.sort(every), np.arange(n))  # each row once
        np.testing.assert_array_equal(out.method.released.rows(split), np.arange(n))  # type: ignore[union-attr]
    report, _, z_train, _ = audit_final(plan, ds, out.method, CFG)  # type: ignore[arg-type]
    k0 = releases[0]["train"]
    np.testing.assert_array_equal(z_train[k0["rows"]], k0["z"])


def test_a_node_releases_only_its_own_rows(ds: Dataset) -> None:
    data = NodeData(
        0, ds.train.take(np.arange(5, 10)), NodeObjective(("u",), ("s",)), rows=np.arange(5, 10), test_x=ds.test.x[:2],
        test_rows=np.array([7, 3]),
    )  # fmt: skip
    node = Node(data, seed=0)
    got = node.rows_to_release({"train": np.array([9, 6]), "test": np.array([3])})
    assert [(s, r.tolist()) for s, r, _ in got] == [("train", [6, 9]), ("test", [3])]
    np.testing.assert_array_equal(got[0][2], ds.train.x[[6, 9]])
    np.testing.assert_array_equal(got[1][2], ds.test.x[[1]])
    assert [(s, r.tolist()) for s, r, _ in node.rows_to_release(None)] == [("train", [5, 6, 7, 8, 9]), ("test", [3, 7])]
    with pytest.raises(ValueError, match="does not own"):
        node.rows_to_release({"train": np.array([4])})


def test_live_audits_and_a_restarted_client_release_only_what_is_asked(ds: Dataset, monkeypatch) -> None:
    """A live audit every 2 rounds on at most 60 rows per split, and client 1's host dies at the start of round 3
    (it rejoins with the current psi and a fresh encoder): after rounds 2, 4 and 6 each client releases exactly
    its own rows among the live audit's, and at the end all its own rows; every message is one the table lists
    and every byte is counted (bytes_release_up: every release)."""
    for k, v in fault_env("1@3").items():
        monkeypatch.setenv(k, v)
    plan, out, coord, _ = recorded_run(
        "d-gpp", ds, RUNS["d-gpp"], live=True, audit_every=2, live_rows=60, nodes_per_host=1
    )
    assert plan.rounds == 6 and plan.test_parts is not None
    assert [f.node for f in out.records[2].failures] == [1] and any(1 in r.joined for r in out.records[3:])
    check_every_message("d-gpp", coord, out, ds)
    live = live_auditor(plan, ds).rows
    by_round: dict[int, dict[int, Any]] = {}
    for rnd, node, kind, blob in coord.received:
        if kind == "release":
            by_round.setdefault(rnd, {}).setdefault(node, []).append(loads(blob))
    assert sorted(by_round) == [2, 4, 6] and all(sorted(v) == [0, 1, 2] for v in by_round.values())
    for rnd, nodes in by_round.items():
        for k, msgs in nodes.items():
            own = {"train": plan.parts[k], "test": plan.test_parts[k]}
            want_live = {s: np.intersect1d(own[s], live[s]) for s in own}
            if rnd < 6:
                assert len(msgs) == 1
            else:  # round 6: the last live audit, then the final release of every own row
                assert len(msgs) == 2
                for s in own:
                    np.testing.assert_array_equal(msgs[1][s]["rows"], np.sort(own[s]))
            for s in own:
                got = msgs[0][s]["rows"] if s in msgs[0] else np.empty(0, np.int64)
                np.testing.assert_array_equal(got, want_live[s])
    releases = sum(len(b) for *_, kind, b in coord.received if kind == "release")
    assert out.totals()["bytes_release_up"] == releases
    assert [r.round for r in out.records if r.release_up] == [2, 4, 6]
    assert [int("live/utility_auc" in h) for h in out.history] == [0, 1, 0, 1, 0, 1]
    assert out.history[1]["bytes_release_up"] == sum(out.records[1].release_up.values())


def test_the_audit_reads_only_what_the_clients_released(ds: Dataset) -> None:
    """A client whose host is gone at the end releases nothing: the audit report says so, the global audit scores
    the rows that were released (and no other), and that client's per-node row is NaN. A release that claims rows
    a client does not own is refused."""
    plan, out, _, _ = recorded_run("d-gpp", ds, RUNS["d-gpp"])
    m = out.method
    assert m.released is not None and plan.test_parts is not None
    full = audit_final(plan, ds, m, CFG)
    for split in ("train", "test"):
        del m.released.parts[split][1]  # as if client 1's host had died for good before the release
    report, rows, z_train, z_test = audit_final(plan, ds, m, CFG)
    assert z_train.shape[0] == len(ds.train) - len(plan.parts[1]) and z_test.shape[0] == len(ds.test) - len(
        plan.test_parts[1]
    )
    assert [w.split(" released")[0] for w in report.warnings] == ["node 1", "node 1"]
    assert np.isnan(rows[1]["utility_auc"]) and rows[1]["train_rows"] == len(plan.parts[1])
    for k in (0, 2):  # the others' audits do not change (stacked probes: equal up to floating-point order)
        assert rows[k] == pytest.approx(full[1][k], abs=1e-6)
    rows0, z0 = m.released.parts["train"][0]
    m.released.parts["train"][0] = (rows0 + 1, z0)  # rows it does not own
    with pytest.raises(FederationError, match="node 0's train release"):
        audit_final(plan, ds, m, CFG)


def test_a_partial_release_is_audited_and_certified_on_the_rows_it_covers(ds: Dataset) -> None:
    """With client 1's release missing, the run's audit step (capacity sweep included) and the certificate read the
    released rows only, and say how many test rows the certificate stands on."""
    from veil.audit.step import audit_release
    from veil.certify.certificate import certify
    from veil.certify.target import default_target

    plan, out, _, _ = recorded_run("d-gpp", ds, RUNS["d-gpp"])
    m = out.method
    assert m.released is not None and plan.test_parts is not None
    for split in ("train", "test"):
        del m.released.parts[split][1]
    cfg = dataclasses.replace(CFG, capacity=True)
    audited = audit_release(m, ds, cfg, federation=plan)
    covered = audited.covered(ds)
    assert len(covered.test) == len(ds.test) - len(plan.test_parts[1]) == len(audited.z_test)
    assert "adversary_auc_max" in audited.metrics
    cert = certify(audited.z_train, audited.z_test, covered, audited.report, default_target(), cfg)
    assert cert.test_rows == len(covered.test) and np.isfinite(cert.worst_gap.point)
