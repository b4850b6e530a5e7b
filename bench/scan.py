"""Benchmark: MB/s of `repoguard scan --no-git` against `detect-secrets scan --all-files` and,
with `--kingfisher BIN`, against Kingfisher (the fastest peer, issue 45), on the same corpus in
the same run.

Both scan the same corpus of real source in one run: text files (.py .pyi .c .h .cpp .js .ts
.json .toml .cfg .txt .md .rst .yaml) copied from the venv's site-packages into a temporary
directory (default ≥ 100 MB). Prints bytes, seconds, MB/s, MB/s per core, findings per MB and
the ratio, findings per 100 MB (with their triage location), both in wall-clock MB/s and in MB per CPU-second (the second is what a shared
machine can measure fairly: it does not depend on what else runs). Run by hand: `.venv/bin/python bench/scan.py [--mb 100] [--jobs N]`.

Kingfisher is installed apart from the project (never into its lock), e.g.
`python -m venv /tmp/kf && /tmp/kf/bin/pip install kingfisher-bin`, and its binary is run
directly: `--kingfisher /tmp/kf/lib/python3.*/site-packages/kingfisher/bin/kingfisher`. It runs
with `--no-validate --git-history none` (no network, the files only) and the same worker count;
each tool gets one warm-up run (rule caches, page cache), then `--repeats` timed runs (median).
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

EXTS = {".py", ".pyi", ".c", ".h", ".cpp", ".hpp", ".js", ".ts", ".json", ".toml", ".cfg",
        ".txt", ".md", ".rst", ".yaml", ".yml", ".ini", ".html", ".css", ".pyx", ".pxd"}


def build_corpus(src: Path, dest: Path, target_bytes: int) -> int:
    """Copy text files from `src` (sorted, deterministic) until `target_bytes`; returns bytes."""
    total = 0
    for dirpath, dirnames, filenames in os.walk(src):
        dirnames.sort()
        for name in sorted(filenames):
            p = Path(dirpath) / name
            if p.suffix not in EXTS or p.is_symlink():
                continue
            size = p.stat().st_size
            if size > 5_000_000:
                continue
            out = dest / p.relative_to(src)
            out.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(p, out)
            total += size
            if total >= target_bytes:
                return total
    return total


def timed(cmd: list[str], cwd: Path, env: dict) -> tuple[float, float, subprocess.CompletedProcess]:
    """(wall seconds, CPU seconds of the command and its children, the finished process)."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, env=env)
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime), proc


def _median(runs: list[tuple[float, float, subprocess.CompletedProcess]]) -> tuple[float, float, subprocess.CompletedProcess]:
    """The run of median CPU seconds (its wall and process with it)."""
    return sorted(runs, key=lambda r: r[1])[len(runs) // 2]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=100.0, help="corpus size in MB (default 100)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count(), help="repoguard worker processes")
    ap.add_argument("--src", action="append", default=None,
                    help="source tree, repeatable: copied in order until --mb (default: this venv's site-packages; "
                         "add e.g. --src /usr --src /root/.pyenv for a corpus of 1 GB or more)")
    ap.add_argument("--skip-detect-secrets", action="store_true")
    ap.add_argument("--kingfisher", default=None, metavar="BIN", help="Kingfisher binary: time it on the same corpus")
    ap.add_argument("--repeats", type=int, default=1, help="timed runs of each tool (median reported)")
    ap.add_argument("--keep-output", default=None, metavar="DIR",
                    help="copy repoguard's JSON report there (to diff finding sets between trees)")
    ap.add_argument("--detect-secrets-mb", type=float, default=None,
                    help="time detect-secrets on the first N MB of the same corpus only (it runs at "
                         "well under 1 MB/s; default: the whole corpus)")
    args = ap.parse_args()
    venv_bin = Path(sys.executable).parent
    srcs = [Path(x) for x in args.src] if args.src else [Path(next(p for p in sys.path if p.endswith("site-packages")))]
    env = dict(os.environ)
    with tempfile.TemporaryDirectory(prefix="rg-bench-") as tmp:
        corpus = Path(tmp) / "corpus"
        cache = Path(tmp) / "cache"
        env["REPOGUARD_CACHE"] = str(cache)
        n = 0
        for i, src in enumerate(srcs):     # each tree in its own folder: no file overwrites another
            if n < args.mb * 1e6:
                n += build_corpus(src, corpus / str(i), int(args.mb * 1e6) - n)
        print(f"corpus: {n / 1e6:.1f} MB of text files from {', '.join(map(str, srcs))}")
        rg = [str(venv_bin / "repoguard"), "scan", "--no-git", str(corpus), "--format", "json",
              "--output", str(Path(tmp) / "rg.json"), "--jobs", str(args.jobs), "-q"]
        print(f"load {' '.join(open('/proc/loadavg').read().split()[:3])}; date {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}")
        timed(rg, corpus, env)  # warm: compile the Hyperscan database into the cache, fill page cache
        t_rg, cpu_rg, p = _median([timed(rg, corpus, env) for _ in range(max(1, args.repeats))])
        if p.returncode not in (0, 1):
            print(p.stderr.decode(), file=sys.stderr)
            return 2
        doc = json.loads((Path(tmp) / "rg.json").read_text())
        if args.keep_output:
            Path(args.keep_output).mkdir(parents=True, exist_ok=True)
            shutil.copyfile(Path(tmp) / "rg.json", Path(args.keep_output) / "repoguard.json")
        stats = doc["stats"]
        rg_mbs = stats["bytes"] / 1e6 / t_rg
        rg_cpu_mbs = stats["bytes"] / 1e6 / cpu_rg
        print(f"repoguard scan --no-git: {t_rg:.2f} s wall, {rg_mbs:.1f} MB/s wall "
              f"({rg_mbs / args.jobs:.1f} MB/s per core over {args.jobs} jobs); {cpu_rg:.2f} CPU s, "
              f"{rg_cpu_mbs:.1f} MB per CPU-second (whole process: startup, walk, read, scan); "
              f"engine {stats['engine']}, {len(doc['findings'])} findings")
        by_rule: dict[str, int] = {}
        for f in doc["findings"]:
            by_rule[f["rule_id"]] = by_rule.get(f["rule_id"], 0) + 1
        print("  findings by rule:", dict(sorted(by_rule.items(), key=lambda kv: -kv[1])[:12]))
        by_loc: dict[str, int] = {}
        for f in doc["findings"]:
            by_loc[f.get("location", "?")] = by_loc.get(f.get("location", "?"), 0) + 1
        per100 = len(doc["findings"]) / (stats["bytes"] / 1e8) if stats["bytes"] else 0.0
        print(f"  findings per 100 MB of real source: {per100:.1f} (target ≤ 10); by location {by_loc}")
        if args.kingfisher:
            kf = [args.kingfisher, "scan", str(corpus), "--no-validate", "--git-history", "none", "--format", "json",
                  "--no-update-check", "-q", "-j", str(args.jobs), "-o", str(Path(tmp) / "kf.json")]
            timed(kf, corpus, env)  # warm: its Vectorscan rule cache, as for repoguard
            t_kf, cpu_kf, p = _median([timed(kf, corpus, env) for _ in range(max(1, args.repeats))])
            if p.returncode not in (0, 200, 205):  # 200/205: findings (not validated)
                print(p.stderr.decode()[-2000:], file=sys.stderr)
                return 2
            kf_n = len(json.loads((Path(tmp) / "kf.json").read_text()).get("findings", []))
            kf_mbs, kf_cpu_mbs = stats["bytes"] / 1e6 / t_kf, stats["bytes"] / 1e6 / cpu_kf
            print(f"kingfisher scan --no-validate: {t_kf:.2f} s wall, {kf_mbs:.1f} MB/s wall; {cpu_kf:.2f} CPU s, "
                  f"{kf_cpu_mbs:.1f} MB per CPU-second; {kf_n} findings (its own rules)")
            print(f"ratio repoguard / kingfisher: {rg_mbs / kf_mbs:.2f}x wall, {rg_cpu_mbs / kf_cpu_mbs:.2f}x per CPU-second "
                  f"(target ≥ 1.5x per CPU-second); load now {' '.join(open('/proc/loadavg').read().split()[:3])}")
        if args.skip_detect_secrets:
            return 0
        ds_dir, n_ds = corpus, n
        if args.detect_secrets_mb:  # a prefix of the same corpus (same file order as the copy)
            ds_dir = Path(tmp) / "ds-corpus"
            n_ds = build_corpus(corpus, ds_dir, int(args.detect_secrets_mb * 1e6))
            print(f"detect-secrets corpus: the first {n_ds / 1e6:.1f} MB of the same files")
        ds = [str(venv_bin / "detect-secrets"), "scan", "--all-files"]
        t_ds, cpu_ds, p = timed(ds, ds_dir, env)
        if p.returncode != 0:
            print(p.stderr.decode()[-2000:], file=sys.stderr)
            return 2
        ds_doc = json.loads(p.stdout)
        ds_n = sum(len(v) for v in ds_doc.get("results", {}).values())
        ds_mbs = n_ds / 1e6 / t_ds
        ds_cpu_mbs = n_ds / 1e6 / cpu_ds
        print(f"detect-secrets scan --all-files: {t_ds:.2f} s wall, {ds_mbs:.2f} MB/s wall; "
              f"{cpu_ds:.2f} CPU s, {ds_cpu_mbs:.2f} MB per CPU-second; {ds_n} findings")
        print(f"ratio repoguard / detect-secrets: {rg_mbs / ds_mbs:.1f}x wall, "
              f"{rg_cpu_mbs / ds_cpu_mbs:.1f}x per CPU-second")
    return 0


if __name__ == "__main__":
    sys.exit(main())
