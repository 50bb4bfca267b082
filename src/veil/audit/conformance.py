"""What every method must do, checked the same way for Veil's own methods (tests/methods/test_conformance.py)
and for a plugin's (docs/extending.md): a kebab-case name, a `param`-built Config, a description; fit on a
small task, a history of the right shape, a release of the right width that carries the utility label, and a
state that round-trips. A federated method whose clients keep their encoders is released by its clients and
refuses to encode anywhere else.

    python -m veil.audit.conformance NAME [--set KEY=VALUE ...]    # a plugin author's check of a method"""

from __future__ import annotations

import argparse
import sys
from typing import Any, Mapping

import numpy as np
import torch

from veil.audit.probes import audit
from veil.audit.settings import AuditConfig
from veil.datasets.dataset import Dataset
from veil.methods.builtin import create_method, get_method
from veil.methods.federated.core import EncodersStayHome, FederatedRoles
from veil.methods.federated.simulation import run_in_process
from veil.methods.method import MethodConfig

SMALL = {"d_z": 3, "batch_size": 32, "seed": 0, "release_seed": 0}
"""Values every check sets (reproducible releases: the round trip compares z)."""
UTILITY_AUC_FLOOR = 0.85
"""The least utility ROC-AUC a release must keep on the small task (Veil's methods: >= 0.955, seeds 0-2)."""
PROBE = AuditConfig(hidden=(16,), epochs=30, lr=1e-2, batch_size=128, standardize=True, seed=0)
"""The fresh probe that reads the release."""


class ConformanceError(AssertionError):
    """A method does not do what every method must."""


def require(ok: bool, what: str) -> None:
    if not ok:
        raise ConformanceError(what)


def check_method(name: str, values: Mapping[str, Any], data: Dataset) -> dict[str, float]:
    """Run every conformance check of method `name` with `values` (on top of SMALL) on `data` (a small task with
    one utility label and sensitive labels); the release's audit metrics, or ConformanceError naming the check."""
    cls = get_method(name)
    require(cls.name == name and name == name.lower() and " " not in name, f"{name}: a kebab-case name")
    require(issubclass(cls.Config, MethodConfig) and bool(cls.description), f"{name}: a MethodConfig and a description")
    values = {**SMALL, **values}
    m = create_method(name, values, data.task())
    private = False
    if isinstance(m, FederatedRoles) and m.private_encoders():  # the clients keep their encoders (d-gpp)
        private = True
        history = run_in_process(m, data.train, dataset=data).history
        released: Any = getattr(m, "released", None)  # the release is the clients', each of its own rows
        require(released is not None, f"{name}: the clients released z")
        z_train, z_test = released.z("train"), released.z("test")
        again = create_method(name, values, data.task())
        again.load_state(m.state())  # what the aggregator has (psi), round-tripped; it cannot encode
        same = again.state().keys() == m.state().keys()
        require(same and all(torch.equal(again.state()[k], v) for k, v in m.state().items()), f"{name}: state")
        for model in (m, again):
            try:
                model.encode(data.test.x)
            except EncodersStayHome:
                continue
            raise ConformanceError(f"{name}: encoded outside its clients")
    else:
        history = m.fit(data.train)
        z_train, z_test = m.encode(data.train.x), m.encode(data.test.x)
        again = create_method(name, values, data.task())
        again.load_state(m.state())
        require(np.allclose(again.encode(data.train.x), z_train, atol=1e-6), f"{name}: the state round-trips")
    if private:  # one row per round, numbered 1..rounds_total
        rounds = [row["round"] for row in history]
        require(rounds == list(range(1, int(history[0]["rounds_total"]) + 1)), f"{name}: one history row per round")
    elif m.iterative:
        finite = all(np.isfinite(v) for row in history for v in row.values())
        require(len(history) == values["epochs"] and finite, f"{name}: one row of finite losses per epoch")
        require(all(row for row in history), f"{name}: every history row names a loss")
    else:
        require(history == [], f"{name}: a closed-form fit reports no epochs")
    width = data.d_in if cls.releases_input_format else values["d_z"]
    shapes = z_train.shape == (len(data.train), width) and z_test.shape == (len(data.test), width)
    require(shapes and bool(np.isfinite(z_test).all()), f"{name}: a finite release of width {width}")
    metrics = audit(z_train, data.train, z_test, data.test, data.num_classes, PROBE).metrics()
    utility = metrics["utility_auc"]
    require(utility >= UTILITY_AUC_FLOOR, f"{name}: utility AUC {utility:.3f} below {UTILITY_AUC_FLOOR}")
    worst = max(metrics[f"adversary_auc/{s}"] for s in data.sensitive_names)
    require(metrics["adversary_auc"] == worst, f"{name}: adversary_auc is the worst case over the sensitive labels")
    require(m.params().get("d_z") == values["d_z"], f"{name}: params() reports its config")
    return metrics


def main(argv: list[str] | None = None) -> int:
    import yaml

    from veil.datasets.catalog import load_dataset

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("name", help="a registered method (plugins included)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a method field")
    args = ap.parse_args(argv)
    values = {k.strip(): yaml.safe_load(v) for k, _, v in (s.partition("=") for s in args.set)}
    metrics = check_method(args.name, values, load_dataset("gaussian-octant", {"n": 300}))
    print(
        f"{args.name}: conforms (utility AUC {metrics['utility_auc']:.3f}, adversary AUC {metrics['adversary_auc']:.3f})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
