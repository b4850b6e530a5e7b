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

    .venv/bin/python bench/plan.py --examples 9000 --steps 200 [--json]
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--examples", type=int, default=9000)
    ap.add_argument("--credentials", type=int, default=6)
    ap.add_argument("--batch-size", type=float, default=166.0)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    inc = wagtail_like(a.examples, a.credentials, np.random.default_rng(a.seed))
    floor = Undetected(1, 1e-10, 1e-3)
    kw = dict(batch_size=a.batch_size, steps=a.steps, floor=floor)

    p = np.array([s.p for s in inc.secrets])
    r = np.array([s.r for s in inc.secrets])
    _, lp_wall, lp_cpu = timed(lambda: solve_weights(inc.matrix, secret_caps(p, r, "kl"), 1.0))
    plan1, w1, c1 = timed(lambda: build_plan(inc, **kw))
    spent = {s.id: (s.kl_spent, {k: v for k, v in s.renyi_spent.items()}) for s in plan1.secrets}
    pairs = {s.id: [s.pair] if s.pair else None for s in plan1.secrets}
    night2 = lambda: build_plan(inc, ledger_spent=spent, ledger_pairs=pairs, **kw)  # noqa: E731
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


if __name__ == "__main__":
    main()
