"""Render the Targets block of benchmarks/README.md from benchmarks/results/suite.jsonl and results/gpu.json.

The issues' targets as Markdown tables made from the suite's results file (the latest row per benchmark, as
`python benchmarks/suite.py` appends them) and from `python benchmarks/gpu.py`'s row, each with its figure, met or
not, and the measured cause of a gap. It reads only those files; nothing is measured here
(tests/test_benchmark_suite.py checks the block is made from the results file).

python tools/bench_targets_block.py [--results FILE] [--gpu FILE] [--readme FILE] [--check]   (or `make docs`)"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from doc_file import parser, write_or_check

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "suite.jsonl"  # benchmarks/suite.py's rows
GPU_RESULTS = ROOT / "benchmarks" / "results" / "gpu.json"  # benchmarks/gpu.py's row, from a lent GPU machine
README = ROOT / "benchmarks" / "README.md"
BEGIN = "<!-- filled by suite: targets -->"
END = "<!-- end of suite targets -->"
#: benchmarks/bench_training.py's CENTRALIZED benchmarks, in its order, and its K1000_TARGET_S (the suite's test
#: checks that the two agree)
CENTRALIZED = ("eigan", "gpp", "ldp-frl", "adjustable-ae")
K1000_TARGET_S = 30.0

Row = dict[str, Any]


def latest(path: Path) -> dict[str, Row]:
    """The newest row of every benchmark in the results file (full runs before quick ones of the same day)."""
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []
    out: dict[str, Row] = {}
    for r in rows:
        out[r["benchmark"]] = r
    return out


def _when(r: Row) -> str:
    busy = " above the core count: slowed by other jobs" if r["load_avg"] > r["machine"]["cpus"] else ""
    return f"{r['date'][:10]}, {'--quick' if r['quick'] else 'full'}, load {r['load_avg']}{busy}"


def targets(rows: dict[str, Row]) -> list[str]:
    """The issue's targets as a Markdown table, each with the latest measured figure, met or not, and the gap."""
    lines = ["| target | latest figure | met | gap and measured cause |", "|---|---|---|---|"]
    e = rows.get("eigan")
    if e:
        ok = e["ratio"] >= 1.5 and e["pct_of_limit"] >= 80
        p = e["profile"]
        lines.append(
            f"| centralized EIGAN >= 1.5x the paper-style loop and >= 80% of the FLOP limit | {e['ratio']:.2f}x "
            f"({e['samples_per_s']:.0f} vs {e['baseline_samples_per_s']:.0f} samples/s), {e['pct_of_limit']:.0f}% of "
            f"{e['limit_gflops']:.0f} GFLOP/s ({_when(e)}) | {'yes' if ok else 'no'} | "
            + (
                "-"
                if ok
                else "; ".join(
                    ([f"{1.5 - e['ratio']:.2f}x short of 1.5x"] if e["ratio"] < 1.5 else [])
                    + (
                        [f"{80 - e['pct_of_limit']:.1f} points short of 80% ({e['pct_of_limit']:.1f}%)"]
                        if e["pct_of_limit"] < 80
                        else []
                    )
                    + [
                        f"the paper-style loop runs at {e['baseline_pct_of_limit']:.0f}% of the limit, so no loop can "
                        f"beat {100 / e['baseline_pct_of_limit']:.2f}x it"
                    ]
                )
                + "; "
                f"Veil step time: {100 * p['matmul']:.0f}% matmul, {100 * p['optimizer']:.0f}% optimizer, {100 * p['other']:.0f}% other"
                + (
                    f"; the encoder under torch.compile: {e['compiled']['ratio_vs_eager']:.2f}x eager "
                    f"({e['compiled']['samples_per_s']:.0f} samples/s, first fit {e['compiled']['first_fit_s']:.0f} s)"
                    if "compiled" in e
                    else ""
                )
            )
            + " |"
        )
    d = rows.get("d-eigan")
    if d:
        r, k100 = d["ratio"], d["per_k"]["100"]
        loop = k100.get("ratio_per_node")
        rps = {rt: (k100.get(rt) or {}).get("rounds_per_s") or 0 for rt in ("virtual", "in-process", "per-node")}
        lines.append(
            f"| D-EIGAN K=100 virtual >= 5x in-process rounds/s | {r:.2f}x in-process; {loop or 0:.2f}x the per-node "
            f"loop ({_when(d)}) | {'yes' if r and r >= 5 else 'no'} | "
            + (
                "-"
                if r and r >= 5
                else f"virtual {rps['virtual']:.1f}, in-process {rps['in-process']:.1f}, per-node loop "
                f"{rps['per-node']:.1f} rounds/s: Veil's in-process runtime is not a per-node loop, it runs all K nodes "
                "as one vectorised ensemble, the same code a virtual host runs, so virtual can only add transport to it; "
                "against one node per host (the loop the target assumed) virtual is the ratio after the semicolon"
            )
            + " |"
        )
    k = rows.get("k1000")
    if k:
        ok = not k.get("quick") and k["wall_s"] <= K1000_TARGET_S
        lines.append(
            f"| D-EIGAN K=1000 end to end <= 30 s | {k['wall_s']:.1f} s ({_when(k)}) | {'yes' if ok else 'no'} | "
            + (
                "-"
                if ok
                else f"training {k['train_s'] or 0:.1f} s and the audits {max(0, (k['total_s'] or 0) - (k['train_s'] or 0)):.1f} s "
                f"of the run's {k['total_s'] or 0:.1f} s; the other {k['wall_s'] - (k['total_s'] or 0):.1f} s are imports, "
                "Ray start and shutdown (see 'Where the gaps come from')"
            )
            + " |"
        )
    q = rows.get("quickstart")
    if q:
        sep = q["separate"]
        if "skipped" in q:
            fig = f"separate trials only: {sep['wall_s']:.0f} s, {sep['trials_per_hour']:.0f} trials/h ({_when(q)})"
            lines.append(
                f"| quickstart with populations >= 3x faster end to end, hypervolume not worse | {fig} | no | {q['skipped']} |"
            )
        else:
            pop = q["population"]
            ok = q["ratio"] >= 3 and pop["hypervolume"] >= sep["hypervolume"]
            lines.append(
                f"| quickstart with populations >= 3x faster end to end, hypervolume not worse | {q['ratio']:.2f}x "
                f"({sep['wall_s']:.0f} s -> {pop['wall_s']:.0f} s), hypervolume {sep['hypervolume']:.4f} -> {pop['hypervolume']:.4f} "
                f"({_when(q)}) | {'yes' if ok else 'no'} | {'-' if ok else quickstart_gap(q)} |"
            )
    p = rows.get("population")
    if p:
        ok = p["ratio"] >= 4
        diff = p["max_member_difference"]
        lines.append(
            f"| population of 16 quickstart-size GPP trials >= 4x the trials/hour of 16 separate trials, same results "
            f"| {p['ratio']:.2f}x ({p['trials_per_hour']['separate']} -> {p['trials_per_hour']['population']} trials/h; "
            f"members within {diff['utility_auc']} utility AUC, {diff['privacy_gap']} privacy gap of their solo runs; "
            f"{_when(p)}) | {'yes' if ok else 'no'} | "
            + (
                "-"
                if ok
                else f"training {p['separate_train_s']:.0f} s -> {p['population_train_s']:.0f} s; the rest "
                f"({p['separate_s'] - p['separate_train_s']:.0f} s separate, {p['population_s'] - p['population_train_s']:.0f} s "
                "as a population) is each member's audit, certificate and MLflow run, FLOP-bound probes that a population "
                "cannot share (each member releases its own z): with it unchanged the ratio cannot exceed "
                f"{p['separate_s'] / (p['population_train_s'] + p['separate_s'] - p['separate_train_s']):.2f}x"
            )
            + " |"
        )
    if q and "skipped" not in q:
        for label in ("separate", "population"):
            t = q[label].get("timings") or {}
            if not t:
                continue
            ok = t["orchestration"] <= 0.10
            lines.append(
                f"| orchestration <= 10% of sweep wall time ({'separate trials' if label == 'separate' else 'populations'}) "
                f"| {100 * t['orchestration']:.0f}% of {t['wall']:.0f} s ({_when(q)}) | {'yes' if ok else 'no'} | "
                + (
                    "-"
                    if ok
                    else f"Ray start {t['ray_start']:.1f} s, Tune {t['tune']:.1f} s for {t['trials']:.1f} s of trial work "
                    f"at concurrency 2, final report {t['finish']:.1f} s"
                )
                + " |"
            )
    lines += new_targets(rows)
    return lines


def new_targets(rows: dict[str, Row]) -> list[str]:
    """Issue 26's targets: `veil sweep` against the plain Optuna loop, orchestration of the 32-trial Adult sweep,
    the audit engine against the one-probe-at-a-time loop, and the CLI's start-up."""
    lines = []
    o = rows.get("optuna-loop")
    if o:
        v, p = o["veil"], o["optuna"]
        hv_v, hv_p = (x.get("hypervolume_mean", x["hypervolume"]) for x in (v, p))
        n = len(v.get("walls", [v["wall_s"]]))
        ok = o["ratio"] >= 1.8 and hv_v >= hv_p
        t = v.get("timings") or {}
        one = o.get("optuna_1thread")
        hv_gap = hv_p - hv_v
        cause = (
            ("time met" if o["ratio"] >= 1.8 else f"{1.8 - o['ratio']:.2f}x short")
            + ("; hypervolume not worse" if hv_gap <= 0 else f"; mean hypervolume {hv_gap:.4f} lower ({n} sweeps each)")
            + f"; plain loop: imports {p['import_s']:.1f} s, {p['trials']} trials one at a time {p['trial_s']:.1f} s "
            f"(mean {p['mean_trial_s']:.1f} s on {p['torch_threads']} torch threads"
            + (f"; on 1 thread {one['mean_trial_s']:.1f} s, wall {one['wall_s']:.0f} s" if one else "")
            + "); veil sweep: Ray start "
            f"{t.get('ray_start', 0):.1f} s, Tune {t.get('tune', 0):.1f} s for {t.get('trials', 0):.1f} s of trial work "
            f"at concurrency 2, report {t.get('finish', 0):.1f} s, the rest imports and shutdown"
        )
        lines.append(
            f"| veil sweep >= 1.8x the plain Optuna loop on the quickstart, end to end, at equal or better hypervolume "
            f"| {o['ratio']:.2f}x ({p['wall_s']:.0f} s -> {v['wall_s']:.0f} s, median of {n}), mean hypervolume {hv_p:.4f} "
            f"(Optuna loop) vs {hv_v:.4f} (veil sweep) ({_when(o)}) | {'yes' if ok else 'no'} | "
            f"{'-' if ok else cause} |"
        )
    a = rows.get("adult-sweep")
    if a:
        t = a.get("timings") or {}
        orch = a.get("orchestration")
        ok = orch is not None and orch <= 0.10
        lines.append(
            f"| orchestration <= 10% of the 32-trial Adult sweep | {100 * (orch or 0):.0f}% of "
            f"{t.get('wall', 0):.0f} s ({a['trials']} trials of {a.get('mean_trial_s') or 0:.1f} s, {_when(a)}) | "
            f"{'yes' if ok else 'no'} | "
            + (
                f"Ray start {t.get('ray_start', 0):.1f} s, Tune {t.get('tune', 0):.1f} s for {t.get('trials', 0):.1f} s "
                f"of trial work at concurrency {a['spec']['concurrency']}, final report {t.get('finish', 0):.1f} s; "
                f"the command's {a['wall_s']:.0f} s add {a['wall_s'] - t.get('wall', 0):.0f} s of imports and "
                f"shutdown: {100 * (1 - t.get('trials', 0) / a['spec']['concurrency'] / a['wall_s']):.0f}% "
                "counted end to end"
            )
            + " |"
        )
    au = rows.get("audit")
    if au:
        parts, causes, met = [], [], []
        for name, c in au["cases"].items():
            v, pl = c["veil"], c["plain"]
            spread = max(max(sp.values()) for sp in c["spread"].values())
            met.append(c["ratio"] >= 3 and c["max_difference"] <= spread)
            parts.append(
                f"{name} ({c['rows'][0]} x {c['d_z']}, {c['audit_epochs']} epochs): {pl['wall_s']:.2f} -> "
                f"{v['wall_s']:.2f} s = {c['ratio']:.2f}x; AUCs within {c['max_difference']:.4f} of the plain loop's "
                f"(seeds' spread up to {spread:.4f})"
            )
            pv, pp = c["profile"]["veil"], c["profile"]["plain"]
            causes.append(
                f"{name}: {c['flops'] / 1e9:.1f} GFLOP; plain loop {pl['ms_per_step']:.2f} ms a probe step, "
                f"{pl['pct_of_limit']:.0f}% of the {c['limit_gflops']:.0f} GFLOP/s matmul limit "
                f"({100 * pp['matmul']:.0f}% matmul, {100 * pp['optimizer']:.0f}% optimizer, {100 * pp['other']:.0f}% "
                f"other); Veil {v['ms_per_step']:.2f} ms, {v['pct_of_limit']:.0f}% ({100 * pv['matmul']:.0f}% matmul, "
                f"{100 * pv['optimizer']:.0f}% optimizer, {100 * pv['other']:.0f}% other); at this protocol no engine "
                f"can beat {c['ideal_ratio']:.2f}x (the plain loop's time over the limit's)"
            )
        lines.append(
            "| audit of one run >= 3x faster than the one-probe-at-a-time loop at equal metrics within the seeds' "
            f"spread (1 torch thread) | {'; '.join(parts)} ({_when(au)}) | {'yes' if all(met) else 'no'} | "
            f"{'; '.join(causes)} |"
        )
    c = rows.get("cli")
    if c:
        timed_cmds = {name: m for name, m in c["commands"].items() if m["target_s"] is not None}
        ok = all(m["wall_s"] <= m["target_s"] for m in timed_cmds.values())
        lines.append(
            "| "
            + " and ".join(f"`{name}` <= {m['target_s']:g} s" for name, m in timed_cmds.items())
            + " (fresh processes, median) | "
            + "; ".join(f"`{name}` {m['wall_s']:.2f} s (CPU {m['cpu_s']:.2f} s)" for name, m in c["commands"].items())
            + f" ({_when(c)}) | {'yes' if ok else 'no'} | "
            + ("-" if ok else "what each command imports before it answers: see 'Start-up of the CLI'")
            + " |"
        )
        e = c.get("exit")
        if e:
            lines.append(
                f"| exit of a short run: the `veil` script against `main()` alone (`{e['command']}`, fresh processes, "
                f"median) | {e['script_s']:.2f} s against {e['main_s']:.2f} s: {e['ratio']:.2f}x ({_when(c)}) | - | "
                "the script freezes the heap before Python's last garbage collection at exit |"
            )
    return lines


def gpu_targets(g: Row) -> list[str]:
    """The targets benchmarks/gpu.py measures on a GPU (its row: benchmarks/results/gpu.json), as rows of the
    targets table: the audit engine and centralized EIGAN against the same baselines on that GPU, and populations."""
    if not g.get("machine", {}).get("gpu"):
        return []
    gpu = g["machine"]["gpu"]
    lines = []
    cases = {k: v for k, v in (g.get("audit") or {}).items() if isinstance(v, dict) and "ratio_vs_plain_gpu" in v}
    if cases:
        met = all(
            c["ratio_vs_plain_gpu"] >= 3 and c["max_difference_vs_plain"] <= c["seed_spread"] for c in cases.values()
        )
        parts = [
            f"{name} ({c['audit_epochs']} epochs): {c['plain_gpu_s']:.3f} -> {c['veil_gpu_s']:.3f} s = "
            f"{c['ratio_vs_plain_gpu']:.2f}x; AUCs within {c['max_difference_vs_plain']:.4f} of the plain loop's "
            f"(seeds' spread {c['seed_spread']:.4f})"
            for name, c in cases.items()
        ]
        lines.append(
            f"| the same audit target on a GPU (`benchmarks/gpu.py`; the plain loop on that GPU) | {'; '.join(parts)} "
            f"({gpu}, {g['audit']['when'][:10]}) | {'yes' if met else 'no'} | "
            + ("-" if met else "see benchmarks/README.md, GPU")
            + " |"
        )
    p = g.get("population")
    if p and "ratio" in p:
        lines.append(
            f"| the population target on a GPU (`benchmarks/gpu.py`) | {p['ratio']:.2f}x "
            f"({p['trials_per_hour']['separate_gpu']} -> {p['trials_per_hour']['population_gpu']} trials/h; members "
            f"within {p['max_member_difference']['utility_auc']} utility AUC, {p['max_member_difference']['privacy_gap']} "
            f"privacy gap; {gpu}, {p['when'][:10]}) | {'partly' if p['ratio'] >= 4 else 'no'} | training and the "
            "fresh-probe audit only: MLflow and the certificate do not run on the GPU machine |"
        )
    e = g.get("eigan")
    if e and "ratio_vs_paper_loop" in e:
        big = max(e.get("larger_batch", {}).items(), key=lambda kv: int(kv[0]), default=None)
        ok = e["ratio_vs_paper_loop"] >= 1.5 and e["pct_of_fp32_limit"] >= 80
        lines.append(
            f"| the centralized EIGAN target on a GPU (`benchmarks/gpu.py`; the paper-style loop on that GPU) | "
            f"{e['ratio_vs_paper_loop']:.2f}x ({e['samples_per_s_cuda']:.0f} vs {e['paper_loop_samples_per_s_cuda']:.0f} "
            f"samples/s), {e['pct_of_fp32_limit']:.1f}% of {e.get('fp32_limit_tflops', g['fp32_limit_tflops']):.1f} TFLOP/s ({gpu}, {e['when'][:10]}) | "
            f"{'yes' if ok else 'no'} | "
            + (
                "-"
                if ok
                else ("ratio met; " if e["ratio_vs_paper_loop"] >= 1.5 else "")
                + gpu_eigan_cause(e)
                + (f"; at batch {big[0]}: {big[1]['pct_of_fp32_limit']:.1f}%" if big else "")
            )
            + " |"
        )
    return lines


def gpu_eigan_cause(e: Row) -> str:
    """Why the GPU EIGAN row is short of 80%: its batch's own products back to back, and what the CUDA graph gave."""
    batch = e["params"]["batch_size"]
    if "gemm_at_batch" not in e:
        return f"batch {batch}'s products are too small to fill the card (the step is launch- and latency-bound)"
    return (
        f"at batch {batch} the step's own products, back to back, reach {e['gemm_at_batch']['pct_of_fp32_limit']:.1f}% "
        "of the limit, so no implementation of this step can reach 80% there"
        + (
            f"; Veil replays the step as one CUDA graph: {e['ratio_graph_vs_eager']:.2f}x its eager steps "
            f"({e['samples_per_s_cuda_eager']:.0f} samples/s)"
            if "ratio_graph_vs_eager" in e
            else ""
        )
    )


def quickstart_gap(q: Row) -> str:
    """Why the quickstart with populations is not 3x faster: where each sweep's wall time went."""
    parts = []
    for label in ("separate", "population"):
        t = q[label].get("timings") or {}
        if t:
            parts.append(
                f"{label}: Ray start {t['ray_start']:.1f} s, trials {t['tune']:.1f} s, report {t['finish']:.1f} s"
            )
    return "; ".join(parts) or "see the row in benchmarks/results/suite.jsonl"


def others(rows: dict[str, Row]) -> list[str]:
    """The latest row of every centralized benchmark as a table."""
    lines = [
        "| benchmark | Veil samples/s | paper-style samples/s | ratio | FLOPs/sample | limit GFLOP/s | % of limit | measured |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name in CENTRALIZED:
        r = rows.get(name)
        if r:
            lines.append(
                f"| {name} (batch {r['params']['batch_size']}) | {r['samples_per_s']:.0f} | {r['baseline_samples_per_s']:.0f} | "
                f"{r['ratio']:.2f}x | {r['flops_per_sample'] / 1e6:.2f} M | {r['limit_gflops']:.0f} | {r['pct_of_limit']:.2g}% | {_when(r)} |"
            )
    return lines


def render_block(results: Path, readme: Path, gpu: Path = GPU_RESULTS) -> str:
    """`readme`'s text with the block between the suite markers replaced by tables made from the results files
    alone (the suite's and, where one was recorded, benchmarks/gpu.py's)."""
    rows = latest(results)
    gpu_row = json.loads(gpu.read_text()) if gpu.exists() else {}
    body = [
        f"Written by `python tools/bench_targets_block.py` from `{results.relative_to(ROOT) if results.is_relative_to(ROOT) else results}`"
        " (latest row per benchmark); do not edit by hand.",
        "",
        *targets(rows),
        *gpu_targets(gpu_row),
        "",
        *others(rows),
    ]
    text = readme.read_text()
    start, end = text.index(BEGIN), text.index(END) + len(END)
    return text[:start] + BEGIN + "\n" + "\n".join(body) + "\n" + END + text[end:]


def rewrite_readme(results: Path, readme: Path, gpu: Path = GPU_RESULTS) -> None:
    """Replace the README's block between the suite markers with tables made from the results files alone."""
    readme.write_text(render_block(results, readme, gpu))


def main(argv: list[str] | None = None) -> int:
    """Rewrite the Targets block; with --check, only say whether it is current (exit 1 if not)."""
    ap = parser(__doc__)
    ap.add_argument("--results", type=Path, default=RESULTS, help="the suite's JSON-lines results file")
    ap.add_argument("--gpu", type=Path, default=GPU_RESULTS, help="benchmarks/gpu.py's recorded row")
    ap.add_argument("--readme", type=Path, default=README, help="the Markdown file with the markers")
    args = ap.parse_args(argv)
    new = render_block(args.results, args.readme, args.gpu)
    return write_or_check({args.readme: new}, check=args.check, command="python tools/bench_targets_block.py")


if __name__ == "__main__":
    sys.exit(main())
