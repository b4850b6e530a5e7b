"""A per-σ table of Neyman–Pearson bounds over the Poisson family, one entry shared by every
secret whose mixing law it dominates.

Dominance. For secret j, M = Σ_{i∈E_j} Bernoulli(ρ_i) (independent). Let X ~ Poisson(λ_j) with
λ_j = −Σ_i log(1 − ρ_i), and N ≥ |E_j|. Then M ≤_st min(X, N):
1. Bernoulli(ρ) ≤_st Poisson(−log(1−ρ)): both put mass 1−ρ on 0 (e^{log(1−ρ)} = 1−ρ), and
   P(Bern ≥ k) = 0 ≤ P(Poisson ≥ k) for k ≥ 2 [e.g. Serfling 1978, "Some elementary results on
   Poisson approximation in a sequence of Bernoulli trials", §2].
2. The usual stochastic order is closed under sums of independent variables [Shaked &
   Shanthikumar 2007, *Stochastic Orders*, Thm 1.A.3(b)], and Σ_i Poisson(μ_i) = Poisson(Σ μ_i):
   M ≤_st X.
3. M ≤ |E_j| ≤ N surely, so P(M ≥ k) ≤ min(P(X ≥ k), 1{k ≤ N}) = P(min(X, N) ≥ k).
Poisson(λ) is stochastically increasing in λ, so λ may be rounded *up* to a grid point.

Monotonicity of the bound in the mixing law. The dominating pair is P = Σ_m π_m N(m·a, 1) against
Q = N(0, 1) (`divergences.py`). Every f-divergence with f convex, in either direction, is
non-decreasing when π moves to a stochastically larger law (proof in the `divergences.py`
docstring: moving mass from m to m+1 changes D_f at first order by E_Q[f'(P/Q)(g_{m+1} − g_m)]
≥ 0 because P/Q is increasing in z and g_{m+1} − g_m changes sign once with mean 0 under Q; D_f is
convex in P, so the change itself is ≥ its first-order term). The hockey-stick divergence
δ(ε) = E_Q[(P/Q − e^ε)_+] is such an f-divergence for every ε ∈ ℝ (f(t) = (t − e^ε)_+ convex; its
reverse t·f(1/t) = (1 − e^ε t)_+ convex too). So the pair built on min(X, N) dominates secret j's
pair in the sense of Zhu, Dong & Wang 2022 (δ larger at every ε, both directions), the T-fold
compositions keep the order [ibid., Thm 10], and the Neyman–Pearson bound min_ε e^ε p + δ_T(ε)
(`pld.py`) computed for the table entry is an upper bound for every secret it covers.

Use. At one σ, the entry for grid point λ_k = (1 + G)^k is computed once (both directions, coarse
then fine loss grid, `pld.delta_curve`) and serves every secret with λ_j ≤ λ_k and no earlier
runs; its priors are applied afterwards (δ_T does not depend on p). The table is a screen:
Poisson is looser than the Poisson-binomial (mass at m ≥ 2 is larger by about λ²/2 − Σρ²/2), so
secrets it cannot certify go on to the per-group bound.
"""
from __future__ import annotations

import math

import numpy as np

from repoguard.accounting.divergences import Mixture
from repoguard.accounting.pld import delta_curve

GRID_RATIO = 1.005       # λ grid: λ_k = GRID_RATIO^k; λ is rounded up to the next point


def dominating_lambda(rhos) -> float:
    """λ = −Σ log(1 − ρ_i) of the Poisson law that stochastically dominates the Poisson-binomial
    of `rhos` (each in [0, 1)); +inf if some ρ_i = 1 (no Poisson law dominates it)."""
    r = np.asarray(rhos, float)
    if r.size and r.max() >= 1.0:
        return math.inf
    return float(-np.sum(np.log1p(-r)))


def grid_index(lam: np.ndarray) -> np.ndarray:
    """Index k of the smallest grid point λ_k = GRID_RATIO^k ≥ λ (λ > 0)."""
    return np.ceil(np.log(np.asarray(lam, float)) / math.log(GRID_RATIO) - 1e-12).astype(np.int64)


def capped_poisson(lam: float, n_max: int) -> Mixture:
    """The law of min(X, n_max), X ~ Poisson(lam), as a `Mixture` (support 0..n_max)."""
    from scipy.stats import poisson     # here: scipy.stats costs ~0.7 s to import (a no-op run)

    m = np.arange(n_max + 1)
    lw = poisson.logpmf(m, lam)
    lw[-1] = poisson.logsf(n_max - 1, lam)          # P(X ≥ n_max)
    keep = np.isfinite(lw)
    return Mixture(m[keep].astype(np.int64), lw[keep], int(n_max))


class PoissonTable:
    """Neyman–Pearson bounds at one a = s/σ and T steps for the capped Poisson family, filled
    lazily per (grid point, loss-grid step h). `n_max` caps every covered secret's |E_j|;
    `eps_max` (nats) is log(1/p) of the smallest prior it will be asked about."""

    def __init__(self, a: float, steps: int, n_max: int, eps_max: float) -> None:
        self.a, self.steps, self.n_max, self.eps_max = float(a), int(steps), int(n_max), float(eps_max)
        self._curves: dict[tuple[int, float], tuple] = {}
        self.evaluations = 0

    def bound(self, k: int, priors: np.ndarray, h: float) -> tuple[np.ndarray, np.ndarray]:
        """(bounds, minimising ε) for `priors` under grid point k's law at loss step h: the larger
        over the two directions of min_ε e^ε p + δ_T(ε), and ≥ p."""
        key = (int(k), float(h))
        cur = self._curves.get(key)
        if cur is None:
            mix = capped_poisson(GRID_RATIO ** int(k), self.n_max)
            cur = tuple(delta_curve(mix, self.a, self.steps, d, eps_max=self.eps_max, h=h)
                        for d in ("remove", "add"))
            self._curves[key] = cur
            self.evaluations += 1
        p = np.atleast_1d(np.asarray(priors, float))
        out, at = np.zeros(p.size), np.zeros(p.size)
        for c in cur:
            b, e = c.bound(p)
            bigger = b > out
            out, at = np.where(bigger, b, out), np.where(bigger, e, at)
        return np.maximum(out, p), at
