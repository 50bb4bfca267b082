"""`veil datasets ...` subcommands (wired into veil.cli).

veil datasets                       list every dataset and its parameters
veil datasets show NAME             the dataset's card; class balance once fetched
veil datasets fetch NAME [--from PATH] [--force]
veil datasets verify NAME           re-hash the fetched files, compare row counts with the card
veil datasets partition NAME --scheme dirichlet --nodes 10 --alpha 0.3 [-p key=value ...]

The registry (numpy, pandas, every loader) is imported by the commands that use it, not to build the parser.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from veil.config import field_table
from veil.errors import ConfigError, DataError


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register `veil datasets` and its subcommands on the top-level parser."""
    p = sub.add_parser(
        "datasets",
        help="list, show, fetch, verify and partition datasets",
        description="Datasets: synthetic generators, real datasets (fetched into the cache) and your own "
        ".csv/.parquet files. Without a subcommand, lists every dataset.",
    )
    p.set_defaults(func=cmd_list)
    dsub = p.add_subparsers(dest="datasets_command", metavar="{list,show,fetch,verify,partition}")

    q = dsub.add_parser("list", help="list every dataset and its parameters")
    q.set_defaults(func=cmd_list)

    q = dsub.add_parser(
        "show", help="print a dataset's card (source, licence, schema, labels, split) and class balance"
    )
    q.add_argument("name")
    add_dataset_param_flag(q, "-p utility=label -p sensitive=group (for the class balance)", old_spelling=True)
    q.set_defaults(func=cmd_show)

    q = dsub.add_parser("fetch", help="download a real dataset into the cache, checking its sha256")
    q.add_argument("name")
    q.add_argument(
        "--from",
        dest="from_path",
        metavar="PATH",
        help="use a local copy instead: a folder, an archive (zip, wheel, tar, .deb) or a single file",
    )
    q.add_argument("--force", action="store_true", help="fetch again even if already in the cache")
    q.set_defaults(func=cmd_fetch)

    q = dsub.add_parser("verify", help="re-hash a fetched dataset's files and compare its row counts with the card")
    q.add_argument("name")
    q.set_defaults(func=cmd_verify)

    q = dsub.add_parser("partition", help="split a dataset's rows over federated nodes and print a per-node table")
    q.add_argument("name", help="dataset name or path to a .csv/.parquet file")
    q.add_argument(
        "--scheme", default="iid", help="iid | dirichlet[:ALPHA] | silo[:COLUMN] | variance | quantity[:ALPHA]"
    )
    q.add_argument("--nodes", type=int, required=True, help="number of nodes K")
    q.add_argument("--alpha", type=float, help="Dirichlet concentration (dirichlet, quantity); smaller = more skew")
    q.add_argument("--label", help="label whose classes are skewed (dirichlet; default: first utility label)")
    q.add_argument("--column", help="column whose values are the silos (silo; e.g. node, subject)")
    q.add_argument("--seed", type=int, default=0, help="seed of the partition")
    q.add_argument("--split", choices=("train", "test"), default="train", help="which side of the dataset to partition")
    add_dataset_param_flag(q, "-p utility=label -p sensitive=group", old_spelling=True)
    q.set_defaults(func=cmd_partition)


def add_dataset_param_flag(parser: argparse.ArgumentParser, example: str, *, old_spelling: bool = False) -> None:
    """`-p/--dataset-param KEY=VALUE`: a dataset parameter, the same flag on `veil run` and `veil datasets
    show/partition` (`dataset_params:` in run files and sweep specs); `veil datasets` also keeps `--param`."""
    parser.add_argument(
        "-p",
        "--dataset-param",
        *(["--param"] if old_spelling else []),
        dest="dataset_param",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help=f"dataset parameter (repeatable), e.g. {example}",
    )


def parse_params(items: list[str]) -> dict[str, Any]:
    """`-p KEY=VALUE` items as a mapping; values stay text, typed by the dataset's parameter fields."""
    out: dict[str, Any] = {}
    for item in items:
        key, eq, val = item.partition("=")
        if not eq or not key.strip():
            raise ConfigError("-p", item, "KEY=VALUE, e.g. -p utility=COLUMN")
        if key.strip() in out:
            raise ConfigError("-p", item, f"one value per key ({key.strip()} is given twice)")
        out[key.strip()] = val.strip()
    return out


def cmd_list(args: argparse.Namespace) -> int:
    from veil.datasets.catalog import DATASETS
    from veil.datasets.fetch import is_fetched
    from veil.plugins import load_plugins

    load_plugins()
    for name, entry in sorted(DATASETS.items()):
        kind = entry.kind
        if kind == "real":
            try:
                kind = "real, fetched" if is_fetched(name) else "real, not fetched"
            except DataError:
                pass
        print(f"{name}  [{kind}]  {entry.description}")
        for row in field_table(entry.params_cls):
            print(f"    {row['name']:<16} {row['type']:<10} default {row['default']:<8} {row['doc']}")
    print(
        "\nYour own data: any path to a .csv or .parquet file, with -p utility=COLUMN -p sensitive=COLUMN "
        "(veil run and veil datasets show/partition; dataset_params: {utility: COLUMN, sensitive: COLUMN} in run "
        "files and sweep specs)."
    )
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    import numpy as np

    from veil.datasets.card_files import card_text, load_card
    from veil.datasets.catalog import get_dataset_entry, load_dataset
    from veil.datasets.fetch import is_fetched, raw_dir

    entry = get_dataset_entry(args.name)
    if entry.kind != "real":  # synthetic generators and user files have no card
        print(f"{args.name}  [{entry.kind}]  {entry.description}")
        _print_params(entry)
        return 0
    card = load_card(args.name)
    print(f"# {card.path}")
    print(card_text(card).rstrip())
    print()
    _print_params(entry)
    if not is_fetched(args.name):
        store = card.uses or card.name
        print(f"\n# status: not fetched (run `veil datasets fetch {store}`)")
        return 0
    print(f"\n# status: fetched in {raw_dir(args.name)}")
    ds = load_dataset(args.name, parse_params(args.dataset_param))
    print(
        f"# class balance ({len(ds.train)} train / {len(ds.test)} test rows, {ds.d_in} features; "
        f"classes are coded 0..C-1 in sorted order of their values)"
    )
    # the card's class names apply to the default build (parameters may regroup classes, e.g. compas race)
    names = {**card.utility_labels, **card.sensitive_labels} if not args.dataset_param else {}
    for lab in ds.label_names:
        role = "utility" if lab in ds.utility_names else "sensitive"
        cls = names.get(lab, {}).get("classes")
        for side, sp in (("train", ds.train), ("test", ds.test)):
            y = sp.labels()[lab]
            counts = np.bincount(y, minlength=ds.num_classes[lab])
            parts = []
            for c, k in enumerate(counts):
                tag = f"{cls[c]}" if cls and len(cls) == len(counts) else str(c)
                parts.append(f"{tag}: {k} ({100 * k / max(1, len(y)):.1f}%)")
            print(f"  {role:<9} {lab:<14} {side:<5} " + ", ".join(parts))
    return 0


def _print_params(entry: Any) -> None:
    print("# parameters")
    for row in field_table(entry.params_cls):
        allowed = f" ({row['allowed']})" if row["allowed"] else ""
        print(f"  {row['name']:<16} default {row['default']:<20} {row['doc']}{allowed}")


def cmd_fetch(args: argparse.Namespace) -> int:
    from veil.datasets.catalog import DATASETS, get_dataset_entry
    from veil.datasets.fetch import fetch

    entry = get_dataset_entry(args.name)
    if entry.kind != "real":
        raise DataError(
            f"dataset '{args.name}' is {entry.kind}; only real datasets are fetched "
            f"(real ones: {', '.join(sorted(n for n, e in DATASETS.items() if e.kind == 'real'))})"
        )
    path = fetch(args.name, args.from_path, force=args.force)
    print(path)
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    from veil.datasets.catalog import get_dataset_entry
    from veil.datasets.counts import check_counts
    from veil.datasets.fetch import verify

    get_dataset_entry(args.name)
    ok = True
    for fname, good, msg in verify(args.name):
        print(f"  {'ok ' if good else 'BAD'} {fname}: {msg}")
        ok &= good
    for key, want, got in check_counts(args.name):
        good = want == got
        print(f"  {'ok ' if good else 'BAD'} rows of {key}: {got:,}" + ("" if good else f" (the card says {want:,})"))
        ok &= good
    print(f"{args.name}: {'verified' if ok else 'FAILED'}")
    return 0 if ok else 1


def cmd_partition(args: argparse.Namespace) -> int:
    from veil.datasets.catalog import load_dataset
    from veil.datasets.partition import describe, parse_scheme, partition

    try:
        scheme, kw = parse_scheme(args.scheme)
    except ConfigError as e:  # name the flag the scheme came from
        raise ConfigError("--scheme", e.value, e.allowed) from None
    if args.alpha is not None:
        kw["alpha"] = args.alpha
    if args.label:
        kw["label"] = args.label
    if args.column:
        kw["column"] = args.column
    ds = load_dataset(args.name, parse_params(args.dataset_param))
    split = ds.train if args.split == "train" else ds.test
    parts = partition(split, scheme, args.nodes, args.seed, **kw)
    opts = ", ".join(f"{k}={v}" for k, v in kw.items())
    print(
        f"{args.name} ({args.split}, {len(split)} rows) -> {args.nodes} nodes, scheme {scheme}"
        + (f" ({opts})" if opts else "")
        + f", seed {args.seed}"
    )
    rows = describe(split, parts)
    labels = list(split.utility) + list(split.sensitive)
    cells = [
        [str(r["node"]), str(r["rows"])]
        + [" ".join(f"{ds.class_name(lab, int(c))}:{n}" for c, n in r[lab].items()) for lab in labels]
        for r in rows
    ]
    head = ["node", "rows"] + [f"{lab} ({'utility' if lab in split.utility else 'sensitive'})" for lab in labels]
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(head)]
    print("  ".join(h.ljust(w) for h, w in zip(head, widths)))
    for c in cells:
        print("  ".join(v.ljust(w) for v, w in zip(c, widths)))
    sys.stdout.flush()
    return 0
