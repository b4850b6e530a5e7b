"""Benchmark: `repoguard scan --history` against git's own `git log -p` of the same range.

The history scan streams `git log -p -U0` once and scans the added lines (issue 45: on
getmoto/moto, 9.3k commits and 278 MB of added lines, it cost 5× git's own pass). The baseline,
measured in the same run: the same `git log -p` written to /dev/null. Prints wall and CPU seconds
(CPU of the child processes, git included, from getrusage) of each, their ratio and the load;
with `--baseline TREE` (an older repoguard source checkout) also that tree's scan of the same
history and whether both report the same findings.

    .venv/bin/python bench/history.py [REPO] [--jobs 1] [--baseline /tmp/old] [--repeats N] [--json]

With `--repeats N` the runs are interleaved (git log, scan, baseline; N times) and each round's
ratio is taken within the round: on a shared machine the CPU seconds of one process grow with
the load of the others (two threads on one core), so a git run at a quiet minute and a scan at
a busy one would make a ratio of the load. Prints each round's ratio and their mean ± SE.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# the arguments `GitRepo.iter_patches` gives git (its format aside: one hash line per commit here)
GIT_LOG = ["git", "log", "-p", "-U0", "--text", "--no-color", "--no-merges", "--no-ext-diff", "-M", "--format=%H", "HEAD"]


def timed(cmd: list[str], cwd: Path, env: dict | None = None, stdout=subprocess.DEVNULL) -> tuple[float, float, int]:
    """(wall s, CPU s of the child and its children, exit code)."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    rc = subprocess.run(cmd, cwd=cwd, env=env, stdout=stdout, stderr=subprocess.DEVNULL).returncode
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime), rc


def scan(tree: Path, repo: Path, jobs: int, out: Path) -> tuple[float, float, dict]:
    env = dict(os.environ, PYTHONPATH=str(tree))
    wall, cpu, rc = timed([sys.executable, "-m", "repoguard.cli", "-q", "scan", str(repo), "--history",
                           "--jobs", str(jobs), "--format", "json", "--output", str(out),
                           "--out", str(out.parent / (out.stem + "-rg"))], repo, env)
    if rc not in (0, 1):
        raise SystemExit(f"{tree}: scan --history exited {rc}")
    return wall, cpu, json.loads(out.read_text())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("repo", nargs="?", type=Path, default=ROOT, help="a git repository (default: this checkout)")
    ap.add_argument("--jobs", type=int, default=1, help="scan worker processes (1: CPU is comparable)")
    ap.add_argument("--baseline", type=Path, default=None, metavar="TREE", help="an older repoguard source tree")
    ap.add_argument("--repeats", type=int, default=1, help="interleaved rounds (ratio taken within each)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    load0 = open("/proc/loadavg").read().split()[:3]
    rounds = []
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(max(1, a.repeats)):
            g_wall, g_cpu, rc = timed(GIT_LOG, a.repo)
            if rc:
                raise SystemExit(f"{a.repo}: git log -p exited {rc}")
            s_wall, s_cpu, doc = scan(ROOT, a.repo, a.jobs, Path(tmp) / "this.json")
            r = {"git_log_wall_s": g_wall, "git_log_cpu_s": g_cpu, "scan_wall_s": s_wall, "scan_cpu_s": s_cpu,
                 "ratio_wall": s_wall / max(g_wall, 1e-9), "ratio_cpu": s_cpu / max(g_cpu, 1e-9)}
            if a.baseline is not None:
                b_wall, b_cpu, bdoc = scan(a.baseline, a.repo, a.jobs, Path(tmp) / "baseline.json")
                r.update(baseline_wall_s=b_wall, baseline_cpu_s=b_cpu, baseline_over_this_cpu=b_cpu / max(s_cpu, 1e-9),
                         same_findings=bdoc["findings"] == doc["findings"])
            r["load"] = open("/proc/loadavg").read().split()[:3]
            rounds.append(r)
    out = {"repo": str(a.repo), "jobs": a.jobs, "commits": doc["stats"].get("commits"),
           "bytes": doc["stats"].get("bytes"), "findings": len(doc["findings"]), **rounds[-1]}
    ratios = [r["ratio_cpu"] for r in rounds]
    out["rounds"] = rounds
    out["ratio_cpu_mean"] = sum(ratios) / len(ratios)
    out["ratio_cpu_se"] = (statistics.stdev(ratios) / len(ratios) ** 0.5) if len(ratios) > 1 else 0.0
    out["load"] = [load0, open("/proc/loadavg").read().split()[:3]]
    if a.json:
        print(json.dumps(out, indent=2))
        return
    print(f"history of {a.repo}: {out['commits']:,} commits, {out['bytes'] / 1e6:.0f} MB of added lines, "
          f"{out['findings']} findings; --jobs {a.jobs}; load {' '.join(load0)} → {' '.join(out['load'][1])}")
    print(f"baseline: git log -p of the same range: {g_wall:.1f} s wall, {g_cpu:.1f} s CPU")
    for i, r in enumerate(rounds, 1):
        print(f"round {i} (load {' '.join(r['load'])}): git log -p {r['git_log_wall_s']:.1f} s wall, "
              f"{r['git_log_cpu_s']:.1f} s CPU; scan --history {r['scan_wall_s']:.1f} s wall, {r['scan_cpu_s']:.1f} s CPU "
              f"(git's included); ratio {r['ratio_wall']:.2f}× wall, {r['ratio_cpu']:.2f}× CPU")
        if a.baseline is not None:
            print(f"  baseline tree {a.baseline}: {r['baseline_wall_s']:.1f} s wall, {r['baseline_cpu_s']:.1f} s CPU; "
                  f"baseline / this {r['baseline_over_this_cpu']:.2f}× CPU; same findings: {r['same_findings']}")
    print(f"ratio scan / git log -p: {out['ratio_cpu_mean']:.2f} ± {out['ratio_cpu_se']:.2f}× CPU "
          f"(mean ± SE of {len(rounds)} rounds; target ≤ 1.5×)")


if __name__ == "__main__":
    main()
