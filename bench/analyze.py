"""Benchmark: `repoguard analyze` per analyzer on a real repository, the pre-commit hook, and the
precision/recall of Python import resolution against an independent `ast`-based resolver.

    .venv/bin/python bench/analyze.py REPO [--config FILE] [--jobs N] [--hook-files 5] [--check-imports]

Prints, for each stage (corpus, each analyzer): wall time (cold: empty blob cache), peak Python
allocation (tracemalloc, second pass) and the process RSS high-water mark; the re-run time with
the blob cache warm; the hook (`repoguard tag`) time for a handful of staged files in a scratch
clone. Named baselines measured in the same run, with ratios: `git log -z --name-status` (the
history floor of ownership/cochange/codenames) and `ast.parse` of every Python file (the parsing
floor of import extraction).

The independent check resolves `import`/`from … import` statements found by `ast` with its own
small resolver (repository root and `src/` folders as roots, relative imports by package) and
compares file → file edges with repoguard's import graph restricted to Python:
precision = |both| / |repoguard|, recall = |both| / |ast|.
"""
from __future__ import annotations

import argparse
import ast
import json
import os
import posixpath
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from repoguard.analyzers.analyze import TrackingCache, run_analyzers  # noqa: E402
from repoguard.analyzers.registry import REGISTRY  # noqa: E402
from repoguard.analyzers import _files, history  # noqa: E402
from repoguard.analyzers import imports as imports_analyzer  # noqa: E402
from repoguard.core.config import load_config  # noqa: E402
from repoguard.source.corpus import build_corpus  # noqa: E402
from repoguard.source.gitrepo import GitRepo  # noqa: E402


def _children_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def timed(fn, *a, **kw):
    t = time.perf_counter()
    out = fn(*a, **kw)
    return out, time.perf_counter() - t


# -- baselines ------------------------------------------------------------------------------------
def git_log_floor(root: Path) -> float:
    t = time.perf_counter()
    cmd = ["git", "log", "-z", "--name-status", "--no-merges", "-M", "--format=%H%x1f%ae%x1f%B"]
    if subprocess.run(cmd, cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode:
        t = time.perf_counter()  # blobs missing (partial clone): as repoguard does, without -M
        subprocess.run(cmd[:5] + ["--no-renames"] + cmd[6:], cwd=root, stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter() - t


def ast_floor(root: Path, py: list[str]) -> float:
    t = time.perf_counter()
    for p in py:
        try:
            ast.parse((root / p).read_bytes())
        except (SyntaxError, ValueError, OSError):
            pass
    return time.perf_counter() - t


# -- independent python resolver ------------------------------------------------------------------
def ast_edges(root: Path, py: list[str], all_paths: set[str], unparsed: set[str] | None = None
              ) -> set[tuple[str, str]]:
    """File → file edges from `ast`, resolved independently of repoguard.resolve; files this
    interpreter cannot parse (newer syntax) are added to `unparsed`."""
    roots = [""] + sorted({p.split("/src/")[0] + "/src" for p in py if "/src/" in p}
                          | {"src" for p in py if p.startswith("src/")})

    def mod_file(base: str, dotted: str) -> str | None:
        stem = "/".join(x for x in [base] + dotted.split(".") if x) if dotted else base
        for cand in ([stem + ".py", stem + ".pyi"] if dotted else []) + [(stem + "/" if stem else "") + "__init__.py"]:
            if cand in all_paths:
                return cand
        return None

    def absolute(dotted: str) -> str | None:
        for r in roots:
            f = mod_file(r, dotted)
            if f:
                return f
        return None

    edges = set()
    for p in py:
        try:
            tree = ast.parse((root / p).read_bytes())
        except (SyntaxError, ValueError, OSError):
            if unparsed is not None:
                unparsed.add(p)
            continue
        pkg = posixpath.dirname(p)
        for node in ast.walk(tree):
            targets = []
            if isinstance(node, ast.Import):
                for a in node.names:
                    parts = a.name.split(".")
                    for n in range(len(parts), 0, -1):
                        f = absolute(".".join(parts[:n]))
                        if f:
                            targets.append(f)
                            break
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = pkg
                    ok = True
                    for _ in range(node.level - 1):
                        if not base:
                            ok = False
                            break
                        base = posixpath.dirname(base)
                    if not ok:
                        continue
                    look = lambda d, b=base: mod_file(b, d)  # noqa: E731
                else:
                    look = absolute
                mod = node.module or ""
                for a in node.names:
                    sub = f"{mod}.{a.name}" if mod else a.name
                    f = look(sub) if a.name != "*" else None
                    if f is None:
                        parts = mod.split(".") if mod else []
                        for n in range(len(parts), -1 if node.level else 0, -1):
                            f = look(".".join(parts[:n]))
                            if f:
                                break
                    if f:
                        targets.append(f)
            for t in targets:
                if t != p:
                    edges.add((p, t))
    return edges


# -- main -----------------------------------------------------------------------------------------
def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("repo")
    ap.add_argument("--config", default=None)
    ap.add_argument("--hook-files", type=int, default=5)
    ap.add_argument("--check-imports", action="store_true")
    ap.add_argument("--json", default=None, help="also write the figures to this JSON file")
    args = ap.parse_args()
    root = Path(args.repo).resolve()
    repo = GitRepo(root)
    cfg = load_config(args.config or root / "repoguard.toml", required=False)
    figures: dict = {"repo": str(root), "secrets": [s.id for s in cfg.secrets]}

    floor_log = git_log_floor(root)
    cpu_start = time.process_time() + _children_cpu()
    corpus, t_corpus = timed(build_corpus, repo, cfg.corpus)
    py = [p for p in corpus.files if p.endswith(".py")]
    floor_ast = ast_floor(root, py)
    n_commits = int(subprocess.run(["git", "rev-list", "--count", "--no-merges", "HEAD"], cwd=root,
                                   capture_output=True, text=True).stdout.strip() or 0)
    figures.update(files=len(corpus.files), examples=len(corpus.examples), commits=n_commits,
                   python_files=len(py), corpus_seconds=round(t_corpus, 2),
                   baseline_git_log_seconds=round(floor_log, 2), baseline_ast_parse_seconds=round(floor_ast, 2))
    print(f"{root.name}: {len(corpus.files)} files, {len(corpus.examples)} examples, {n_commits} commits "
          f"(non-merge), {len(cfg.secrets)} secrets")
    print(f"baselines: git log -z --name-status {floor_log:.2f} s; ast.parse of {len(py)} .py files {floor_ast:.2f} s")
    print(f"corpus: {t_corpus:.2f} s")

    # pass 1: time, cold cache (history parsed inside the first analyzer that needs it)
    history._CACHE.clear()
    caches: dict = {}
    per = {}
    total_t = 0.0
    evidence_all = []
    for name in REGISTRY:
        if name not in cfg.analyzers.enabled:
            continue
        ev, secs, _ = run_analyzers(repo, corpus, cfg, names=[name], caches=caches)
        evidence_all += ev
        pairs = {(e.path, e.secret_id) for e in ev}
        per[name] = {"seconds": secs[name], "files": len({p for p, _ in pairs}),
                     "incidences": sum(len(corpus.file_examples.get(p, ())) for p, _ in pairs)}
        total_t += secs[name]
    cpu_cold = time.process_time() + _children_cpu() - cpu_start
    # warm re-run (blob caches filled, history memoised: as a second `analyze` in one process)
    warm_t = time.perf_counter()
    run_analyzers(repo, corpus, cfg, names=list(per), caches={k: TrackingCache(v) for k, v in caches.items()})
    warm_t = time.perf_counter() - warm_t
    # pass 2: peak Python allocations per analyzer
    history._CACHE.clear()
    tracemalloc.start()
    for name in per:
        tracemalloc.reset_peak()
        run_analyzers(repo, corpus, cfg, names=[name], caches={})
        per[name]["peak_alloc_mb"] = round(tracemalloc.get_traced_memory()[1] / 2**20, 1)
    tracemalloc.stop()
    print(f"{'analyzer':<12}{'seconds':>9}{'peak MB':>9}{'files':>8}{'incid.':>8}  ratio")
    for name, row in per.items():
        base = floor_log if name in ("ownership", "cochange") else floor_ast
        bname = "git-log" if name in ("ownership", "cochange") else "ast"
        print(f"{name:<12}{row['seconds']:>9.2f}{row['peak_alloc_mb']:>9.1f}{row['files']:>8}{row['incidences']:>8}"
              f"  {row['seconds'] / max(base, 1e-9):.2f}× {bname}")
    print(f"analyze total (corpus + analyzers, cold): {t_corpus + total_t:.2f} s; analyzers warm re-run: "
          f"{warm_t:.2f} s; process peak RSS {rss_mb():.0f} MB; load average {os.getloadavg()[0]:.1f} "
          f"on {os.cpu_count()} cores; CPU of the cold analyze {cpu_cold:.1f} s (git included)")
    figures.update(per_analyzer=per, analyzers_seconds=round(total_t, 2), warm_seconds=round(warm_t, 2),
                   analyze_seconds=round(t_corpus + total_t, 2), analyze_cpu_seconds=round(cpu_cold, 1),
                   peak_rss_mb=round(rss_mb()), load_average=os.getloadavg()[0])

    if args.check_imports:
        files = _files.corpus_files(corpus)
        ig = imports_analyzer.build_graph(repo, {p: s for p, s in files.items() if p.endswith(".py")})
        ours = {(u, v) for u, v in ig.graph.edges() if u.endswith(".py") and v.endswith((".py", ".pyi"))}
        unparsed: set[str] = set()
        theirs = ast_edges(root, py, set(_files.tracked_paths(repo)), unparsed)
        print(f"ast ({sys.version.split()[0]}) cannot parse {len(unparsed)} files (newer syntax): "
              f"their edges are compared on files both parse")
        ours = {(u, v) for u, v in ours if u not in unparsed}
        both = ours & theirs
        prec, rec = len(both) / max(len(ours), 1), len(both) / max(len(theirs), 1)
        print(f"python import edges: repoguard {len(ours)}, ast {len(theirs)}, both {len(both)}: "
              f"precision {prec:.4f}, recall {rec:.4f}")
        for label, diff in (("only repoguard", ours - theirs), ("only ast", theirs - ours)):
            for e in sorted(diff)[:5]:
                print(f"  {label}: {e[0]} → {e[1]}")
        figures.update(import_edges={"repoguard": len(ours), "ast": len(theirs), "both": len(both),
                                     "precision": prec, "recall": rec, "ast_unparsed_files": len(unparsed)})

    if args.hook_files:
        with tempfile.TemporaryDirectory() as tmp:
            clone = Path(tmp) / "clone"
            subprocess.run(["git", "clone", "-q", "--shared", str(root), str(clone)], check=True)
            if args.config:
                shutil.copy(args.config, clone / "repoguard.toml")
            plain = [p for p in py if not p.startswith(".") and "/." not in p and "migrations" not in p]
            picked = plain[:: max(1, len(plain) // args.hook_files)][: args.hook_files]
            for p in picked:
                with open(clone / p, "a") as fh:
                    fh.write("\n# touched by bench/analyze.py\n")
            subprocess.run(["git", "add", *picked], cwd=clone, check=True)
            cmd = [sys.executable, "-m", "repoguard.cli", "tag", "-q"]
            cold = timed(subprocess.run, cmd, cwd=clone, capture_output=True)[1]
            cpu0 = _children_cpu()
            warm = timed(subprocess.run, cmd, cwd=clone, capture_output=True)[1]
            warm_cpu = _children_cpu() - cpu0
        print(f"hook (repoguard tag, {len(picked)} staged .py files): first run {cold:.2f} s "
              f"(parses the index's imports into the cache), next run {warm:.2f} s wall, "
              f"{warm_cpu:.2f} s CPU (load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)")
        figures.update(hook_first_seconds=round(cold, 2), hook_seconds=round(warm, 2),
                       hook_cpu_seconds=round(warm_cpu, 2), hook_files=len(picked))
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
