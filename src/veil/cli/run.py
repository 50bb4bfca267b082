"""`veil run`: train one method on one dataset, audit, certify and log it; its console (progress bars,
summary, the certificate's verdict)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from typing import Any, Sequence

from veil.cli.flags import add_tracking_uri
from veil.console import warn
from veil.errors import ConfigError, UnknownNameError, VeilError


def parse_value(text: str) -> Any:
    """A --set value: YAML scalars and lists ('8', '1e-3', 'true', '[64, 32]'); anything else stays a string."""
    import yaml

    if not text:  # `--set beta=`: say what was typed, not None
        return text
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text


def split_assignments(items: Sequence[str], method: str, dataset: str) -> dict[str, dict[str, Any]]:
    """Route `--set key=value` to method, dataset, audit or federation params through the one `KeyRouter`
    (`seed` is the run's seed)."""
    from veil.pipeline.runspec import KeyRouter

    router = KeyRouter.for_run(method, dataset)
    out: dict[str, dict[str, Any]] = {"method": {}, "dataset": {}, "audit": {}, "fed": {}, "run": {}, "calibration": {}}
    for item in items:
        if "=" not in item:
            raise ConfigError("--set", item, "key=value")
        key, raw = item.split("=", 1)
        key, value = key.strip(), parse_value(raw.strip())
        if key == "seed":
            out["run"]["seed"] = value
            continue
        if key.startswith("calibration."):  # checked with the rest of the calibration settings by `validate`
            out["calibration"][key.split(".", 1)[1]] = value
            continue
        try:
            section, name = router.route(key)
        except UnknownNameError as e:
            if e.kind != "parameter":
                raise
            raise UnknownNameError(
                "parameter", key, [*e.valid, "seed", *calibration_keys(method)], where="--set"
            ) from None
        if name in out[section]:
            raise ConfigError("--set", item, f"one value per key ({key} is set twice)")
        out[section][name] = value
    return out


def calibration_keys(method: str) -> list[str]:
    """The `calibration.` keys `--set` accepts for `method` (none for a method without a privacy knob)."""
    from veil.certify.knob_search import CalibrationConfig
    from veil.methods.cards import method_card

    if method_card(method).privacy_knob is None:
        return []
    return [f"calibration.{f.name}" for f in dataclasses.fields(CalibrationConfig)]


def dataset_assignments(items: Sequence[str], method: str, dataset: str) -> dict[str, Any]:
    """`-p KEY=VALUE` (the dataset parameters, as on `veil datasets`): unknown names fail naming `-p`."""
    from veil.cli.datasets import parse_params
    from veil.pipeline.runspec import KeyRouter

    router = KeyRouter.for_run(method, dataset)
    out = {}
    for key, value in parse_params(list(items)).items():
        out[router.route(key, sections=("dataset",), where="-p")[1]] = value
    return out


def build_run_spec(args: argparse.Namespace):
    from veil.pipeline.runspec import load_run_file, spec_from_mapping

    base = load_run_file(args.file) if args.file else None
    method = args.method or (base.method if base else None)
    dataset = args.dataset or (base.dataset if base else None)
    if not method:
        raise ConfigError(
            "method", None, "a method name (--method NAME or 'method:' in the run file; see `veil methods`)"
        )
    if not dataset:
        raise ConfigError(
            "dataset", None, "a dataset name (--dataset NAME or 'dataset:' in the run file; see `veil datasets`)"
        )
    routed = split_assignments(args.set or [], method, dataset)
    by_p = dataset_assignments(args.dataset_param, method, dataset)
    both = sorted(set(by_p) & set(routed["dataset"]))
    if both:
        raise ConfigError("-p", f"{both[0]}={by_p[both[0]]}", f"one value per key ({both[0]} is also given by --set)")
    routed["dataset"].update(by_p)
    data: dict[str, Any] = dataclasses.asdict(base) if base else {}
    data.update({"method": method, "dataset": dataset})
    data["params"] = {**data.get("params", {}), **routed["method"]}
    data["dataset_params"] = {**data.get("dataset_params", {}), **routed["dataset"]}
    data["audit"] = {**data.get("audit", {}), **routed["audit"]}
    if routed["fed"]:
        data["federation"] = {**data.get("federation", {}), **routed["fed"]}
    if "seed" in routed["run"]:
        data["seed"] = routed["run"]["seed"]
    if routed["calibration"]:
        data["calibration"] = {**data.get("calibration", {}), **routed["calibration"]}
    from veil.certify.target import target_from_flags

    flags = target_from_flags(args.target or [])
    if flags is not None:
        data["target"] = "none" if not flags else flags.to_dict()
    if getattr(args, "no_calibrate", False):
        data["calibrate"] = False
    for key in ("executor", "experiment", "tracking_uri", "address", "run_name", "partition", "runtime"):
        if getattr(args, key, None) is not None:
            data[key] = getattr(args, key)
    if args.workers is not None:
        data["num_workers"] = args.workers
    if args.gpu:
        data["use_gpu"] = True
    return spec_from_mapping(data)


RUN_FLAGS = {
    "partition": ("--partition", "partition"),
    "runtime": ("--runtime", "runtime"),
    "executor": ("--executor", "executor"),
    "num_workers": ("--workers", "workers"),
}
"""Run-spec keys set by a `veil run` flag: (the flag, its argparse attribute)."""


def named_by_flag(e: VeilError, args: argparse.Namespace) -> VeilError:
    """The same error, naming the flag the user typed (`--partition`) instead of the run-spec key it set."""
    key = e.field if isinstance(e, ConfigError) else e.kind.split()[0] if isinstance(e, UnknownNameError) else ""
    flag, attr = RUN_FLAGS.get(key, ("", ""))
    if not flag or getattr(args, attr, None) is None:
        return e
    if isinstance(e, ConfigError):
        return ConfigError(flag, e.value, e.allowed, e.where)
    assert isinstance(e, UnknownNameError)
    return UnknownNameError(e.kind, e.name, e.valid, flag + (f" ({e.where})" if e.where else ""))


def cmd_run(args: argparse.Namespace) -> int:
    from veil.pipeline.validation import validate

    try:
        spec = build_run_spec(args)
        v = validate(spec)  # fail before any start-up cost
    except VeilError as e:
        raise named_by_flag(e, args) from None
    # only Ray Train's workers log from other nodes; every other executor logs from this process
    address = spec.address if v.executor == "ray-train" else "local"
    uri = check_run_tracking(spec.tracking_uri, address, args, replay=not args.check)
    if getattr(v.method_config, "release_seed", None) is None:
        from veil.keystore import check_key_dir

        check_key_dir(uri)  # the run keeps its release key there after training: refused now, not then
    if args.check:
        return check_run(v)
    from veil.pipeline.execute import execute

    out = sys.stderr if args.json else sys.stdout
    federated = v.executor == "federated"
    bar: Any = None

    def on_epoch(epoch: int, row: dict[str, float]) -> None:
        nonlocal bar
        if args.quiet:
            return
        first = bar is None
        if first:  # opened at the first epoch: data loading and start-up errors come without a bar
            from tqdm import tqdm

            # initial=1: the first epoch is counted without a rate (its start time is unknown here; a rate
            # measured from the bar's own creation would read thousands of epochs a second)
            bar = tqdm(
                total=None if federated else v.method_config.epochs,
                initial=1,
                desc=f"{spec.method} on {spec.dataset}" + (f" ({phase})" if phase else ""),
                unit="round" if federated else "epoch",
                file=sys.stderr,
                dynamic_ncols=True,
            )
        if federated:
            bar.total = int(row.get("rounds_total", 0)) or None
        bar.set_postfix_str(round_status(row) if federated else epoch_status(row), refresh=first)
        if not first:
            bar.update(1)  # refreshes the bar with the postfix above

    phase = ""

    def note(text: str) -> None:
        nonlocal bar, phase
        closed = bar is not None
        if closed:  # a calibration stage's epochs end: the next stage opens its own bar
            bar.close()
            bar = None
        phase = next((p for start, p in PHASES if text.startswith(start)), "calibrating")
        if text.startswith(("auditing", "certifying")) and not (closed or phase_said):
            return  # a phase is named where a bar stood, not on an otherwise quiet console
        phase_said.append(text)
        if not args.quiet or text.startswith(("calibration found no value", "calibration has no room")):
            print(f"[veil] {text}", file=sys.stderr, flush=True)

    phase_said: list[str] = []
    pin_threads_if_busy(args.quiet)
    try:
        result = execute(v, on_epoch=on_epoch, note=note)
    finally:
        if bar is not None:
            bar.close()
    print_summary(result, v.executor_label, out)
    if args.json:
        print(json.dumps(result.to_json(), default=str), flush=True)
    return result.exit_code


def pin_threads_if_busy(quiet: bool) -> None:
    """Train on one torch thread when the CPU is already busy (`busy_threads`), saying so unless quiet."""
    from veil.platform.cluster import busy_threads

    if not hasattr(os, "getloadavg"):  # not on Windows: torch's default there
        return
    load, cpus = os.getloadavg()[0], os.cpu_count() or 1
    threads = busy_threads(load, cpus, os.environ)
    if threads is None:
        return
    import torch

    torch.set_num_threads(threads)
    if not quiet:
        print(
            f"[veil] the CPU is busy (load {load:.1f} on {cpus} cores): training and auditing on {threads} torch "
            "thread (set OMP_NUM_THREADS to choose)",
            file=sys.stderr,
            flush=True,
        )


#: a note's first word -> the phase the next progress bar names
PHASES = (("calibrated ", "release"), ("auditing", "audit"), ("certifying", "certificate"))


def epoch_status(row: dict[str, float]) -> str:
    """A training row as the progress bar's postfix: its first three losses under their full names, 'loss/'
    dropped ('encoder=0.693, adversary/s=0.612')."""
    return ", ".join(f"{k.removeprefix('loss/')}={val:.3f}" for k, val in list(row.items())[:3])


def print_certificate(result: Any, out: Any) -> None:
    """The certificate's verdict after a run: its headline and checks, and a warning or an error when unmet."""
    cert = result.certificate
    if cert is None:
        print("no leakage target (target: none): the release is not certified", file=out)
        return
    print(cert.headline(), file=out)
    for c in cert.checks:
        print(f"  {c.text()}", file=out)
    for n in cert.notes:
        print(f"  note: {n}", file=out)
    if cert.met:
        return
    from veil.certify.certificate import certified_instead
    from veil.certify.wire import WIRE_PREFIX

    knob = cert.knob or {}
    instead = certified_instead(cert.checks)
    does = f"; it does certify {' and '.join(instead)} (95% upper end, rounded up)" if instead else ""
    unmet = [c.metric for c in cert.checks if not c.met]
    if result.calibration is not None and unmet and all(m.startswith(WIRE_PREFIX) for m in unmet):
        print(
            f"error: the release meets its target ({cert.target.text()}), but the aggregator's view does not "
            f"({', '.join(unmet)}): recorded with met: false; exit code {result.exit_code}{does}; calibration "
            f"judged {knob.get('field')} on validation rows (the release and the aggregator's linked view), whose "
            f"figures the test rows' need not repeat: a more private value (--set "
            f"{knob.get('field')}=...) keeps more from the aggregator, and --set fed.wire_rounds=0 sends it no audit "
            "release (and certifies none of its view; docs/threat-model.md)",
            file=sys.stderr,
        )
    elif result.calibration is not None:
        print(
            f"error: calibration could not meet the target ({cert.target.text()}): the release above (the least "
            f"leaking value found, {knob.get('field')}={knob.get('value', float('nan')):.4g}) is recorded with met: "
            f"false; exit code {result.exit_code}{does}"
            + ("; a tighter bound needs a more private method or more test rows (docs/targets.md)" if does else ""),
            file=sys.stderr,
        )
    else:
        who = (
            f"{knob.get('field')}={knob.get('value', float('nan')):.4g} set by {knob.get('set_by')}"
            if knob
            else "no knob"
        )
        hint = ""
        if knob.get("set_by") == "run":
            refused = knob.get("calibration_refused")
            hint = (
                f"; calibrating {knob.get('field')} would not help here: {refused}"
                if refused
                else f"; leave {knob.get('field')} unset to let Veil calibrate it"
            )
        warn(f"this release does NOT meet its target ({cert.target.text()}; {who}){does}{hint}")


def check_run_tracking(uri: str | None, address: str | None, args: argparse.Namespace, replay: bool = True) -> str:
    """Refuse an unknown scheme, an unreachable store, or a node-local store for work on a Ray cluster, before
    the data load, naming where the URI came from; then (`replay`) send journals left by earlier runs. Returns the
    resolved URI."""
    from veil.platform.cluster import joins_cluster
    from veil.tracking.mlflow_run import check_tracking, require_shared_store, uri_source
    from veil.tracking.replay import recover

    source = uri_source(args.tracking_uri) if args.tracking_uri or not uri else f"{args.file}: tracking_uri"
    resolved = check_tracking(uri, source)
    require_shared_store(resolved, joins_cluster(address), source)
    if replay:
        recover(resolved, "veil run")
    return resolved


def check_run(v: Any) -> int:
    """`veil run --check`: the parameters are valid and the data load; nothing trains, nothing is logged."""
    from veil.datasets.catalog import load_dataset
    from veil.pipeline.validation import check_release, check_target

    ds = load_dataset(v.spec.dataset, v.dataset_config)
    check_release(v, ds)
    check_target(v, ds)
    if v.executor == "federated":
        check_federation(v, ds)
    labels = f"utility {', '.join(ds.utility_names)}; sensitive {', '.join(ds.sensitive_names)}"
    print(
        f"ok: {v.spec.method} on {v.spec.dataset} ({len(ds.train)} train / {len(ds.test)} test rows, {ds.d_in} "
        f"features; {labels}), executor {v.executor_label}: valid, nothing was run"
    )
    print(f"   {target_plan(v)}")
    return 0


def check_federation(v: Any, ds: Any) -> None:
    """The federation's own checks (its nodes against the rows, its partition against the data), as a real run
    makes them before placing it; nothing starts."""
    from veil.methods.builtin import create_method
    from veil.methods.federated.simulation import plan_federation

    method: Any = create_method(v.spec.method, v.method_config, ds.task())  # a federated method: FederatedRoles
    partition = v.partition or "iid"
    plan_federation(method, v.spec.method, ds.train, dataset=ds, partition_scheme=partition, options=v.federation)


def target_plan(v: Any) -> str:
    """What the run would do about its leakage target (`veil run --check`)."""
    if not v.target:
        return "no leakage target: the release would not be certified"
    if v.calibration is not None:
        from veil.methods.cards import method_card

        knob = method_card(v.spec.method).privacy_knob
        assert knob is not None  # a run calibrates only a method with a knob
        return (
            f"would calibrate {knob.field} to {v.target.text()} on {v.calibration.validation:.0%} of the training "
            "rows, then certify the release on the test rows"
        )
    return f"would certify the release against {v.target.text()} (knob set by {v.knob_set_by}: not calibrated)"


def _kb(n: float) -> str:
    return f"{n / 1e6:.2f} MB" if n >= 1e6 else f"{n / 1e3:.1f} kB"


def round_status(row: dict[str, float]) -> str:
    """A federated round for the progress bar: nodes, bytes, failures and the latest live audit."""
    text = (
        f"round {int(row['round'])} nodes {int(row['participants'])}/{int(row['selected'])} "
        f"up {_kb(row['bytes_up'])} down {_kb(row['bytes_down'])}"
    )
    if row.get("failures"):
        text += f" failures {int(row['failures'])}"
    live = [(k, row[f"live/{k}"]) for k in ("utility_auc", "adversary_auc") if f"live/{k}" in row]
    if live:
        text += " " + " ".join(f"{k.split('_')[0][:3]}AUC {val:.3f}" for k, val in live)
    return text


def print_summary(result, executor: str, out) -> None:
    m = result.metrics
    p = result.params
    print("", file=out)
    took = f"{result.seconds:.1f} s"
    if result.calibration is not None:
        took += f" after {result.calibration.seconds:.1f} s of calibration"
    print(f"veil run  {p['method']} on {p['dataset']}  (executor {executor}, {took})", file=out)
    print(result.report.to_markdown(), file=out)
    keys = ["utility_acc", "utility_auc", "adversary_acc", "adversary_auc", "privacy_gap"]
    print("  ".join(f"{k} {m[k]:.3f}" for k in keys if k in m), file=out)
    if result.extra.get("per_node"):
        from veil.audit.nodes import per_node_markdown

        print("per node (each node's own test rows and objective):", file=out)
        print(per_node_markdown(result.extra["per_node"]), file=out)
    if "bytes_up_total" in m:
        print(
            f"rounds {int(m['rounds'])}  bytes up {_kb(m['bytes_up_total'])}  down {_kb(m['bytes_down_total'])}  "
            f"failures {int(m['failures_total'])}  restarts {int(m['restarts'])} node host(s), "
            f"{int(m.get('coordinator_restarts', 0))} coordinator",
            file=out,
        )
    print_certificate(result, out)
    print(f"MLflow run {result.run_id} (experiment {result.experiment_id}) at {result.tracking_uri}", file=out)


def add_parser(sub: argparse._SubParsersAction) -> None:
    run = sub.add_parser(
        "run",
        help="train one method on one dataset, audit it, certify it against a leakage target and log it to MLflow",
        description="Train, audit, certify and log one run. Exit codes: 0 done (a release whose knob the run set "
        "and that misses its target ends with a warning); 2 bad input, refused before anything ran; 3 calibration "
        "could not meet the target (the least leaking release is recorded with met: false).",
    )
    run.add_argument(
        "file",
        nargs="?",
        help="YAML run file (keys: method, dataset, params, dataset_params, audit, seed, executor, ...)",
    )
    run.add_argument("--method", "-m", help="method name (see `veil methods`)")
    run.add_argument("--dataset", "-d", help="dataset name (see `veil datasets`) or a CSV/Parquet path")
    run.add_argument(
        "--set",
        "-s",
        action="append",
        metavar="KEY=VALUE",
        help="a parameter: method field (beta=1), dataset field (rho=0.5 or dataset.n=2000), audit.FIELD, "
        "fed.FIELD (federation options), seed",
    )
    from veil.cli.datasets import add_dataset_param_flag

    add_dataset_param_flag(run, "-p n=2000, or for your own file -p utility=COLUMN -p sensitive=COLUMN")
    run.add_argument(
        "--target",
        "-t",
        action="append",
        metavar="METRIC=BOUND",
        help="leakage target the release must meet: excess_gap=0.05 (the default for privacy methods: at most 0.05 beyond what the utility labels alone reveal), "
        "adversary_auc_max=0.55, eps=4 (eps-LDP methods), mi/ESTIMATOR/LABEL=0.01; repeat for several; "
        "'none' for no certificate. Without the method's knob set, Veil calibrates the knob to it",
    )
    run.add_argument(
        "--no-calibrate",
        dest="no_calibrate",
        action="store_true",
        help="certify the release at the knob's default instead of calibrating it to the target",
    )
    run.add_argument(
        "--executor",
        help="where training runs: auto | inline | ray-train (auto: ray-train when --gpu "
        "or --workers > 1, else inline)",
    )
    run.add_argument("--workers", type=int, help="Ray Train data-parallel workers (default 1)")
    run.add_argument(
        "--partition",
        help="federated methods: how rows are split over the nodes: iid (default), "
        "dirichlet:ALPHA, quantity:ALPHA, silo:COLUMN, variance",
    )
    run.add_argument(
        "--runtime",
        help="federated methods: where nodes run: auto | in-process | ray-actors | virtual "
        "(auto = virtual: many nodes per Ray actor, vectorised)",
    )
    run.add_argument(
        "--gpu",
        action="store_true",
        help="train on a CUDA GPU (none found: a warning, and training runs on CPU; tag veil.device says which)",
    )
    run.add_argument("--address", help="Ray cluster to join (e.g. 'auto'); default: a local Ray when needed")
    add_tracking_uri(run)
    run.add_argument("--experiment", help="MLflow experiment name (default 'veil')")
    run.add_argument("--run-name", dest="run_name", help="MLflow run name")
    run.add_argument(
        "--json", action="store_true", help="print one JSON object (run id, params, metrics) as the last stdout line"
    )
    run.add_argument("--quiet", "-q", action="store_true", help="no progress bar")
    run.add_argument(
        "--check",
        action="store_true",
        help="validate the parameters, the store and the data (a federation: its partition), then stop (nothing trains)",
    )
    run.set_defaults(func=cmd_run)
