"""imports — a file that imports a secret's module (directly, or within `propagate.imports` hops)
carries that secret.

The import graph is a networkx DiGraph over repository files: an edge u → v means "u imports v",
with the first import's line and its text. Direction matters: importing a secret carries it; being
imported *by* a secret does not (a secret module's helper in `shared/utils` stays clean).

A Rust `mod x;` declaration is an edge too (attr `contains=True`), but it states where module
`x` lives in the module tree, not that the parent uses what `x` contains: it is kept for readers
(`imported_by`, chains) and never carries a secret. Counting it would put every module of a crate
one hop from its root and, with `use crate::…` going back up, fold whole crates into one cycle.

Cycles are collapsed before hops are counted, but only small ones (at most `MAX_CYCLE` files,
`nx.condensation` restricted to them): the files of a small cycle import each other (a module and
its helper, a package `__init__` re-exporting a submodule), so each is as far from the secret as
the cycle's closest member. A large strongly connected component is not a cycle anyone wrote: it
is many one-way imports that happen to close up through re-exports (in astral-sh/ruff, 471 files
of one crate even without `mod` edges, 970 with them), and collapsing it would put its every file
one hop from any secret one member imports (ruff's parser crate: 746 files at depth 1 instead of
84). Its files keep their own hop counts. Hops: 1 = direct importers.

An importer is tied per chunk (import_ties): where it imports and where it uses the names the
import binds (uses.py), not wholly, as codename and credential ties are; imports that never run
(`if TYPE_CHECKING:`, TypeScript `import type`) are not extracted at all, so they are no edge.

Extraction (imports_lang) is cached by blob SHA: `cache` maps EXTRACT_KEY + SHA → [java package, [raw imports]],
so a re-run parses only changed files. Resolution is cached too, under the single key
`RESOLVED_KEY`: {"digest": …, "files": {"path\0SHA": [[targets] per import]}}. A resolution
depends on the importer's path and imports and on the resolver's inputs (every path, the project
files it reads, the Java packages), which the digest covers; when they change, the whole entry is
replaced, so it never grows past one entry per file. Resolving all of astral-sh/ruff's 40,000
imports takes about a second, which the pre-commit hook would otherwise pay on every commit.
"""
from __future__ import annotations

import hashlib
import json
import logging
import posixpath
from collections import deque
from dataclasses import dataclass, field
from typing import Iterator, MutableMapping

import networkx as nx

from repoguard.analyzers import _files
from repoguard.analyzers.imports_lang import RawImport, extract, language_of, supported
from repoguard.analyzers.resolve import PROJECT_FILES, Resolver
from repoguard.analyzers.incidence import Evidence
from repoguard.analyzers.protocol import EvidenceAnalyzer
from repoguard.core.progress import progress

log = logging.getLogger(__name__)
NAME = "imports"
MAX_CYCLE = 8  # strongly connected components up to this many files collapse (module doc)
RESOLVED_KEY = "resolved:v2"  # bump when resolution rules change: cached targets go stale
# Prefix of extraction cache keys; bumped when what extraction reports changes (2: imports under
# `if TYPE_CHECKING:` and TypeScript `import type` are no longer reported).
EXTRACT_KEY = "x2:"
USES_KEY = "u1:"   # + blob SHA → uses.to_json of the file: where it uses what it imports


@dataclass
class ImportGraph:
    """`graph`: u → v when file u imports file v (edge attrs `line`, `spec`). `external` counts
    imports that resolved to no file of the repo (standard library, third-party)."""

    graph: nx.DiGraph
    external: int = 0
    resolved: int = 0
    per_language: dict[str, int] = field(default_factory=dict)
    # path → [(import as written, the files it resolved to)], in the file's order: which of a
    # file's imports carry a secret decides which of its chunks do (analyze)
    imports: dict[str, list[tuple[RawImport, list[str]]]] = field(default_factory=dict)
    _flow: tuple | None = field(default=None, repr=False, compare=False)

    def flow(self) -> tuple[nx.DiGraph, nx.DiGraph, dict[str, int]]:
        """(carrying edges, their small cycles collapsed, path → collapsed node), computed once:
        every secret's `carriers` walks the same graphs (the pre-commit hook walks them per
        secret). Build the graph completely before the first call."""
        if self._flow is None:
            uses = _uses(self.graph)
            self._flow = (uses, *_collapse(uses))
        return self._flow

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
        hit = cache.get(EXTRACT_KEY + sha) if (cache is not None and sha) else None
        if hit is not None:
            out[p] = (hit[0], [RawImport(l, k, t, lv, tuple(n)) for l, k, t, lv, n in hit[1]])
        else:
            todo[p] = sha
    with progress("imports", total=len(todo)) as advance:
        for path, data in _files.read_sources(repo, todo):
            ex = extract(language_of(path), data)
            out[path] = (ex.package, ex.imports)
            if cache is not None and todo.get(path):
                cache[EXTRACT_KEY + todo[path]] = [ex.package, [list(r[:4]) + [list(r.names)] for r in ex.imports]]
            advance()
    return out


def build_graph(repo, files: dict[str, str], *, cache: MutableMapping | None = None) -> ImportGraph:
    """The import graph of `files` (path → blob SHA), targets resolved among all tracked files."""
    extracted = extract_imports(repo, files, cache=cache)
    java = {p: pkg for p, (pkg, _) in extracted.items() if language_of(p) == "java"}
    universe = set(_files.tracked_paths(repo)) | set(files)
    read = lambda p: _files.read_text(repo, p)  # noqa: E731
    digest = _resolver_digest(universe, read, java)
    old = cache.get(RESOLVED_KEY) if cache is not None else None
    known = old["files"] if isinstance(old, dict) and old.get("digest") == digest else {}
    resolved: dict[str, list] = {}
    resolver = None  # built only when some file's resolutions are not cached
    g = nx.DiGraph()
    g.add_nodes_from(files)
    ig = ImportGraph(g)
    for path in sorted(extracted):
        lang = language_of(path)
        raws = extracted[path][1]
        key = f"{path}\0{files.get(path, '')}"
        per_import = known.get(key) if files.get(path) else None
        if per_import is None or len(per_import) != len(raws):
            if resolver is None:
                resolver = Resolver(universe, read, java_packages=java)
            per_import = [resolver.resolve(path, lang, raw) for raw in raws]
        if files.get(path):
            resolved[key] = per_import
        ig.imports[path] = [(raw, list(t)) for raw, t in zip(raws, per_import) if t]
        for raw, targets in zip(raws, per_import):
            if not targets:
                ig.external += 1
                continue
            ig.resolved += 1
            ig.per_language[lang] = ig.per_language.get(lang, 0) + 1
            contains = lang == "rust" and raw.kind == "mod"
            for t in targets:
                if t == path:
                    continue
                if not g.has_edge(path, t):
                    g.add_edge(path, t, line=raw.line, spec=_spec(lang, raw), contains=contains)
                elif g.edges[path, t]["contains"] and not contains:
                    # `mod x;` then `use x::…`: the use is what carries; cite it.
                    g.add_edge(path, t, line=raw.line, spec=_spec(lang, raw), contains=False)
    if cache is not None and (resolver is not None or len(resolved) != len(known)):
        cache[RESOLVED_KEY] = {"digest": digest, "files": resolved}
    return ig


def _resolver_digest(universe: set[str], read, java: dict[str, str]) -> str:
    """Digest of everything a Resolver's answers depend on besides the importer and its imports:
    the paths, the project files it reads, the Java packages (module doc)."""
    h = hashlib.sha256()
    for p in sorted(universe):
        h.update(p.encode() + b"\0")
        if posixpath.basename(p) in PROJECT_FILES:
            h.update((read(p) or "").encode() + b"\0")
    h.update(json.dumps(sorted(java.items())).encode())
    return h.hexdigest()[:16]


def _uses(g: nx.DiGraph) -> nx.DiGraph:
    """The edges that carry secrets: every import but Rust `mod x;` declarations (module doc)."""
    out = nx.DiGraph()
    out.add_nodes_from(g)
    out.add_edges_from((u, v) for u, v, c in g.edges(data="contains", default=False) if not c)
    return out


def _collapse(g: nx.DiGraph) -> tuple[nx.DiGraph, dict[str, int]]:
    """`g` with each strongly connected component of at most MAX_CYCLE files merged into one node
    (larger components stay file by file): (the quotient graph, which keeps the cycles of large components; path → node). Node attr
    `members` lists the files of each node."""
    comp: dict[str, int] = {}
    members: list[list[str]] = []
    for scc in nx.strongly_connected_components(g):
        if len(scc) <= MAX_CYCLE:
            comp.update((p, len(members)) for p in scc)
            members.append(sorted(scc))
        else:
            for p in sorted(scc):
                comp[p] = len(members)
                members.append([p])
    q = nx.DiGraph()
    q.add_nodes_from((i, {"members": m}) for i, m in enumerate(members))
    q.add_edges_from((comp[u], comp[v]) for u, v in g.edges() if comp[u] != comp[v])
    return q, comp


def carriers(ig: ImportGraph, seeds: list[str], depth: int) -> dict[str, tuple[int, list[str]]]:
    """Files within `depth` import hops of any seed (seeds excluded): path → (hops, small cycles
    collapsed; chain of files from the path to a seed). Rust `mod x;` edges are not followed.
    Raises nothing; unknown seeds are ignored."""
    seeds = [s for s in seeds if s in ig.graph]
    if not seeds or depth <= 0:
        return {}
    g, cond, comp = ig.flow()
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
    """Evidence for every corpus file importing a secret's files within `propagate.imports` hops,
    per chunk: the chunk holding each carrying import and those using the names it binds
    (import_ties), the whole file where those cannot be told."""
    from repoguard.analyzers import import_ties
    from repoguard.analyzers.uses import from_json, import_uses, to_json

    files = _files.corpus_files(corpus)
    secrets = [s for s in config.secrets if s.propagate.imports > 0 and s.paths]
    if not secrets:
        return
    ig = graph or build_graph(repo, files, cache=cache)
    universe = set(ig.graph.nodes)
    _, _, comp = ig.flow()
    todo: list[tuple[str, str, list]] = []         # (path, secret id, carrying imports)
    for secret in secrets:
        depth = secret.propagate.imports
        seeds = _files.secret_files(secret, universe)
        found = carriers(ig, seeds, depth)
        hop = {s: 0 for s in seeds if s in universe}
        chain_of = {s: [s] for s in hop}
        for p, (h, c) in found.items():
            hop[p], chain_of[p] = h, c
        for path, (hops, chain) in sorted(found.items()):
            if path not in files:
                continue
            lang = language_of(path)
            carrying, seen = [], set()
            for raw, targets in ig.imports.get(path, ()):
                if lang == "rust" and raw.kind == "mod":
                    continue                       # a module declaration carries nothing (module doc)
                for t in targets:
                    if t != path and t in hop and (hop[t] + 1 <= depth or comp.get(t) == comp.get(path)) \
                            and raw not in seen:
                        seen.add(raw)
                        carrying.append((t, raw, _spec(lang, raw), [path] + chain_of[t], hops))
            if not carrying:                       # reached through a cycle only: the old whole-file row
                carrying = [(chain[1], None, "", chain, hops)]
            todo.append((path, secret.id, carrying))
    if not todo:
        return
    need = {p: files[p] for p, _, _ in todo}
    data = dict(_files.read_sources(repo, need))
    uses = {}
    for p, b in data.items():
        key = USES_KEY + need[p] if (cache is not None and need[p]) else None
        if key is not None and key in cache:
            uses[p] = from_json(cache[key])
            continue
        uses[p] = import_uses(language_of(p), b)
        if key is not None:
            cache[key] = to_json(uses[p])
    for path, sid, carrying in todo:
        if carrying[0][1] is None or path not in data:
            target, _, _, chain, hops = carrying[0]
            yield Evidence(path, sid, NAME, reason(ig, hops, chain), tuple(chain))
            continue
        yield from import_ties.chunk_rows(path, sid, carrying, uses[path], data[path],
                                          _files.own_chunks(corpus, path))


ANALYZER = EvidenceAnalyzer(NAME, analyze, cached=True)
