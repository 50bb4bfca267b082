"""Render docs/targets.md from benchmarks/results/targets.json (what benchmarks/targets.py records).

It reads only that file; nothing is measured here (tests/test_docs_commands.py checks the page is current).

python tools/targets_doc.py [--check]   (or `make docs`)"""

from __future__ import annotations

import json
import math
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np
from doc_file import parser, write_or_check

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "targets.json"
DOC = ROOT / "docs" / "targets.md"
#: what benchmarks/targets.py measures with (tests/test_docs_commands.py checks that the two agree): its methods in
#: the table's order, the quickstart's data and target of the cost section, and the case the reference sweep is
#: held against
METHODS = ("gpp", "eigan", "ldp-frl", "adjustable-ae", "d-eigan", "d-gpp")
QUICK = ["-d", "gaussian-correlated", "-p", "n=3000"]
QUICK_TARGET = "privacy_gap=0.1"
SWEEP_CASE = "gpp/gaussian-correlated n=12000"


def load(path: Path = RESULTS) -> dict[str, Any]:
    return json.loads(path.read_text())


def section(title: str, intro: str, columns: str | None = None) -> list[str]:
    """A Markdown section's head: its title, what it shows, and a table header ('a | b | c') unless None."""
    head = ["", f"## {title}", "", intro]
    return head if columns is None else [*head, "", f"| {columns} |", "|" + "---|" * (columns.count("|") + 1)]


def grid_lines(data: dict[str, Any]) -> list[str]:
    """Per case: the best met utility on the grid per seed, against the calibrated reruns' utility."""
    intro = (
        "Each case with its knob set to each value of a grid spread over the knob's range, per run seed, certified "
        "against the default target (`python benchmarks/targets.py grid --only CASE --points N --seeds ...`). The "
        "best met utility on the grid is read after seeing each run's test split; calibration never does."
    )
    intro += (
        " A fixed setting chosen that way is met only on the seeds it happened to pass; the last two columns hold "
        "calibration against the most useful grid value met at every seed it ran with (8 or more), the setting a "
        "user could have fixed in advance and relied on (calibration's assurance is 0.95)."
    )
    columns = "case | grid values | seeds | best met utility on the grid, per seed | calibrated utility, per seed"
    columns += " (reruns) | within 0.03 | most useful value met at every seed: met, mean utility"
    lines = section("Calibration against a brute-force grid", intro, columns + " | calibrated: met, mean utility")
    for key, runs in sorted(data["grid"].items()):
        seeds = sorted({r["seed"] for r in runs.values()})
        values = sorted({r["value"] for r in runs.values()})
        best = {
            s: max((r["utility_auc"]["value"] for r in runs.values() if r["seed"] == s and r.get("met")), default=None)
            for s in seeds
        }
        cal = {
            int(k): r["utility_auc"]["value"]
            for k, r in (data.get("reruns", {}).get(key) or {}).items()
            if r.get("utility_auc")
        }
        pairs = [(b, cal[s]) for s in seeds if (b := best[s]) is not None and s in cal]
        within = sum(c >= b - 0.03 for b, c in pairs)
        reliable = reliable_value(runs)
        reruns_ = list((data.get("reruns", {}).get(key) or {}).values())
        cal_met = sum(bool(r.get("met")) for r in reruns_)
        lines.append(
            f"| {key} | {len(values)} ({values[0]:.3g}..{values[-1]:.3g}) | {', '.join(map(str, seeds))} | "
            + ", ".join("-" if best[s] is None else f"{best[s]:.3f}" for s in seeds)
            + " | "
            + ", ".join(f"{cal[s]:.3f}" if s in cal else "-" for s in seeds)
            + f" | {within} of {len(pairs)} | "
            + (
                f"{reliable[0]:.3g}: {reliable[1]} of {reliable[2]}, {reliable[3]:.3f}"
                if reliable
                else "none with 8 seeds"
            )
            + f" | {cal_met} of {len(reruns_)}, {np.mean(list(cal.values())) if cal else float('nan'):.3f} |"
        )
    return lines


def reliable_value(runs: dict[str, Any]) -> tuple[float, int, int, float] | None:
    """(value, seeds met, seeds, mean utility) of the most useful grid value met at every one of the 8 or more seeds
    it ran with; None if no value qualifies."""
    by_value: dict[float, list[dict[str, Any]]] = {}
    for r in runs.values():
        by_value.setdefault(round(float(r["value"]), 6), []).append(r)
    ok = []
    for value, rs in by_value.items():
        met = sum(bool(r.get("met")) for r in rs)
        if len(rs) >= 8 and met == len(rs):
            ok.append((value, met, len(rs), float(np.mean([r["utility_auc"]["value"] for r in rs]))))
    return max(ok, key=lambda t: t[3]) if ok else None


def rerun_lines(data: dict[str, Any]) -> list[str]:
    """The reruns section: per case, how often each outcome came out, and the utility's spread."""
    intro = (
        "Each case again with the run seeds shown (`python benchmarks/targets.py reruns --only CASE --seeds ...`): "
        "the outcome (met / not met / refused) and the test utility AUC per seed."
    )
    head = "case | seeds | met | not met | refused | same outcome | utility AUC (min-max) | excess upper end (max)"
    lines = section("Reruns: is the outcome a coin flip?", intro, head)
    for key, runs in sorted(data["reruns"].items()):
        outs = [("refused" if r.get("exit") == 2 else "met" if r.get("met") else "not met") for r in runs.values()]
        utils = [r["utility_auc"]["value"] for r in runs.values() if r.get("utility_auc")]
        highs = [r["excess_gap"]["high"] for r in runs.values() if r.get("excess_gap")]
        same = max(outs.count(o) for o in set(outs))
        lines.append(
            f"| {key} | {', '.join(runs)} | {outs.count('met')} | {outs.count('not met')} | {outs.count('refused')} "
            f"| {same} of {len(outs)} | "
            + (f"{min(utils):.3f}-{max(utils):.3f}" if utils else "-")
            + " | "
            + (f"{max(highs):.3f}" if highs else "-")
            + " |"
        )
    return lines


def trail_lines(data: dict[str, Any]) -> list[str]:
    lines = section(
        "Calibration refined to the end",
        "A case with refinement forced (`python benchmarks/targets.py trail --only CASE`, which runs it with "
        "`--set calibration.min_gain=0`): every candidate, its validation utility and leakage, and the limit its "
        "certificate needs (validation figure plus calibration's margin) against the target. It shows what the "
        "default stop rule (stop when the target is expected to admit under 0.02 more utility) gave up.",
    )
    for key, t in sorted(data["trail"].items()):
        target = ", ".join(f"{k} <= {v:g}" for k, v in (t.get("target") or {}).items())
        util = (t.get("utility_auc") or {}).get("value", float("nan"))
        knob = t.get("knob") or {}
        lines += [
            "",
            f"`{key}` ({target}; {len(t['trail'])} candidates, {t.get('seconds', 0):.0f} s, commit "
            f"{t.get('commit', '?')}): released {knob.get('field', 'knob')} = {knob.get('value', float('nan')):.4g}, "
            f"test utility AUC {util:.3f}, {'met' if t.get('met') else 'not met'}.",
            "",
        ]
        limits = t.get("target") or {}
        within = [r for r in t["trail"] if all(v <= limits.get(m, math.inf) for m, v in r["leakage"].items())]
        feasible = [r for r in t["trail"] if r["feasible"]]
        if within and feasible:
            top, kept = max(within, key=lambda r: r["utility"]), max(feasible, key=lambda r: r["utility"])
            lines += [
                f"Ignoring the margin (validation leakage within the target, before the room the certificate's bound and "
                f"the split noise need) the most useful candidate keeps validation utility {top['utility']:.3f} "
                f"({knob.get('field', 'knob')} {top['value']:.4g}); the most useful feasible one "
                f"{kept['utility']:.3f}.",
                "",
            ]
        lines += [
            "| value | stage | validation utility | validation leakage | needs | feasible |",
            "|---|---|---|---|---|---|",
        ]
        for r in sorted(t["trail"], key=lambda r: r["value"]):
            leak = ", ".join(f"{m} {v:.4f}" for m, v in r["leakage"].items())
            needs = ", ".join(f"{v:.3f}" for v in r["needs"].values())
            lines.append(
                f"| {r['value']:.4g} | {r['stage']} | {r['utility']:.3f} | {leak} | {needs} | "
                f"{'yes' if r['feasible'] else 'no'} |"
            )
    return lines


def refusal(error: str) -> str:
    """A refusal's cell: how far the test split can certify, and the rows the target needs (the whole message is
    in the JSON)."""
    rows, floor, need = (
        re.search(p, error) for p in (r"holds (\d+) test rows", r"above ([\d.]+)", r"about (\d+) test")
    )
    if not (rows and floor and need):
        return f"refused up front (exit 2): {error}"
    size = re.search(r"\(-p n=(\d+)\)", error)
    return (
        f"refused up front (exit 2): {rows.group(1)} test rows certify no gap under {floor.group(1)}; "
        f"0.05 needs ~{need.group(1)}" + (f" (the error suggests `-p n={size.group(1)}`)" if size else "")
    )


def fmt_case(c: dict[str, Any]) -> tuple[str, str, str, str, str]:
    """(outcome, worst gap [95%], utility AUC [95%], what the utility labels alone reveal, knob) of one case."""
    if c.get("exit") == 2:
        return refusal(c.get("error", "")), "", "", "", ""
    if "met" not in c:
        return f"exit {c.get('exit')}: {c.get('error', 'no result')}", "", "", "", ""
    iv = lambda d: f"{d['value']:.3f} [{d['low']:.3f}, {d['high']:.3f}]"  # noqa: E731
    knob = c.get("knob") or {}
    met = "**met**" if c["met"] else f"**not met** (exit {c['exit']})"
    reveals = ", ".join(f"{g:.3f}" for g in (c.get("utility_reveals") or {}).values())
    return (
        met,
        iv(c["privacy_gap"]),
        iv(c["utility_auc"]),
        reveals,
        f"{knob.get('field')} = {knob.get('value', float('nan')):.4g}",
    )


def tally(cases_: dict[str, dict[str, Any]]) -> str:
    """One sentence counting the outcomes, and the cases met only at a utility near chance."""
    met = [k for k, c in cases_.items() if c.get("met") is True]
    unmet = [k for k, c in cases_.items() if c.get("met") is False]
    refused = [k for k, c in cases_.items() if c.get("exit") == 2]
    other = len(cases_) - len(met) - len(unmet) - len(refused)
    near_chance = [k for k in met if cases_[k]["utility_auc"]["high"] < 0.6]
    relative = [k for k in met if "excess_gap" in (cases_[k].get("target") or {})]
    kept = [k for k in relative if cases_[k]["utility_auc"]["value"] >= 0.6]
    unmet_text = sorted(f"{knob_text(cases_[k])} on {k.partition('/')[2]}" for k in unmet)
    return (
        f"Of {len(cases_)} cases: {len(met)} met, {len(unmet)} not met (exit 3, recorded with met: false), "
        f"{len(refused)} refused up front (exit 2)" + (f", {other} other" if other else "") + ". "
        f"{len(near_chance)} of the met releases keep a utility AUC under 0.6 at the upper end of its interval. "
        f"Under the current default (excess_gap <= 0.05) {len(kept)} of {len(relative)} met releases keep a utility "
        "AUC of 0.6 or more. The not-met cases "
        f"({', '.join(unmet_text)}; worst gaps "
        f"{gap_span(cases_, unmet)}) are recorded with met: false and exit 3: the run says so instead of releasing a "
        "leak as safe."
    )


def gap_span(cases_: dict[str, dict[str, Any]], keys: list[str]) -> str:
    """'0.025-0.248': the range of the cases' worst privacy gaps (point estimates)."""
    gaps = [cases_[k]["privacy_gap"]["value"] for k in keys if cases_[k].get("privacy_gap")]
    return f"{min(gaps):.3f}-{max(gaps):.3f}" if gaps else "none recorded"


def knob_text(c: dict[str, Any]) -> str:
    """'eigan alpha = 0.01' of one case (its method from the command)."""
    knob = c.get("knob") or {}
    method = c["command"].split(" -m ")[1].split()[0]
    return f"{method} {knob.get('field')} = {knob.get('value', float('nan')):.4g}"


def render_text(data: dict[str, Any]) -> str:
    """docs/targets.md from the recorded results alone (tests/test_docs_commands.py holds the two equal)."""
    lines = [
        "# Leakage targets, measured",
        "",
        "Generated by `python tools/targets_doc.py` from `benchmarks/results/targets.json` "
        f"({data['meta'].get('machine', '')}, {data['meta'].get('threads', '')}, updated {data['meta'].get('updated', '')}).",
        "Each row is one `veil run` with no method option (the command is in the JSON): Veil calibrates the method's",
        "privacy knob to the default target (`docs/defaults.md`) on the training rows alone (a validation split, or 3",
        "cross-fitting folds where it would hold under 300 rows of a sensitive class), releases, and certifies the",
        "release on the test split. **The default promise: the release reveals each sensitive label at most 0.05 (in AUC) beyond",
        "what the utility labels alone reveal of it** (excess_gap <= 0.05, one-sided 95% bound;",
        "docs/certificates.md). The 'target' column says which default a row was measured under: rows at",
        "`privacy_gap <= 0.05` predate it; rerun them with `python benchmarks/targets.py cases --redo`.",
        "A target the test split is too small to certify is refused before anything trains (exit 2); a calibration",
        "that cannot meet it records the least leaking release with met: false and exits 3. Never a silent leak.",
        "'u reveals' is the privacy gap the test split's utility labels alone carry about each sensitive label (a",
        "release that keeps them fully cannot hide it further).",
        f"Code: commit {', '.join(sorted({c.get('commit', '?') for c in data['cases'].values()}))}.",
        "",
        tally(data["cases"]),
        "",
        "| method | data | target | outcome | worst privacy gap [95%] | excess over u [95%] | utility AUC [95%] "
        "| u reveals | knob | wall time |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for key, c in sorted(data["cases"].items(), key=lambda kv: (METHODS.index(kv[0].split("/")[0]), kv[0])):
        method, label = key.split("/", 1)
        outcome, gap, util, reveals, knob = fmt_case(c)
        target = ", ".join(f"{k} <= {v:g}" for k, v in (c.get("target") or {"privacy_gap": 0.05}).items())
        ex = c.get("excess_gap")
        excess = f"{ex['value']:.3f} [{ex['low']:.3f}, {ex['high']:.3f}]" if ex else "-"
        lines.append(
            f"| `{method}` | {label} | {target} | {outcome} | {gap} | {excess} | {util} | {reveals} | {knob} "
            f"| {c.get('seconds', 0):.0f} s |"
        )
    cost_ = data.get("cost")
    if cost_:
        lines += [
            "",
            "## What calibration costs",
            "",
            f"On the quickstart data (`{' '.join(QUICK)}`, 750 test rows: {QUICK_TARGET} is the tightest round bound",
            "they certify), one plain run (GPP with its knob set, certified) against the same run calibrated, wall time",
            "of the whole command:",
            "",
            "| run | command | wall time | certificate |",
            "|---|---|---|---|",
        ]
        for name in ("plain", "calibrated"):
            r = cost_[name]
            lines.append(
                f"| {name} | `{r['command']}` | {r['seconds']:.1f} s"
                + (f" (median of {', '.join(f'{w:.1f}' for w in r['walls'])})" if "walls" in r else "")
                + f" | {'met' if r.get('met') else 'not met'} |"
            )
        lines.append(f"\nCalibration costs **{cost_['ratio']:.2f}x** one plain run (target: at most 4x).")
    for key in sorted(k for k in data if k.startswith("cost ")):
        c = data[key]
        lines += [
            "",
            f"On {key[5:]} at the default target (`python benchmarks/targets.py cost --dataset {key[5:]}`):",
            "",
            "| run | options (the commands are in the JSON) | wall time | certificate | utility AUC |",
            "|---|---|---|---|---|",
        ]
        for name in ("plain", "calibrated"):
            r = c[name]
            util = (r.get("utility_auc") or {}).get("value", float("nan"))
            # the options only: a command on data that must be fetched first would not run in the docs' check
            options = "the knob set (--set beta=1)" if name == "plain" else "none: calibrated"
            lines.append(
                f"| {name} | {options} | {r['seconds']:.1f} s | {'met' if r.get('met') else 'not met'} | {util:.3f} |"
            )
        lines.append(f"\nCalibration plus certificate cost **{c['ratio']:.2f}x** one plain certified run (target: 3x).")
    sw = data.get("sweep")
    if sw:
        best = sw.get("best_feasible") or {}
        # the case as the table shows it (re-run since the sweep, it is the calibrated run the sweep is held against)
        cal_u = (data["cases"].get(SWEEP_CASE, {}).get("utility_auc") or {}).get("value", sw.get("calibrated_utility"))
        short = (best.get("utility_auc") or 0.0) - (cal_u or 0.0)
        verdict = "met" if cal_u is not None and short <= 0.02 else f"not met, {short:.3f} below"
        spread = feasible_spread(sw, cal_u or 0.0) + best_rerun(sw, cal_u or 0.0)
        lines += [
            "",
            "## The calibrated point against a sweep",
            "",
            f"A {sw['trials']}-trial sweep of GPP's beta (log 0.001..30, everything else at its default) on the data",
            f"of the `{SWEEP_CASE}` case (multi-objective TPE; the spec is in the JSON), every trial certified",
            f"against the default target: {sw['feasible']} trials meet it.",
            f"Its best feasible trial: beta {best.get('beta', float('nan')):.4g}, utility AUC "
            f"{best.get('utility_auc') or float('nan'):.3f}; the calibrated run: utility AUC "
            f"{cal_u or float('nan'):.3f} (target: within 0.02: **{verdict}**).{spread} The sweep "
            "picks its best trial after seeing the test split; calibration never does. The sweep took "
            f"{sw['seconds']:.0f} s (commit {sw.get('commit', '?')}), the calibrated run "
            f"{data['cases'][SWEEP_CASE]['seconds']:.0f} s (commit {data['cases'][SWEEP_CASE].get('commit', '?')}). On "
            "these data the utility label alone reveals s with a gap of "
            f"{max((data['cases'][SWEEP_CASE].get('utility_reveals') or {'': 0.0}).values()):.3f}.",
        ]
    if data.get("reruns"):
        lines += rerun_lines(data)
    if data.get("grid"):
        lines += grid_lines(data)
    if data.get("trail"):
        lines += trail_lines(data)
    return "\n".join(lines) + "\n"


def feasible_spread(sw: dict[str, Any], calibrated: float) -> str:
    """The sentence on the sweep's feasible trials' utility spread, where the best of them sits atop ('' for one)."""
    feasible = [t["utility_auc"] for t in sw.get("all", []) if t.get("certificate/met")]
    if len(feasible) < 2:
        return ""
    inside = "lies inside" if min(feasible) <= calibrated <= max(feasible) else "lies outside"
    return (
        f" The {len(feasible)} feasible trials' utility AUCs span {min(feasible):.3f}-{max(feasible):.3f} (mean "
        f"{np.mean(feasible):.3f}): the best is the highest of {len(feasible)} readings on the test split, each "
        "with its own sampling error, so it is expected to read higher than its beta keeps in another run; the "
        f"calibrated run's {inside} that span."
    )


def best_rerun(sw: dict[str, Any], calibrated: float) -> str:
    """The sentence on `recheck`'s reruns of the best feasible trial ('' when none is recorded)."""
    rerun = sw.get("best_rerun") or []
    kept = [u for r in rerun if (u := (r.get("utility_auc") or {}).get("value")) is not None]
    if not rerun or len(kept) < len(rerun):
        return ""
    gap = float(np.mean(kept)) - calibrated
    return (
        f" Run again at its beta with run seeds {', '.join(str(r['seed']) for r in rerun)} on the same rows "
        f"(`python benchmarks/targets.py recheck`), it keeps utility AUC {', '.join(f'{u:.3f}' for u in kept)} "
        f"(mean {np.mean(kept):.3f}; certificate met in {sum(bool(r.get('met')) for r in rerun)} of {len(rerun)}): "
        + (
            f"{abs(gap):.3f} from the calibrated run's, within the target."
            if abs(gap) <= 0.02
            else f"{gap:.3f} above the calibrated run's, beyond the target."
        )
    )


def main(argv: list[str] | None = None) -> int:
    """Write docs/targets.md; with --check, only say whether it is current (exit 1 if not)."""
    ap = parser(__doc__)
    args = ap.parse_args(argv)
    return write_or_check({DOC: render_text(load())}, check=args.check, command="python tools/targets_doc.py")


if __name__ == "__main__":
    sys.exit(main())
