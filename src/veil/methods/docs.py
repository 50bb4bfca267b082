"""Render docs/methods.md from the registry, so the documentation always matches the code.

python -m veil.methods.docs > docs/methods.md"""

from __future__ import annotations

import inspect
import sys

from veil.config import field_table
from veil.methods import METHODS

RELEASE_RANDOMNESS = [
    "## Release randomness",
    "",
    "Training is reproducible from `seed` (for `d-gpp`, whose aggregator trains on uploaded noisy z, only with",
    "`release_seed`); a release is not. Every stochastic release (`gpp` and `d-gpp` with",
    "release=sample, `noisy-encoder`, `ldp-frl` and `ldp-fedavg`'s Laplace mechanism, `adjustable-ae` with",
    "noise > 0, and the sanitized batches a `d-gpp` client uploads) draws its noise from a generator seeded",
    "from OS entropy at release time, so it cannot be regenerated from the run's params, and every `encode`",
    "call (train rows, test rows) draws independent noise. Setting `release_seed` makes releases reproducible",
    "run to run (call n of a method draws from (release_seed, n); node k's uploads from (release_seed, k)):",
    "it voids the privacy guarantee, so it is recorded as `method.deviation.release_seed`, tagged",
    "`veil.release_reproducible=true` and flagged at the top of the audit report. Use it only for tests.",
    "",
]


def render_markdown() -> str:
    out = [
        "# Methods",
        "",
        "Generated from the code by `python -m veil.methods.docs > docs/methods.md` (a test checks it is current).",
        "`veil methods NAME` prints the same parameter table. Options that depart from the paper are recorded in",
        "each run's params as `method.deviation.*`.",
        "",
        *RELEASE_RANDOMNESS,
    ]
    seen: set[str] = set()
    for name, cls in sorted(METHODS.items()):
        out += [f"## `{name}`", "", f"{cls.description}." + (f" Source: {cls.paper}." if cls.paper else ""), ""]
        doc = inspect.getdoc(sys.modules[cls.__module__]) or ""
        if doc and cls.__module__ not in seen:  # baselines share one module docstring
            out += ["```text", doc, "```", ""]
            seen.add(cls.__module__)
        out += ["| parameter | default | allowed | meaning |", "|---|---|---|---|"]
        for row in field_table(cls.Config):
            out.append(
                f"| `{row['name']}` | `{row['default']}` | {row['allowed'].replace('|', '/')} | "
                f"{row['doc'].replace('|', '/')} |"
            )
        out.append("")
    return "\n".join(out)


if __name__ == "__main__":
    sys.stdout.write(render_markdown())
