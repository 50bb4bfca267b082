"""Render docs/methods.md from the registry, so the documentation always matches the code.

python -m veil.methods.docs > docs/methods.md"""

from __future__ import annotations

import inspect
import sys

from veil.config import field_table
from veil.methods import METHODS


def render_markdown() -> str:
    out = [
        "# Methods",
        "",
        "Generated from the code by `python -m veil.methods.docs > docs/methods.md` (a test checks it is current).",
        "`veil methods NAME` prints the same parameter table. Options that depart from the paper are recorded in",
        "each run's params as `method.deviation.*`.",
        "",
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
