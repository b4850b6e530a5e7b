"""imports — a file that imports a secret's module (directly, or within `propagate.imports` hops)
carries that secret.

The import graph is a networkx DiGraph over repository files: an edge u → v means "u imports v",
with the first import's line and its text. Cycles are collapsed with `nx.condensation` before
hops are counted, so every file of an import cycle is as far from the secret as the cycle's
closest member (files of one cycle import each other, whatever the order). Hops are counted on
the condensed DAG: 1 = direct importers. Direction matters: importing a secret carries it; being
imported *by* a secret does not (a secret module's helper in `shared/utils` stays clean).

Extraction (imports_lang) is cached by blob SHA: `cache` maps SHA → [java package, [raw imports]],
so a re-run parses only changed files.
"""
from __future__ import annotations

import logging
from collections import deque
from dataclasses import dataclass, field
from typing import Iterator, MutableMapping

import networkx as nx

from repoguard.analyzers import _files
from repoguard.analyzers.imports_lang import RawImport, extract, language_of, supported
from repoguard.analyzers.resolve import Resolver
from repoguard.incidence import Evidence
from repoguard.progress import progress

log = logging.getLogger(__name__)
NAME = "imports"


@dataclass
class ImportGraph:
    """`graph`: u → v when file u imports file v (edge attrs `line`, `spec`). `external` counts
    imports that resolved to no file of the repo (standard library, third-party)."""

    graph: nx.DiGraph
    external: int = 0
    resolved: int = 0
    per_language: dict[str, int] = field(default_factory=dict)

    def importers(self, path: str) -> list[str]:
        """Files that import `path` directly (grimp: find_modules_that_directly_import)."""
        return sorted(self.graph.predecessors(path)) if path in self.graph else []

    def imported_by(self, path: str) -> list[str]:
        """Files `path` imports directly (grimp: find_modules_directly_imported_by)."""
        return sorted(self.graph.successors(path)) if path in self.graph else []

    def shortest_chain(self, importer: str, imported: str) -> list[str] | None:
        """Files from `importer` to `imported` along imports, or None (grimp: find_shortest_chain)."""
        try:
            return nx.shortest_path(self.graph, importer, imported)
        except (nx.NodeNotFound, nx.NetworkXNoPath):
            return None


def _spec(language: str, raw: RawImport) -> str:
    """The import as a reader would recognise it (not byte-exact source)."""
    if language == "python":
        dots = "." * raw.level
        if raw.kind == "from":
            return f"from {dots}{raw.target} import {', '.join(raw.names)}"
        if raw.kind == "dynamic":
            return f'importlib.import_module("{dots}{raw.target}")'
        return f"import {raw.target}"
    if language == "rust":
        return f"mod {raw.target}" if raw.kind == "mod" else f"use {raw.target}"
    if language == "java":
        return f"import {'static ' if raw.kind == 'static' else ''}{raw.target}{'.*' if raw.kind == 'wildcard' else ''}"
    if language in ("c", "cpp"):
        return f'#include "{raw.target}"' if raw.kind == "local" else f"#include <{raw.target}>"
    if language in ("javascript", "typescript", "tsx") and raw.kind == "require":
        return f'require("{raw.target}")'
    if raw.kind == "dynamic":
        return f'import("{raw.target}")'
    return f'"{raw.target}"'


def extract_imports(repo, files: dict[str, str], *, cache: MutableMapping | None = None
                    ) -> dict[str, tuple[str, list[RawImport]]]:
    """path → (java package, imports) for every file of a supported language. `cache` (blob SHA →
    [package, [[line, kind, target, level, names]]]) is read and updated."""
    wanted = {p: s for p, s in files.items() if supported(language_of(p))}
    out: dict[str, tuple[str, list[RawImport]]] = {}
    todo: dict[str, str] = {}
    for p, sha in wanted.items():
        hit = cache.get(sha) if (cache is not None and sha) else None
        if hit is not None:
            out[p] = (hit[0], [RawImport(l, k, t, lv, tuple(n)) for l, k, t, lv, n in hit[1]])
        else:
            todo[p] = sha
    with progress("imports", total=len(todo)) as advance:
        for path, data in _files.read_sources(repo, todo):
            ex = extract(language_of(path), data)
            out[path] = (ex.package, ex.imports)
            if cache is not None and todo.get(path):
                cache[todo[path]] = [ex.package, [list(r[:4]) + [list(r.names)] for r in ex.imports]]
            advance()
    return out


def build_graph(repo, files: dict[str, str], *, cache: MutableMapping | None = None) -> ImportGraph:
    """The import graph of `files` (path → blob SHA), targets resolved among all tracked files."""
    extracted = extract_imports(repo, files, cache=cache)
    java = {p: pkg for p, (pkg, _) in extracted.items() if language_of(p) == "java"}
    universe = set(_files.tracked_paths(repo)) | set(files)
    resolver = Resolver(universe, lambda p: _files.read_text(repo, p), java_packages=java)
    g = nx.DiGraph()
    g.add_nodes_from(files)
    ig = ImportGraph(g)
    for path in sorted(extracted):
        lang = language_of(path)
        for raw in extracted[path][1]:
            targets = resolver.resolve(path, lang, raw)
            if not targets:
                ig.external += 1
                continue
            ig.resolved += 1
            ig.per_language[lang] = ig.per_language.get(lang, 0) + 1
            for t in targets:
                if t != path and not g.has_edge(path, t):
                    g.add_edge(path, t, line=raw.line, spec=_spec(lang, raw))
    return ig


def carriers(ig: ImportGraph, seeds: list[str], depth: int) -> dict[str, tuple[int, list[str]]]:
    """Files within `depth` import hops of any seed (seeds excluded): path → (hops on the
    condensed graph, chain of files from the path to a seed). Raises nothing; unknown seeds are
    ignored."""
    g = ig.graph
    seeds = [s for s in seeds if s in g]
    if not seeds or depth <= 0:
        return {}
    cond = nx.condensation(g)
    comp = cond.graph["mapping"]
    dist = {comp[s]: 0 for s in seeds}
    queue = deque(dist)
    while queue:
        c = queue.popleft()
        if dist[c] >= depth:
            continue
        for pred in cond.predecessors(c):
            if pred not in dist:
                dist[pred] = dist[c] + 1
                queue.append(pred)
    # Shortest file-level chains to a seed: one multi-source BFS on the reversed graph.
    parent: dict[str, str | None] = {s: None for s in seeds}
    queue = deque(seeds)
    while queue:
        v = queue.popleft()
        for u in g.predecessors(v):
            if u not in parent:
                parent[u] = v
                queue.append(u)
    seed_set = set(seeds)
    out: dict[str, tuple[int, list[str]]] = {}
    for c, d in dist.items():
        for path in cond.nodes[c]["members"]:
            if path in seed_set or path not in parent:
                continue
            chain = [path]
            while parent[chain[-1]] is not None:
                chain.append(parent[chain[-1]])
            out[path] = (d, chain)
    return out


def reason(ig: ImportGraph, hops: int, chain: list[str]) -> str:
    """"imports trading/alpha/signals.py at line 9 (from ..alpha import signals)", plus how the
    chain goes on to the secret's file for transitive ties."""
    first = ig.graph.edges[chain[0], chain[1]]
    text = f"imports {chain[1]} at line {first['line']} ({first['spec']})"
    if len(chain) > 2:
        text += f", which imports {' → '.join(chain[2:])} ({len(chain) - 1} hops)"
    if hops < len(chain) - 1:
        text += f" — an import cycle shortens this to {hops} hop{'s' if hops != 1 else ''}"
    return text


def analyze(repo, corpus, config, *, cache: MutableMapping | None = None,
            graph: ImportGraph | None = None) -> Iterator[Evidence]:
    """Evidence for every corpus file importing a secret's files within `propagate.imports` hops."""
    files = _files.corpus_files(corpus)
    secrets = [s for s in config.secrets if s.propagate.imports > 0 and s.paths]
    if not secrets:
        return
    ig = graph or build_graph(repo, files, cache=cache)
    universe = set(ig.graph.nodes)
    for secret in secrets:
        seeds = _files.secret_files(secret, universe)
        for path, (hops, chain) in sorted(carriers(ig, seeds, secret.propagate.imports).items()):
            if path not in files:
                continue
            yield Evidence(path, secret.id, NAME, reason(ig, hops, chain), tuple(chain))
