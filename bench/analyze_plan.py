"""Benchmark: `repoguard analyze` then `repoguard plan` on a real repository, as a user runs them
(issue 45: at most 60 s of CPU on a ≥ 3k-file, ≥ 10k-commit repository; getmoto/moto with every
analyzer configured).

Each command runs in its own process on a scratch copy of REPO (its `repoguard.toml` included,
its `.repoguard/` left out, so the blob cache is cold); CPU is that process's user + system time
with every process it waited for (git, the import-extraction workers): `RUSAGE_CHILDREN`, what
`/usr/bin/time` reports. `--baseline TREE` (an older repoguard source tree, e.g.
`git worktree add /tmp/old 8882464`) runs the same two commands with that tree's code in the same
run, and prints the CPU ratio and whether both wrote the same incidence and plan byte for byte.

    .venv/bin/python bench/analyze_plan.py /tmp/moto [--baseline /tmp/old] [--repeats 1] [--json]
"""
from __future__ import annotations

import argparse
import filecmp
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
# incidence/ and plan/ files compared byte for byte (summary.json and plan.json hold timings)
SAME = ("incidence/incidence.npz", "incidence/evidence.parquet", "incidence/secrets.json", "plan/plan.npz")
_MAIN = "import sys; from repoguard.cli import main; sys.exit(main(sys.argv[1:]))"


def _children_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def run_tree(tree: Path, repo: Path, work: Path) -> dict:
    """analyze then plan with the repoguard source tree `tree` on a fresh copy of `repo`:
    {"analyze": (wall s, CPU s), "plan": (...), "out": the copy's .repoguard}."""
    copy = work / "repo"
    if copy.exists():
        shutil.rmtree(copy)
    shutil.copytree(repo, copy, symlinks=True, ignore=shutil.ignore_patterns(".repoguard"))
    env = dict(os.environ, PYTHONPATH=str(tree))
    out = {}
    for cmd in ("analyze", "plan"):
        c0, w0 = _children_cpu(), time.perf_counter()
        subprocess.run([sys.executable, "-c", _MAIN, cmd, "-q", str(copy)], env=env, cwd=work,
                       stdout=subprocess.DEVNULL, check=True)
        out[cmd] = (time.perf_counter() - w0, _children_cpu() - c0)
    plan = json.loads((copy / ".repoguard" / "plan" / "plan.json").read_text())
    out["sigma"], out["c"] = plan["sigma"], plan["c"]
    out["out"] = copy / ".repoguard"
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("repo", type=Path, help="a git repository (with its repoguard.toml)")
    ap.add_argument("--baseline", type=Path, default=None, metavar="TREE",
                    help="an older repoguard source tree run in the same run, for the ratio")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    res: dict = {"repo": str(a.repo), "load_start": open("/proc/loadavg").read().split()[:3], "runs": []}
    files = subprocess.run(["git", "ls-files"], cwd=a.repo, capture_output=True, text=True, check=True).stdout
    commits = subprocess.run(["git", "rev-list", "--count", "HEAD"], cwd=a.repo, capture_output=True, text=True,
                             check=True).stdout
    res["files"], res["commits"] = len(files.splitlines()), int(commits)
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(a.repeats):
            row = {}
            trees = [("this", HERE)] + ([("baseline", a.baseline.resolve())] if a.baseline else [])
            outs = {}
            for name, tree in trees:
                work = Path(tmp) / name
                work.mkdir(exist_ok=True)
                r = run_tree(tree, a.repo, work)
                outs[name] = r.pop("out")
                row[name] = r
            if a.baseline:
                row["identical"] = all(filecmp.cmp(outs["this"] / f, outs["baseline"] / f, shallow=False)
                                       for f in SAME) and row["this"]["sigma"] == row["baseline"]["sigma"]
                cpu = {k: row[k]["analyze"][1] + row[k]["plan"][1] for k in ("this", "baseline")}
                row["baseline_over_this_cpu"] = cpu["baseline"] / max(cpu["this"], 1e-9)
            res["runs"].append(row)
    res["load_end"] = open("/proc/loadavg").read().split()[:3]
    if a.json:
        print(json.dumps(res, indent=2))
        return
    print(f"{a.repo}: {res['files']:,} files, {res['commits']:,} commits; load {' '.join(res['load_start'])} → "
          f"{' '.join(res['load_end'])}")
    for i, row in enumerate(res["runs"]):
        for name in ("this", "baseline"):
            if name in row:
                r = row[name]
                print(f"  run {i + 1} {name:8s}: analyze {r['analyze'][1]:.1f} s CPU ({r['analyze'][0]:.1f} s wall), "
                      f"plan {r['plan'][1]:.1f} s CPU ({r['plan'][0]:.1f} s wall); together "
                      f"{r['analyze'][1] + r['plan'][1]:.1f} s CPU (σ = {r['sigma']:.6g})")
        if "identical" in row:
            print(f"  ratio baseline / this: {row['baseline_over_this_cpu']:.2f}× CPU; incidence and plan "
                  f"identical byte for byte: {row['identical']}")


if __name__ == "__main__":
    main()
