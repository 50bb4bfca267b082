"""Render docs/methods.md from the registry, so the documentation always matches the code.

python tools/methods_doc.py [--check]   (or `make docs`)"""

from __future__ import annotations

import inspect
import sys
from pathlib import Path

from doc_file import parser, write_or_check

from veil.config import field_table
from veil.methods import METHODS, method_config
from veil.methods.cards import knob_text
from veil.methods.method import Method
from veil.methods.tasks import PAPER_TASKS

PRESETS = [
    "## Privacy knobs, defaults and `preset: paper`",
    "",
    "Each privacy method names its **privacy knob**, the field that trades utility for privacy (below, with the",
    "range calibration searches). A run that does not set it calibrates it to its leakage target (the default",
    "target is excess_gap <= 0.05) on training rows held out of each candidate's training (a validation split,",
    "or cross-fitting folds where it would hold few rows of a sensitive class) and certifies the release",
    "(README, 'A leakage target, not a knob'; measured in [targets.md](targets.md)); a run that sets it, a sweep",
    "trial and `preset: paper` are certified, not calibrated. The other defaults are chosen because they help a",
    "release hide: on each paper's own synthetic task (s independent of u) the knob's default hides s, where s",
    "correlates with u it does not (both measured in [defaults.md](defaults.md), made by",
    "`python studies/defaults_protect.py`). `--set preset=paper` (or `preset: paper` in a run file or a",
    "sweep's params) restores the letter of the paper in one switch; values you set yourself still win over it.",
    "Each method below lists the fields where the two differ and why. A difference the paper states is",
    "recorded in the run's params as `method.deviation.<field>`; where the paper gives no value, `paper` keeps",
    "Veil's earlier choice and nothing is recorded.",
    "",
]

RELEASE_RANDOMNESS = [
    "## Release randomness",
    "",
    "Training is reproducible from `seed` (for `d-gpp`, whose aggregator trains on uploaded noisy z, only with",
    "`release_seed`); a release is not. Every stochastic release (`gpp` and `d-gpp` with",
    "release=sample, `noisy-encoder`, the Laplace mechanism of `ldp-frl`, `ldp-fedavg` and `dp-input`,",
    "`adjustable-ae` with noise > 0, `eigan` and `d-eigan` with release_noise > 0) is permanent randomization:",
    "its noise derives from a secret 32-byte release key (drawn from OS entropy per run, never in the run's",
    "params, tags or artifacts; `veil run` keeps it in `.veil/keys/<run id>.key`, owner-only) and each row's",
    "content (HMAC-SHA256 of the row seeding a counter-based generator), so the same row released twice gets the",
    "same noise and averaging releases gains nothing, while distinct rows, or one row under two keys, get",
    "independent noise. `veil release` loads the run's key, so it releases the z the certificate audited (the",
    "same noise; z equal up to the encoder's float rounding, about 1e-7); a missing key, or a key file that is",
    "not the run's (by the fingerprint the run tags), is an error, never a new key. A `d-gpp` client releases",
    "its own rows (its encoder never leaves it) under its own key, the same rows with the same noise in every",
    "release; the sanitized",
    "batches it uploads in training rounds draw fresh noise from its upload stream. Setting `release_seed`",
    "derives the keys from it (node k's uploads from (release_seed, k)), making releases reproducible run to",
    "run: it voids the privacy guarantee, so it is recorded as `method.deviation.release_seed`, tagged",
    "`veil.release_reproducible=true` and flagged at the top of the audit report. Use it only for tests.",
    "",
]


def render_markdown() -> str:
    out = [
        "# Methods",
        "",
        "Generated from the code by `python tools/methods_doc.py` (`make docs`; a test checks it is current).",
        "`veil methods NAME` prints the same parameter table. Options that depart from the paper are recorded in",
        "each run's params as `method.deviation.*`.",
        "",
        *PRESETS,
        *RELEASE_RANDOMNESS,
    ]
    seen: set[str] = set()
    for name, cls in sorted(METHODS.items()):
        out += [f"## `{name}`", "", f"{cls.description}." + (f" Source: {cls.paper}." if cls.paper else ""), ""]
        doc = inspect.getdoc(sys.modules[cls.__module__]) or ""
        if doc and cls.__module__ not in seen:  # baselines share one module docstring
            out += ["```text", doc, "```", ""]
            seen.add(cls.__module__)
        out += knob_line(cls)
        out += preset_rows(name, cls)
        out += ["| parameter | default | allowed | meaning |", "|---|---|---|---|"]
        for row in field_table(cls.Config):
            out.append(
                f"| `{row['name']}` | `{row['default']}` | {row['allowed'].replace('|', '/')} | "
                f"{row['doc'].replace('|', '/')} |"
            )
        out.append("")
    return "\n".join(out)


def knob_line(cls: type[Method]) -> list[str]:
    return [f"Privacy knob: {knob_text(cls)}.", ""]


def preset_rows(name: str, cls: type[Method]) -> list[str]:
    """The 'default vs paper' table of one method (nothing for a method without paper values)."""
    if not cls.paper_values:
        return []
    defaults = method_config(name, {})
    task = PAPER_TASKS.get(name)
    where = f" Measured on `{task.dataset}` ({task.source}): see [defaults.md](defaults.md)." if task else ""
    out = [f"Defaults vs `preset: paper`.{where}", "", "| field | default | paper | why the default differs |"]
    out.append("|---|---|---|---|")
    for key, default, paper, why in cls.preset_differences(defaults):
        out.append(f"| `{key}` | `{default}` | {paper} | {why} |")
    return [*out, ""]


DOC = Path(__file__).resolve().parents[1] / "docs" / "methods.md"


def main(argv: list[str] | None = None) -> int:
    """Write docs/methods.md; with --check, only say whether it is current (exit 1 if not)."""
    args = parser(__doc__).parse_args(argv)
    return write_or_check({DOC: render_markdown()}, check=args.check, command="python tools/methods_doc.py")


if __name__ == "__main__":
    sys.exit(main())
