"""Choosing the LP scale c when the undetected-secret floor is on: the secrets' calibration
deferred while they pass at the floor's σ, the c the Σw/σ rule would pick without the floor, the
bisection that raises c to the largest value whose σ(c) stays within the floor's noise, and the
record of what that bought (plan.json extra["floor_bought"]). Used by `planning.plan.build_plan`.
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np


class Deferred:
    """The secrets' calibration at one c, not yet run: they pass at `at` (the floor's σ, so the
    row's σ is the floor's), or fail at `above` (the row's σ exceeds it). `sigma` runs the
    calibration (`compute`) the first time a figure needs σ_secrets itself."""

    def __init__(self, compute, *, at: float | None = None, above: float | None = None) -> None:
        self.at, self.above = at, above
        self._compute, self._cal = compute, None

    @property
    def sigma(self) -> float:
        """σ_secrets at this c, running the calibration on first use and keeping it."""
        if self._cal is None:
            self._cal = self._compute()
        return self._cal.sigma


def pick_without_floor(rows, results: dict, fails_at) -> float | None:
    """The c the Σw/σ rule picks on the secrets' σ alone (what the plan was before the floor).
    A row whose σ_secrets was deferred (`Deferred`) is calibrated only when it could win:
    rows are taken by increasing c, and one whose secrets fail (`fails_at(c, x)`) at some σ x at
    or above the one below which it would reach the best score so far is passed over (its score
    is lower: bounds fall as σ grows). x is at least a quarter of the floor's σ, where the
    Neyman–Pearson bound is cheap (at a tiny σ its loss grid is long). Sets `sigma_secrets` on
    the rows it calibrates."""
    from repoguard.planning.weighting import pick_c

    best = 0.0
    for row in sorted(rows, key=lambda r: r.c):
        cal = results[row.c][2]
        if row.sigma_secrets is None:
            if best > 0 and fails_at(row.c, max(row.sum_w / (best * (1 - 1e-12)), cal.at / 4)):
                continue
            row.sigma_secrets = cal.sigma
        s = row.sigma_secrets
        if math.isfinite(s) and s > 0:
            best = max(best, row.sum_w / s)
    try:
        return pick_c([dataclasses.replace(r, sigma=r.sigma_secrets,
                                           score=r.sum_w / r.sigma_secrets if math.isfinite(r.sigma_secrets)
                                           and r.sigma_secrets > 0 else 0.0)
                       for r in rows if r.sigma_secrets is not None]).c
    except ValueError:
        return None


def raise_c(chosen: float, rows, results: dict, run, row_sigma, log: list, *, iters: int = 5,
             extend: int = 6) -> float:
    """The largest c ≥ `chosen` whose σ(c) stays within σ(chosen) (relative 1e-6): bisection on
    log c between `chosen` and the next swept c above it; when `chosen` is the largest swept c
    (the floor still sets σ there), c is first doubled up to `extend` times until σ(c) exceeds
    the budget. Every kept c is added to `results` (c → (lp, ρ, cal)); every tried c is logged
    in `log` as {"c", "sum_w", "sigma", "kept"}."""
    budget = next(r.sigma for r in rows if r.c == chosen) * (1 + 1e-6)

    def attempt(cval: float) -> bool:
        lp, rho, cal = run(cval, None, budget)
        sig = row_sigma(cal, rho)
        kept = sig <= budget and float(lp.w.sum()) >= float(results[lo][0].w.sum())
        # σ above the budget is not searched for: only that it exceeds it (sigma None)
        log.append({"c": cval, "sum_w": float(lp.w.sum()), "sigma": sig if math.isfinite(sig) else None,
                    "kept": kept})
        if kept:
            results[cval] = (lp, rho, cal)
        return kept

    lo = chosen
    above = sorted(r.c for r in rows if r.c > chosen)
    if above:
        hi = above[0]
        if next(r.sigma for r in rows if r.c == hi) <= budget:
            return chosen             # ties went to the smaller c: keep the rule's choice
    else:
        hi = None
        for _ in range(extend):
            if not attempt(lo * 2):
                hi = lo * 2
                break
            lo *= 2
        if hi is None:
            return lo
    from repoguard.accounting.search import narrow

    # the largest kept c: bisect on "not kept" and keep the bracket's low end
    return narrow(lambda x: not attempt(x), lo, hi, iters=iters)[0]


def bought(incidence, test, results: dict, chosen: float, c_without, refine: list) -> dict:
    """What the floor's noise bought back: tied Σw at the chosen c against the c the rule picks
    without the floor, overall, per secret and per top-level directory (only rows that changed)."""
    from repoguard.planning.retention import retention

    tied = np.asarray(incidence.matrix.getnnz(axis=1) > 0)
    train = ~test if test is not None else np.ones(tied.size, dtype=bool)
    w_with = results[chosen][0].w
    out = {"c": chosen, "c_without_floor": c_without, "refine": refine,
           "tied_examples": int((tied & train).sum()), "tied_sum_w": float(w_with[tied & train].sum())}
    if c_without is None or c_without not in results:
        return out
    w_wo = results[c_without][0].w
    out["tied_sum_w_without_floor"] = float(w_wo[tied & train].sum())
    a, b = retention(incidence, w_with, test), retention(incidence, w_wo, test)
    bs = {x["secret"]: x for x in b["per_secret"]}
    out["per_secret"] = [{"secret": x["secret"], "examples": x["examples"], "sum_w": x["sum_w"],
                          "sum_w_without_floor": bs[x["secret"]]["sum_w"]}
                         for x in a["per_secret"] if abs(x["sum_w"] - bs[x["secret"]]["sum_w"]) > 1e-9]
    bd = {x["directory"]: x for x in b["per_directory"]}
    out["per_directory"] = [{"directory": x["directory"], "tied": x["tied"], "sum_w": x["sum_w"],
                             "sum_w_without_floor": bd[x["directory"]]["sum_w"]}
                            for x in a["per_directory"] if abs(x["sum_w"] - bd[x["directory"]]["sum_w"]) > 1e-9]
    return out
