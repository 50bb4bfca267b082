"""The coordinator's view of a federation, certified: the certificate's `wire` section.

A federation has two parties that see something derived from the data: the consumer of the final release (the
certificate proper) and the coordinator (aggregator), which receives every round's uploads. This module measures
what the uploads let the aggregator learn about s, round by round, with the certificate's own machinery
(`veil.certify.certificate.certify` on a fresh-probe audit), so when the certificate's statistic changes the wire
audit follows it.

- D-GPP (`private_encoders`): each round every participating client uploads z = mu + sigma * eps of a batch of its
  rows, drawn by its current encoder. For a few sampled rounds (`fed.wire_rounds`: the first, the last and evenly
  spaced ones between) the auditor asks the round's participants, right after the round (their encoders are
  exactly the ones that drew that round's upload), to release z of every row they own, train and test, drawn as
  an upload is drawn (a fresh mu + sigma * eps; with `release=mean` the mean, which an optimal adversary reads at
  least as well). The union is audited like a release against the run's target: fresh probe and adversary suite
  trained on the train rows, scored on the held-out test rows, 95% bootstrap intervals. A round's upload is b
  rows per client of exactly that distribution, so the figure is what that round's z reveals per row; the
  aggregator sees a batch of it every round. The check `wire/<metric>` (the worst sampled round) joins the
  certificate's checks, so the certificate is met only when the aggregator's view meets the target too.
  The audit's releases carry row ids, as the final release does, so an aggregator that keeps them can join one
  row's z across the sampled rounds and the final release. Each is keyed by the node's key and the encoder that
  drew it (`veil.randomness.state_digest`): one encoder's releases of a row are one z, and different encoders'
  carry independent noise, so their differences are not noise-free; they compose as releases under different
  keys do. `linked_view` puts them side by side and the section certifies that view too (the `linked` entry,
  metrics `certificate/wire_linked_*`); its check `wire/linked/<metric>` is among the run's checks, like the
  rounds'. `fed.wire_rounds=0` sends no audit release (and certifies neither).
- D-EIGAN, LDP-FedAvg (shared encoder): uploads are parameters. The aggregator holds no rows, but it averages the
  uploads into the global encoder, which it can apply to any x it gets. For the sampled rounds the global encoder
  of that round is applied, without any release noise (the aggregator has the parameters, not the noise: for
  LDP-FedAvg that is the extractor's v before the Laplace mechanism), to the train and test rows and audited the
  same way. It is reported against the target (met / not met with the figure), but it does not decide the
  certificate's `met`: it bounds what the aggregator learns only from rows it would have to obtain itself.

The wire audit's own releases (D-GPP) travel through the coordinator's process in Veil's runtimes, like a live
audit's; they are an audit measurement, not protocol traffic, and are counted apart (`audit_bytes_up`), not in
the federation's byte totals."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
import torch

from veil.audit.probes import audit
from veil.audit.settings import AuditConfig
from veil.certify.certificate import Certificate, Check, certify
from veil.certify.target import Target
from veil.datasets.dataset import Dataset
from veil.methods.federated.core import Release
from veil.methods.federated.simulation import FederationPlan

#: bounds of a target that do not apply to the aggregator's view: the eps of the release's mechanism bounds the
#: release, not the parameters the aggregator holds (it can compute the representation before the mechanism)
NOT_ON_THE_WIRE = ("eps",)

RECEIVES = {
    "private": "every round, each participating client's batch of (z, u): z = mu + sigma * eps of b of its rows, "
    "drawn by its private encoder (never s, x or the encoder)",
    "shared": "every round, each participating node's encoder parameters (D-EIGAN: a fraction phi of them; "
    "LDP-FedAvg: every parameter, extractor and decoders); no rows",
}
CAN_LEARN = {
    "private": "whatever the uploaded z reveal about the clients' s (the aggregator knows which client sent a "
    "batch but not s): measured per sampled round on every row its participants own",
    "shared": "the global encoder it averages, applied without release noise to any x it obtains (it holds no "
    "rows of its own): measured per sampled round on the run's train and test rows",
}


LINKED = "the sampled rounds' and the final release joined by row id"
#: what the aggregator's checks' metrics start with among a certificate's checks
WIRE_PREFIX = "wire/"


def sampled_rounds(total: int, count: int) -> list[int]:
    """`count` rounds of 1..total: the first, the last and evenly spaced ones between (fewer when total is small)."""
    if count <= 0 or total <= 0:
        return []
    if count == 1:
        return [1]
    return sorted({int(round(r)) for r in np.linspace(1, total, min(count, total))})


@dataclass
class WireView:
    """What one sampled round let the aggregator see (or compute): z of train and test rows (ids into the run's
    splits) and the nodes it stands for."""

    round: int
    nodes: list[int]
    train_rows: np.ndarray
    z_train: np.ndarray
    test_rows: np.ndarray
    z_test: np.ndarray


@torch.no_grad()
def plain_encoding(encoder: torch.nn.Module, x: np.ndarray, batch_size: int = 4096) -> np.ndarray:
    """`encoder(x)` in eval mode, no release noise: what a holder of the encoder's parameters computes."""
    was = encoder.training
    encoder.eval()
    out = []
    for i in range(0, len(x), batch_size):
        z = encoder(torch.from_numpy(np.array(x[i : i + batch_size], np.float32)))
        z = z[0] if isinstance(z, tuple) else z  # a Gaussian encoder's (mu, logvar): mu
        out.append(z.float().numpy())
    encoder.train(was)
    return np.concatenate(out) if out else np.zeros((0, 0), np.float32)


class WireCapture:
    """Called by `run_federation` after every round (`FederationPlan.wire`); keeps the views of the sampled rounds
    (bounded: len(rounds) views of n x d_z floats)."""

    def __init__(self, plan: FederationPlan, ds: Dataset, rounds: Sequence[int]) -> None:
        self.ds = ds
        self.rounds = sorted(set(int(r) for r in rounds))
        self.rounds_total = plan.rounds
        self.private = plan.method.private_encoders()
        self.views: dict[int, WireView] = {}
        self.audit_bytes_up = 0
        self.audit_bytes_down = 0

    def __call__(self, rnd: int, method: Any, fed: Any, record: Any) -> None:
        if rnd not in self.rounds:
            return
        nodes = sorted(int(k) for k in record.completed)
        if not nodes:
            return
        if self.private:
            got, up, down = fed.release({k: None for k in nodes})  # every row each participant owns
            self.audit_bytes_up += sum(up.values())
            self.audit_bytes_down += sum(down.values())
            rel = Release.from_messages(got)
            if not rel.nodes("train") or not rel.nodes("test"):
                return
            self.views[rnd] = WireView(
                rnd, sorted(got), rel.rows("train"), rel.z("train"), rel.rows("test"), rel.z("test")
            )
            return
        method.assemble(fed.snapshot())
        enc = method.modules()["encoder"]
        tr, te = np.arange(len(self.ds.train)), np.arange(len(self.ds.test))
        self.views[rnd] = WireView(
            rnd, nodes, tr, plain_encoding(enc, self.ds.train.x), te, plain_encoding(enc, self.ds.test.x)
        )


def linked_view(capture: WireCapture, released: Release | None) -> WireView | None:
    """What an aggregator that joins, by row id, each row's z from every sampled round's release and from the final
    release holds: per row those z side by side (a round whose participants did not own the row: zeros, and a
    0/1 column saying so), so an adversary can combine them (average, difference) as it likes. None without a
    final release or a sampled view."""
    if released is None or not capture.views or not released.nodes("train") or not released.nodes("test"):
        return None
    parts: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for split in ("train", "test"):
        rows = released.rows(split)
        cols = [released.z(split, rows)]
        for view in capture.views.values():
            have, z = (view.train_rows, view.z_train) if split == "train" else (view.test_rows, view.z_test)
            at = np.searchsorted(have, rows).clip(max=max(len(have) - 1, 0))
            present = (have[at] == rows) if len(have) else np.zeros(len(rows), bool)
            cols.append(np.where(present[:, None], z[at], 0.0).astype(np.float32))
            if not present.all():
                cols.append(present[:, None].astype(np.float32))
        parts[split] = (rows, np.concatenate(cols, axis=1))
    (tr, ztr), (te, zte) = parts["train"], parts["test"]
    return WireView(0, sorted(released.nodes("train")), tr, ztr, te, zte)


def linked_rows(capture: WireCapture, released: Release | None, ds: Dataset) -> tuple[np.ndarray, np.ndarray] | None:
    """The linked view's z of every train and of every test row of `ds`, in row order (what calibration scores a
    candidate's linked view on, paired with its release row for row); None without one, or when it misses rows."""
    joined = linked_view(capture, released)
    if joined is None or not covers(ds, joined):
        return None
    return joined.z_train, joined.z_test


def wire_capture(plan: FederationPlan, ds: Dataset) -> WireCapture | None:
    """The capture of `plan`'s federation (`fed.wire_rounds` sampled rounds), or None when it samples none."""
    rounds = sampled_rounds(plan.rounds, plan.options.wire_rounds)
    return WireCapture(plan, ds, rounds) if rounds else None


def wire_target(target: Target) -> Target:
    """The bounds of `target` that apply to the aggregator's view (all but `NOT_ON_THE_WIRE`)."""
    return dataclasses.replace(target, bounds=tuple(b for b in target.bounds if b.metric not in NOT_ON_THE_WIRE))


def covers(ds: Dataset, view: WireView) -> bool:
    """Whether `view` holds every train and test row of `ds`, in row order."""
    return np.array_equal(view.train_rows, np.arange(len(ds.train))) and np.array_equal(
        view.test_rows, np.arange(len(ds.test))
    )


def view_data(ds: Dataset, view: WireView) -> Dataset:
    """`ds` restricted to the rows of `view` (itself when the view covers every row, in order)."""
    if covers(ds, view):
        return ds
    return dataclasses.replace(ds, train=ds.train.take(view.train_rows), test=ds.test.take(view.test_rows))


def certify_view(view: WireView, ds: Dataset, target: Target, cfg: AuditConfig) -> Certificate:
    """The certificate of one round's view, exactly as a release's: fresh-probe audit, then `certify`."""
    data = view_data(ds, view)
    report = audit(view.z_train, data.train, view.z_test, data.test, data.num_classes, cfg)
    return certify(view.z_train, view.z_test, data, report, target, cfg)


@dataclass
class WireSection:
    """The aggregator's view, certified round by round: per sampled round the certificate's figures, the worst
    round, and the checks that join the run's certificate (`checks`; empty when they do not decide it)."""

    method: str
    private: bool
    target: Target
    rounds: list[dict[str, Any]]
    rounds_total: int
    worst_round: int | None
    worst_gap: dict[str, float] | None
    round_checks: dict[str, list[Check]]
    decides: bool
    audit_bytes_up: int = 0
    audit_bytes_down: int = 0
    notes: list[str] = field(default_factory=list)
    linked: dict[str, Any] | None = None
    """The view of an aggregator that joins each row's sampled-round and final releases by row id (D-GPP)."""
    linked_checks: list[Check] = field(default_factory=list)

    @property
    def met(self) -> bool | None:
        """Every applicable bound met on every sampled round and on the linked view (None: nothing was sampled or
        no bound applies)."""
        if not self.rounds or not self.target:
            return None
        return all(c.met for c in self.checks())

    def checks(self) -> list[Check]:
        """Per bound of the target, one check over the sampled rounds (the worst round's value, met when every
        round meets it), then the linked view's (`wire/linked/<metric>`). They join the run's certificate when
        the wire `decides` it."""
        out = []
        for metric, per_round in self.round_checks.items():
            worst = max(per_round, key=lambda c: (c.checked, c.value))
            at = self.rounds[per_round.index(worst)]["round"]
            out.append(
                Check(
                    f"{WIRE_PREFIX}{metric}",
                    worst.limit,
                    worst.value,
                    worst.checked,
                    f"{worst.how}, worst sampled round ({at})",
                    all(c.met for c in per_round),
                )
            )
        return out + [
            dataclasses.replace(c, metric=f"{WIRE_PREFIX}linked/{c.metric}", how=f"{c.how}, {LINKED}")
            for c in self.linked_checks
        ]

    def to_dict(self) -> dict[str, Any]:
        kind = "private" if self.private else "shared"
        return {
            "party": "aggregator (coordinator)",
            "method": self.method,
            "receives": RECEIVES[kind],
            "can_learn": CAN_LEARN[kind],
            "met": self.met,
            "decides_certificate": self.decides,
            "target": self.target.to_dict(),
            "rounds_total": self.rounds_total,
            "sampled_rounds": [r["round"] for r in self.rounds],
            "worst_round": self.worst_round,
            "privacy_gap": self.worst_gap,
            "checks": [dataclasses.asdict(c) for c in self.checks()],
            "rounds": self.rounds,
            "linked": self.linked,
            "audit_bytes_up": self.audit_bytes_up,
            "audit_bytes_down": self.audit_bytes_down,
            "notes": list(self.notes),
        }

    def metrics(self) -> dict[str, float]:
        """certificate/wire_* figures for MLflow."""
        if self.worst_gap is None:
            return {}
        out = {
            "certificate/wire_privacy_gap": self.worst_gap["value"],
            "certificate/wire_privacy_gap_high": self.worst_gap["high"],
            "certificate/wire_worst_round": float(self.worst_round or 0),
        }
        if self.met is not None:
            out["certificate/wire_met"] = float(self.met)
        if self.linked is not None:
            out["certificate/wire_linked_privacy_gap"] = self.linked["privacy_gap"]["value"]
            out["certificate/wire_linked_privacy_gap_high"] = self.linked["privacy_gap"]["high"]
            out["certificate/wire_linked_excess_gap_high"] = self.linked["excess_gap"]["high"]
        return out


def view_entry(view: WireView, cert: Certificate, tgt: Target) -> dict[str, Any]:
    """The section's record of one certified view (a round's: with its `round`, added by the caller)."""
    return {
        "nodes": list(view.nodes),
        "train_rows": int(len(view.train_rows)),
        "test_rows": cert.test_rows,
        "privacy_gap": cert.worst_gap.to_dict(),
        "excess_gap": cert.worst_excess.to_dict(),
        "adversary_auc_max": cert.worst_auc.to_dict(),
        "strongest_adversary": cert.strongest,
        "utility_auc": cert.utility.to_dict(),
        "checks": [dataclasses.asdict(c) for c in cert.checks],
        "met": cert.met if tgt else None,
    }


def audit_wire(capture: WireCapture, ds: Dataset, target: Target, cfg: AuditConfig, method: Any) -> WireSection:
    """Certify every sampled round's view of `capture` against the bounds of `target` that apply on the wire."""
    tgt = wire_target(target)
    rounds: list[dict[str, Any]] = []
    round_checks: dict[str, list[Check]] = {}
    worst: tuple[float, float, int] | None = None
    worst_gap = None
    for rnd in sorted(capture.views):
        view = capture.views[rnd]
        cert = certify_view(view, ds, tgt, cfg)
        entry = {"round": rnd, **view_entry(view, cert, tgt)}
        rounds.append(entry)
        for c in cert.checks:
            round_checks.setdefault(c.metric, []).append(c)
        key = (cert.worst_gap.high, cert.worst_gap.point, rnd)
        if worst is None or key[:2] > worst[:2]:
            worst, worst_gap = key, cert.worst_gap.to_dict()
    notes = []
    dropped = [b.metric for b in target.bounds if b.metric in NOT_ON_THE_WIRE]
    if dropped:
        notes.append(
            f"{', '.join(dropped)} bounds the release's mechanism, not what the aggregator holds: not checked on the "
            "wire"
        )
    if capture.private and getattr(method.config, "release", "sample") == "mean":
        notes.append("release=mean: the wire audit released mu, which reveals at least what a draw mu + sigma*eps does")
    linked, linked_checks = None, []
    joined = linked_view(capture, getattr(method, "released", None)) if capture.private else None
    if joined is not None:
        cert = certify_view(joined, ds, tgt, cfg)
        linked = {**view_entry(joined, cert, tgt), "rounds": sorted(capture.views), "columns": joined.z_train.shape[1]}
        linked_checks = list(cert.checks)
        notes.append(
            "linked view: an aggregator that keeps the audit's sampled-round releases and the final release, each "
            "with row ids, can join them per row; each encoder's release has its own noise (keyed by the node's key "
            "and the encoder), so they compose as independent releases. fed.wire_rounds=0 sends no audit release "
            "(and certifies no round)"
        )
    missing = [r for r in capture.rounds if r not in capture.views]
    if missing:
        notes.append(f"sampled rounds {missing} have no view (no participant delivered or released)")
    return WireSection(
        method.name,
        capture.private,
        tgt,
        rounds,
        capture.rounds_total,
        worst[2] if worst is not None else None,
        worst_gap,
        round_checks,
        decides=capture.private and bool(tgt) and bool(rounds),
        audit_bytes_up=capture.audit_bytes_up,
        audit_bytes_down=capture.audit_bytes_down,
        notes=notes,
        linked=linked,
        linked_checks=linked_checks,
    )


def attach(cert: Certificate, section: WireSection) -> None:
    """Add `section` to `cert`: its dict as `cert.wire`, and its checks to the certificate's when the aggregator's
    view decides it (D-GPP), so `cert.met` requires it."""
    cert.wire = section.to_dict()
    if section.decides:
        cert.checks.extend(section.checks())


__all__ = [
    "WIRE_PREFIX",
    "WireCapture",
    "WireSection",
    "WireView",
    "attach",
    "audit_wire",
    "certify_view",
    "linked_rows",
    "linked_view",
    "sampled_rounds",
    "wire_capture",
    "wire_target",
]
