"""Benchmark: a year of nightly scheduled runs in the privacy ledger, and the plan after it.

Simulation (`--secrets` N at the end of the year, `--nights` runs):
* secrets arrive over time: 80 % exist on night 1, the rest appear on random nights;
* secret j sits in 1 + Poisson(3) examples (at most 12) with ρ ~ U[0.0005, 0.003] each (Hush
  §5.1 samples at B/N ≈ 0.0012); the LP is re-solved weekly, so every ρ is scaled by a weekly
  factor (a random walk, ±1 % a week) — each week every secret has a new mixing law;
* σ drifts from 0.95 to 1.3 over the year (budgets deplete) with ±1 % noise every night, so no
  two nights share a = 1/σ and the pair history of every secret needs the dominance merge;
* T = 2000/N_nights steps a night, 42 Rényi orders. One step's divergences are computed for
  real (`batch.batch_step_divergences`, both directions) for 200 prototype secrets at σ = 1;
  a secret's are its nearest prototype's (by Σρ²) scaled by its Σρ² (divergences of a
  subsampled Gaussian grow as ρ² for small ρ) and by (a/a₁)² for the night's σ — plausible
  values of the right size, which the ledger only stores and sums (its pairs are the secret's
  own mixing laws, exact);
* each run is recorded "started" (zeros, as the trainer records it) and then "completed".
Spending is passed to `append_entry` as a columnar `ledger_state.Run` (what `record_run` builds
from the plan's per-secret dicts; that conversion is ~0.1 s per 10 k secrets and not timed).

Then, before run N_nights + 1 (every secret at p = 1e-4, r_j the KL bound at 1.6× its year's
KL, so about a third of the budget is left), in the same process:
* "plan" = `ledger.spending` (newest summary + open runs) + σ calibration (`calibrate`, accountant
  "best", with the carried Neyman–Pearson histories), against the same from the raw entries
  (`raw_state`: every entry's spending file, every pair unmerged);
* `ledger verify` (every side file's digest) and `verify --deep` (summary recomputed);
* checks: KL and Rényi sums equal, σ(carried) ≥ σ(raw) (the carried history is an upper bound)
  and the Neyman–Pearson bound of a sample of secrets from the carried history ≥ the raw one.

    /work/venv/bin/python bench/ledger.py --secrets 10000 --nights 365
"""
from __future__ import annotations

import argparse
import math
import shutil
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from repoguard.accounting import ledger_state as ls  # noqa: E402
from repoguard.accounting.batch import batch_mixtures, batch_step_divergences  # noqa: E402
from repoguard.accounting.bounds import kl_bound  # noqa: E402
from repoguard.accounting.calibrate import calibrate  # noqa: E402
from repoguard.accounting.divergences import DEFAULT_ALPHAS  # noqa: E402
from repoguard.accounting.ledger import append_entry, raw_state, read_entries, spending, verify  # noqa: E402
from repoguard.accounting.pld import _coarsen, pair_from_record, pld_bound  # noqa: E402
from repoguard.accounting.spending import Spent, SpentArrays  # noqa: E402

ALPHAS = [f"{x:g}" for x in DEFAULT_ALPHAS]


def du(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


class World:
    """The simulated secrets, their weekly mixing laws and one-step divergences."""

    def __init__(self, n: int, nights: int, rng) -> None:
        self.ids = [f"secret-{j:06d}" for j in range(n)]
        self.birth = np.where(rng.random(n) < 0.8, 0, rng.integers(0, nights, n))
        k = np.minimum(1 + rng.poisson(3, n), 12)
        self.rho = [rng.uniform(0.0005, 0.003, kk) for kk in k]
        self.factor = np.exp(np.cumsum(rng.normal(0, 0.01, nights // 7 + 2)))
        self.sigma = (0.95 + 0.35 * np.arange(nights) / max(nights - 1, 1)) * (1 + 0.01 * rng.standard_normal(nights))
        self.week: dict[int, tuple] = {}
        # one-step divergences at σ = 1 (a₁ = 1): 200 prototypes, each secret scaled from its nearest
        q = np.array([np.sum(r ** 2) for r in self.rho])
        proto = np.argsort(q)[np.linspace(0, n - 1, min(200, n)).astype(int)]
        kl, ren = batch_step_divergences(batch_mixtures([np.sort(self.rho[j]) for j in proto]), 1.0,
                                         np.asarray(DEFAULT_ALPHAS), np.full((proto.size, len(ALPHAS)), np.inf))
        near = np.clip(np.searchsorted(q[proto], q), 0, proto.size - 1)
        self.kl1 = kl.max(axis=1)[near] * q / q[proto][near]
        self.ren1 = ren.max(axis=2)[near] * (q / q[proto][near])[:, None]

    def rhos(self, week: int) -> list[np.ndarray]:
        return [np.sort(r * self.factor[week]) for r in self.rho]

    def weekly(self, week: int) -> tuple:
        """(parts of every secret's mixing law this week, kl (n,), ren (n, A)) per step at σ = 1."""
        if week not in self.week:
            mixes = [_coarsen(m) for m in batch_mixtures(self.rhos(week))]
            recs = [{"a": 1.0, "steps": 0, "m": m.m, "logw": m.logw, "n": m.n} for m in mixes]
            parts = ls._parts_from_records(np.arange(len(mixes)), recs)
            f2 = self.factor[week] ** 2
            self.week = {week: (parts, self.kl1 * f2, self.ren1 * f2)}
        return self.week[week]


def night_runs(w: World, night: int, steps: int) -> tuple[ls.Run, ls.Run]:
    """(started, completed) spending of one night's run over the secrets that exist by then."""
    active = np.nonzero(w.birth <= night)[0]
    sigma = float(w.sigma[night])
    parts, kl1, ren1 = w.weekly(night // 7)
    scale = steps / sigma ** 2
    ids = [w.ids[j] for j in active]
    k = active.size
    started = ls.Run(ids, np.zeros(k), ALPHAS, np.zeros((k, len(ALPHAS))), np.full(k, ls.PAIR_NULL, np.int8),
                     ls.Parts.empty())
    p = parts.take(active)
    p = ls.Parts(np.arange(k), np.full(k, 1.0 / sigma), np.full(k, steps, np.int64), p.n, p.off, p.m, p.lw)
    done = ls.Run(ids, kl1[active] * scale, ALPHAS, ren1[active] * scale, np.full(k, ls.PAIR_SET, np.int8), p)
    return started, done


def plan_inputs(path: Path | None, state: ls.State | None, w: World, nights: int, steps: int, p0: float, r):
    """What `repoguard plan` derives from the ledger: spending dicts (timed by the caller), then
    the arrays and histories `calibrate` takes (`spending.Spent.arrays`)."""
    if state is None:
        spent, pairs = spending(path)
    else:
        spent, pairs = state.spent(), state.pairs()
    secrets = [SimpleNamespace(id=s) for s in w.ids]
    prior = Spent(spent, pairs).arrays(secrets, DEFAULT_ALPHAS)
    return prior.kl, prior.renyi, prior.pairs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--secrets", type=int, default=10_000)
    ap.add_argument("--nights", type=int, default=365)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--skip-raw-plan", action="store_true",
                    help="do not calibrate from the raw (unmerged) histories (slow: every pair of the year)")
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)
    w = World(a.secrets, a.nights, rng)
    steps = max(1, 2000 // a.nights)
    tmp = Path(tempfile.mkdtemp(prefix="ledger-bench-"))
    path = tmp / "ledger.jsonl"
    t_append, t_last, c_append = 0.0, [], 0.0
    out: dict = {}
    try:
        t0 = time.perf_counter()
        for night in range(a.nights):
            started, done = night_runs(w, night, steps)
            fields = {"run_id": f"night-{night:03d}", "plan_digest": "0" * 64, "sigma": float(w.sigma[night]),
                      "batch_size": 2048.0, "steps": steps, "accountant": "best", "adjacency": "zero-out"}
            t, c = time.perf_counter(), time.process_time()
            append_entry(path, {**fields, "status": "started", "steps_completed": 0}, started)
            append_entry(path, {**fields, "status": "completed", "steps_completed": steps}, done)
            dt = time.perf_counter() - t
            c_append += time.process_time() - c
            t_append += dt
            if night >= a.nights - 30:
                t_last.append(dt)
            if night % 30 == 0 or night == a.nights - 1:
                print(f"  night {night + 1}: {du(tmp) / 1e6:.0f} MB on disk, appends {t_append:.0f} s, "
                      f"wall {time.perf_counter() - t0:.0f} s", flush=True)
        size = du(tmp)
        n_files = sum(1 for _ in tmp.rglob("*.parquet"))
        # the plan before night N+1: targets leave about a third of each secret's budget
        p0 = 1e-4
        rhos = w.rhos(a.nights // 7)
        t, c = time.perf_counter(), time.process_time()
        skl, sre, hist = plan_inputs(path, None, w, a.nights, steps, p0, None)
        t_read = time.perf_counter() - t
        r = np.minimum(kl_bound(1.6 * skl + 1e-4, p0), 0.999)
        t = time.perf_counter()
        cal = calibrate(rhos, np.full(a.secrets, p0), r, steps, spent=SpentArrays(skl, sre, hist))
        t_cal = time.perf_counter() - t
        c_plan = time.process_time() - c
        t, c = time.perf_counter(), time.process_time()
        raw = raw_state(read_entries(path), path=path)
        rkl, rre, rhist = plan_inputs(None, raw, w, a.nights, steps, p0, r)
        t_read_raw = time.perf_counter() - t
        t_cal_raw = math.nan
        cal_raw = None
        if not a.skip_raw_plan:
            t = time.perf_counter()
            cal_raw = calibrate(rhos, np.full(a.secrets, p0), r, steps, spent=SpentArrays(rkl, rre, rhist))
            t_cal_raw = time.perf_counter() - t
        c_plan_raw = time.process_time() - c
        worst_kl = float(np.max(np.abs(skl - rkl) / np.maximum(rkl, 1e-300)))
        fin = np.isfinite(rre)
        worst_ren = float(np.max(np.abs(sre[fin] - rre[fin]) / np.maximum(rre[fin], 1e-300))) if fin.any() else 0.0
        same_inf = bool(np.array_equal(fin, np.isfinite(sre)))
        parts_c = np.array([len(h) for h in hist])
        parts_r = np.array([len(h) for h in rhist])
        # the Neyman–Pearson bound of the year's history alone, carried vs raw, for a sample
        sample = rng.choice(a.secrets, 8, replace=False)
        ratios = []
        t_np_c = t_np_r = 0.0
        for j in sample:
            nothing = pair_from_record({"a": 1.0, "steps": 0, "m": [0], "logw": [0.0], "n": 0})
            t = time.perf_counter()
            bc = float(pld_bound(*nothing, 1e-4, history=hist[j])[0][0])
            t_np_c += time.perf_counter() - t
            t = time.perf_counter()
            br = float(pld_bound(*nothing, 1e-4, history=rhist[j])[0][0])
            t_np_r += time.perf_counter() - t
            ratios.append(bc / br)
        from repoguard.accounting.ledger_io import clear_caches
        clear_caches()                      # a fresh process: nothing parsed or hashed yet
        t, c = time.perf_counter(), time.process_time()
        v = verify(path)
        t_verify, c_verify = time.perf_counter() - t, time.process_time() - c
        t, c = time.perf_counter(), time.process_time()
        vd = verify(path, deep=True)
        t_deep, c_deep = time.perf_counter() - t, time.process_time() - c
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    n_start = int(np.sum(w.birth == 0))
    print(f"setting: {a.nights} nightly runs ({2 * a.nights} entries, {n_files} Parquet files), {n_start:,} → "
          f"{a.secrets:,} secrets, {len(ALPHAS)} Rényi orders, {steps} steps a night, σ {w.sigma.min():.3f}–"
          f"{w.sigma.max():.3f} (every night distinct), ρ rescaled weekly")
    print(f"ledger on disk: {size / 1e6:.1f} MB ({size / a.nights / 1e6:.2f} MB a night); appends {t_append:.1f} s "
          f"in all ({t_append / a.nights:.2f} s a night, {np.mean(t_last):.2f} s a night over the last 30; "
          f"CPU {c_append / a.nights:.2f} s a night)")
    print(f"plan before run {a.nights + 1}, carried-forward summary: read {t_read:.2f} s + calibrate {t_cal:.1f} s "
          f"= {t_read + t_cal:.1f} s (target ≤ 60 s), σ = {cal.sigma:.5g}, "
          f"{cal.stats['pld_evaluations']} Neyman–Pearson evaluations; CPU {c_plan:.1f} s")
    if cal_raw is not None:
        print(f"plan from the raw entries: read {t_read_raw:.2f} s + calibrate {t_cal_raw:.1f} s = "
              f"{t_read_raw + t_cal_raw:.1f} s, σ = {cal_raw.sigma:.5g}; ratio raw/carried "
              f"{(t_read_raw + t_cal_raw) / (t_read + t_cal):.1f}× (read {t_read_raw / t_read:.1f}×), "
              f"σ(carried)/σ(raw) = {cal.sigma / cal_raw.sigma:.5f}; CPU {c_plan_raw:.1f} s "
              f"({c_plan_raw / c_plan:.1f}×)")
    else:
        print(f"read from the raw entries: {t_read_raw:.2f} s ({t_read_raw / t_read:.1f}× the summary)")
    print(f"carried state vs raw: max relative difference KL {worst_kl:.1e}, Rényi {worst_ren:.1e} "
          f"(+inf orders equal: {same_inf}); pair parts per secret carried max {parts_c.max()} "
          f"(mean {parts_c.mean():.1f}) vs raw max {parts_r.max()} (mean {parts_r.mean():.1f})")
    print(f"Neyman–Pearson bound of the year's history (p = 1e-4, 8 secrets): carried/raw "
          f"{min(ratios):.4f}–{max(ratios):.4f}, {t_np_c / 8:.2f} s vs {t_np_r / 8:.2f} s per secret "
          f"({t_np_r / max(t_np_c, 1e-9):.1f}×)")
    print(f"ledger verify (every side file's digest): {t_verify:.2f} s (CPU {c_verify:.2f} s), ok = {v['ok']}; "
          f"verify --deep (summary recomputed from {a.nights} runs): {t_deep:.1f} s (CPU {c_deep:.1f} s), "
          f"ok = {vd['ok']}")
    bad = (not (v["ok"] and vd["ok"]) or worst_kl > 1e-9 or worst_ren > 1e-9 or not same_inf
           or min(ratios) < 1 - 1e-9 or (cal_raw is not None and cal.sigma < cal_raw.sigma * (1 - 1e-5)))
    if bad:
        sys.exit(1)


if __name__ == "__main__":
    main()
