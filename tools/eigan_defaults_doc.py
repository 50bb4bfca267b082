"""Render docs/eigan-defaults.md from studies/results/eigan_defaults.json (what studies/eigan_defaults.py records).

It reads only that file, and EIGAN's default release_noise from its config (no torch); nothing is measured here
(tests/test_docs_commands.py checks the page is current).

python tools/eigan_defaults_doc.py [--check]   (or `make docs`)"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
from doc_file import parser, write_or_check

from veil.methods.cards import method_config
from veil.methods.configs.eigan_card import EIGANConfig

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "studies" / "results" / "eigan_defaults.json"
DOC = ROOT / "docs" / "eigan-defaults.md"
#: what studies/eigan_defaults.py measures (tests/test_docs_commands.py checks that the two agree): the schedule's
#: alphas and seeds, and the noise study's methods and cases in the table's order
SCHEDULE_ALPHAS = (0.01, 0.001)
SCHEDULE_SEEDS = (0, 1, 2)
NOISE_METHODS = ("eigan", "d-eigan")
NOISE_CASES = ("adult", "applicants.csv", "gaussian-correlated n=12000")


def load(path: Path = RESULTS) -> dict[str, Any]:
    return json.loads(path.read_text())


def schedule_lines(runs: list[dict[str, Any]]) -> list[str]:
    """The section on EIGAN's adversary schedule: one row per data, alpha and step count, every seed shown."""
    lines = [
        "",
        "## EIGAN's adversary schedule",
        "",
        "EIGAN with its alpha set (certified, not calibrated) with Alg. A1's one adversary step per encoder step and",
        "with Veil's default of 5 (`adversary_steps`; `preset: paper` restores 1), the release E(x) itself",
        "(`release_noise` 0, so that the schedule is all that differs), run seeds",
        f"{', '.join(map(str, SCHEDULE_SEEDS))} on the same rows (`python studies/eigan_defaults.py schedule`), at alpha "
        f"{SCHEDULE_ALPHAS[0]} (where calibration's range used to end) and {SCHEDULE_ALPHAS[1]} (where it ends now).",
        "With one step the encoder hides s from a training adversary a step behind it, and a fresh adversary reads",
        "what that one missed; the extra steps make the private end of the knob private more often across seeds.",
        "",
        "| data | alpha | adversary steps | worst privacy gap per seed (95% upper end) | utility AUC per seed | mean gap | met 0.05 |",
        "|---|---|---|---|---|---|---|",
    ]
    for label in dict.fromkeys(r["data"] for r in runs):
        for alpha in dict.fromkeys(r["alpha"] for r in runs):
            for k in sorted({r["adversary_steps"] for r in runs}):
                rows = [
                    r
                    for r in runs
                    if (r["data"], r["alpha"], r["adversary_steps"]) == (label, alpha, k) and r.get("privacy_gap")
                ]
                if not rows:
                    continue
                rows.sort(key=lambda r: r["seed"])
                gaps = ", ".join(f"{r['privacy_gap']['value']:.3f} ({r['privacy_gap']['high']:.3f})" for r in rows)
                utils = ", ".join(f"{r['utility_auc']['value']:.3f}" for r in rows)
                mean = float(np.mean([r["privacy_gap"]["value"] for r in rows]))
                met = sum(bool(r.get("met")) for r in rows)
                lines.append(f"| {label} | {alpha} | {k} | {gaps} | {utils} | {mean:.3f} | {met} of {len(rows)} |")
    widths = []
    for label in dict.fromkeys(r["data"] for r in runs):
        rows = [r for r in runs if r["data"] == label and r.get("privacy_gap")]
        add = float(np.mean([r["privacy_gap"]["high"] - r["privacy_gap"]["value"] for r in rows]))
        widths.append(f"{add:.3f} on {label} ({rows[0].get('test_rows')} test rows)")
    lines += [
        "",
        f"The certificate judges the upper end of a 95% interval, which adds on average {' and '.join(widths)} to "
        "a release's gap: to be met there, a release must read that much under 0.05.",
    ]
    return lines


def noise_lines(data: dict[str, Any]) -> list[str]:
    """The section on release noise: per case and level, every training seed's outcome, worst gap and knob."""
    lines = [
        "",
        "## EIGAN's and D-EIGAN's release noise",
        "",
        "EIGAN and D-EIGAN as the paper gives them release the encoder's output itself (`release_noise` 0, what",
        "`preset: paper` keeps). Near the private end of alpha the encoder collapses to a nearly constant z whose last",
        "bits still depend on x, and adversaries that standardise or rank z (the MLPs, gradient boosting) read s from",
        "them. With `release_noise` s, Gaussian noise of std s is added to every released entry of the tanh output. The",
        "cases the deterministic release missed, at each level and training seed (`--set release_noise=S --set",
        "seed=N`, nothing else: alpha calibrated to the default target; `python studies/eigan_defaults.py noise`). Each",
        "cell lists the seeds' figures in seed order; the gap is the upper end of its 95% interval, the one the",
        "certificate judges:",
        "",
        "| method | data | release_noise | met | worst gap, upper end | utility AUC | alpha |",
        "|---|---|---|---|---|---|---|",
    ]
    totals: dict[float, list[bool]] = {}
    for key in (f"{m}/{label}" for m in NOISE_METHODS for label in NOISE_CASES):
        method, label = key.split("/", 1)
        by_level: dict[float, list[dict[str, Any]]] = {}
        for at, run in sorted(data["noise"].get(key, {}).items(), key=lambda kv: tuple(map(float, kv[0].split("/")))):
            by_level.setdefault(float(at.split("/")[0]), []).append(run)
        for level, runs in by_level.items():
            met = [bool(r.get("met")) for r in runs]
            totals.setdefault(level, []).extend(met)
            upper = per_seed(runs, lambda r: f"{r['privacy_gap']['high']:.3f}")
            util = per_seed(runs, lambda r: f"{r['utility_auc']['value']:.3f}")
            alpha = per_seed(runs, lambda r: f"{(r.get('knob') or {}).get('value', float('nan')):.3g}")
            lines.append(
                f"| `{method}` | {label} | {level:g} | {sum(met)} of {len(met)} | {upper} | {util} | {alpha} |"
            )
    config = method_config("eigan", {})
    assert isinstance(config, EIGANConfig)
    default = config.release_noise
    lines += [
        "",
        "Met, all cases and seeds: "
        + "; ".join(f"release_noise {lv:g}: {sum(m)} of {len(m)}" for lv, m in sorted(totals.items()))
        + f". Veil's default is {default:g} (`preset: paper` restores 0), so the cases table of docs/targets.md is measured with",
        "it; what the noise costs where the release is useful (alpha set, no calibration) is in the reproductions'",
        "default-preset entries of eigan-adult, eigan-titanic and deigan-vs-eigan.",
    ]
    return lines


def per_seed(runs: list[dict[str, Any]], figure: Any) -> str:
    """One figure of each run, in seed order ('-' for a run without a certificate)."""
    return " · ".join(figure(r) if "met" in r else "-" for r in runs)


def render_text(data: dict[str, Any]) -> str:
    """docs/eigan-defaults.md from the recorded results alone (tests/test_docs_commands.py holds the two equal)."""
    meta = data.get("meta", {})
    lines = [
        "# EIGAN's and D-EIGAN's defaults, measured",
        "",
        "Generated by `python tools/eigan_defaults_doc.py` from `studies/results/eigan_defaults.json` "
        f"({meta.get('machine', '')}, {meta.get('threads', '')}, updated {meta.get('updated', '')}).",
        "Why EIGAN and D-EIGAN default to 5 adversary steps per encoder step and `release_noise` 0.1 where the papers",
        "have 1 and 0 (`preset: paper` restores both). Each row is one `veil run` (the command is in the JSON).",
    ]
    if data.get("schedule"):
        lines += schedule_lines(data["schedule"])
    if data.get("noise"):
        lines += noise_lines(data)
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Write docs/eigan-defaults.md; with --check, only say whether it is current (exit 1 if not)."""
    ap = parser(__doc__)
    args = ap.parse_args(argv)
    return write_or_check({DOC: render_text(load())}, check=args.check, command="python tools/eigan_defaults_doc.py")


if __name__ == "__main__":
    sys.exit(main())
