"""The import graph of Veil's source, read from every import statement (function-local ones included) but those
under `if TYPE_CHECKING:` (annotations only: nothing is imported when the module runs): the one parser the layout
tests share (tests/test_layering.py, tests/datasets/test_registry_layout.py)."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"


def modules() -> dict[str, Path]:
    out = {}
    for f in (SRC / "veil").rglob("*.py"):
        name = ".".join(f.relative_to(SRC).with_suffix("").parts)
        out[name.removesuffix(".__init__")] = f
    return out


def type_only(tree: ast.AST) -> set[ast.AST]:
    """The import statements of `tree` under `if TYPE_CHECKING:`."""
    out: set[ast.AST] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            out.update(n for body in node.body for n in ast.walk(body) if isinstance(n, (ast.Import, ast.ImportFrom)))
    return out


def graph() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """veil module -> veil modules it imports, and -> top-level third-party names it imports."""
    mods = modules()

    def resolve(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    edges: dict[str, set[str]] = {m: set() for m in mods}
    third: dict[str, set[str]] = {m: set() for m in mods}
    for m, f in mods.items():
        package = m.split(".") if f.name == "__init__.py" else m.split(".")[:-1]
        tree = ast.parse(f.read_text())
        skip = type_only(tree)
        for node in ast.walk(tree):
            if node in skip:
                continue
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = ".".join(package[: len(package) - node.level + 1]) if node.level else ""
                mod = ".".join(p for p in (base, node.module or "") if p)
                subs = [f"{mod}.{a.name}" for a in node.names if f"{mod}.{a.name}" in mods]
                targets = subs + ([mod] if len(subs) < len(node.names) else [])
            else:
                continue
            for t in targets:
                third[m].add(t.split(".")[0])
                r = resolve(t) if t.startswith("veil") else None
                if r and r != m and not (r == "veil" and t == "veil"):
                    edges[m].add(r)
    return edges, third


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in edges:
        if v not in index:
            visit(v)
    return out


def package_graph(edges: dict[str, set[str]]) -> dict[str, set[str]]:
    """The same imports between packages: a module counts as its package (its `__init__` too), and a module
    directly under `veil` (config, run, cli, ...) as itself. A cycle here (a subpackage importing its parent's
    modules while they import it) is a layering knot even when no two modules import each other."""
    mods = modules()

    def node(m: str) -> str:
        if mods[m].name == "__init__.py":
            return m
        parent = m.rpartition(".")[0]
        return m if parent == "veil" else parent

    out: dict[str, set[str]] = {node(m): set() for m in edges}
    for m, targets in edges.items():
        out[node(m)] |= {node(t) for t in targets if node(t) != node(m)}
    return out
