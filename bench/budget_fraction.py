"""Measurement: what a run's budget fraction f costs now and leaves for the next run (issue 41 item 13).

For each f, on a fresh copy of an analysed repository: plan run 1 exactly as `repoguard run`'s plan
stage does (`pipeline.stages.plan.execute`, targets r_run = b₀ + f·(r − b₀)), record it in the
ledger as a completed run (the spending a trained run records; no training needed), then plan
runs 2 and 3 the same way. Prints σ of each run and, per f, σ₁/σ₁(f = 1) (what the headroom costs
run 1) and σ₂/σ₁ (what run 1 left run 2). The plan's B and T are the batch rule's unless given.

    .venv/bin/python bench/budget_fraction.py REPO [--fractions 1,0.5] [--steps T] [--runs 3]

REPO must have been analysed (`repoguard analyze REPO`); its OUT is copied, never written.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def plan_runs(repo: Path, out0: Path, fraction: float, *, steps: int | None, runs: int) -> list[dict]:
    from repoguard.accounting.ledger import record_run
    from repoguard.core.config import default_config_path, load_config
    from repoguard.core.errors import PolicyError
    from repoguard.pipeline import stages
    from repoguard.pipeline.context import Context, RunSettings
    from repoguard.planning.plan import load_plan
    from repoguard.source.gitrepo import open_repo

    work = Path(tempfile.mkdtemp(prefix="rg-fraction-"))
    out = work / "out"
    shutil.copytree(out0, out, ignore=shutil.ignore_patterns("ledger*", "plan", "train", "runs", "run_state.json"))
    config = load_config(default_config_path(repo), required=False)
    ctx = Context(open_repo(str(repo), allow_plain=True), config, b"", None, out,
                  RunSettings(budget_fraction=fraction, steps=steps, show_progress=False), {}, lambda s: None)
    rows = []
    for k in range(1, runs + 1):
        t0 = time.perf_counter()
        try:
            info = stages.plan.execute(ctx)
        except PolicyError as exc:
            rows.append({"run": k, "sigma": None, "refused": str(exc)[:160]})
            break
        fl = info.get("undetected_floor") or {}
        rows.append({"run": k, "sigma": info["sigma"], "B": info["batch_size"], "T": info["steps"],
                     "floor_bound": fl.get("achieved_bound"), "floor_r": fl.get("r"),
                     "bound_ratio_max": info["bound_ratio_max"], "retained": info["retained_fraction"],
                     "seconds": round(time.perf_counter() - t0, 1)})
        plan = load_plan(out)
        record_run(ctx.ledger, plan, run_id=f"bench-{k}", steps_completed=plan.steps, status="completed")
    shutil.rmtree(work, ignore_errors=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("repo")
    ap.add_argument("--out", default=None, help="the analysed OUT (default REPO/.repoguard)")
    ap.add_argument("--fractions", default="1,0.5")
    ap.add_argument("--steps", type=int, default=None)
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    repo = Path(a.repo).resolve()
    out0 = Path(a.out).resolve() if a.out else repo / ".repoguard"
    res = {}
    for f in (float(x) for x in a.fractions.split(",")):
        res[f] = plan_runs(repo, out0, f, steps=a.steps, runs=a.runs)
        for r in res[f]:
            print(json.dumps({"fraction": f, **r}), flush=True)
    base = res.get(1.0, [{}])[0].get("sigma")
    for f, rows in res.items():
        s = [r.get("sigma") for r in rows]
        first = f"σ₁/σ₁(f=1) = {s[0] / base:.3g}" if base and s and s[0] else ""
        nxt = f"σ₂/σ₁ = {s[1] / s[0]:.3g}" if len(s) > 1 and s[0] and s[1] else "run 2 refused" \
            if len(rows) > 1 or (len(s) == 1 and a.runs > 1) else ""
        print(f"f = {f:g}: σ by run {['—' if x is None else round(x, 4) for x in s]}; {first}; {nxt}")


if __name__ == "__main__":
    main()
