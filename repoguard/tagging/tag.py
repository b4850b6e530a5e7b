"""The sensitivity manifest `.repoguard/sensitive.toml` and the pre-commit hook that keeps it.

The manifest is committed: it lists every file tied to a secret and which analyzers tied it,
so a reviewer sees in the diff when a change makes a file sensitive (a new import of the alpha
package, a codename in a comment). Format (TOML, sorted, one table per file):

    [files."trading/execution/router.py"]
    "alpha-strategy" = ["imports", "ownership"]

`repoguard tag` (hook id `repoguard-tag`) recomputes the entries of the staged files only,
incrementally: declared paths, imports (the whole index's import graph, parsed files cached per
blob SHA in OUT/cache), CODEOWNERS, codenames in the staged contents. History-based ties
(co-change) cannot change with a commit's contents; an existing entry keeps them. Credentials are
scanned in the staged contents. Entries of
files no longer in the index are dropped. When the manifest changes, the hook writes it and
exits 1 so the developer reviews and stages it (pre-commit's convention for hooks that modify
files); the next run finds nothing to change and exits 0. `repoguard tag --all` rebuilds the
manifest from a full `analyze` (all analyzers, history included).
"""
from __future__ import annotations

import json
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping

from repoguard.analyzers import _files
from repoguard.core.artefacts import atomic_write_text
from repoguard.core.errors import InputError
from repoguard.analyzers.incidence import Evidence
from repoguard.source.corpus import MANIFEST, PRIVATE_PATHS, own_path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

HISTORY_ANALYZERS = frozenset({"cochange"})
_HEADER = ("# repoguard sensitivity manifest: files that carry a secret, and the analyzers that tied them.\n"
           "# Maintained by the `repoguard-tag` pre-commit hook; review changes and commit this file.\n"
           "# Rebuild it from the whole history with `repoguard tag --all`.\n")

Entries = dict[str, dict[str, list[str]]]


@dataclass
class TagResult:
    """`changed`: the manifest was rewritten; `tagged`: the examined files' new entries (changed
    or not); `updated`: the entries that are new or differ from the old manifest's (what changed
    sensitivity, with `removed`); `removed`: paths whose entry was dropped."""

    changed: bool
    manifest: Path
    examined: list[str]
    tagged: Entries = field(default_factory=dict)
    removed: list[str] = field(default_factory=list)
    seconds: float = 0.0
    updated: Entries = field(default_factory=dict)

    def to_json(self) -> dict:
        """The result as a JSON object for `tag --json` (`seconds` rounded to ms)."""
        return {"changed": self.changed, "manifest": str(self.manifest), "examined": self.examined,
                "tagged": self.tagged, "updated": self.updated, "removed": self.removed, "seconds": round(self.seconds, 3)}


# -- manifest file --------------------------------------------------------------------------------
def read_manifest(path: Path) -> Entries:
    """Entries of the manifest at `path` ({} when absent). Raises InputError when malformed."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: invalid manifest ({exc}); delete it and run `repoguard tag --all`") from None
    files = data.get("files", {})
    ok = isinstance(files, dict) and all(
        isinstance(v, dict) and all(isinstance(a, list) and all(isinstance(x, str) for x in a) for a in v.values())
        for v in files.values())
    if not ok:
        raise InputError(f"{path}: invalid manifest (expected [files.\"PATH\"] tables of secret = [analyzers])")
    return {p: {s: sorted(set(a)) for s, a in v.items()} for p, v in files.items()}


def render_manifest(entries: Entries) -> str:
    """Deterministic TOML text of `entries` (sorted paths, secrets and analyzers)."""
    out = [_HEADER]
    for path in sorted(entries):
        if not entries[path]:
            continue
        out.append(f"\n[files.{json.dumps(path, ensure_ascii=False)}]\n")
        for sid in sorted(entries[path]):
            analyzers = ", ".join(json.dumps(a) for a in sorted(set(entries[path][sid])))
            out.append(f"{json.dumps(sid, ensure_ascii=False)} = [{analyzers}]\n")
    return "".join(out)


def entries_from_evidence(evidence: Iterable[Evidence]) -> Entries:
    """Manifest entries from evidence rows: {path: {secret id: sorted analyzer names}}."""
    acc: dict[str, dict[str, set]] = defaultdict(lambda: defaultdict(set))
    for e in evidence:
        acc[e.path][e.secret_id].add(e.analyzer)
    return {p: {s: sorted(a) for s, a in v.items()} for p, v in acc.items()}


# -- incremental tagging ----------------------------------------------------------------------------
def staged_evidence(repo, config, out: Path, files: Mapping[str, str]) -> list[Evidence]:
    """Evidence for `files` (path → staged blob SHA) from the analyzers that depend only on the
    index: declared, imports, CODEOWNERS ownership, codenames in file contents, credentials."""
    from repoguard.analyzers.analyze import load_caches, save_cache
    from repoguard.analyzers import codenames, declared, imports, ownership
    from repoguard.analyzers.imports_lang import language_of, supported

    enabled = set(config.analyzers.enabled)
    fs = _files.FileSet(files)
    evidence: list[Evidence] = []
    if "declared" in enabled:
        evidence += declared.analyze(repo, fs, config)
    secrets = [s for s in config.secrets if s.propagate.imports > 0 and s.paths]
    caches = load_caches(out, [n for n, used in (("imports", bool(secrets)), ("codenames", True))
                               if n in enabled and used])
    if "imports" in caches:
        index = {f.path: f.blob_sha for f in _files.tracked_files(repo)
                 if not f.is_symlink and supported(language_of(f.path))}
        ig = imports.build_graph(repo, index, cache=caches["imports"])
        nodes = set(ig.graph.nodes)
        for s in secrets:
            for path, (hops, chain) in sorted(imports.carriers(ig, _files.secret_files(s, nodes),
                                                               s.propagate.imports).items()):
                if path in files:
                    evidence.append(Evidence(path, s.id, imports.NAME, imports.reason(ig, hops, chain), tuple(chain)))
    if "ownership" in enabled:
        evidence += ownership._by_codeowners(repo, sorted(files), config)
    if "codenames" in enabled:
        evidence += codenames.analyze(repo, fs, config, cache=caches["codenames"], commit_messages=False)
    if "credentials" in enabled:
        from repoguard.analyzers import credentials

        evidence += credentials.scan_blobs(repo, files, config)
    if any(c.added for c in caches.values()):
        if not out.exists():
            from repoguard.analyzers.analyze import GITIGNORE

            out.mkdir(parents=True)
            atomic_write_text(out / ".gitignore", GITIGNORE)
        save_cache(out, caches, prune=False)
    return evidence


def index_paths(paths: Iterable[str], tracked: set[str]) -> set[str]:
    """The tracked files `paths` (repo-relative) name: a file itself, or every tracked file below
    a directory ("." is the whole repository). Raises InputError naming the first path that is
    neither a tracked file nor a directory holding one (before, `repoguard tag .` examined
    nothing and said nothing)."""
    out: set[str] = set()
    for raw in paths:
        p = raw.strip("/")
        if p in ("", "."):
            return set(tracked)
        if p in tracked:
            out.add(p)
            continue
        below = {t for t in tracked if t.startswith(p + "/")}
        if not below:
            raise InputError(f"{raw}: not a file or directory in the git index (repoguard tag examines "
                             "tracked files: `git add` it first)")
        out |= below
    return out


def tag(repo, config, out: Path, *, paths: Iterable[str] | None = None, all_files: bool = False) -> TagResult:
    """Update the manifest for the staged files (or for `paths`, files in the index as pre-commit
    passes them, or directories: `index_paths`; `all_files`: everything, from a full analyze).
    Writes it only when it changes. Raises InputError outside a git repo and for a path naming
    nothing in the index."""
    if not getattr(repo, "is_git", False):
        raise InputError(f"{repo.root}: `repoguard tag` needs a git repository (it reads the index)")
    t0 = time.perf_counter()
    manifest = repo.root / MANIFEST
    old = read_manifest(manifest)
    tracked = {f.path for f in _files.tracked_files(repo)}
    if all_files:
        from repoguard.analyzers.analyze import run_analyze

        result = run_analyze(repo, config, out, write=False)
        new = entries_from_evidence(result.incidence.evidence)
        examined = sorted(tracked)
    else:
        if paths is not None:  # pre-commit passes the files (all of them under --all-files)
            wanted = index_paths(paths, tracked)
            staged = {f.path: f.blob_sha for f in _files.tracked_files(repo)
                      if f.path in wanted and not f.is_symlink}
        else:
            staged = {f.path: f.blob_sha for f in repo.staged_files() if not f.is_symlink}
        # repoguard's own files (the config names every codename) are never tied, as in `analyze`
        staged = {p: s for p, s in staged.items() if not _private(p)}
        examined = sorted(staged)
        fresh = entries_from_evidence(staged_evidence(repo, config, out, staged)) if staged else {}
        new = {p: v for p, v in old.items() if p in tracked and not _private(p)}
        for p in examined:
            kept = {s: [a for a in an if a in HISTORY_ANALYZERS] for s, an in old.get(p, {}).items()}
            merged: dict[str, set] = defaultdict(set)
            for src in (kept, fresh.get(p, {})):
                for s, an in src.items():
                    merged[s].update(an)
            entry = {s: sorted(a) for s, a in merged.items() if a}
            if entry:
                new[p] = entry
            else:
                new.pop(p, None)
    new = {p: v for p, v in new.items() if v}
    changed = render_manifest(new) != render_manifest(old) or (bool(new) and not manifest.exists())
    if changed:
        atomic_write_text(manifest, render_manifest(new))
        ignore = manifest.parent / ".gitignore"
        if not ignore.exists():
            from repoguard.analyzers.analyze import GITIGNORE
            atomic_write_text(ignore, GITIGNORE)
    updated = {p: v for p, v in new.items() if _norm(v) != _norm(old.get(p, {}))}
    return TagResult(changed, manifest, examined, {p: new[p] for p in examined if p in new},
                     sorted(set(old) - set(new)), time.perf_counter() - t0, updated)


def _private(path: str) -> bool:
    return bool(own_path(path)) or any(path == p or (p.endswith("/") and path.startswith(p)) for p in PRIVATE_PATHS)


def _norm(entry: Mapping[str, Iterable[str]]) -> dict[str, list[str]]:
    return {s: sorted(set(a)) for s, a in entry.items() if a}
