"""The package layout (docs/design.md "Packages and layering"): one package per stage, imports
running one way, no import cycle between modules, nothing flat in `repoguard/` but the entry points.

The import graph is read with the standard library's `ast` from every `import`/`from … import`
in `repoguard/`, including imports inside functions (a lazy import is still a dependency).
`from pkg import name` counts as an import of `pkg.name` when that is a module, else of `pkg`.
"""
from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parent.parent / "repoguard"

# Lower rank = lower layer. A module may import its own layer or a lower one, never a higher one.
# core ← source ← credentials ← analyzers ← tagging, accounting ← planning ← training, synthesis
# ← audit, evaluation ← report ← pipeline ← commands ← cli (docs/design.md's order, with
# tagging placed after the analyzers it reads and before the pipeline that runs it).
LAYERS = {
    "core": 0, "source": 1, "credentials": 2, "analyzers": 3, "tagging": 4, "accounting": 4,
    "planning": 5, "training": 6, "synthesis": 6, "audit": 7, "evaluation": 7, "report": 8,
    "pipeline": 9, "commands": 10, "cli": 11, "__main__": 11,
}
TOP_LEVEL_MODULES = {"__init__.py", "__main__.py", "cli.py"}


def _modules() -> dict[str, Path]:
    mods = {}
    for p in ROOT.rglob("*.py"):
        parts = p.relative_to(ROOT.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        mods[name] = p
    return mods


def import_graph() -> nx.DiGraph:
    """Module → module edges inside `repoguard` (nodes are dotted module names)."""
    mods = _modules()
    g = nx.DiGraph()
    g.add_nodes_from(mods)
    for name, path in mods.items():
        is_pkg = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = name.split(".") if is_pkg else name.split(".")[:-1]
                    base = base[: len(base) - node.level + 1]
                    mod = ".".join(base + ([node.module] if node.module else []))
                else:
                    mod = node.module or ""
                targets = [f"{mod}.{a.name}" if f"{mod}.{a.name}" in mods else mod for a in node.names]
            for t in targets:
                parts = t.split(".")
                while parts and ".".join(parts) not in mods:
                    parts.pop()
                target = ".".join(parts)
                if target and target != name:
                    g.add_edge(name, target)
    return g


def layer(module: str) -> int | None:
    """The layer of a dotted module name; None for the root package (`repoguard.__version__`)."""
    parts = module.split(".")
    return None if len(parts) == 1 else LAYERS[parts[1]]


def test_graph_reads_imports():
    g = import_graph()
    # a known lazy import and a known top-level import: the walker sees both kinds
    assert g.has_edge("repoguard.cli", "repoguard.commands")
    assert g.has_edge("repoguard.planning.plan", "repoguard.accounting.calibrate")
    assert g.number_of_edges() > 300


def test_no_import_cycle():
    cycles = list(nx.simple_cycles(import_graph()))
    assert not cycles, "import cycles: " + "; ".join(" → ".join(c + c[:1]) for c in cycles[:10])


def test_imports_run_one_way():
    bad = []
    for a, b in import_graph().edges:
        la, lb = layer(a), layer(b)
        if la is not None and lb is not None and lb > la:
            bad.append(f"{a} → {b}")
    assert not bad, "imports against the layer order:\n" + "\n".join(sorted(bad))


def test_every_package_is_a_known_layer():
    for p in ROOT.iterdir():
        if p.is_dir() and p.name != "__pycache__":
            assert (p / "__init__.py").exists(), f"repoguard/{p.name}/ has no __init__.py (packages.find skips it)"
            assert p.name in LAYERS, f"package repoguard/{p.name}/ has no place in LAYERS"


def test_nothing_flat_in_repoguard():
    flat = {p.name for p in ROOT.glob("*.py")}
    assert flat <= TOP_LEVEL_MODULES, f"flat modules: {sorted(flat - TOP_LEVEL_MODULES)}"


@pytest.mark.parametrize("pkg", sorted(p.name for p in ROOT.iterdir() if (p / "__init__.py").exists()))
def test_package_docstring_says_what_it_takes_and_hands_on(pkg):
    init = ROOT / pkg / "__init__.py"
    doc = ast.get_docstring(ast.parse(init.read_text()))
    assert doc and len(doc.split()) >= 12, f"repoguard/{pkg}/__init__.py needs a docstring: takes, writes, hands to"
