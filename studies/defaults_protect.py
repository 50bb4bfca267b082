"""Measure what each privacy method's knob defaults release WITHOUT calibration, on its paper's synthetic task
(where s is independent of u) and on correlated data (rho 0.5, where it is not), and at `preset: paper`.

    python studies/defaults_protect.py            # seeds 0 1 2, writes docs/defaults.md and the JSON below

Each run goes through the real pipeline (`veil.pipeline.execute.execute`) with `calibrate: false`, so the release is the knob's
default, certified against the default target (privacy_gap <= 0.05: the certificate's worst adversary, 95% upper
end) into a throw-away MLflow store; every seed is reported. What a run with no options releases instead (the
knob calibrated to the target) is measured by benchmarks/targets.py (docs/targets.md). Results:
studies/results/defaults_protect.json."""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from datetime import date
from pathlib import Path
from typing import Any

from veil.methods.tasks import PAPER_TASKS, PaperTask
from veil.pipeline.execute import RunSpec, execute

ROOT = Path(__file__).resolve().parent.parent
#: (label, preset, task or None for the method's paper task)
CASES: tuple[tuple[str, str, PaperTask | None], ...] = (
    ("paper task, knob default", "default", None),
    ("paper task, preset paper", "paper", None),
    (
        "correlated (rho 0.5), knob default",
        "default",
        PaperTask("gaussian-correlated", {"rho": 0.5, "n": 8000, "test_fraction": 0.5}),
    ),
)


def measure(method: str, task: PaperTask, preset: str, seed: int, uri: str) -> dict[str, Any]:
    spec = RunSpec(
        method=method,
        params={"preset": preset},
        seed=seed,
        executor="inline",
        tracking_uri=uri,
        experiment="defaults-protect",
        calibrate=False,
        **task.run_fields(method),
    )
    result = execute(spec)
    cert = result.certificate
    assert cert is not None
    return {
        "utility_auc": round(cert.utility.point, 4),
        "privacy_gap": round(cert.worst_gap.point, 4),
        "gap_high": round(cert.worst_gap.high, 4),
        "met": cert.met,
        "knob": cert.knob,
        "test_rows": cert.test_rows,
    }


def task_name(task: PaperTask) -> str:
    return task.dataset + (f" {dict(task.dataset_params)}" if task.dataset_params else "")


def table(results: dict[str, dict[str, dict[str, Any]]]) -> list[str]:
    lines = [
        "| method | case | data | knob | utility AUC per seed | worst privacy gap per seed (95% upper end) | met 0.05 |",
        "|---|---|---|---|---|---|---|",
    ]
    for method, by_case in results.items():
        for label, entry in by_case.items():
            rows = entry["rows"]
            knob = rows[0]["knob"] or {}
            u = ", ".join(f"{r['utility_auc']:.3f}" for r in rows)
            g = ", ".join(f"{r['privacy_gap']:.3f} ({r['gap_high']:.3f})" for r in rows)
            met = f"{sum(r['met'] for r in rows)} of {len(rows)}"
            lines.append(
                f"| `{method}` | {label} | {entry['task']} | {knob.get('field')} = {knob.get('value', 0):.4g} | {u} | {g} | {met} |"
            )
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--methods", nargs="+", default=list(PAPER_TASKS))
    args = p.parse_args(argv)
    t0 = time.time()
    results: dict[str, dict[str, dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        uri = f"sqlite:///{tmp}/mlflow.db"
        for method in args.methods:
            results[method] = {}
            for label, preset, task in CASES:
                t = task or PAPER_TASKS[method]
                rows = [measure(method, t, preset, s, uri) for s in args.seeds]
                results[method][label] = {"task": task_name(t), "rows": rows}
                print(f"{method:<14} {label:<36} gaps {[r['privacy_gap'] for r in rows]}", flush=True)
    command = "python studies/defaults_protect.py" + (
        f" --seeds {' '.join(map(str, args.seeds))}" if args.seeds != [0, 1, 2] else ""
    )
    meta = {
        "command": command,
        "date": date.today().isoformat(),
        "machine": f"{platform.machine()}, {platform.python_version()}, {sys.platform}",
        "threads": os.environ.get("OMP_NUM_THREADS", "default"),
        "seconds": round(time.time() - t0, 1),
        "seeds": args.seeds,
    }
    out = ROOT / "studies" / "results" / "defaults_protect.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"meta": meta, "results": results}, indent=1) + "\n")
    doc = [
        "# Defaults, and what protects",
        "",
        "**With no options, a privacy method's release is calibrated to a leakage target and certified** (README,",
        "'A leakage target, not a knob'). **The default promise: the release reveals each sensitive label at most 0.05",
        "(in AUC) beyond what the utility labels alone reveal of it** (`excess_gap <= 0.05`): for the worst of the",
        "certificate's adversaries (logistic regression, MLPs of 32 and 512-256-128 units, gradient boosting) and every",
        "sensitive label, its AUC - 0.5 less that of the best predictor of the label from the utility labels (floored at",
        "0), paired on the same test rows, at the one-sided 95% upper bound. Where s is independent of the task this is",
        "privacy_gap <= 0.05; where the task itself reveals s, the task is kept and the rest hidden, and",
        "`--target privacy_gap=0.05` bounds the gap itself. 0.05 is where the fresh-probe audit of the papers calls a",
        "representation private (GPP's 0.531 adversary AUC at beta 1, EIGAN's hidden quadrant). A test split too small",
        "to certify it is refused before training (exit 2), with the number of rows it would take; runs that meet it",
        "exit 0; calibrations that cannot exit 3, with the least leaking release recorded as `met: false`. What that",
        "gives, method by method, on correlated synthetic data, Adult, COMPAS and `examples/applicants.csv`:",
        "[docs/targets.md](targets.md).",
        "",
        "**The knobs' defaults alone do not protect where s correlates with u.** The table below releases each",
        "method at its knob's default, uncalibrated (`--no-calibrate`, or a run file's `calibrate: false`), certified",
        "against an absolute privacy_gap <= 0.05 (the default until the excess target; the figures below were measured",
        "then): on its paper's synthetic task (s independent of u) and on",
        "gaussian-correlated at rho 0.5 (s copies u half the time, as sensitive labels follow outcomes in real",
        "tables: there a release that keeps u leaks s, and only a lower knob, at a cost in utility, hides it).",
        "`preset: paper` is the letter of the paper (docs/methods.md says, per method, which fields differ and why);",
        "it is certified, never calibrated. tests/test_defaults_protect.py runs the no-options path of every",
        "privacy method on correlated data (met, or exit 3; never a silent leak) and shows the knobs' defaults",
        "leak there.",
        "",
        f"Generated by `{command}` on {meta['date']} ({meta['machine']}, {meta['seconds']} s); raw figures in",
        "`studies/results/defaults_protect.json`. Privacy gap = the certificate's worst |AUC - 0.5| (its 95%",
        "upper end in brackets); utility = the audit probe's AUC.",
        "",
        *table(results),
        "",
    ]
    (ROOT / "docs" / "defaults.md").write_text("\n".join(doc))
    print(f"wrote docs/defaults.md and {out.relative_to(ROOT)} in {meta['seconds']} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
