"""The one bisection every monotone search of repoguard runs: the smallest noise multiplier σ
that certifies a group of secrets (`calibrate`), the posterior bound q that a divergence allows
(`bounds.kl_bound`, `bounds.renyi_bound`, elementwise on log q), the largest LP scale c whose σ(c) stays within
the floor's noise (`planning.c_choice.raise_c`), and the smallest canary exposure whose tail
bound falls below a level (`audit.canary_exposure.exposure_at_level`,
`audit.missed.predicted_exposure`).

σ and c span decades, so they are bisected on a log scale (the midpoint is the geometric mean
√(lo·hi), the stopping rule relative); log q and an exposure e are already logarithms (e = −log₂ p
of the prior p it is bounded at), so they are bisected arithmetically.
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np


def narrow(ok: Callable[[float], bool], lo: float, hi: float, *, log_scale: bool = True,
           rel_tol: float | None = None, abs_tol: float | None = None, iters: int | None = None
           ) -> tuple[float, float]:
    """Bisect the bracket [lo, hi] of a monotone predicate: `ok` is False at `lo` and True at
    `hi` (not evaluated there), and switches once in between. Each step evaluates `ok` at the
    midpoint — √(lo·hi) with `log_scale` (lo > 0), (lo + hi)/2 without — and keeps the half
    where it switches. Stops after `iters` steps, or once hi/lo − 1 ≤ `rel_tol`, or once
    hi − lo ≤ `abs_tol` (exactly one of the three). Returns the final (lo, hi): `hi` is the
    smallest x found with ok(x), `lo` the largest without.

    A search for the *largest* x with some property P (P true at lo) passes ok = not P and
    keeps `lo`. With arrays `lo`, `hi` (one bracket per element) `ok` returns a bool array and
    every bracket is halved `iters` times (the only stopping rule then). Raises ValueError when
    not exactly one stopping rule is given, or for a log-scale bracket with lo ≤ 0."""
    if sum(x is not None for x in (rel_tol, abs_tol, iters)) != 1:
        raise ValueError("narrow: give exactly one of rel_tol, abs_tol, iters")
    if isinstance(lo, np.ndarray) or isinstance(hi, np.ndarray):
        if iters is None:
            raise ValueError("narrow: arrays of brackets stop after `iters` halvings only")
        for _ in range(iters):
            mid = np.sqrt(lo * hi) if log_scale else 0.5 * (lo + hi)
            good = ok(mid)
            hi = np.where(good, mid, hi)
            lo = np.where(good, lo, mid)
        return lo, hi
    if log_scale and not lo > 0:
        raise ValueError(f"narrow: a log-scale bracket needs lo > 0, not {lo!r}")
    done = 0
    while True:
        if iters is not None:
            if done >= iters:
                break
        elif rel_tol is not None:
            if not hi / lo - 1 > rel_tol:
                break
        elif not hi - lo > abs_tol:
            break
        mid = math.sqrt(lo * hi) if log_scale else 0.5 * (lo + hi)
        if ok(mid):
            hi = mid
        else:
            lo = mid
        done += 1
    return lo, hi
