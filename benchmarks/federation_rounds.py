"""Federation throughput: rounds per second of D-EIGAN with one node host actor per node ('ray-actors')
versus virtual nodes (a few actors, each hosting many nodes as one vectorised ensemble: 'virtual'),
and the in-process runtime as a reference, for several K. Start-up (placement group, actor starts,
initial join) is timed apart from the rounds. Configurations the cluster cannot hold are refused by
Veil's own resource check before any actor starts, and the refusal is recorded as the result.

    python benchmarks/federation_rounds.py                          # K = 10, 16, 100; all runtimes
    python benchmarks/federation_rounds.py --ks 10 100 --rounds 20 --record   # and append to RESULTS.md
"""

from __future__ import annotations

import argparse
import os
import platform
import shlex
import sys
import time
from datetime import date
from pathlib import Path

RESULTS = Path(__file__).with_name("RESULTS.md")
SECTION = "## Federation"


def run_one(k: int, runtime: str, args: argparse.Namespace, nodes_per_host: int = 0) -> dict:
    from veil.datasets import load_dataset
    from veil.errors import VeilError
    from veil.methods import create_method
    from veil.methods.configs.fed_options import FederationOptions
    from veil.platform.federation import plan_on, run_planned

    n = int(round(k * args.rows_per_node / 0.75))  # 25% of the rows are held out as test
    ds = load_dataset("gaussian-quadrant", {"n": n, "dim": args.dim, "seed": 0})
    params = {
        "K": k,
        "epochs": args.rounds,
        "delta": 1,
        "phi": args.phi,
        "d_z": 4,
        "batch_size": args.batch,
        "encoder_hidden": [64],
        "head_hidden": [32],
        "seed": 0,
    }
    opts = {"hosts": args.hosts} if runtime == "virtual" else {"nodes_per_host": nodes_per_host}
    row = {"K": k, "runtime": runtime}
    m = create_method("d-eigan", params, ds.task())
    try:
        prep = plan_on(runtime, m, "d-eigan", ds.train, dataset=ds, options=FederationOptions(**opts), seed=0)
    except VeilError as e:
        row["refused"] = str(e)
        return row
    t0 = time.time()
    out = run_planned(prep)
    tot = out.totals()
    row.update(
        {
            "hosts": len(prep.node_blocks),
            "cpus_per_actor": prep.resources.cpus_per_actor if prep.resources else None,
            "startup_s": out.startup_seconds,
            "rounds": len(out.records),
            "rounds_per_s": tot["rounds_per_second"],
            "wall_s": time.time() - t0,
            "bytes_up_per_round": tot["bytes_up_total"] / max(1, len(out.records)),
        }
    )
    return row


def fmt(row: dict) -> str:
    if "refused" in row:
        return f"| {row['K']} | {row['runtime']} | - | - | refused before any actor started: {row['refused']} | - |"
    cpu = f"{row['cpus_per_actor']:g}" if row["cpus_per_actor"] else "driver"
    return (
        f"| {row['K']} | {row['runtime']} | {row['hosts']} x {cpu} CPU | {row['startup_s']:.1f} s | "
        f"{row['rounds_per_s']:.2f} rounds/s ({row['rounds']} rounds) | {row['bytes_up_per_round'] / 1e3:.1f} kB |"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ks", type=int, nargs="+", default=[10, 16, 100], help="numbers of nodes K")
    ap.add_argument(
        "--runtimes",
        nargs="+",
        default=["ray-actors", "virtual", "in-process"],
        choices=["ray-actors", "virtual", "in-process"],
    )
    ap.add_argument("--rounds", type=int, default=10, help="communication rounds (delta = 1 local epoch each)")
    ap.add_argument("--rows-per-node", type=int, default=64, help="training rows per node")
    ap.add_argument("--batch", type=int, default=32, help="minibatch size")
    ap.add_argument("--dim", type=int, default=16, help="input features")
    ap.add_argument("--phi", type=float, default=0.8, help="D-EIGAN's sparsification fraction")
    ap.add_argument("--hosts", type=int, default=0, help="virtual runtime: host actors (0 = min(K, CPUs))")
    ap.add_argument("--cpus", type=int, default=0, help="CPUs of the local Ray (0 = os.cpu_count())")
    ap.add_argument("--record", action="store_true", help="append the table to benchmarks/RESULTS.md")
    args = ap.parse_args()

    import ray
    import torch

    torch.set_num_threads(1)
    cpus = args.cpus or os.cpu_count() or 1
    ray.init(
        num_cpus=cpus,
        include_dashboard=False,
        configure_logging=False,
        log_to_driver=False,
        runtime_env={"env_vars": {"OMP_NUM_THREADS": "1"}},
    )
    rows = []
    try:
        for k in args.ks:
            for rt in args.runtimes:
                row = run_one(k, rt, args)
                rows.append(row)
                print(fmt(row), flush=True)
    finally:
        ray.shutdown()
    cmd = "python benchmarks/federation_rounds.py " + shlex.join(sys.argv[1:])
    head = (
        "| K | runtime | node hosts | start-up | rounds (steady state) | bytes up / round |\n|---|---|---|---|---|---|"
    )
    block = (
        f"\n### {date.today()}: `{cmd.strip()}`\n\nD-EIGAN, {args.rows_per_node} training rows per node, "
        f"batch {args.batch}, {args.dim} features, phi {args.phi}, delta 1; local Ray with {cpus} CPUs "
        f"({os.cpu_count()} CPU, {platform.machine()}), one torch thread per process.\n\n{head}\n"
        + "\n".join(fmt(r) for r in rows)
        + "\n"
    )
    print(block)
    if args.record:
        text = RESULTS.read_text() if RESULTS.exists() else "# Benchmark results\n"
        if SECTION not in text:
            text = text.rstrip("\n") + f"\n\n{SECTION}\n"
        start = text.index(SECTION) + len(SECTION)
        nxt = text.find("\n## ", start)
        end = len(text) if nxt < 0 else nxt
        text = text[:end].rstrip("\n") + "\n" + block + text[end:]
        RESULTS.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
