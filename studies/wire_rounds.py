"""The aggregator's view of one federation, round by round (the certificate's `wire` section, docs/threat-model.md).

Runs a federated method in process with `fed.wire_rounds` sampled rounds and certifies them with
`veil.certify.wire.audit_wire` against the default target, exactly as `veil run` does, without the final release's
audit; prints one JSON line: per sampled round (round, gap, low, high, the excess over what the utility labels
reveal and its high end, met, test rows, utility AUC), and the same for the linked view (D-GPP: each row's
sampled-round and final releases joined by row id).

    python studies/wire_rounds.py DATASET N WARMUP EPOCHS WIRE_ROUNDS SEED [PARTITION] [KEY=VALUE ...]

N 0 keeps the dataset's own size; WARMUP is D-GPP's or LDP-FedAvg's warmup_epochs (ignored for other methods); KEY=VALUE sets a
method field (a JSON value: 'beta=[0.01]', K=5) or, as ds.KEY=VALUE, a dataset field (ds.sensitive=sex,race).
METHOD=d-eigan / ldp-fedavg in the environment picks another method (default d-gpp). Seeds: `seed` and
`release_seed` are SEED, the probes' seed too."""

from __future__ import annotations

import json
import os
import sys
import time

from veil.audit.settings import AuditConfig
from veil.certify.target import default_target
from veil.certify.wire import audit_wire, wire_capture
from veil.datasets.catalog import load_dataset
from veil.methods.builtin import create_method
from veil.methods.configs.fed_options import FederationOptions
from veil.methods.federated.core import FederatedRoles
from veil.methods.federated.simulation import LocalFederation, plan_federation, run_federation


def dataset_value(v: str) -> object:
    return tuple(v.split(",")) if "," in v else float(v) if "." in v else v


def figures(r: dict) -> list:
    """One certified view's figures: round (0: the linked view), gap, low, high, excess, its high end, met, test
    rows, utility AUC."""
    return [
        r.get("round", 0),
        round(r["privacy_gap"]["value"], 4),
        round(r["privacy_gap"]["low"], 4),
        round(r["privacy_gap"]["high"], 4),
        round(r["excess_gap"]["value"], 4),
        round(r["excess_gap"]["high"], 4),
        r["met"],
        r["test_rows"],
        round(r["utility_auc"]["value"], 3),
    ]


def main(argv: list[str]) -> None:
    name, n, warm, epochs, wire_rounds, seed = argv[0], *map(int, argv[1:6])
    partition = argv[6] if len(argv) > 6 else "iid"
    extra = dict(a.split("=", 1) for a in argv[7:])
    method = os.environ.get("METHOD", "d-gpp")
    params: dict[str, object] = {"epochs": epochs, "seed": seed, "release_seed": seed}
    if method in ("d-gpp", "ldp-fedavg"):
        params["warmup_epochs"] = warm
    params.update({k: json.loads(v) for k, v in extra.items() if not k.startswith("ds.")})
    ds_params = {k[3:]: dataset_value(v) for k, v in extra.items() if k.startswith("ds.")}
    t0 = time.time()
    ds = load_dataset(name, {**({"n": n} if n else {}), **ds_params})
    m = create_method(method, params, ds.task())
    assert isinstance(m, FederatedRoles), f"{method} is not a federated method"
    options = FederationOptions(wire_rounds=wire_rounds, per_node_audit=False)
    plan = plan_federation(m, method, ds.train, dataset=ds, partition_scheme=partition, options=options, seed=seed)
    plan.wire = wire_capture(plan, ds)
    run_federation(plan, LocalFederation(plan))
    t1 = time.time()
    section = audit_wire(plan.wire, ds, default_target(), AuditConfig(seed=seed), m).to_dict()
    rounds = [figures(r) for r in section["rounds"]]
    out = {
        "method": method,
        "dataset": name,
        "n": n,
        "partition": partition,
        "warmup": warm,
        "epochs": epochs,
        "seed": seed,
        "extra": extra,
        "train_s": round(t1 - t0),
        "audit_s": round(time.time() - t1),
        "rounds_total": section["rounds_total"],
        "met": section["met"],
        "rounds": rounds,
        "linked": figures(section["linked"]) if section["linked"] else None,
    }
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    if len(sys.argv) < 7 or {"-h", "--help"} & set(sys.argv[1:]):
        print(__doc__)
        sys.exit(0 if {"-h", "--help"} & set(sys.argv[1:]) else 2)
    main(sys.argv[1:])
