"""Benchmark: the plan stage (`planning.plan.build_plan`: c sweep, LP, certified σ calibration,
undetected floor, KL and uniform baselines) on a wagtail-shaped incidence, night 1 and night 2.

Setting (issue 28: wagtail, 9,171 examples, 8 declared secrets + single-example credentials):
`--examples` examples, 7 path secrets carrying 2–13 % of them each (p = 1e-10, r = 1e-3; one at
r = 2e-4), `--credentials` secrets of one example each, the undetected floor on (k = 1), B = 166.
Night 2 plans against a ledger holding night 1's spending and pairs (the scheduled run's second
night, whose plan was 18× slower in issue 28 item 1).

Prints wall and CPU seconds of each night and, as the baselines measured in the same run, the LP
alone on the same incidence and night 1 (night 2 / night 1 CPU ratio); also whether a cold re-run
of night 2 (every accounting cache emptied) gives the same σ and bounds bit for bit.

`--incidence OUT` plans a real repository's incidence instead (OUT: a repoguard output directory
after `analyze`, e.g. getmoto/moto's: 16k examples, 36 secrets; issue 45), night 1 only.
`--baseline TREE` (a source checkout of an older repoguard, e.g. `git worktree add /tmp/old
1b49916`) also plans night 1 with that tree's code, in a child process on the same incidence
(each tree in its own child, so neither warms the other's caches), and prints the CPU ratio and
whether both plans agree bit for bit (σ, c, w, ρ, every secret's bound and binding).

    .venv/bin/python bench/plan.py --examples 9000 --steps 200 [--json]
    .venv/bin/python bench/plan.py --incidence /tmp/moto/.repoguard --batch-size 256 --steps 20 --baseline /tmp/old
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from repoguard.accounting.spending import Spent  # noqa: E402
from repoguard.analyzers.incidence import Incidence, Secret  # noqa: E402
from repoguard.core.config import Undetected  # noqa: E402
from repoguard.planning.plan import build_plan  # noqa: E402
from repoguard.planning.weighting import secret_caps, solve_weights  # noqa: E402


def wagtail_like(n_ex: int, n_cred: int, rng) -> Incidence:
    shares = [0.13, 0.08, 0.05, 0.03, 0.02, 0.02, 0.0005]
    secrets = [Secret(f"path-{j}", "declared", 1e-10, 2e-4 if j == 0 else 1e-3) for j in range(len(shares))]
    rows, cols = [], []
    start = 0
    for j, s in enumerate(shares):                      # contiguous files: a secret's directory
        k = max(1, int(s * n_ex))
        rows += list(range(start, start + k))
        cols += [j] * k
        start += k
    for c in range(n_cred):                             # one credential in one example each
        secrets.append(Secret(f"credential:{c}", "credential", 1e-10, 1e-3))
        rows.append(int(rng.integers(start, n_ex)))
        cols.append(len(secrets) - 1)
    m = sp.csr_matrix((np.ones(len(rows), bool), (rows, cols)), shape=(n_ex, len(secrets)))
    return Incidence([f"ex{i}" for i in range(n_ex)], secrets, m)


def _clear_caches() -> None:
    from repoguard.accounting import pld

    for name in ("_ONE_STEP", "_BOUNDS"):       # an older tree (a copy of this file run on it) may lack one
        getattr(pld, name, {}).clear()


def timed(fn):
    _clear_caches()
    w0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - w0, time.process_time() - c0


# Night 1 in a child process with `tree` first on sys.path: prints CPU seconds and the plan's bits.
_CHILD = r"""
import hashlib, json, resource, sys, time
sys.path.insert(0, sys.argv[1])
from repoguard.analyzers.incidence import load_incidence
from repoguard.core.config import Undetected
from repoguard.planning.plan import build_plan
inc = load_incidence(sys.argv[2])
t = resource.getrusage(resource.RUSAGE_SELF)
w0 = time.perf_counter()
plan = build_plan(inc, batch_size=float(sys.argv[3]), steps=int(sys.argv[4]), floor=Undetected(1, 1e-10, 1e-3))
u = resource.getrusage(resource.RUSAGE_SELF)
h = hashlib.sha256()
for a in (plan.w, plan.rho):
    h.update(a.tobytes())
h.update(json.dumps([[s.id, s.achieved_bound, s.binding, s.kl_spent] for s in plan.secrets]).encode())
print(json.dumps({"cpu_s": u.ru_utime + u.ru_stime - t.ru_utime - t.ru_stime, "wall_s": time.perf_counter() - w0,
                  "sigma": plan.sigma, "c": plan.c, "bits": h.hexdigest()}))
"""


def plan_in_child(tree: Path, out: Path, batch: float, steps: int) -> dict:
    """Night 1 planned by the repoguard source tree `tree` in a fresh process."""
    env = dict(os.environ, PYTHONPATH=str(tree))
    res = subprocess.run([sys.executable, "-c", _CHILD, str(tree), str(out), repr(batch), str(steps)],
                         capture_output=True, text=True, env=env, check=True)
    return json.loads(res.stdout.strip().splitlines()[-1])


def compare_trees(inc, out: Path | None, baseline: Path, batch: float, steps: int) -> dict:
    """This tree and `baseline`, each planning night 1 in its own child on the same incidence."""
    from repoguard.analyzers.incidence import save_incidence

    with tempfile.TemporaryDirectory() as tmp:
        if out is None:
            out = Path(tmp)
            save_incidence(inc, out)
        here = plan_in_child(Path(__file__).resolve().parents[1], out, batch, steps)
        old = plan_in_child(baseline, out, batch, steps)
    return {"this_cpu_s": here["cpu_s"], "this_wall_s": here["wall_s"], "baseline_cpu_s": old["cpu_s"],
            "baseline_wall_s": old["wall_s"], "baseline_over_this_cpu": old["cpu_s"] / max(here["cpu_s"], 1e-9),
            "sigma": here["sigma"], "baseline_sigma": old["sigma"], "c": here["c"], "baseline_c": old["c"],
            "identical": here["bits"] == old["bits"] and here["sigma"] == old["sigma"] and here["c"] == old["c"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--examples", type=int, default=9000)
    ap.add_argument("--credentials", type=int, default=6)
    ap.add_argument("--batch-size", type=float, default=166.0)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--incidence", type=Path, default=None, metavar="OUT",
                    help="plan this repoguard output directory's incidence (night 1 only)")
    ap.add_argument("--baseline", type=Path, default=None, metavar="TREE",
                    help="an older repoguard source tree to plan night 1 with too, in a child process")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if a.incidence is not None:
        from repoguard.analyzers.incidence import load_incidence

        inc = load_incidence(a.incidence)
    else:
        inc = wagtail_like(a.examples, a.credentials, np.random.default_rng(a.seed))
    floor = Undetected(1, 1e-10, 1e-3)
    kw = dict(batch_size=a.batch_size, steps=a.steps, floor=floor)

    p = np.array([s.p for s in inc.secrets])
    r = np.array([s.r for s in inc.secrets])
    load0 = open("/proc/loadavg").read().split()[:3]
    _, lp_wall, lp_cpu = timed(lambda: solve_weights(inc.matrix, secret_caps(p, r, "kl"), 1.0))
    if a.incidence is not None or a.baseline is not None:
        _real(a, inc, lp_wall, lp_cpu, load0)
        return
    plan1, w1, c1 = timed(lambda: build_plan(inc, **kw))
    spent = {s.id: (s.kl_spent, {k: v for k, v in s.renyi_spent.items()}) for s in plan1.secrets}
    pairs = {s.id: [s.pair] if s.pair else None for s in plan1.secrets}
    night2 = lambda: build_plan(inc, spent=Spent(spent, pairs), **kw)  # noqa: E731
    plan2, w2, c2 = timed(night2)
    again, _, _ = timed(night2)
    same = (again.sigma == plan2.sigma and np.array_equal(again.w, plan2.w)
            and [s.achieved_bound for s in again.secrets] == [s.achieved_bound for s in plan2.secrets])
    out = {"examples": a.examples, "secrets": len(inc.secrets), "batch_size": a.batch_size, "steps": a.steps,
           "lp_wall_s": lp_wall, "lp_cpu_s": lp_cpu,
           "night1_wall_s": w1, "night1_cpu_s": c1, "night1_sigma": plan1.sigma,
           "night2_wall_s": w2, "night2_cpu_s": c2, "night2_sigma": plan2.sigma,
           "night2_over_night1_cpu": c2 / c1, "night1_over_lp_cpu": c1 / max(lp_cpu, 1e-9),
           "cold_rerun_identical": bool(same), "load": open("/proc/loadavg").read().split()[:3]}
    if a.json:
        print(json.dumps(out, indent=2))
        return
    print(f"setting: {a.examples:,} examples × {len(inc.secrets)} secrets, B = {a.batch_size:g}, T = {a.steps}, "
          f"undetected floor k = 1; load {' '.join(out['load'])}")
    print(f"baseline: the LP alone (c = 1): {lp_wall:.2f} s wall, {lp_cpu:.2f} s CPU")
    print(f"plan night 1: {w1:.1f} s wall, {c1:.1f} s CPU (σ = {plan1.sigma:.5g}); ratio to the LP {out['night1_over_lp_cpu']:.0f}×")
    print(f"plan night 2 (ledger: night 1): {w2:.1f} s wall, {c2:.1f} s CPU (σ = {plan2.sigma:.5g}); "
          f"ratio night 2 / night 1 (baseline) {out['night2_over_night1_cpu']:.2f}× CPU")
    print(f"cold re-run of night 2 identical bit for bit: {same}")


def _real(a, inc, lp_wall: float, lp_cpu: float, load0) -> None:
    """Night 1 of `inc` in this process, against the LP alone and (with --baseline) an older tree."""
    plan1, w1, c1 = timed(lambda: build_plan(inc, batch_size=a.batch_size, steps=a.steps,
                                             floor=Undetected(1, 1e-10, 1e-3)))
    out = {"examples": inc.matrix.shape[0], "secrets": inc.matrix.shape[1], "batch_size": a.batch_size,
           "steps": a.steps, "lp_wall_s": lp_wall, "lp_cpu_s": lp_cpu, "night1_wall_s": w1, "night1_cpu_s": c1,
           "night1_sigma": plan1.sigma, "c": plan1.c, "night1_over_lp_cpu": c1 / max(lp_cpu, 1e-9)}
    if a.baseline is not None:
        out["baseline"] = compare_trees(inc, a.incidence, a.baseline, a.batch_size, a.steps)
    out["load"] = [load0, open("/proc/loadavg").read().split()[:3]]
    if a.json:
        print(json.dumps(out, indent=2))
        return
    print(f"setting: {out['examples']:,} examples × {out['secrets']} secrets, B = {a.batch_size:g}, T = {a.steps}, "
          f"undetected floor k = 1; load {' '.join(load0)} → {' '.join(out['load'][1])}")
    print(f"baseline: the LP alone (c = 1): {lp_wall:.2f} s wall, {lp_cpu:.2f} s CPU")
    print(f"plan night 1: {w1:.1f} s wall, {c1:.1f} s CPU (σ = {plan1.sigma:.6g}, c = {plan1.c:.6g}); "
          f"ratio to the LP {out['night1_over_lp_cpu']:.0f}×")
    if a.baseline is not None:
        b = out["baseline"]
        print(f"baseline tree {a.baseline}: {b['baseline_cpu_s']:.1f} s CPU ({b['baseline_wall_s']:.1f} s wall) against "
              f"this tree's {b['this_cpu_s']:.1f} s CPU ({b['this_wall_s']:.1f} s wall), each in a fresh process: "
              f"ratio baseline / this {b['baseline_over_this_cpu']:.2f}× CPU; plans identical bit for bit "
              f"(σ, c, w, ρ, bounds): {b['identical']}")


if __name__ == "__main__":
    main()
