"""Veil on a GPU: the CUDA tests and the GPU benchmarks of issue 26 in one script, for a lent GPU machine.

Such a machine has torch, numpy, pandas, pyarrow and pytest but not Ray, Optuna or MLflow (too large to carry there,
and nothing can be downloaded), so this measures the GPU code paths below the platform: the audit engine, populations
and centralized training, each side by side against what a user would write on the same GPU (the plain autograd
probe loop; separate runs; the paper-style EIGAN loop) and against this machine's CPU. Results go to benchmarks/results/gpu.json (or --out).

    python benchmarks/gpu.py                  # on the GPU machine (several minutes)
    python benchmarks/gpu.py --device cpu --quick   # a dry run of the script on a CPU machine

Adult comes from VEIL_CACHE_DIR (a copy of ~/.cache/veil carried to the machine); without it the Adult cases are
skipped and say so.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(HERE), str(ROOT / "tests" / "support"), str(ROOT / "src")]

from bench_common import linear_shapes, matmul_gflops, step_flops_per_row  # noqa: E402
from bench_training import AUDIT_CASES, CENTRALIZED, adult_shape, probe_cost  # noqa: E402

SECTIONS = ("tests", "audit", "population", "population-adult", "eigan")
GPU_TESTS = [
    "tests/audit/test_probe_device.py",
    "tests/methods/test_population.py",
    "tests/methods/test_cuda_graph.py",
]
SEEDS = (0, 1, 2)


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def clock(fn: Callable[..., Any], device: str, *args: Any) -> tuple[float, Any]:
    """(wall seconds, result) of fn(*args), the device's queue drained before and after."""
    sync(device)
    t0 = time.perf_counter()
    out = fn(*args)
    sync(device)
    return time.perf_counter() - t0, out


def machine(device: str) -> dict[str, Any]:
    info: dict[str, Any] = {
        "torch": torch.__version__,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "device": device,
    }
    if device.startswith("cuda"):
        p = torch.cuda.get_device_properties(0)
        info.update(gpu=p.name, gpu_memory_gib=round(p.total_memory / 2**30, 1), sms=p.multi_processor_count)
    return info


def fp32_limit(device: str) -> float:
    """Measured float32 matmul TFLOP/s (8192^3, TF32 off as torch's default): the device's arithmetic limit here."""
    n = 4096 if device == "cpu" else 8192
    g = torch.Generator(device=device).manual_seed(0)
    a, b = (torch.randn(n, n, device=device, generator=g) for _ in range(2))
    torch.matmul(a, b)
    best = float("inf")
    for _ in range(3 if device == "cpu" else 10):
        t, _ = clock(lambda: torch.matmul(a, b), device)
        best = min(best, t)
    return 2 * n**3 / best / 1e12


def run_tests(device: str) -> dict[str, Any]:
    """The CUDA tests (skipped on machines without a GPU), without the repo's conftest (it starts servers this
    machine cannot run)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT / "tests" / "support")])}
    cmd = [sys.executable, "-m", "pytest", "-q", "--noconftest", "-p", "no:cacheprovider", *GPU_TESTS]
    p = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    lines = p.stdout.strip().splitlines()
    print("\n".join(lines[-15:]), flush=True)
    return {"command": " ".join(cmd[1:]), "rc": p.returncode, "summary": lines[-1] if lines else p.stderr[-500:]}


def label_metrics(report: Any) -> dict[str, float]:
    return {
        k: round(v, 4)
        for k, v in report.metrics().items()
        if k.split("/")[0] in ("utility_auc", "adversary_auc") and "/" in k
    }


def audit_case(name: str, device: str, quick: bool) -> dict[str, Any]:
    """One audit case of the suite (a GPP release of quickstart or Adult size), seeds 0-2: Veil's audit on the GPU,
    the plain loop on the GPU (one probe after another), Veil's audit on one CPU thread, and `audit_many` of a
    population's copies on the GPU."""
    from reference_probe import reference_audit

    from veil.audit.probes import audit, audit_many
    from veil.audit.settings import AuditConfig
    from veil.datasets import load_dataset
    from veil.methods import create_method
    from veil.methods.method import TrainContext

    c = AUDIT_CASES[name]
    ds = load_dataset(c.dataset, c.dataset_params)
    gpp = {**c.gpp_params, "seed": 0, "release_seed": 0, **({"epochs": c.quick_gpp_epochs} if quick else {})}
    method = create_method("gpp", gpp, ds.task())
    train_s, _ = clock(lambda: method.fit(ds.train, TrainContext(device)), device)
    method.to("cpu")
    z_tr, z_te = method.encode(ds.train.x), method.encode(ds.test.x)
    epochs = c.quick_epochs if quick else c.audit_epochs
    seeds = SEEDS[:2] if quick else SEEDS
    labels = [*ds.train.utility, *ds.train.sensitive]
    cost = [
        probe_cost(z_tr.shape[1], (256, 128), ds.num_classes[lab], len(z_tr), len(z_te), epochs, 128) for lab in labels
    ]
    steps = sum(p["steps"] for p in cost)
    sides: dict[str, Callable[[Any], Any]] = {
        "veil_gpu": lambda cfg: audit(z_tr, ds.train, z_te, ds.test, ds.num_classes, cfg),
        "plain_gpu": lambda cfg: reference_audit(z_tr, ds.train, z_te, ds.test, ds.num_classes, cfg),
    }
    walls: dict[str, list[float]] = {k: [] for k in sides}
    metrics: dict[str, dict[str, dict[str, float]]] = {k: {} for k in sides}
    audit(
        z_tr[:256], ds.train.take(np.arange(256)), z_te, ds.test, ds.num_classes, AuditConfig(epochs=1, device=device)
    )
    for s in seeds:
        cfg = AuditConfig(epochs=epochs, seed=s, device=device)
        for side, fn in sides.items():
            t, report = clock(fn, device, cfg)
            walls[side].append(round(t, 3))
            metrics[side][str(s)] = label_metrics(report)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        cpu_s, cpu_report = clock(
            lambda: audit(
                z_tr, ds.train, z_te, ds.test, ds.num_classes, AuditConfig(epochs=epochs, seed=0, device="cpu")
            ),
            "cpu",
        )
    finally:
        torch.set_num_threads(threads)
    n = c.members
    many_s, many = clock(
        lambda: audit_many(
            [z_tr] * n,
            [ds.train] * n,
            [z_te] * n,
            [ds.test] * n,
            ds.num_classes,
            AuditConfig(epochs=epochs, device=device),
        ),
        device,
    )
    keys = list(metrics["veil_gpu"][str(seeds[0])])
    veil, plain = float(np.median(walls["veil_gpu"])), float(np.median(walls["plain_gpu"]))
    spread = max(
        max(m[str(s)][k] for s in seeds) - min(m[str(s)][k] for s in seeds) for m in metrics.values() for k in keys
    )
    row = {
        "rows": [len(z_tr), len(z_te)],
        "labels": labels,
        "audit_epochs": epochs,
        "steps": steps,
        "flops": sum(p["flops"] for p in cost),
        "gpp_train_s_on_device": round(train_s, 2),
        "wall_s": walls,
        "veil_gpu_s": round(veil, 3),
        "plain_gpu_s": round(plain, 3),
        "veil_cpu_1thread_s": round(cpu_s, 3),
        "ratio_vs_plain_gpu": round(plain / veil, 2),
        "ratio_vs_veil_cpu": round(cpu_s / veil, 2),
        "us_per_step": {
            "veil_gpu": round(1e6 * veil / max(p["steps"] for p in cost), 1),
            "plain_gpu": round(1e6 * plain / steps, 1),
        },
        "metrics": metrics,
        "cpu_metrics_seed0": label_metrics(cpu_report),
        "max_difference_vs_plain": round(
            max(abs(metrics["veil_gpu"][str(s)][k] - metrics["plain_gpu"][str(s)][k]) for s in seeds for k in keys), 4
        ),
        "max_difference_vs_cpu": round(
            max(abs(metrics["veil_gpu"]["0"][k] - label_metrics(cpu_report)[k]) for k in keys), 4
        ),
        "seed_spread": round(spread, 4),
        "many": {"members": n, "wall_s": round(many_s, 3), "per_member_s": round(many_s / n, 3)},
    }
    print(
        f"  audit {name}: veil on {device} {veil:.2f} s, plain loop on {device} {plain:.2f} s ({row['ratio_vs_plain_gpu']}x), "
        f"veil on 1 CPU thread {cpu_s:.2f} s ({row['ratio_vs_veil_cpu']}x); {n} members {many_s:.2f} s",
        flush=True,
    )
    return row


def population_case(case: str, quick: bool) -> tuple[str, dict[str, Any], dict[str, Any], dict[str, Any], int]:
    """(dataset, its params, GPP's fixed params, audit settings, members) of a population benchmark: `quickstart`,
    sweeps/quickstart.yaml's trials, 16 members; `adult`, the adult-sweep's trials (GPP's defaults, 2 epochs, the
    default 30-epoch audit), 8 members."""
    import yaml

    if case == "adult":
        return ("adult", {}, {"epochs": 1 if quick else 2}, {"epochs": 3} if quick else {}, 4 if quick else 8)
    q = yaml.safe_load((ROOT / "sweeps" / "quickstart.yaml").read_text())
    params, data, audit_params = dict(q["params"]), dict(q["dataset_params"]), dict(q["audit"])
    if quick:
        params["epochs"], data["n"], audit_params["epochs"] = 3, 1000, 5
    return q["dataset"], data, params, audit_params, 16


def population_bench(device: str, quick: bool, case: str = "quickstart") -> dict[str, Any]:
    """GPP trials of one size (`population_case`: the quickstart's 16, Adult's 8), beta log-spaced over 0.04-4, each
    audited with its case's audit settings: one population on the GPU, the same trials as separate runs on the GPU,
    and the population on the CPU (one thread at quickstart size, as a sweep's trial gets; all cores on Adult).
    Training and the fresh-probe audit; no MLflow and no certificate (neither runs here)."""
    from veil.audit.probes import audit
    from veil.audit.settings import AuditConfig
    from veil.audit.step import audit_releases
    from veil.datasets import load_dataset
    from veil.methods import create_method, method_config
    from veil.methods.method import TrainContext
    from veil.methods.population import fit_population

    name, data, params, audit_params, members = population_case(case, quick)
    cpu_threads = 1 if case == "quickstart" else torch.get_num_threads()
    ds = load_dataset(name, data)
    betas = np.geomspace(0.04, 4, members)
    configs = [method_config("gpp", {**params, "beta": float(b), "seed": 0, "release_seed": 0}) for b in betas]

    def population(dev: str) -> list[dict[str, float]]:
        cfg = AuditConfig(**audit_params, device=dev)
        fitted = fit_population("gpp", configs, ds.task(), ds.train, TrainContext(dev))
        return [o.metrics for o in audit_releases([m for m, _ in fitted], ds, [cfg] * members)]

    def separate(dev: str) -> list[dict[str, float]]:
        cfg = AuditConfig(**audit_params, device=dev)
        out = []
        for config in configs:
            m = create_method("gpp", config, ds.task())
            m.fit(ds.train, TrainContext(dev))
            m.to("cpu")
            out.append(
                audit(m.encode(ds.train.x), ds.train, m.encode(ds.test.x), ds.test, ds.num_classes, cfg).metrics()
            )
        return out

    warm = ds.train.take(np.arange(min(len(ds.train), 2048)))
    fit_population("gpp", configs[:2], ds.task(), warm, TrainContext(device))  # warm-up: kernels, allocator
    pop_s, pop = clock(lambda: population(device), device)
    sep_s, sep = clock(lambda: separate(device), device)
    threads = torch.get_num_threads()
    torch.set_num_threads(cpu_threads)
    try:
        cpu_s, _ = clock(lambda: population("cpu"), "cpu")
    finally:
        torch.set_num_threads(threads)
    diffs = {m: round(max(abs(a[m] - b[m]) for a, b in zip(pop, sep)), 4) for m in ("utility_auc", "privacy_gap")}
    row = {
        "members": members,
        "population_gpu_s": round(pop_s, 2),
        "separate_gpu_s": round(sep_s, 2),
        "population_cpu_s": round(cpu_s, 2),
        "cpu_threads": cpu_threads,
        "trials_per_hour": {
            "population_gpu": round(3600 * members / pop_s),
            "separate_gpu": round(3600 * members / sep_s),
            "population_cpu": round(3600 * members / cpu_s),
        },
        "ratio": round(sep_s / pop_s, 2),
        "ratio_of": "trials/hour of the population on the GPU / of separate runs on the GPU",
        "ratio_vs_cpu": round(cpu_s / pop_s, 2),
        "max_member_difference": diffs,
    }
    print(
        f"  population of {members}: on {device} {pop_s:.2f} s, separate on {device} {sep_s:.2f} s ({row['ratio']}x), "
        f"population on {cpu_threads} CPU thread(s) {cpu_s:.2f} s ({row['ratio_vs_cpu']}x)",
        flush=True,
    )
    return row


EIGAN_BATCHES = (512, 4096)  # the suite's batch, then one large enough to give the card's matmuls work


def eigan_bench(device: str, quick: bool, limit_tflops: float) -> dict[str, Any]:
    """Centralized EIGAN at the suite's size (816-1632 encoder, Adult-shape rows): Veil's fit on the GPU against the
    paper-style loop on the GPU (benchmarks/paper_loops.py, each minibatch copied to the GPU as drawn) and Veil on
    this machine's CPU (all cores) at the suite's batch 512, then Veil on the GPU at a larger batch; samples/s and the
    GPU's share of its float32 matmul limit."""
    from paper_loops import eigan as paper_eigan

    from veil.datasets.dataset import TaskSpec
    from veil.methods import create_method
    from veil.methods.method import TrainContext

    b = CENTRALIZED["eigan"]
    rows, epochs = (b.quick_rows, b.quick_epochs) if quick else (b.rows, b.epochs)
    split = adult_shape(rows)
    task = TaskSpec(102, {"income": 2}, {"sex": 2})
    params = {**b.params, "epochs": epochs, "seed": 0}
    flops = step_flops_per_row(create_method("eigan", params, task), split)
    kind = device.split(":")[0]

    def rate(done_rows: int, seconds: float) -> float:
        return round(done_rows / seconds, 1)

    def veil_fit(dev: str, p: dict[str, Any], graph: bool = True) -> float:
        warm = adult_shape(p["batch_size"] * 8)  # past the CUDA graph's warm-up steps, so it is captured once
        create_method("eigan", {**p, "epochs": 1}, task).fit(warm, TrainContext(dev, cuda_graph=graph))
        t, _ = clock(create_method("eigan", p, task).fit, dev, split, TrainContext(dev, cuda_graph=graph))
        return rate(p["epochs"] * (rows // p["batch_size"]) * p["batch_size"], t)

    out: dict[str, Any] = {"params": params, "rows": rows, "flops_per_sample": round(flops)}
    out[f"samples_per_s_{kind}"] = veil_fit(device, params)
    if kind == "cuda":  # the same fit with every step launched eagerly, kernel by kernel
        out["samples_per_s_cuda_eager"] = veil_fit(device, params, graph=False)
        out["ratio_graph_vs_eager"] = round(out["samples_per_s_cuda"] / out["samples_per_s_cuda_eager"], 2)
    paper_eigan(create_method("eigan", {**params, "epochs": 1}, task), adult_shape(params["batch_size"] * 2), 1, device)
    t, done = clock(lambda: paper_eigan(create_method("eigan", params, task), split, epochs, device), device)
    out[f"paper_loop_samples_per_s_{kind}"] = rate(done, t)
    if kind != "cpu":
        out["samples_per_s_cpu"] = veil_fit("cpu", params)
    veil_rate = out[f"samples_per_s_{kind}"]
    out.update(
        layer_shapes=linear_shapes(create_method("eigan", params, task).modules().values()),
        fp32_limit_tflops=round(limit_tflops, 2),  # this machine's: the row's top-level figure is the last run's
        pct_of_fp32_limit=round(100 * veil_rate * flops / (limit_tflops * 1e12), 2),
        ratio_vs_paper_loop=round(veil_rate / out[f"paper_loop_samples_per_s_{kind}"], 2),
        ratio_vs_cpu=round(veil_rate / out["samples_per_s_cpu"], 2),
    )
    scan = {}
    for batch in EIGAN_BATCHES[1:]:
        # as many rows processed as at batch 512, so the timing is not a handful of steps
        p = {**params, "batch_size": min(batch, rows), "epochs": epochs * (1 if quick else 8)}
        r = veil_fit(device, p)
        scan[str(batch)] = {
            "epochs": p["epochs"],
            "samples_per_s": r,
            "pct_of_fp32_limit": round(100 * r * flops / (limit_tflops * 1e12), 2),
        }
    out["larger_batch"] = scan
    shapes = [tuple(sh) for sh in out["layer_shapes"]]
    # the step's own products back to back at this batch: what any implementation of it could reach
    gemm = matmul_gflops(shapes, params["batch_size"], 1.0 if quick else 3.0, device) / 1e3
    out["gemm_at_batch"] = {"tflops": round(gemm, 2), "pct_of_fp32_limit": round(100 * gemm / limit_tflops, 1)}
    print(
        f"  eigan: {veil_rate:.0f} samples/s on {device} ({out['ratio_vs_paper_loop']}x the paper-style loop there), "
        f"{out['samples_per_s_cpu']:.0f} on the CPU; larger batches {scan}; the step's products back to back "
        f"{out['gemm_at_batch']}; eager steps {out.get('samples_per_s_cuda_eager')}",
        flush=True,
    )
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda", help="cuda (default) or cpu for a dry run")
    ap.add_argument("--quick", action="store_true", help="small sizes: check the script, not the speed")
    ap.add_argument("--out", type=Path, default=HERE / "results" / "gpu.json")
    ap.add_argument(
        "--only",
        nargs="+",
        choices=SECTIONS,
        default=list(SECTIONS),
        help="run these sections only; the others keep their rows from --out's file",
    )
    args = ap.parse_args(argv)
    device = args.device
    if device.startswith("cuda") and not torch.cuda.is_available():
        print("no CUDA device visible: run with --device cpu for a dry run", file=sys.stderr)
        return 2
    started = time.time()
    row: dict[str, Any] = json.loads(args.out.read_text()) if args.out.exists() else {}
    command = "python benchmarks/gpu.py" + (" --quick" if args.quick else "")
    row.update(machine=machine(device), fp32_limit_tflops=round(fp32_limit(device), 2))
    print(f"{row['machine']}; float32 matmul {row['fp32_limit_tflops']} TFLOP/s", flush=True)
    when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    if "tests" in args.only:
        row["tests"] = run_tests(device)
    cache = Path(os.environ.get("VEIL_CACHE_DIR", Path.home() / ".cache" / "veil")) / "datasets"
    have_adult = (cache / "raw" / "adult" / "MANIFEST.json").exists()
    if "audit" in args.only:
        row["audit"] = {}
        for name in AUDIT_CASES:
            if name == "adult" and not have_adult:
                row["audit"][name] = {"skipped": f"Adult was not fetched under {cache}"}
                continue
            row["audit"][name] = audit_case(name, device, args.quick)
    if "population" in args.only:
        row["population"] = population_bench(device, args.quick)
    if "population-adult" in args.only:
        row["population-adult"] = (
            population_bench(device, args.quick, "adult")
            if have_adult
            else {"skipped": f"Adult was not fetched under {cache}"}
        )
    if "eigan" in args.only:
        row["eigan"] = eigan_bench(device, args.quick, row["fp32_limit_tflops"])
    for section in args.only:
        row[section] = {**row[section], "when": when, "command": command + " --only " + section}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(row, indent=1) + "\n")
    print(f"wrote {args.out} ({time.time() - started:.1f} s)")
    return 0 if row.get("tests", {}).get("rc", 0) in (0, 5) else 1


if __name__ == "__main__":
    sys.exit(main())
