"""A run spec validated completely, torch-free: `validate` builds a `ValidatedRun` from a `RunSpec` (method, dataset,
audit and federation parameters, ranges, executor, target) before any data are loaded or any training starts.

Then, once the data are loaded, `check_release` and `check_target` (whether the test split can certify the target:
`veil.certify.resolution.check_resolution`) refuse what only the data can show, still before anything trains.

It reads the methods' cards (`veil.methods.cards`), the audit's settings and the dataset registry, so `veil sweep
--check` and `veil run --check` answer without loading torch, Ray or MLflow; only a federated run's runtime check
imports the federation runtimes."""

from __future__ import annotations

from typing import Any

from veil.audit.settings import AuditConfig, check_mi_case
from veil.certify.knob_search import CalibrationConfig
from veil.certify.resolution import check_resolution
from veil.certify.target import Target, check_labels, default_target, parse_target
from veil.config import build
from veil.datasets.catalog import dataset_params
from veil.datasets.dataset import Dataset
from veil.datasets.partition import parse_scheme
from veil.errors import ConfigError, UnknownNameError
from veil.methods.cards import is_federated, method_card, method_config
from veil.methods.configs.fed_options import FederationOptions
from veil.pipeline.runspec import (
    EXECUTOR_CHOICES,
    RunSpec,
    ValidatedRun,
    centralized_refusal,
    choose_executor,
)
from veil.sizing import check_memory


def validate(spec: RunSpec) -> ValidatedRun:
    """Check and build method, dataset, audit and execution settings, once; raises before anything is trained."""
    mcfg = method_config(spec.method, spec.method_values())
    dcfg = dataset_params(spec.dataset, spec.dataset_values())
    acfg = build(AuditConfig, spec.audit_values(), where="audit")
    goal = resolve_target(spec)
    card = method_card(spec.method)
    check_memory(mcfg, dcfg, spec.dataset, card.releases_input_format)
    if spec.executor not in EXECUTOR_CHOICES:
        raise ConfigError("executor", spec.executor, " | ".join(EXECUTOR_CHOICES))
    if is_federated(spec.method):
        if acfg.mi != "none":
            raise ConfigError("audit.mi", acfg.mi, "none: MI estimates are not wired into federated runs yet")
        from veil.platform.federation import get_runtime  # a federated run's runtimes (they load torch)

        try:
            runtime = get_runtime(spec.runtime or "auto").name
        except UnknownNameError as e:
            raise ConfigError("runtime", spec.runtime, " | ".join(e.valid)) from None
        partition = spec.partition or "iid"
        parse_scheme(partition)  # a bad scheme fails here, before any data are loaded
        fed = build(FederationOptions, dict(spec.federation), where="federation")
        return ValidatedRun(spec, mcfg, dcfg, acfg, "federated", fed, runtime, partition, **goal)
    width = card.release_width_for(mcfg, None)
    if width is not None:  # else known once the data are loaded: `check_release`
        check_mi_case(acfg, width)
    for key in ("partition", "runtime", "federation"):
        if getattr(spec, key):
            raise centralized_refusal(key, getattr(spec, key), spec.method)
    executor = choose_executor(spec.executor, spec.num_workers, spec.use_gpu)
    return ValidatedRun(spec, mcfg, dcfg, acfg, executor, **goal)


def resolve_target(spec: RunSpec) -> dict[str, Any]:
    """The run's target (its own, else the default for a method with a privacy knob), whether it calibrates, and
    who sets the knob: keyword arguments of `ValidatedRun`."""
    card = method_card(spec.method)
    knob = card.privacy_knob
    given = parse_target(spec.target)
    target = given if given is not None else default_target() if knob else Target(())
    eps = target.get("eps")
    if eps is not None and not card.eps_ldp:
        raise ConfigError("target.eps", eps.limit, "a bound of eps-LDP methods only (ldp-frl, ldp-fedavg, dp-input)")
    ccfg = build(CalibrationConfig, dict(spec.calibration), where="calibration")
    if knob is None:
        if spec.calibration:
            raise ConfigError(
                "calibration", dict(spec.calibration), f"nothing: method {spec.method!r} has no privacy knob"
            )
        return {"target": target}
    preset = spec.params.get("preset", "default")
    set_by = "run" if knob.field in spec.params else "preset paper" if preset == "paper" else "default"
    calibrates = bool(target) and spec.calibrate and set_by == "default"
    return {
        "target": target,
        "calibration": ccfg.resolved(is_federated(spec.method)) if calibrates else None,
        "knob_set_by": "calibration" if calibrates else set_by,
    }


def check_release(v: ValidatedRun, ds: Dataset) -> None:
    """Checks that need the data: the MI estimator copes with the release's width (known only with the task:
    EIGAN derives d_z from the allies' classes, the adjustable AE releases x'); an MI bound names a sensitive
    label."""
    width = method_card(v.spec.method).release_width_for(v.method_config, ds.task())
    if v.executor != "federated" and width is not None:
        check_mi_case(v.audit_config, width)
    check_labels(v.target, ds.sensitive_names, v.spec.dataset)


def check_target(v: ValidatedRun, ds: Dataset) -> None:
    """A run that calibrates must have a target its test split can certify (`check_resolution`): refused before
    the minutes calibration takes, naming the smallest bound the data can show."""
    if v.calibration is not None:
        check_resolution(ds, v.target, v.audit_config, v.spec.dataset, v.spec.seed)
